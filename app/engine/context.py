"""What is embedded for an item: its own text, read after the end of the item before it in its thread.

A turn such as "Yes, last Tuesday!" answers nothing alone; read after the turn it answers,
its vector carries what was asked. Only the vector sees this: the stored text, the keyword
index and the id are the item's own. Measured on a long-conversation benchmark
(docs/search-quality.md): hybrid recall@10 rose with the turn before, fell with the date.
"""

from __future__ import annotations

from app.contract.items import StoredItem

# How much of the item before is read, from its end (the part nearest the item): enough for
# the question a turn answers, short of pushing the item's own text past an encoder's input.
BEFORE_CHARS = 300

ThreadKey = tuple[str, str]


def thread_of(item: StoredItem) -> ThreadKey | None:
    """The (namespace, thread id) an item belongs to, if any."""
    thread_id = item.meta.thread_id
    return None if thread_id is None else (item.meta.namespace or "", thread_id)


def embedded_text(text: str, before: str | None) -> str:
    """``text`` as the encoder reads it, after the end of the text stored before it in its thread."""
    if not before:
        return text
    return f"{before[-BEFORE_CHARS:]}\n{text}"


def texts_to_embed(texts: list[str], threads: list[ThreadKey | None], latest: dict[ThreadKey, str]) -> list[str]:
    """Each text as embedded, for items written in this order: an item's predecessor is the one
    before it in the list when they share a thread, else the thread's ``latest`` stored text."""
    last = dict(latest)
    embedded = []
    for text, thread in zip(texts, threads, strict=True):
        embedded.append(embedded_text(text, last.get(thread) if thread else None))
        if thread:
            last[thread] = text
    return embedded
