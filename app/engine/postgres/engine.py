"""The PostgreSQL engine: SQL first, each statement the clearest form of its rule.

Every method plans its statements (queries/), runs them, and builds the answer from their rows
(rows.py). SQL reaches the database one way: asyncpg's own pools (pool.py), each connection set up
once with its startup settings and the jsonb and pgvector codecs, each statement prepared once a
connection. SQLAlchemy serves alembic's migrations only (schema.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from functools import partial

import anyio.to_thread
import asyncpg
import numpy as np

from app.contract.errors import ConfigError, Forbidden, NotFound, quoted
from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.limits import DEFAULT_LIMITS, MAX_STORE_MANY, Limits
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import (
    FETCH_MODES,
    EngineDescriptor,
    ExplorePage,
    ExploreRequest,
    FacetBucket,
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
from app.contract.transfer import ExportPage, ExportRequest, ExportRow, GivenVector, kept_vectors
from app.embeddings.errors import embedder_errors
from app.embeddings.late import LateInteraction, packed, stored_maxsim
from app.embeddings.protocol import Embedder
from app.engine import answers, consistency
from app.engine.context import BEFORE_ITEMS, ThreadKey, texts_to_embed, thread_of
from app.engine.cursors import CursorCodec, listing_position, listing_seen, scope_of
from app.engine.grounded import GroundedAnswerer
from app.engine.interaction import rescored
from app.engine.keywords import KeywordQuery
from app.engine.postgres.combiner import StoreCombiner
from app.engine.postgres.errors import classify, database_errors
from app.engine.postgres.facets import FacetFolder
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.indexer import (
    COUNT_EVERY,
    BacklogCount,
    VectorIndexer,
    backlog_size,
    index_everything,
    rebuild_index,
    worth_rebuilding,
)
from app.engine.postgres.keys import PostgresKeys
from app.engine.postgres.options import EngineOptions
from app.engine.postgres.pool import Pools, PoolUsage, execute, fetch, fetchval
from app.engine.postgres.queries.facets import folds_facet, plan_explore
from app.engine.postgres.queries.listing import plan_get, plan_list
from app.engine.postgres.queries.retention import POLICIES_SHARED
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.sweeps import SWEEP_BATCH, plan_sweep_expired, plan_sweep_forgotten
from app.engine.postgres.queries.tokens import plan_read, read_rows
from app.engine.postgres.queries.transfer import plan_export
from app.engine.postgres.queries.writes import (
    UNVECTORED,
    ItemRow,
    Keep,
    plan_drop_receipt,
    plan_erase_kept,
    plan_erase_kept_filter,
    plan_forget_filter,
    plan_forget_ids,
    plan_kept,
    plan_preview_filter,
    plan_preview_ids,
    plan_prior,
    plan_write,
)
from app.engine.postgres.ranking import Rankings, concurrently
from app.engine.postgres.replica import ReadRouter
from app.engine.postgres.retention import PostgresRetention
from app.engine.postgres.rows import hit_of, item_row
from app.engine.postgres.schema import driver_url, ensure_current
from app.engine.postgres.supervisor import EmbeddedSupervisor
from app.engine.postgres.sweeper import Sweeper
from app.engine.postgres.tokens import TokenWriter, own_words
from app.engine.receipts import new_receipt
from app.engine.reranking import Reranker
from app.telemetry.metrics import ITEMS_FORGOTTEN, ITEMS_STORED

# The first start claims the database for this embedder and makes the cursor secret.
logger = logging.getLogger("engram")

CLAIM_SETTINGS = (
    "INSERT INTO engram_settings (key, value) VALUES ('embedder', $1), ('cursor_secret', $2) "
    "ON CONFLICT (key) DO NOTHING"
)
READ_SETTINGS = "SELECT key, value FROM engram_settings"
# Health answers `down` once the database has not answered `SELECT 1` within this (docs/operations.md).
HEALTH_TIMEOUT_S = 3.0


class PostgresEngine:
    """Items in ``engram_items``, vectors per model in ``engram_embeddings`` (HNSW-indexed) or, until
    the indexer has moved them there, in ``engram_vector_backlog`` (app/engine/postgres/indexer.py)."""

    def __init__(
        self,
        pools: Pools,
        embedder: Embedder,
        *,
        limits: Limits = DEFAULT_LIMITS,
        text_search_config: str = "english",
        cursor_secret: bytes,
        options: EngineOptions | None = None,
        owns_embedder: bool = False,
        answerer: GroundedAnswerer | None = None,
        reranker: Reranker | None = None,
        supervisor: EmbeddedSupervisor | None = None,
        reads: ReadRouter | None = None,
        late: LateInteraction | None = None,
    ) -> None:
        self._pools = pools
        self._supervisor = supervisor  # None: a database reached by URL, or one whose keeper is elsewhere
        # Where the requests' reads run: a replica's pools beside the primary's, or the primary alone.
        self._reads = reads or ReadRouter(pools)
        self._options = options or EngineOptions()
        self._answerer = answerer  # None: extractive answers only; closed with the engine
        self._reranker = reranker  # None: hybrid keeps the fused order
        self._late = late  # None: no late interaction (ENGRAM_LATE_INTERACTION off)
        self._tokens = TokenWriter(self.connection, late) if late is not None else None
        self._owns_embedder = owns_embedder
        self._indexer = VectorIndexer(self.connection, workers=self._options.indexer.workers)
        self._facets = FacetFolder(self.connection)
        undo, retention = self._options.undo, self._options.retention
        self._undo = Sweeper(
            self.connection,
            lambda: plan_sweep_forgotten(undo.window_s),
            batch=SWEEP_BATCH,
            every_s=undo.sweep_every_s,
            name="undo window",
        )
        self._expired = Sweeper(
            self.connection, plan_sweep_expired, batch=SWEEP_BATCH, every_s=retention.sweep_every_s, name="retention"
        )
        self._backlog_limit = self._options.indexer.backlog_limit
        self._backlog_count = BacklogCount(COUNT_EVERY)
        self._stores = StoreCombiner(self._commit_items, most=MAX_STORE_MANY)
        self._rankings = Rankings(
            model=embedder.name, dimension=embedder.dimension, ts_config=text_search_config, options=self._options
        )
        self._embedder = embedder
        self._limits = limits
        self._cursors = CursorCodec(cursor_secret)
        self.keys = PostgresKeys(self.run)
        self.retention = PostgresRetention(self.connection, self._reads.written)
        self._descriptor = EngineDescriptor(
            id="postgres",
            label="PostgreSQL + pgvector",
            description="Keyword search by tsvector, vector search by pgvector HNSW, hybrid by fusing their scores.",
            hosted=False,
            needs_endpoint=False,
            needs_key=False,
            fetch_modes=list(FETCH_MODES),
        )

    @classmethod
    async def connect(
        cls,
        url: str,
        embedder: Embedder,
        *,
        options: EngineOptions | None = None,
        limits: Limits = DEFAULT_LIMITS,
        owns_embedder: bool = False,
        answerer: GroundedAnswerer | None = None,
        reranker: Reranker | None = None,
        supervisor: EmbeddedSupervisor | None = None,
        read_url: str | None = None,
        late: LateInteraction | None = None,
    ) -> PostgresEngine:
        """Open the pools, read the settings the schema was made with, start the vector indexer.

        ``options`` (options.py) size the pools and tune the rankings and the indexer. With
        ``owns_embedder`` the engine's ``close`` closes the embedder too (the service's, built for
        it alone); an embedder shared by several engines is closed by whoever made it. An
        ``answerer`` (app/engine/grounded.py) writes recall answers and is closed with the engine;
        without one they are extractive. A ``reranker`` (app/engine/reranking.py) re-orders hybrid's
        first hits. A ``supervisor`` (supervisor.py) keeps the embedded server running while the engine
        is open. With a ``read_url`` (a streaming replica of ``url``'s database) the requests' reads
        run there (replica.py). With ``late`` (app/embeddings/late.py) items get token vectors after
        their write (tokens.py) and the rankings' first hits are re-scored by them.
        """
        options = options or EngineOptions()
        with database_errors():
            pools = await Pools.open(driver_url(url), options.pool, options.hnsw)
        replica: Pools | None = None
        try:
            if read_url is not None:
                with database_errors():
                    replica = await Pools.open(driver_url(read_url), options.pool, options.hnsw)
            reads = ReadRouter(pools, replica, wait_s=options.replica.wait_ms / 1000, retry_s=options.replica.retry_s)
            with database_errors():
                async with pools.connection() as connection:
                    await ensure_current(connection)
                    settings = await cls._read_settings(connection, embedder)
                    await reads.start(connection)
        except BaseException:
            await pools.close()
            if replica is not None:
                await replica.close()
            raise
        connected = cls(
            pools,
            embedder,
            limits=limits,
            text_search_config=settings["text_search_config"],
            cursor_secret=bytes.fromhex(settings["cursor_secret"]),
            options=options,
            owns_embedder=owns_embedder,
            answerer=answerer,
            reranker=reranker,
            supervisor=supervisor,
            reads=reads,
            late=late,
        )
        if supervisor is not None:
            supervisor.start()
        if options.indexer.background:
            connected._indexer.start()  # which first indexes whatever a crash left queued
            if connected._tokens is not None:
                connected._tokens.start()  # which first makes what the items lack
        if options.undo.window_s > 0:
            connected._undo.start()
        if options.retention.sweep_every_s > 0:
            connected._expired.start()
        return connected

    @staticmethod
    async def _read_settings(connection: asyncpg.Connection, embedder: Embedder) -> dict[str, str]:
        async with connection.transaction():
            await connection.execute(CLAIM_SETTINGS, embedder.name, secrets.token_hex(32))
            settings = {row["key"]: row["value"] for row in await connection.fetch(READ_SETTINGS)}
            # Refused inside the transaction, so a refused start does not leave its claim behind.
            if settings["embedder"] != embedder.name:
                raise ConfigError(
                    f"the database holds vectors of {settings['embedder']} but the configured embedder is "
                    f"{embedder.name}: run `engram reembed` to switch"
                )
            if int(settings["embedding_dim"]) != embedder.dimension:
                raise ConfigError(
                    f"the database was made for {settings['embedding_dim']}-dimensional vectors but the embedder "
                    f"gives {embedder.dimension}: run `engram reembed` to switch"
                )
        return settings

    @property
    def descriptor(self) -> EngineDescriptor:
        return self._descriptor

    @property
    def options(self) -> EngineOptions:
        return self._options

    async def close(self) -> None:
        await self._stores.close()
        if self._supervisor is not None:
            await self._supervisor.stop()
        await self._indexer.stop()
        if self._tokens is not None:
            await self._tokens.stop()
        await self._facets.stop()
        await self._undo.stop()
        await self._expired.stop()
        await self._rankings.close()
        await self._pools.close()
        await self._reads.close()
        if self._owns_embedder:
            await self._embedder.aclose()
        if self._answerer is not None:
            await self._answerer.aclose()

    async def finish_token_vectors(self) -> None:
        """Make every late-interaction token vector the items lack now (the token writer would, in
        time); nothing without late interaction."""
        if self._tokens is not None:
            with database_errors():
                await self._tokens.catch_up()

    async def finish_indexing(self) -> None:
        """Move the whole vector backlog into the index now (the indexer would, shortly); a backlog
        that would at least double the index by building the index afresh (indexer.worth_rebuilding)."""
        options = self._options.indexer
        with database_errors():
            async with self.connection() as connection:
                if await worth_rebuilding(connection, least=options.rebuild_least):
                    try:
                        await rebuild_index(connection, memory_mb=options.build_memory_mb)
                    except asyncpg.PostgresError as error:  # e.g. no shared memory for a parallel build
                        logger.warning(
                            "vector index: building it afresh failed (%s, SQLSTATE %s); indexing vector by vector",
                            type(error).__name__,
                            error.sqlstate,
                        )
                await index_everything(connection)  # what others held meanwhile, or queued since

    async def vector_backlog(self) -> int:
        """How many vectors wait for the index."""
        with database_errors():
            async with self.connection() as connection:
                return await backlog_size(connection)

    def pool_usage(self) -> list[PoolUsage]:
        """The connection pools now, without a round trip."""
        return self._pools.usage()

    def sketch_copies(self) -> tuple[int, int]:
        """The filter keys whose sketches this process holds in memory, and their bytes (mirror.py)."""
        return self._rankings.copies_held()

    async def health(self) -> Health:
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S), self.connection() as connection:
                await connection.execute("SELECT 1")
        except Exception as error:
            return Health(state="down", reason=classify(error).message)
        replica_problem = await self._reads.problem()
        if replica_problem is not None:
            return Health(state="degraded", reason=replica_problem)
        return Health(state="ok")

    # Writes.

    async def store(self, item: StoredItem) -> StoreReceipt:
        # Refused in the item's own words, not as items[0] of a batch the client never sent; then
        # written with the stores of the same moment (combiner.py).
        receipt, position = await self._stores.store(item.checked(self._limits))
        if position is not None:
            consistency.wrote(position)
        return receipt

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        return await self._write(StoreManyRequest.model_construct(items=items).checked(self._limits))

    async def import_items(
        self, items: list[StoredItem], vectors: list[GivenVector | None], stored: list[datetime | None] | None = None
    ) -> list[StoreReceipt]:
        """``store_many`` for an import: an item with a vector of this embedder keeps it, unembedded;
        ``stored`` (a restore's) says when each item was first stored, None for now."""
        checked = StoreManyRequest.model_construct(items=items).checked(self._limits)
        given = kept_vectors(vectors, self._embedder)
        return await self._write(checked, given, stored)

    async def _write(
        self,
        checked: list[StoredItem],
        given: dict[int, np.ndarray] | None = None,
        stored: list[datetime | None] | None = None,
    ) -> list[StoreReceipt]:
        receipts, position = await self._commit_items(checked, given, stored)
        if position is not None:
            consistency.wrote(position)
        return receipts

    async def _commit_items(
        self,
        checked: list[StoredItem],
        given: dict[int, np.ndarray] | None = None,
        stored: list[datetime | None] | None = None,
    ) -> tuple[list[StoreReceipt], int | None]:
        """Validated items, written in one transaction; a receipt each, in their order, and the
        position the commit reached (None without a replica).

        The encoder is the costly part of a write, so each new item is embedded once: repeats in
        the batch and items already held are set aside first, and the vectors are made before the
        transaction, which then holds its ids' locks only as long as the insert takes. Counted as under
        way for the token writer, which waits while writes keep the process busy (TokenWriter.writing).
        """
        with self._tokens.writing() if self._tokens is not None else contextlib.nullcontext():
            return await self._commit_batch(checked, given, stored)

    async def _commit_batch(
        self,
        checked: list[StoredItem],
        given: dict[int, np.ndarray] | None,
        stored: list[datetime | None] | None,
    ) -> tuple[list[StoreReceipt], int | None]:
        texts = [item.render_text() for item in checked]
        rows = [item_row(item, text) for item, text in zip(checked, texts, strict=True)]
        if stored is not None:
            rows = [row._replace(stored_at=at) for row, at in zip(rows, stored, strict=True)]
        first: dict[str, int] = {}  # each id's first copy in the batch
        for position, row in enumerate(rows):
            first.setdefault(row.id, position)
        positions = list(first.values())
        threads = [thread_of(checked[p]) for p in positions]
        held, latest = await self._prior(list(first), threads)
        embedded = dict(zip(positions, texts_to_embed([texts[p] for p in positions], threads, latest), strict=True))
        given = given or {}
        new = [p for p in positions if rows[p].id not in held]
        vectors = {p: given[p] for p in new if p in given}
        vectors |= await self._vectors({p: embedded[p] for p in new if p not in given})
        written = [rows[p] for p in positions]

        def by_id(at: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
            return {rows[p].id: vector for p, vector in at.items()}

        # A bulk load (IndexerOptions.deferred) never catches up, so never counts what it would catch up on.
        count_backlog = self._options.indexer.catch_up and self._backlog_count.due(len(new))
        with database_errors():
            async with self.connection() as connection:
                try:
                    inserted, backlog = await self._insert(connection, written, by_id(vectors), count_backlog)
                except asyncpg.PostgresError as error:
                    if error.sqlstate != UNVECTORED:
                        raise
                    # Held a moment ago and forgotten since: new again, so embedded now, and written again.
                    late = [p for p in positions if p not in vectors]
                    vectors |= {p: given[p] for p in late if p in given}
                    vectors |= await self._vectors({p: embedded[p] for p in late if p not in given})
                    inserted, backlog = await self._insert(connection, written, by_id(vectors), count_backlog)
                position = await self._reads.position(connection)
        self._facets.wrote(len(inserted))
        ITEMS_STORED.inc(len(inserted))
        if inserted:
            self._indexer.wake(len(inserted))
            if self._tokens is not None:
                self._tokens.wrote()
        if backlog is not None and backlog > self._backlog_limit:
            await self._indexer.catch_up(to=self._backlog_limit)
        seen: set[str] = set()
        receipts = []
        for item_id in (row.id for row in rows):
            receipts.append(StoreReceipt(id=item_id, replayed=item_id not in inserted or item_id in seen))
            seen.add(item_id)
        return receipts, position

    async def _vectors(self, texts: dict[int, str]) -> dict[int, np.ndarray]:
        """The vectors of the texts by position, in one encoder call; a text twice is embedded once."""
        if not texts:
            return {}
        distinct = list(dict.fromkeys(texts.values()))
        with embedder_errors():
            made = dict(zip(distinct, await self._embedder.embed(distinct), strict=True))
        return {position: made[text] for position, text in texts.items()}

    async def _prior(
        self, ids: list[str], threads: list[ThreadKey | None]
    ) -> tuple[set[str], dict[ThreadKey, list[str]]]:
        """Which of ``ids`` are held already, and the latest stored texts (oldest first) of the
        threads the batch writes to: one round trip."""
        keys = list(dict.fromkeys(thread for thread in threads if thread))
        rows = await self.run(plan_prior(ids, keys, BEFORE_ITEMS))
        held = {row["id"] for row in rows if row["id"] is not None}
        latest = {(row["ns"], row["thread"]): list(row["texts"]) for row in rows if row["id"] is None}
        return held, latest

    async def _insert(
        self, connection: asyncpg.Connection, rows: list[ItemRow], vectors: dict[str, np.ndarray], count_backlog: bool
    ) -> tuple[set[str], int | None]:
        """The items' rows and the new ones' vectors by id, in one statement (WRITE_ITEMS): the ids
        inserted (an item already held, and not expired, is not), and how many vectors wait for the
        index when ``count_backlog``."""
        statement = plan_write(rows, self._embedder.name, vectors, count_backlog=count_backlog)
        (row,) = await fetch(connection, statement)
        return set(row["inserted_ids"]), row["backlog"]

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target = target.checked(self._limits)
        keep = self._keep(target.purge)
        if isinstance(target, ForgetByIds):
            if target.dry_run:
                return await self._preview(plan_preview_ids(target.ids))
            erase = plan_erase_kept(target.ids) if target.purge else None
            return await self._delete(plan_forget_ids(target.ids, keep=keep), keep, erase)
        if target.dry_run:
            return await self._preview(plan_preview_filter(filter_predicate(target.filter)))
        # The expired items the filter admits go too (_delete), and an erasure reaches the copies kept for undo.
        pred = filter_predicate(target.filter, live=False)
        erase = plan_erase_kept_filter(pred) if target.purge else None
        return await self._delete(plan_forget_filter(pred, keep), keep, erase)

    async def forget_within(
        self, ids: list[str], reach: Reach, *, dry_run: bool = False, purge: bool = False
    ) -> ForgetReport:
        request = ForgetWithinRequest(ids=ids, reach=reach).checked(self._limits)
        if dry_run:
            return await self._preview(plan_preview_ids(request.ids, filter_predicate(Filter(reach=request.reach))))
        pred = filter_predicate(Filter(reach=request.reach), live=False)
        keep = self._keep(purge)
        erase = plan_erase_kept(request.ids, pred) if purge else None
        return await self._delete(plan_forget_ids(request.ids, pred, keep), keep, erase)

    def _keep(self, purge: bool) -> Keep | None:
        """Where a forget keeps its items for the undo window; None for an erasure or no window."""
        if purge or self._options.undo.window_s <= 0:
            return None
        return Keep(receipt=new_receipt(), model=self._embedder.name)

    async def _preview(self, statement: Statement) -> ForgetReport:
        (row,) = await self.run(statement)
        return ForgetReport(forgotten=0, would_forget=row["n"], first_ids=list(row["first_ids"]))

    async def _delete(self, statement: Statement, keep: Keep | None, erase: Statement | None = None) -> ForgetReport:
        """The delete (and an erasure's drop of copies kept for undo) in one transaction, not while a
        retention change rewrites expiries (queries/retention.py)."""
        with database_errors():
            async with self.connection() as connection:
                async with connection.transaction():
                    await execute(connection, Statement(POLICIES_SHARED))
                    count = int(await fetchval(connection, statement) or 0)
                    if erase is not None:
                        await execute(connection, erase)
                await self._reads.written(connection)
        self._facets.wrote(count)
        ITEMS_FORGOTTEN.inc(count)
        return ForgetReport(forgotten=count, receipt=keep.receipt if keep is not None and count else None)

    async def restore(self, receipt: str, *, within: Reach | None = None) -> RestoreReport:
        """The items a forget kept under ``receipt``, stored again (their vectors kept when this
        embedder made them); ``not_found`` once the window is over; ``forbidden`` when ``within``
        does not admit one of them, and then nothing is restored."""
        request = RestoreRequest(receipt=receipt).checked(self._limits)
        rows = await self.run(plan_kept(request.receipt, self._options.undo.window_s))
        if not rows:
            raise NotFound(f"no forgotten items under receipt {quoted(request.receipt)} within the undo window")
        items = [ITEM_ADAPTER.validate_python(row["item"]) for row in rows]
        if within is not None:
            for item in items:
                if not within.admits(item.meta.namespace_node):
                    raise Forbidden(f"namespace {quoted(str(item.meta.namespace_node))} is outside this key's reach")
        vectors: list[GivenVector | None] = [
            (row["model"], row["embedding"].to_list()) if row["embedding"] is not None else None for row in rows
        ]
        stored = [row["stored_at"] for row in rows]  # restored as first stored, not as written again
        for start in range(0, len(items), MAX_STORE_MANY):
            batch = slice(start, start + MAX_STORE_MANY)
            await self.import_items(items[batch], vectors[batch], stored[batch])
        await self.run(plan_drop_receipt(request.receipt))
        return RestoreReport(restored=len(items))

    async def sweep_undo(self) -> int:
        """Drop the kept items older than the undo window now (the sweeper does it every minute)."""
        with database_errors():
            return await self._undo.sweep()

    async def sweep_expired(self) -> int:
        """Erase the items whose retention expiry has passed now (the sweeper does it every minute)."""
        with database_errors():
            return await self._expired.sweep()

    # Reads.

    async def fetch(self, request: FetchRequest) -> FetchPage:
        self.descriptor.ensure_mode(request.mode)
        request = request.checked(self._limits)
        scope = scope_of(request.query, request.mode, request.filter)
        offset = self._cursors.resume(request.cursor, scope, 0)
        if not isinstance(offset, int) or offset < 0:
            offset = 0
        # One row more than the page says whether there is a next page.
        hits = await self._rank(request.query, request.mode, request.filter, offset, request.limit + 1)
        more = len(hits) > request.limit
        return FetchPage(
            hits=hits[: request.limit],
            next_cursor=self._cursors.issue(scope, offset + request.limit) if more else None,
        )

    async def _rank(self, query: str, mode: str, request_filter: Filter, offset: int, count: int) -> list[Hit]:
        keywords = KeywordQuery.parse(query)
        if mode == "keyword":
            return [] if keywords.is_empty else await self._keyword(keywords, request_filter, offset, count)
        depth, weight = self._late_reach(mode, offset)
        if depth:
            # The question's token vectors are made while its first hits are found and theirs read.
            (hits, tokens), question = await concurrently(
                self._first_hits(query, keywords, mode, request_filter, max(offset + count, depth), depth),
                self._question(query),
            )
            return self._rescored(question, hits, tokens, weight, depth)[offset : offset + count]
        with embedder_errors():
            (vector,) = await self._embedder.embed_queries([query])
        if mode == "vector":
            return await self._vector(vector, request_filter, offset, count)
        if self._reranker is None or not self._reranker.reaches(offset):
            return await self._hybrid(keywords, vector, request_filter, offset, count)
        # Every page that holds re-ranked hits re-ranks the same first ones: one order for all pages.
        end = max(offset + count, self._reranker.depth)
        ranked = await self._hybrid(keywords, vector, request_filter, 0, end)
        return (await self._reranker.reorder(query, ranked))[offset : offset + count]

    def _late_reach(self, mode: str, offset: int) -> tuple[int, float]:
        """How many of the ranking's first hits late interaction re-scores for a page at ``offset``,
        and MaxSim's weight; (0, 0) when it re-scores none of the page's (or the cross-encoder
        re-ranks hybrid instead)."""
        late = self._options.late
        if self._late is None:
            return 0, 0.0
        if mode == "vector":
            if not late.vector:
                return 0, 0.0
            depth, weight = late.vector_depth, late.vector_weight
        elif self._reranker is None:
            depth, weight = late.hybrid_depth, late.hybrid_weight
        else:
            return 0, 0.0
        return (depth, weight) if offset < depth else (0, 0.0)

    async def _question(self, query: str) -> np.ndarray:
        assert self._late is not None
        if (known := self._late.remembered(query)) is not None:
            return known
        with embedder_errors():
            return await anyio.to_thread.run_sync(self._late.question, query)

    async def _first_hits(
        self, query: str, keywords: KeywordQuery, mode: str, request_filter: Filter, count: int, depth: int
    ) -> tuple[list[Hit], dict[str, bytes]]:
        """The ranking's first ``count`` hits, and the token vectors of its first ``depth``: read where
        stored, made here for the hits that lack them (as they will be stored: the order of every page
        is the same whether or not the writer has come to them) and handed to the writer to store."""
        assert self._late is not None and self._tokens is not None
        with embedder_errors():
            (vector,) = await self._embedder.embed_queries([query])
        if mode == "vector":
            hits = await self._vector(vector, request_filter, 0, count)
        else:
            hits = await self._hybrid(keywords, vector, request_filter, 0, count)
        head = [hit.id for hit in hits[:depth]]
        tokens = read_rows(await self._read(plan_read(self._late.name, head)))
        if missing := [hit for hit in hits[:depth] if hit.id not in tokens]:
            texts = [own_words(hit.text) for hit in missing]
            with embedder_errors():
                made = await anyio.to_thread.run_sync(partial(self._late.items, texts, waited_for=True))
            blobs = {hit.id: packed(vectors) for hit, vectors in zip(missing, made, strict=True)}
            tokens.update(blobs)
            self._tokens.made(blobs)
        return hits, tokens

    def _rescored(
        self, question: np.ndarray, hits: list[Hit], tokens: dict[str, bytes], weight: float, depth: int
    ) -> list[Hit]:
        """``hits`` with the first ``depth`` re-scored by MaxSim over the stored token vectors ``tokens`` holds."""
        assert self._late is not None
        known = [hit.id for hit in hits[:depth] if hit.id in tokens]
        judged = stored_maxsim(question, [tokens[item_id] for item_id in known], self._late.dimension)
        return rescored(hits, dict(zip(known, judged.tolist(), strict=True)), weight, depth)

    async def run(self, statement: Statement) -> list[asyncpg.Record]:
        """One statement on a pooled connection (the generic-plan pool's when it says so), in one round
        trip: the requests' reads, and maintenance or inspection (tests, EXPLAIN) alike."""
        with database_errors():
            async with self.connection(generic_plan=statement.generic_plan) as connection:
                return await fetch(connection, statement)

    async def _read(self, statement: Statement, *, at_least: int | None = None) -> list[asyncpg.Record]:
        """A request's read (fetch, recall, list, get, explore, export): on the read replica when one
        may answer it (replica.py), else on the primary as ``run``."""
        with database_errors():
            return await self._reads.run(statement, at_least=at_least)

    async def _read_seen(self, statement: Statement) -> tuple[list[asyncpg.Record], int | None]:
        """``_read``, and the position of the server that answered (None without a replica)."""
        with database_errors():
            return await self._reads.run_seen(statement)

    def connection(self, *, generic_plan: bool = False) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A pooled connection (pool.Pools.connection), for several statements or a transaction."""
        return self._pools.connection(generic_plan=generic_plan)

    async def gather_statistics(self) -> None:
        """ANALYZE the items now and rank keywords by what it finds (autovacuum does it in time)."""
        with database_errors():
            async with self.connection() as connection:
                await connection.execute("ANALYZE engram_items")
        self.forget_term_statistics()

    def forget_term_statistics(self) -> None:
        """Read the keyword ranking's statistics again at the next search (after an ANALYZE, say)."""
        self._rankings.forget_statistics()

    async def _keyword(self, keywords: KeywordQuery, request_filter: Filter, offset: int, count: int) -> list[Hit]:
        pred = filter_predicate(request_filter)
        rows = await self._rankings.keyword(self._read, keywords, request_filter, pred, offset, count)
        return [hit_of(row, float(row["score"])) for row in rows]

    async def _vector(self, vector: np.ndarray, request_filter: Filter, offset: int, count: int) -> list[Hit]:
        pred = filter_predicate(request_filter)
        rows = await self._rankings.vector(self._read, vector, request_filter, pred, offset, count)
        return [hit_of(row, float(row["score"])) for row in rows]

    async def _hybrid(
        self, keywords: KeywordQuery, vector: np.ndarray, request_filter: Filter, offset: int, count: int
    ) -> list[Hit]:
        """Both rankings at once, each on a pooled connection of its own (Rankings.hybrid)."""
        pred = filter_predicate(request_filter)
        fused = await self._rankings.hybrid(
            (self._read, self._read), keywords, vector, request_filter, pred, offset, count
        )
        return [hit_of(row, score) for row, score in fused]

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        request = request.checked(self._limits)
        hits = await self._rank(request.question, "hybrid", request.filter, 0, request.limit)
        if self._answerer is not None:
            return await self._answerer.answer(request.question, request.instructions, hits)
        return answers.compose(request.question, hits)

    async def export_page(self, request: ExportRequest, *, after: int, ceiling: int | None, count: int) -> ExportPage:
        request = request.checked(self._limits)
        model = self._embedder.name if request.include_vectors else None
        pred = filter_predicate(request.filter)
        statement = plan_export(pred, after=after, ceiling=ceiling, count=count, model=model)
        if ceiling is None:
            # The first page fixes the ceiling: every later page must be read where this one's rows are.
            rows, seen = await self._read_seen(statement)
            consistency.must_see(seen)
        else:
            rows = await self._read(statement)
        return ExportPage(
            rows=[
                ExportRow(
                    row["seq"], row["id"], row["item"], row["vector"].to_list() if row["vector"] is not None else None
                )
                for row in rows
            ],
            ceiling=rows[0]["ceiling"] if rows else (ceiling or 0),
            embedder=self._embedder.name,
        )

    async def list(self, request: ListRequest) -> ListPage:
        request = request.checked(self._limits)
        scope = scope_of("list", request.filter)
        position = self._cursors.resume(request.cursor, scope, None)
        after, ceiling = listing_position(position)
        pred = filter_predicate(request.filter)
        statement = plan_list(pred, after=after, ceiling=ceiling, count=request.limit + 1)
        if position is None:
            rows, seen = await self._read_seen(statement)
        else:
            # A later page is read where the first one's rows were (replica.py): none is skipped.
            seen = listing_seen(position)
            rows = await self._read(statement, at_least=seen)
        page = rows[: request.limit]
        more = len(rows) > request.limit
        resume = [page[-1]["seq"], rows[0]["ceiling"]] if more else None
        if resume is not None and seen is not None:
            resume.append(seen)
        return ListPage(
            items=[hit_of(row, 0.0) for row in page],
            next_cursor=self._cursors.issue(scope, resume) if resume is not None else None,
        )

    async def get(self, request: GetRequest) -> list[Hit]:
        request = request.checked(self._limits)
        pred = filter_predicate(Filter(reach=request.reach)) if request.reach else filter_predicate(Filter())
        ids = list(dict.fromkeys(request.ids))
        found = {row["id"]: row for row in await self._read(plan_get(pred, ids))}
        return [hit_of(found[i], 0.0, stored=True) for i in ids if i in found]

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        request = request.checked(self._limits)
        (row,) = await self._read(plan_explore(request.facet, filter_predicate(request.filter), request.limit))
        if folds_facet(row["kept_rows"], row["distinct_values"]):
            self._facets.fold_soon()
        buckets = row["buckets"] if isinstance(row["buckets"], list) else json.loads(row["buckets"])
        return ExplorePage(
            facet=request.facet,
            buckets=[FacetBucket(value=b["value"], count=b["count"]) for b in buckets],
            total=row["total"],
            missing=row["missing"],
            more_buckets=max(0, row["distinct_values"] - request.limit),
            truncated=False,
        )
