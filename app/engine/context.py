"""What is embedded for an item: its own text, then the end of the items before it in its thread.

A turn such as "Yes, last Tuesday!" answers nothing alone; followed by the turns it answers,
its vector carries what was asked. The item's own words come first, where the encoder reads
them best, and role prefixes ("user: ") are left out: they say who typed, not what about. Only
the vector sees this: the stored text, the keyword index and the id are the item's own. Measured
on a long-conversation benchmark (docs/tuning.md#thread-context): vector recall@10 rose with the
turns before, more with the item's own text first, and fell with the date.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.contract.items import StoredItem
from app.engine.sentences import ROLE_WORDS

# How many items before it, and how much of their text, from its end (the part nearest the item):
# enough for what a turn answers, short of pushing the item's own text past an encoder's input.
BEFORE_ITEMS = 2
BEFORE_CHARS = 500

ThreadKey = tuple[str, str]

_ROLE_PREFIX = re.compile(rf"^(?:{'|'.join(sorted(ROLE_WORDS))}):[ \t]*", re.MULTILINE)


def thread_of(item: StoredItem) -> ThreadKey | None:
    """The (namespace, thread id) an item belongs to, if any."""
    thread_id = item.meta.thread_id
    return None if thread_id is None else (item.meta.namespace or "", thread_id)


def without_roles(text: str) -> str:
    """``text`` without the role prefix of each line (``user: ``, ``assistant: ``)."""
    return _ROLE_PREFIX.sub("", text)


def embedded_text(text: str, before: Sequence[str]) -> str:
    """``text`` as the encoder reads it: its own words, then the end of the texts stored before it in
    its thread (oldest first), role prefixes left out."""
    own = without_roles(text) or text
    context = "\n".join(without_roles(t) for t in before[-BEFORE_ITEMS:])[-BEFORE_CHARS:]
    return f"{own}\n{context}" if context else own


def texts_to_embed(
    texts: list[str], threads: list[ThreadKey | None], latest: Mapping[ThreadKey, Sequence[str]]
) -> list[str]:
    """Each text as embedded, for items written in this order: the items before it are those
    before it in the list that share its thread, after the thread's ``latest`` stored texts."""
    window = {thread: list(before) for thread, before in latest.items()}
    embedded = []
    for text, thread in zip(texts, threads, strict=True):
        before = window.get(thread, []) if thread else []
        embedded.append(embedded_text(text, before))
        if thread:
            window[thread] = [*before, text][-BEFORE_ITEMS:]
    return embedded
