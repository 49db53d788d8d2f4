"""Which statements a ranking runs, over whatever runs them.

The engine runs these on its pools; the benchmark's raw-SQL floor (bench/rawsql.py) on its own
prepared connections: both send the same statements in the same order, by construction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from app.contract.meta import Filter
from app.engine.fusion import fuse, fusion_depth
from app.engine.keywords import KeywordQuery
from app.engine.postgres.filters import Predicate, sketch_keys
from app.engine.postgres.mirror import SketchMirror
from app.engine.postgres.options import EngineOptions
from app.engine.postgres.pool import Row
from app.engine.postgres.queries.keyword import plan_keyword
from app.engine.postgres.queries.mirror import plan_mirrored
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TERM_STATISTICS, StatisticsCache, TermStatistics
from app.engine.postgres.queries.vector import index_was_enough, plan_sketch, plan_vector, sketch_candidates
from app.engine.postgres.selectivity import admits_many, least_candidates, sampled_bound

# Runs one statement and returns its rows.
Run = Callable[[Statement], Awaitable[Sequence[Row]]]


async def concurrently(*calls: Awaitable[Any]) -> list[Any]:
    """The calls awaited at once; the first failure cancels the others and is raised as it is (not grouped)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class Rankings:
    """The keyword, vector and hybrid rankings of one store: its model, dimension, text search
    configuration and options, and the planner's statistics, read again every few seconds."""

    def __init__(self, *, model: str, dimension: int, ts_config: str, options: EngineOptions) -> None:
        self._model = model
        self._dimension = dimension
        self._ts_config = ts_config
        self._options = options
        self._statistics = StatisticsCache()
        # Filter keys' sketches scanned in memory (mirror.py); None: the statement scans them.
        self._mirror = SketchMirror(options.mirror) if options.mirror.budget_mb > 0 else None

    async def statistics(self, run: Run) -> TermStatistics:
        """The statistics, read by ``run`` when the cached ones are too old."""
        return await self._statistics.current(lambda: run(TERM_STATISTICS))

    async def copies_read(self) -> None:
        """Until the sketch copies being read in the background are there (mirror.py); at once without them."""
        if self._mirror is not None:
            await self._mirror.read()

    def copies_held(self) -> tuple[int, int]:
        """How many keys' sketch copies this process holds, and their bytes (0, 0 without them)."""
        if self._mirror is None:
            return 0, 0
        return self._mirror.held_keys, self._mirror.held_bytes

    async def close(self) -> None:
        """Stop what runs in the background (the sketch copies' reads)."""
        if self._mirror is not None:
            await self._mirror.close()

    def forget_statistics(self) -> None:
        """Read the statistics again at the next ranking (after an ANALYZE, say)."""
        self._statistics.forget()

    async def keyword_statement(
        self, run: Run, keywords: KeywordQuery, request_filter: Filter, pred: Predicate, offset: int, count: int
    ) -> Statement:
        """The keyword statement; a filter the statistics bound to many items has its matches held
        first, as a ranking without a filter does (selectivity.admits_many)."""
        statistics = await self.statistics(run)
        return plan_keyword(
            keywords,
            pred,
            offset=offset,
            count=count,
            statistics=statistics,
            ts_config=self._ts_config,
            options=self._options.keyword,
            broad=not pred.admits_all and admits_many(request_filter, statistics, self._options.keyword),
        )

    async def keyword(
        self, run: Run, keywords: KeywordQuery, request_filter: Filter, pred: Predicate, offset: int, count: int
    ) -> list[Row]:
        """``count`` rows of the keyword ranking from ``offset`` (none for a query without words)."""
        if keywords.is_empty:
            return []
        return list(await run(await self.keyword_statement(run, keywords, request_filter, pred, offset, count)))

    async def sketch_candidates(self, run: Run, request_filter: Filter, pred: Predicate) -> int | None:
        """The least candidates a vector ranking under the filter re-ranks when it is by sketches (its
        statistics bound it to few items, or to a small share of many); None when it walks the index."""
        if pred.admits_all:
            return None
        return least_candidates(request_filter, await self.statistics(run), self._options.sketch)

    async def admits_few(self, run: Run, request_filter: Filter, pred: Predicate) -> bool:
        """Whether a vector ranking under the filter is by sketches."""
        return await self.sketch_candidates(run, request_filter, pred) is not None

    async def vector_statement(
        self,
        run: Run,
        vector: np.ndarray,
        request_filter: Filter,
        pred: Predicate,
        offset: int,
        count: int,
        *,
        exact: bool = False,
        sketches: bool = True,
        copies: bool = True,
    ) -> tuple[Statement, bool]:
        """The vector statement and whether its rows are the answer (else, should the index come back
        short, the exact scan follows). Without ``sketches`` a filter walks the index whatever it
        admits (what the engine did before migration 0008, bench/proposals.py). Without ``copies`` the
        statement scans the sketches itself (``vector``, which has asked the copies already)."""
        least = await self.sketch_candidates(run, request_filter, pred) if sketches else None
        mirrored = await self._mirrored(run, vector, request_filter, pred, offset, count, least) if copies else None
        if mirrored is not None:
            return mirrored[0], True
        if least is not None:
            options = self._options.sketch
            statement = plan_sketch(
                vector,
                pred,
                sketch_keys(request_filter),
                model=self._model,
                offset=offset,
                count=count,
                candidates=least,
                admitted=sampled_bound(request_filter, await self.statistics(run), options),
                sampled=options.sampled,
                margin=options.sample_margin,
            )
            return statement, True
        statement = plan_vector(
            vector,
            pred,
            model=self._model,
            dimension=self._dimension,
            offset=offset,
            count=count,
            exact=exact,
            options=self._options.hnsw,
        )
        return statement, exact

    async def vector(
        self,
        run: Run,
        vector: np.ndarray,
        request_filter: Filter,
        pred: Predicate,
        offset: int,
        count: int,
        *,
        sketches: bool = True,
    ) -> list[Row]:
        """``count`` rows of the vector ranking from ``offset``: by sketches when the filter admits few
        items, else through the index, then exactly should the index give up on a selective filter."""
        least = await self.sketch_candidates(run, request_filter, pred) if sketches else None
        mirrored = await self._mirrored(run, vector, request_filter, pred, offset, count, least)
        if mirrored is not None:
            statement, scanned = mirrored
            rows = list(await run(statement))
            # Short although the copies held enough: candidates forgotten since they were read. The
            # statement's scan says what is there now; the copies are read again when next asked.
            if len(rows) >= count or scanned < offset + count:
                return rows
            assert self._mirror is not None
            self._mirror.forget(sketch_keys(request_filter).keys)
        for exact in (False, True):
            statement, settled = await self.vector_statement(
                run, vector, request_filter, pred, offset, count, exact=exact, sketches=sketches, copies=False
            )
            rows = list(await run(statement))
            if settled or index_was_enough(rows, offset + count):
                return rows
        raise AssertionError("unreachable")

    async def _mirrored(
        self,
        run: Run,
        vector: np.ndarray,
        request_filter: Filter,
        pred: Predicate,
        offset: int,
        count: int,
        least: int | None,
    ) -> tuple[Statement, int] | None:
        """The statement that ranks the candidates a scan of the filter's keys in memory chose, and how
        many distinct postings the copies held; None when no copy serves the filter (no mirror, a
        filter not ranked by sketches (``least`` None), keys that are not the whole filter, copies
        over the memory budget)."""
        if self._mirror is None or least is None:
            return None
        keys = sketch_keys(request_filter)
        if not keys.complete or keys.narrowed:
            return None
        chosen = await self._mirror.choose(run, keys.keys, vector, sketch_candidates(offset + count, least))
        if chosen is None:
            return None
        statement = plan_mirrored(
            vector,
            pred.sql(),
            pred.params,
            live=pred.live,
            model=self._model,
            ids=chosen.ids,
            seqs=chosen.seqs,
            keys=chosen.keys,
            snapshots=chosen.snapshots,
            offset=offset,
            count=count,
        )
        return statement, chosen.scanned

    async def hybrid(
        self,
        runs: tuple[Run, Run],
        keywords: KeywordQuery,
        vector: np.ndarray,
        request_filter: Filter,
        pred: Predicate,
        offset: int,
        count: int,
    ) -> list[tuple[Row, float]]:
        """The keyword and vector rankings' scores combined (fusion.fuse: each counts to a fixed
        depth, so every page cuts one order), each read to that depth or the page's end; the rows
        and fused scores from ``offset``.

        The two rankings are two statements run at once (``runs``: the keyword ranking's and the
        vector ranking's, on two connections): PostgreSQL runs one statement on one core, so a
        hybrid fetch takes about as long as its slower half (docs/tuning.md#hybrid-at-once). Each
        reads its own snapshot, a moment apart: a write committed between them shows in one ranking
        only, as it may to any read that overlaps it; every write acknowledged before the fetch
        began is in both.
        """
        depth = fusion_depth(offset + count)
        nearest = self.vector(runs[1], vector, request_filter, pred, 0, depth)
        if keywords.is_empty:
            keyword_rows, vector_rows = [], await nearest
        else:
            keyword_rows, vector_rows = await concurrently(
                self.keyword(runs[0], keywords, request_filter, pred, 0, depth), nearest
            )
        rows = {row["id"]: row for row in (*keyword_rows, *vector_rows)}
        fused = fuse(
            [(row["id"], float(row["score"])) for row in keyword_rows],
            [(row["id"], float(row["score"])) for row in vector_rows],
            {item_id: row["seq"] for item_id, row in rows.items()},
        )
        return [(rows[item_id], score) for item_id, score in fused[offset : offset + count]]
