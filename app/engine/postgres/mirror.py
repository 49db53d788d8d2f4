"""Filter keys' sketch postings held in the service's memory, and scanned there.

A vector search under a filter that admits few items ranks its sketches (queries/vector.py
sketch_sql): PostgreSQL reads every admitted posting from its index, takes its Hamming distance and
sorts, ~0.2 µs a posting, which at a million items is most of the search (~12 ms for a tag of 40k).
NumPy computes the same distances over a copy in memory in a fraction of that; the candidates it
picks are then ranked by their vectors in PostgreSQL, as before (docs/tuning.md#sketch-mirror).

A copy is as of a snapshot. Every statement that ranks from it also ranks the postings filed since,
by any process (those whose transaction the snapshot does not see: migration 0021), so a copy is
never behind what the statement sees; they are folded into the copy every few seconds, and the copy
is read again every few minutes, which drops the forgotten items it still holds (until then the
ranking statement skips them: they have no vector left). A copy is read in the background: until it
is there, the statement scans, so no search waits for a key's read (~0.2 s for 40k postings). A key
of fewer postings than ``MirrorOptions.floor`` is left to the statement, which scans it as fast.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import numpy as np

from app.engine.postgres import background
from app.engine.postgres.errors import classify
from app.engine.postgres.options import MirrorOptions
from app.engine.postgres.queries.mirror import plan_filed_since, plan_read_key
from app.engine.postgres.queries.statement import Statement

Run = Callable[[Statement], Awaitable[Sequence[asyncpg.Record]]]

logger = logging.getLogger("engram")

# varbit_send's length word before each sketch's bits.
_LENGTH_WORD = 4


@dataclass
class Copy:
    """One key's postings as of ``snapshot``: their items' seqs and ids (UTF-8 bytes, a fraction of a
    str object's size), and their sketches (a column of 64-bit words each: nearest reads a word of
    every sketch at a time, from contiguous memory)."""

    snapshot: str
    seqs: np.ndarray
    ids: np.ndarray
    sketches: np.ndarray
    read_at: float
    merged_at: float

    @property
    def nbytes(self) -> int:
        return self.seqs.nbytes + self.ids.nbytes + self.sketches.nbytes

    def fold(self, snapshot: str, seqs: np.ndarray, ids: np.ndarray, sketches: np.ndarray, now: float) -> None:
        """The postings filed since the copy's snapshot, as of ``snapshot``, folded in."""
        self.snapshot, self.merged_at = snapshot, now
        if len(seqs) and not len(self.seqs):
            self.seqs, self.ids, self.sketches = seqs, ids, sketches
        elif len(seqs):
            self.seqs = np.concatenate([self.seqs, seqs])
            self.ids = np.concatenate([self.ids, ids])  # numpy widens the narrower ids
            self.sketches = np.concatenate([self.sketches, sketches], axis=1)


@dataclass(frozen=True)
class Chosen:
    """What a scan of the copies chose: the candidates' ids and seqs, each key's snapshot (the ranking
    statement adds what each key's postings gained since), and how many distinct postings it read."""

    ids: list[str]
    seqs: list[int]
    keys: list[str]
    snapshots: list[str]
    scanned: int


def sketch_words(blob: bytes, count: int) -> np.ndarray:
    """``count`` sketches sent end to end as varbit_send writes them, as columns of 64-bit words (the
    last padded with zero bits, which add no distance)."""
    if count == 0:
        return np.zeros((0, 0), dtype=np.uint64)
    raw = np.frombuffer(blob, dtype=np.uint8).reshape(count, -1)[:, _LENGTH_WORD:]
    rows = np.zeros((count, words_of(raw.shape[1] * 8) * 8), dtype=np.uint8)
    rows[:, : raw.shape[1]] = raw
    return np.ascontiguousarray(rows.view(np.uint64).T)


