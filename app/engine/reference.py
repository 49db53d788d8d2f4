"""An in-memory engine, correct by inspection, that serves every fetch mode.

It calibrates the tests: the same suite runs against it and against
PostgreSQL, so the two must agree. Its keyword matching is a plain word
match after dropping common words and a crude stemming, which agrees with
PostgreSQL's english configuration on the words the tests use.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from app.contract.errors import Forbidden, NotFound, quoted
from app.contract.explore import explore_page, facet_values
from app.contract.items import Learning, StoredItem
from app.contract.limits import DEFAULT_LIMITS, MAX_STORE_MANY, Limits
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import (
    FETCH_MODES,
    PREVIEW_IDS,
    EngineDescriptor,
    ExplorePage,
    ExploreRequest,
    FetchPage,
    FetchRequest,
    ForgetByIds,
    ForgetReport,
    ForgetTarget,
    ForgetWithinRequest,
    GetRequest,
    Health,
    Hit,
    ListPage,
    ListRequest,
    RecallAnswer,
    RecallRequest,
    RestoreReport,
    RestoreRequest,
    StoreManyRequest,
    StoreReceipt,
)
from app.contract.retention import RetentionPolicy, governing
from app.contract.transfer import ExportPage, ExportRequest, ExportRow, GivenVector, kept_vectors
from app.embeddings.protocol import Embedder
from app.engine import answers
from app.engine.context import ThreadKey, texts_to_embed, thread_of
from app.engine.cursors import CursorCodec, listing_position, scope_of
from app.engine.fusion import fuse
from app.engine.grounded import GroundedAnswerer
from app.engine.keys import MemoryKeys
from app.engine.keywords import MAX_TERMS, STOP_WORDS, WORD, KeywordQuery, stem
from app.engine.receipts import new_receipt
from app.engine.retention import MemoryRetention


@dataclass
class _Record:
    seq: int
    item: StoredItem
    text: str
    vector: list[float]
    stored_at: datetime

    def expires_at(self, policies: list[RetentionPolicy]) -> datetime | None:
        """When retention expires the item (app/contract/retention.py): from its observation time,
        else from when it was stored; None: never."""
        meta = self.item.meta
        return governing(meta.namespace_node, policies).expiry(meta.observed_at or self.stored_at)

    def live(self, policies: list[RetentionPolicy], now: datetime) -> bool:
        expiry = self.expires_at(policies) if policies else None
        return expiry is None or expiry > now

    def hit(self, item_id: str, score: float, *, stored: bool = False) -> Hit:
        """``stored``: with ``stored_at``, as ``get`` answers it."""
        return Hit(
            id=item_id,
            kind=self.item.type,
            text=self.text,
            meta=self.item.meta,
            score=score,
            confidence=self.item.confidence if isinstance(self.item, Learning) else None,
            stored_at=self.stored_at if stored else None,
        )


def _words(text: str) -> list[str]:
    return [stem(w) for w in WORD.findall(text.lower())]


def _keyword_score(query: KeywordQuery, text: str) -> float:
    """How many of the query's operands the text holds: a word counting its repeats, a run such as
    ``main.py`` or a phrase once, where its words stand in order. As in PostgreSQL, only the first
    MAX_TERMS operands that are not all common words count."""
    words = _words(text)
    counts = Counter(words)
    wanted = [[stem(w) for w in WORD.findall(t) if w not in STOP_WORDS] for t in query.texts]
    score = 0.0
    for stems in [s for s in wanted if s][:MAX_TERMS]:
        if len(stems) == 1:
            score += counts.get(stems[0], 0)
        elif any(words[i : i + len(stems)] == stems for i in range(len(words))):
            score += 1
    return score


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b) or 1.0)


class ReferenceEngine:
    def __init__(
        self,
        embedder: Embedder,
        limits: Limits = DEFAULT_LIMITS,
        answerer: GroundedAnswerer | None = None,
        undo_window_s: float = 600.0,
    ) -> None:
        self._embedder = embedder
        self._undo_window_s = undo_window_s
        # receipt -> (when, the records it kept), while the undo window holds them.
        self._kept: dict[str, tuple[float, list[tuple[str, _Record]]]] = {}
        self._answerer = answerer  # as the PostgreSQL engine's: None answers extractively
        self._limits = limits
        self._records: dict[str, _Record] = {}
        self._seq = 0
        self._lock = asyncio.Lock()
        self._cursors = CursorCodec(secrets.token_bytes(32))
        self.keys = MemoryKeys()
        self.retention = MemoryRetention(self._expiring)
        self._descriptor = EngineDescriptor(
            id="reference",
            label="Reference (in memory)",
            description="An in-memory engine that is correct by inspection; it calibrates the tests.",
            hosted=False,
            needs_endpoint=False,
            needs_key=False,
            fetch_modes=list(FETCH_MODES),
        )

    @property
    def descriptor(self) -> EngineDescriptor:
        return self._descriptor

    async def health(self) -> Health:
        return Health(state="ok")

    async def close(self) -> None:
        if self._answerer is not None:
            await self._answerer.aclose()

    async def store(self, item: StoredItem) -> StoreReceipt:
        # Refused in the item's own words, not as items[0] of a batch the client never sent.
        return (await self._write([item.checked(self._limits)]))[0]

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        return await self._write(StoreManyRequest.model_construct(items=items).checked(self._limits))

    async def import_items(
        self, items: list[StoredItem], vectors: list[GivenVector | None], stored: list[datetime | None] | None = None
    ) -> list[StoreReceipt]:
        checked = StoreManyRequest.model_construct(items=items).checked(self._limits)
        given = kept_vectors(vectors, self._embedder)
        return await self._write(checked, given, stored)

    async def _write(
        self,
        checked: list[StoredItem],
        given: dict[int, np.ndarray] | None = None,
        stored: list[datetime | None] | None = None,
    ) -> list[StoreReceipt]:
        """Validated items, written in one transaction; a receipt each, in their order."""
        given = given or {}
        async with self._lock:
            threads = [thread_of(item) for item in checked]
            live = self._live_records()
            in_order = sorted(live.values(), key=lambda r: r.seq)
            latest: dict[ThreadKey, list[str]] = {}
            for record in in_order:
                if thread := thread_of(record.item):
                    latest.setdefault(thread, []).append(record.text)
            embedded = texts_to_embed([item.render_text() for item in checked], threads, latest)
            made = (await self._embedder.embed(embedded)).tolist()
            vectors = [list(map(float, given[p])) if p in given else made[p] for p in range(len(checked))]
            receipts = []
            now = datetime.now(UTC)
            for position, (item, vector) in enumerate(zip(checked, vectors, strict=True)):
                stored_at = (stored[position] if stored is not None else None) or now
                item_id = item.fingerprint()
                # An expired copy is stored anew, as it would be once the sweeper had erased it.
                replayed = item_id in live
                if not replayed:
                    self._seq += 1
                    self._records[item_id] = live[item_id] = _Record(
                        self._seq, item, item.render_text(), vector, stored_at
                    )
                receipts.append(StoreReceipt(id=item_id, replayed=replayed))
            return receipts

    def _live_records(self) -> dict[str, _Record]:
        """The records no retention policy has expired: every read sees only these."""
        policies, now = self.retention.policies, datetime.now(UTC)
        return {i: r for i, r in self._records.items() if r.live(policies, now)}

    def _expiring(self, before: list[RetentionPolicy], after: list[RetentionPolicy]) -> int:
        """How many live records a change of the policies from ``before`` to ``after`` expires."""
        now = datetime.now(UTC)
        return sum(r.live(before, now) and not r.live(after, now) for r in self._records.values())

    async def sweep_expired(self) -> int:
        """Erase the records whose retention expiry has passed; how many."""
        async with self._lock:
            live = self._live_records()
            gone = [i for i in self._records if i not in live]
            for item_id in gone:
                del self._records[item_id]
            return len(gone)

    def _admitted(self, request_filter: Filter, *, live: bool = True) -> list[tuple[str, _Record]]:
        """What the filter admits, in the order stored: of the live records, or of all with ``live`` False."""
        records = self._live_records() if live else self._records
        rows = [(i, r) for i, r in records.items() if request_filter.matches(r.item.type, r.item.meta)]
        return sorted(rows, key=lambda row: row[1].seq)

    async def fetch(self, request: FetchRequest) -> FetchPage:
        self.descriptor.ensure_mode(request.mode)
        request = request.checked(self._limits)
        scope = scope_of(request.query, request.mode, request.filter)
        offset = self._cursors.resume(request.cursor, scope, 0)
        ranked = await self._rank(request.query, request.mode, request.filter)
        page = ranked[offset : offset + request.limit]
        more = offset + request.limit < len(ranked)
        return FetchPage(
            hits=[record.hit(item_id, score) for item_id, record, score in page],
            next_cursor=self._cursors.issue(scope, offset + request.limit) if more else None,
        )

    async def _rank(self, query: str, mode: str, request_filter: Filter) -> list[tuple[str, _Record, float]]:
        admitted = self._admitted(request_filter)
        keyword: list[tuple[str, _Record, float]] = []
        vector: list[tuple[str, _Record, float]] = []
        if mode in ("keyword", "hybrid"):
            parsed = KeywordQuery.parse(query)
            scored = [(i, r, _keyword_score(parsed, r.text)) for i, r in admitted]
            keyword = sorted([s for s in scored if s[2] > 0], key=lambda s: (-s[2], s[1].seq))
        if mode in ("vector", "hybrid"):
            (qv,) = (await self._embedder.embed_queries([query])).tolist()
            scored = [(i, r, _cosine(qv, r.vector)) for i, r in admitted]
            vector = sorted(scored, key=lambda s: (-s[2], s[1].seq))
        if mode == "keyword":
            return keyword
        if mode == "vector":
            return vector
        records = {item_id: record for item_id, record, _ in vector}
        fused = fuse(
            [(i, score) for i, _, score in keyword],
            [(i, score) for i, _, score in vector],
            {i: r.seq for i, r in records.items()},
        )
        return [(item_id, records[item_id], score) for item_id, score in fused]

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        request = request.checked(self._limits)
        ranked = await self._rank(request.question, "hybrid", request.filter)
        hits = [record.hit(item_id, score) for item_id, record, score in ranked[: request.limit]]
        if self._answerer is not None:
            return await self._answerer.answer(request.question, request.instructions, hits)
        return answers.compose(request.question, hits)

    async def export_page(self, request: ExportRequest, *, after: int, ceiling: int | None, count: int) -> ExportPage:
        request = request.checked(self._limits)
        ceiling = self._seq if ceiling is None else ceiling
        rows = [(i, r) for i, r in self._admitted(request.filter) if after < r.seq <= ceiling][:count]
        return ExportPage(
            rows=[
                ExportRow(r.seq, i, r.item.as_json(), r.vector if request.include_vectors else None) for i, r in rows
            ],
            ceiling=ceiling,
            embedder=self._embedder.name,
        )

    async def list(self, request: ListRequest) -> ListPage:
        request = request.checked(self._limits)
        scope = scope_of("list", request.filter)
        after, ceiling = listing_position(self._cursors.resume(request.cursor, scope, None))
        # Up to the last item stored when the first page was read, as the PostgreSQL engine pages.
        ceiling = self._seq if ceiling is None else ceiling
        rows = [(i, r) for i, r in self._admitted(request.filter) if after < r.seq <= ceiling]
        page = rows[: request.limit]
        more = len(rows) > request.limit
        return ListPage(
            items=[record.hit(item_id, 0.0) for item_id, record in page],
            next_cursor=self._cursors.issue(scope, [page[-1][1].seq, ceiling]) if more else None,
        )

    async def get(self, request: GetRequest) -> list[Hit]:
        request = request.checked(self._limits)
        hits = []
        live = self._live_records()
        for item_id in dict.fromkeys(request.ids):
            record = live.get(item_id)
            if record is None:
                continue
            if request.reach is not None and not request.reach.admits(record.item.meta.namespace_node):
                continue
            hits.append(record.hit(item_id, 0.0, stored=True))
        return hits

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target = target.checked(self._limits)
        async with self._lock:
            if isinstance(target, ForgetByIds):
                doomed = [i for i in dict.fromkeys(target.ids) if i in self._records]
                if target.purge and not target.dry_run:
                    self._erase_kept(target.ids)
            else:
                doomed = [i for i, _ in self._admitted(target.filter, live=False)]
                if target.purge and not target.dry_run:
                    self._erase_kept_matching(target.filter)
            if target.dry_run:
                return self._preview(doomed)
            return self._remove(doomed, target.purge)

    def _remove(self, doomed: list[str], purge: bool) -> ForgetReport:
        """Remove ``doomed``; the expired among them are neither kept for undo nor counted."""
        live = self._live_records()
        removed = [(item_id, self._records.pop(item_id)) for item_id in doomed]
        removed = [(item_id, record) for item_id, record in removed if item_id in live]
        if purge or self._undo_window_s <= 0 or not removed:
            return ForgetReport(forgotten=len(removed))
        receipt = new_receipt()
        self._kept[receipt] = (time.monotonic(), removed)
        return ForgetReport(forgotten=len(removed), receipt=receipt)

    def _erase_kept(self, ids: list[str], reach: Reach | None = None) -> None:
        def erased(item_id: str, record: _Record) -> bool:
            return item_id in ids and (reach is None or reach.admits(record.item.meta.namespace_node))

        for receipt, (when, records) in list(self._kept.items()):
            self._kept[receipt] = (when, [(i, r) for i, r in records if not erased(i, r)])

    def _erase_kept_matching(self, request_filter: Filter) -> None:
        """Drop the copies kept for undo that ``request_filter`` admits (an erasure by filter)."""
        for receipt, (when, records) in list(self._kept.items()):
            kept = [(i, r) for i, r in records if not request_filter.matches(r.item.type, r.item.meta)]
            self._kept[receipt] = (when, kept)

    def _preview(self, doomed: list[str]) -> ForgetReport:
        live = self._live_records()
        doomed = [item_id for item_id in doomed if item_id in live]
        first = sorted(doomed, key=lambda item_id: self._records[item_id].seq)[:PREVIEW_IDS]
        return ForgetReport(forgotten=0, would_forget=len(doomed), first_ids=first)

    async def forget_within(
        self, ids: list[str], reach: Reach, *, dry_run: bool = False, purge: bool = False
    ) -> ForgetReport:
        request = ForgetWithinRequest(ids=ids, reach=reach).checked(self._limits)
        reach = request.reach
        async with self._lock:
            doomed = [
                i
                for i in dict.fromkeys(request.ids)
                if i in self._records and reach.admits(self._records[i].item.meta.namespace_node)
            ]
            if dry_run:
                return self._preview(doomed)
            if purge:
                self._erase_kept(request.ids, reach)
            return self._remove(doomed, purge)

    async def restore(self, receipt: str, *, within: Reach | None = None) -> RestoreReport:
        request = RestoreRequest(receipt=receipt).checked(self._limits)
        when, records = self._kept.get(request.receipt, (0.0, []))
        if not records or time.monotonic() - when > self._undo_window_s:
            raise NotFound(f"no forgotten items under receipt {quoted(request.receipt)} within the undo window")
        for _, record in records:
            if within is not None and not within.admits(record.item.meta.namespace_node):
                raise Forbidden(f"namespace {quoted(str(record.item.meta.namespace_node))} is outside this key's reach")
        items = [record.item for _, record in records]
        vectors: list[GivenVector | None] = [(self._embedder.name, record.vector) for _, record in records]
        stored: list[datetime | None] = [record.stored_at for _, record in records]
        for start in range(0, len(items), MAX_STORE_MANY):
            batch = slice(start, start + MAX_STORE_MANY)
            await self.import_items(items[batch], vectors[batch], stored[batch])
        del self._kept[request.receipt]
        return RestoreReport(restored=len(items))

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        request = request.checked(self._limits)
        counts: Counter[str] = Counter()
        total = missing = 0
        for _, record in self._admitted(request.filter):
            total += 1
            values = facet_values(request.facet, record.item.type, record.item.meta)
            if not values:
                missing += 1
            counts.update(values)
        return explore_page(request.facet, counts, total, missing, request.limit)
