"""Read-your-writes across a primary and a replica: what one client's reads must see.

A position is a place in the primary's write-ahead log (a PostgreSQL LSN, a 64-bit number written
``X/Y`` in hex). A write reports the position it reached; a client that presents it on a later read
is answered by a server that has replayed at least that far. The positions travel beside the
engine's calls, not through them: the HTTP layer opens ``positions()`` for each request (from its
``Engram-Position`` header, app/api/positions.py), the engine reads and records them here, and a
call outside any request (a background task, a test) has none, so it reads whatever the replica holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from app.contract.errors import InvalidRequest

# PostgreSQL's text form of an LSN: two hex numbers of at most 32 bits each.
_LSN = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def parse_position(text: str) -> int:
    """``X/Y`` as PostgreSQL writes an LSN, as a number; ``invalid_request`` for anything else."""
    match = _LSN.match(text.strip())
    if match is None:
        raise InvalidRequest("Engram-Position must be a position as a write answered it, such as 0/16B3748")
    return (int(match[1], 16) << 32) | int(match[2], 16)


def format_position(position: int) -> str:
    """A position as PostgreSQL writes an LSN (``16/B374D848``)."""
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


@dataclass
class Positions:
    """One request's positions (or, with ``follows_writes``, one client's over a whole session)."""

    read_after: int | None = None
    """Its reads must see at least this position (what its client last wrote)."""
    wrote: int | None = None
    """The furthest position its own writes reached, to answer the client."""
    follows_writes: bool = False
    """A session of one client (``engram mcp``): each write raises ``read_after`` too."""
    replica_behind: int | None = None
    """A position the replica was waited for in vain: the request's later reads of it go to the
    primary without waiting again."""

    def must_see(self, position: int | None) -> None:
        if position is not None:
            self.read_after = max(self.read_after or 0, position)


_CURRENT: ContextVar[Positions | None] = ContextVar("engram_positions", default=None)
# Set inside ``reads_see_everything()``: reads that decide a write go to the primary.
_EVERYTHING: ContextVar[bool] = ContextVar("engram_reads_see_everything", default=False)


@contextmanager
def positions(read_after: int | None = None, *, follows_writes: bool = False) -> Iterator[Positions]:
    """The positions of the calls made inside: one request's, or a session's (``follows_writes``)."""
    current = Positions(read_after=read_after, follows_writes=follows_writes)
    token = _CURRENT.set(current)
    try:
        yield current
    finally:
        _CURRENT.reset(token)


def current() -> Positions | None:
    """The positions of the call in progress; None outside any request."""
    return _CURRENT.get()


def wrote(position: int) -> None:
    """A write committed at ``position``: the request answers it (a no-op outside a request)."""
    here = _CURRENT.get()
    if here is None:
        return
    here.wrote = max(here.wrote or 0, position)
    if here.follows_writes:
        here.must_see(position)


def read_after() -> int | None:
    """The position the current call's reads must see; None: whatever the replica holds."""
    here = _CURRENT.get()
    return here.read_after if here is not None else None


def must_see(position: int | None) -> None:
    """The rest of the current call must see ``position`` too (a later page of one export)."""
    here = _CURRENT.get()
    if here is not None:
        here.must_see(position)


@contextmanager
def reads_see_everything() -> Iterator[None]:
    """Reads inside see every committed write (the primary): a read that decides what a write
    changes (which ids a scoped forget may remove) must not miss an item a replica has not replayed."""
    token = _EVERYTHING.set(True)
    try:
        yield
    finally:
        _EVERYTHING.reset(token)


def sees_everything() -> bool:
    return _EVERYTHING.get()