def words_of(dimension: int) -> int:
    """The 64-bit words a sketch of ``dimension`` bits takes."""
    return -(-dimension // 64)


def id_bytes(ids: Sequence[str]) -> np.ndarray:
    """Item ids as fixed-width UTF-8 bytes (a str object is ~50 bytes more)."""
    return np.array([item_id.encode() for item_id in ids], dtype=bytes) if ids else np.zeros(0, dtype="S1")


def query_sketch(vector: np.ndarray) -> np.ndarray:
    """The question's sketch as binary_quantize makes it (a 1 for each component above zero), as
    64-bit words."""
    bits = np.packbits(np.asarray(vector) > 0)
    row = np.zeros(words_of(len(vector)) * 8, dtype=np.uint8)
    row[: len(bits)] = bits
    return row.view(np.uint64)


def nearest(sketches: np.ndarray, seqs: np.ndarray, query: np.ndarray, count: int) -> np.ndarray:
    """Positions of the ``count`` sketches (columns of words) nearest ``query`` by Hamming distance,
    ties by seq, each seq once (an item filed under several of the keys scanned), in that order."""
    distance = np.zeros(len(seqs), dtype=np.uint16)  # pgvector's vectors: at most 16,000 bits
    for word, asked in zip(sketches, query, strict=True):
        distance += np.bitwise_count(word ^ asked)
    wanted = count
    while True:
        near = np.arange(len(distance))
        if len(distance) > wanted:
            # Only what is as near as the wanted-th can be among the first wanted, ties included.
            near = np.flatnonzero(distance <= np.partition(distance, wanted - 1)[wanted - 1])
        order = near[np.lexsort((seqs[near], distance[near]))]
        _, first = np.unique(seqs[order], return_index=True)
        if len(first) >= count or len(near) == len(distance):
            return order[np.sort(first)][:count]
        wanted += count - len(first)  # rows seen twice took places: look further


class SketchMirror:
    """The copies of the keys asked lately, up to ``options.budget_mb`` of memory, the least lately
    asked dropped first."""

    def __init__(self, options: MirrorOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self._options = options
        self._clock = clock
        self._copies: OrderedDict[str, Copy] = OrderedDict()
        self._reading: dict[str, asyncio.Task[None]] = {}
        self._declined: dict[str, float] = {}  # keys left to the statement (too few or too big), since when
        self._folding = asyncio.Lock()  # one fold at a time: a copy takes each posting once

    @property
    def held_bytes(self) -> int:
        return sum(copy.nbytes for copy in self._copies.values())

    @property
    def held_keys(self) -> int:
        return len(self._copies)

    def forget(self, keys: Sequence[str] = ()) -> None:
        """Drop the copies of ``keys`` (every copy when none are named): read again when next asked."""
        for key in keys or list(self._copies):
            self._copies.pop(key, None)

    async def choose(self, run: Run, keys: Sequence[str], vector: np.ndarray, count: int) -> Chosen | None:
        """The ``count`` postings of ``keys`` nearest ``vector`` by sketch; None when a key has no copy yet
        (it is being read), has fewer postings than the floor or more than the budget holds, or holds
        sketches of another width (another model's, before ``engram reembed`` re-filed them): the
        statement scans them instead."""
        copies = {}
        for key in keys:
            if (copy := self._ready(run, key)) is None:
                return None
            copies[key] = copy
        async with self._folding:
            await self._fold_due(run, copies)
        words = words_of(len(vector))
        if stale := [key for key, copy in copies.items() if len(copy.seqs) and copy.sketches.shape[0] != words]:
            self.forget(stale)
            return None
        held = [copy for copy in copies.values() if len(copy.seqs)]
        snapshots = [copy.snapshot for copy in copies.values()]
        if not held:
            return Chosen(ids=[], seqs=[], keys=list(copies), snapshots=snapshots, scanned=0)
        sketches = np.concatenate([copy.sketches for copy in held], axis=1) if len(held) > 1 else held[0].sketches
        seqs = np.concatenate([copy.seqs for copy in held]) if len(held) > 1 else held[0].seqs
        ids = np.concatenate([copy.ids for copy in held]) if len(held) > 1 else held[0].ids
        chosen = nearest(sketches, seqs, query_sketch(vector), count)
        return Chosen(
            ids=[item_id.decode() for item_id in ids[chosen].tolist()],
            seqs=seqs[chosen].tolist(),
            keys=list(copies),
            snapshots=snapshots,
            scanned=len(seqs) if len(held) == 1 else len(np.unique(seqs)),
        )

    async def read(self) -> None:
        """Until the copies being read are there (tests, and a benchmark's warm-up)."""
        while self._reading:
            await asyncio.gather(*self._reading.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop the reads under way."""
        await background.stop(*self._reading.values())

    def _ready(self, run: Run, key: str) -> Copy | None:
        """``key``'s copy, read in the background when it has none or it is due to be read again."""
        copy, now = self._copies.get(key), self._clock()
        due = copy is None or now - copy.read_at >= self._options.reread_s
        if now - self._declined.get(key, -np.inf) < self._options.reread_s:
            due = False
        if due and key not in self._reading:
            self._reading[key] = asyncio.create_task(self._read(run, key), name="engram-sketch-mirror")
        if copy is not None:
            self._copies.move_to_end(key)
        return copy

    async def _read(self, run: Run, key: str) -> None:
        try:
            (row,) = await run(plan_read_key(key))
        except Exception as error:  # logged: the statement scans meanwhile, and the next ask reads again
            logger.warning("sketch mirror: %s", classify(error).message)
            return
        finally:
            self._reading.pop(key, None)
        now = self._clock()
        seqs = np.asarray(row["seqs"], dtype=np.int64)
        copy = Copy(
            snapshot=row["snapshot"],
            seqs=seqs,
            ids=id_bytes(row["ids"]),
            sketches=sketch_words(row["sketches"], len(seqs)),
            read_at=now,
            merged_at=now,
        )
        self._copies.pop(key, None)
        budget = self._options.budget_mb * 2**20
        if len(seqs) < self._options.floor or copy.nbytes > budget:
            self._declined[key] = now  # asked again once a copy would be read again
            return
        while self._copies and self.held_bytes + copy.nbytes > budget:
            self._copies.popitem(last=False)
        self._copies[key] = copy

    async def _fold_due(self, run: Run, copies: dict[str, Copy]) -> None:
        """Fold into those of ``copies`` that are due the postings filed since their snapshots."""
        now = self._clock()
        due = {key: copy for key, copy in copies.items() if now - copy.merged_at >= self._options.fold_s}
        if not due:
            return
        rows = await run(plan_filed_since(list(due), [copy.snapshot for copy in due.values()]))
        snapshot, now = rows[0]["snapshot"], self._clock()
        for key, copy in due.items():
            mine = [row for row in rows if row["key"] == key]
            sketches = sketch_words(b"".join(row["sketch"] for row in mine), len(mine))
            if len(mine) and len(copy.seqs) and sketches.shape[0] != copy.sketches.shape[0]:
                self.forget([key])  # re-filed by another model's vectors: read again when next asked
                continue
            seqs = np.asarray([row["seq"] for row in mine], dtype=np.int64)
            copy.fold(snapshot, seqs, id_bytes([row["item_id"] for row in mine]), sketches, now)
