"""What is embedded for an item: its own text, read after the end of the items before it in its thread.

A turn such as "Yes, last Tuesday!" answers nothing alone; read after the turns it answers,
its vector carries what was asked. Only the vector sees this: the stored text, the keyword
index and the id are the item's own. Measured on a long-conversation benchmark
(docs/tuning.md#thread-context): vector recall@10 rose with the turns before, fell with the date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.contract.items import StoredItem

# How many items before it, and how much of their text, from its end (the part nearest the item):
# enough for what a turn answers, short of pushing the item's own text past an encoder's input.
BEFORE_ITEMS = 2
BEFORE_CHARS = 500

ThreadKey = tuple[str, str]


def thread_of(item: StoredItem) -> ThreadKey | None:
    """The (namespace, thread id) an item belongs to, if any."""
    thread_id = item.meta.thread_id
    return None if thread_id is None else (item.meta.namespace or "", thread_id)


def embedded_text(text: str, before: Sequence[str]) -> str:
    """``text`` as the encoder reads it, after the end of the texts stored before it in its thread
    (oldest first)."""
    context = "\n".join(before[-BEFORE_ITEMS:])[-BEFORE_CHARS:]
    return f"{context}\n{text}" if context else text


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
