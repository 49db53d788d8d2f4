"""The PostgreSQL engine: SQL first, each statement the clearest form of its rule."""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import asyncpg
import numpy as np
import orjson
from pydantic import BaseModel
from sqlalchemy import event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.util import greenlet_spawn

from app.contract.errors import ConfigError
from app.contract.items import StoredItem, fingerprint_of
from app.contract.limits import DEFAULT_LIMITS, Limits
from app.contract.meta import Filter, Meta, Source, ToolCall, TurnRange
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
    StoreManyRequest,
    StoreReceipt,
)
from app.embeddings.errors import embedder_errors
from app.embeddings.protocol import Embedder
from app.engine import answers
from app.engine.context import BEFORE_ITEMS, ThreadKey, texts_to_embed, thread_of
from app.engine.cursors import CursorCodec, listing_position, scope_of
from app.engine.fusion import fuse, fusion_depth
from app.engine.grounded import GroundedAnswerer
from app.engine.keywords import KeywordQuery
from app.engine.postgres.errors import classify, database_errors
from app.engine.postgres.facets import FacetFolder
from app.engine.postgres.filters import Predicate, filter_predicate, sketch_keys
from app.engine.postgres.indexer import VectorIndexer, backlog_size, index_everything
from app.engine.postgres.schema import async_url, ensure_current
from app.engine.postgres.selectivity import ranks_by_sketch
from app.engine.postgres.statements import (
    APPLICATION_NAME,
    HELD_IDS,
    HNSW_EF_SEARCH,
    HNSW_EF_SEARCH_FILTERED,
    INSERT_ITEMS,
    INSERT_ITEMS_COLUMNS,
    LOCK_IDS,
    QUEUE_VECTORS,
    TERM_STATISTICS,
    THREAD_LATEST,
    TermStatistics,
    delete_sql,
    explore_params,
    explore_sql,
    folds_facet,
    get_sql,
    keyword_params,
    keyword_sql,
    list_sql,
    plans_generic,
    positional,
    sketch_candidates,
    sketch_sql,
    vector_sql,
)
from app.engine.postgres.vectors import learn_vector_types, query_vector, vector_array
from app.engine.reranking import Reranker


class ItemRow(NamedTuple):
    """One item as ``INSERT_ITEMS`` takes it (its columns in ``INSERT_ITEMS_COLUMNS`` order)."""

    id: str
    kind: str
    namespace: str
    text: str
    meta: str
    item: str
    confidence: float | None
    observed_at: str | None
    source_kind: str


def item_row(item: StoredItem, text: str) -> ItemRow:
    """``item``'s row from one dump of it: what is stored of it is read first, then its id is taken
    over the same values made canonical (which changes them). Where each came from a dump of its
    own (its meta, its JSON, its canonical form), a batch of 100 spent ~0.7 ms more (twentieth session).
    """
    data = item.as_json()
    meta = data["meta"]
    meta_json, item_json = orjson.dumps(meta).decode(), orjson.dumps(data).decode()
    observed_at, source_kind = meta.get("observed_at"), meta["source"]["kind"]
    return ItemRow(
        id=fingerprint_of(data),
        kind=item.type,
        namespace=item.meta.namespace or "",
        text=text,
        meta=meta_json,
        item=item_json,
        confidence=getattr(item, "confidence", None),
        observed_at=observed_at,
        source_kind=source_kind,
    )


class StatisticsCache:
    """The keyword ranking's word statistics (TermStatistics), read again once ``ttl_s`` old.

    ANALYZE (autovacuum's, as the store grows) changes them now and then; reading them is a
    statement of its own, so not one in every search.
    """

    def __init__(self, ttl_s: float = 2.0) -> None:
        self._ttl_s = ttl_s
        self._statistics: TermStatistics | None = None
        self._read_at = 0.0

    async def current(self, read: Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]) -> TermStatistics:
        now = time.monotonic()
        if self._statistics is None or now - self._read_at > self._ttl_s:
            (row,) = await read()
            self._statistics, self._read_at = TermStatistics.of(row), now
        return self._statistics

    def forget(self) -> None:
        self._statistics = None


def _discard_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """At checkout, a pooled connection the server has closed (restart, terminated backend) is replaced.

    Instead of ``pool_pre_ping``, whose ping is three round trips (BEGIN, ``;``, ROLLBACK):
    ~0.7 ms of every read at 100k items, measured in-process. asyncpg sees the server close
    the socket while the connection sits in the pool, so asking it costs nothing.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


def search_breadth(pred: Predicate, *, exact: bool, filtered: int | None) -> int | None:
    """The HNSW breadth of a search through the index under ``pred`` (vector_sql's ``breadth``):
    ``filtered`` when it filters, None (the connection's own) otherwise, or for an exact scan,
    which walks no index."""
    return None if exact or pred.admits_all else filtered


def index_was_enough(rows: Sequence[Mapping[str, Any]], depth: int) -> bool:
    """Whether a vector statement through the index answered for certain: the index gave all ``depth``
    rows. Short, it may have given up on a selective filter (hnsw.max_scan_tuples), and only the exact
    scan says what really matches, however many rows the vector backlog added."""
    return bool(rows) and rows[0]["from_index"] >= depth


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


_set_attribute = object.__setattr__
Model = TypeVar("Model", bound=BaseModel)


@functools.cache
def _unset(model: type[BaseModel]) -> dict[str, None]:
    """Every field of ``model`` as None, which must be each optional field's default."""
    defaults = {name: field.default for name, field in model.model_fields.items() if not field.is_required()}
    if any(value is not None or model.model_fields[name].default_factory for name, value in defaults.items()):
        raise TypeError(f"{model.__name__} has a default other than None: build it with model_construct")
    return dict.fromkeys(model.model_fields)


def built(model: type[Model], values: dict[str, Any]) -> Model:
    """``model`` from values this engine validated on the way in, as ``model_construct`` makes it
    (the same instance state) without its per-field default lookup: a page of 100 hits is built in
    ~0.8 ms instead of 2.9 (10k bench corpus). tests/engine/test_hits.py checks the result equals
    the validated model, so a pydantic that lays instances out differently fails there first.
    """
    instance = model.__new__(model)
    _set_attribute(instance, "__dict__", {**_unset(model), **values})
    _set_attribute(instance, "__pydantic_fields_set__", set(values))
    _set_attribute(instance, "__pydantic_extra__", None)
    _set_attribute(instance, "__pydantic_private__", None)
    return instance


def meta_of(stored: dict[str, Any]) -> Meta:
    """Meta from the JSON this engine wrote, validated on the way in: built, not re-validated.

    bench/HISTORY.md (10k, item 1): ``Meta.model_validate`` per row cost 1.4 ms per 100 hits.
    """
    fields: dict[str, Any] = dict(stored)
    if "source" in fields:
        fields["source"] = built(Source, fields["source"])
    if "tool_call" in fields:
        fields["tool_call"] = built(ToolCall, fields["tool_call"])
    if "turns" in fields:
        fields["turns"] = built(TurnRange, fields["turns"])
    if "observed_at" in fields:
        fields["observed_at"] = datetime.fromisoformat(fields["observed_at"])
    return built(Meta, fields)


def hit_of(row: Mapping[str, Any], score: float) -> Hit:
    """A hit from an ``engram_items`` row (HIT_COLUMNS)."""
    return built(
        Hit,
        {
            "id": row["id"],
            "kind": row["kind"],
            "text": row["text"],
            "meta": meta_of(row["meta"]),
            "score": score,
            "confidence": row["confidence"],
        },
    )


class PostgresEngine:
    """Items in ``engram_items``, vectors per model in ``engram_embeddings`` (HNSW-indexed) or, until
    the indexer has moved them there, in ``engram_vector_backlog`` (app/engine/postgres/indexer.py)."""

    def __init__(
        self,
        engine: AsyncEngine,
        generic_plans: AsyncEngine,
        embedder: Embedder,
        *,
        limits: Limits = DEFAULT_LIMITS,
        text_search_config: str = "english",
        cursor_secret: bytes,
        ef_search_filtered: int | None = None,
        backlog_limit: int = 500,
        indexers: int = 2,
        owns_embedder: bool = False,
        answerer: GroundedAnswerer | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self._db = engine
        self._answerer = answerer  # None: extractive answers only; closed with the engine
        self._reranker = reranker  # None: hybrid keeps the fused order
        self._owns_embedder = owns_embedder
        self._generic = generic_plans
        self._indexer = VectorIndexer(self._connection, workers=indexers)
        self._facets = FacetFolder(self._connection)
        self._backlog_limit = backlog_limit
        self._ef_search_filtered = ef_search_filtered
        self._statistics = StatisticsCache()
        self._embedder = embedder
        self._limits = limits
        self._ts_config = text_search_config
        self._cursors = CursorCodec(cursor_secret)
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
        limits: Limits = DEFAULT_LIMITS,
        pool_size: int = 10,
        pool_overflow: int = 10,
        connect_timeout_s: float = 5.0,
        statement_timeout_ms: int = 15_000,
        ef_search: int = HNSW_EF_SEARCH,
        ef_search_filtered: int | None = HNSW_EF_SEARCH_FILTERED,
        iterative_scan: str = "relaxed_order",
        backlog_limit: int = 500,
        background_indexing: bool = True,
        indexers: int = 2,
        owns_embedder: bool = False,
        answerer: GroundedAnswerer | None = None,
        reranker: Reranker | None = None,
    ) -> PostgresEngine:
        """Open the pools, read the settings the schema was made with, start the vector indexer.

        Two pools of ``pool_size`` (+ ``pool_overflow``) connections each: one plans every
        statement for its values, the other reuses one generic plan per statement (plans_generic).

        ``ef_search`` is every connection's HNSW breadth; a filtered search runs with
        ``ef_search_filtered`` (when given) instead, since the filter discards most candidates.
        A write that leaves more than ``backlog_limit`` vectors waiting for the index indexes
        until it does not (app/engine/postgres/indexer.py); ``indexers`` background workers index
        the rest, each on a pooled connection. Without ``background_indexing`` only such writes
        and ``finish_indexing`` index (tests that need a backlog to stay). With ``owns_embedder``
        the engine's ``close`` closes the embedder too (the service's, built for it alone); an embedder
        shared by several engines is closed by whoever made it. An ``answerer`` (app/engine/grounded.py)
        writes recall answers and is closed with the engine; without one they are extractive.
        """

        def pool(plan_cache_mode: str) -> AsyncEngine:
            pooled = create_async_engine(
                async_url(url),
                pool_size=pool_size,
                max_overflow=pool_overflow,
                pool_timeout=connect_timeout_s,
                # Every hit's meta is jsonb: orjson reads it ~4x faster than the json module
                # (a 100-item list spent 8% of the service's time there, py-spy, fourth session).
                json_deserializer=orjson.loads,
                connect_args={
                    "timeout": connect_timeout_s,
                    "command_timeout": statement_timeout_ms / 1000 + connect_timeout_s,
                    "server_settings": {
                        "application_name": APPLICATION_NAME,
                        "statement_timeout": str(statement_timeout_ms),
                        "jit": "off",  # JIT compiles cost more than these short queries take
                        "plan_cache_mode": plan_cache_mode,
                        "hnsw.ef_search": str(ef_search),
                        # A filtered vector search keeps scanning the index until it has enough rows.
                        "hnsw.iterative_scan": iterative_scan,
                    },
                },
            )
            event.listen(pooled.sync_engine, "checkout", _discard_closed)
            learn_vector_types(pooled)
            return pooled

        # Plan each statement for its values: how selective a filter is and how common the
        # query's words are decide between an index and a scan, and asyncpg's cached statements
        # would otherwise switch to one generic plan. A ranking without a filter, whose values
        # change no estimate, runs on the second pool's one generic plan (plans_generic).
        engine, generic = pool("force_custom_plan"), pool("force_generic_plan")
        try:
            with database_errors():
                await ensure_current(engine)
                settings = await cls._read_settings(engine, embedder)
        except BaseException:
            await engine.dispose()
            await generic.dispose()
            raise
        connected = cls(
            engine,
            generic,
            embedder,
            limits=limits,
            text_search_config=settings["text_search_config"],
            cursor_secret=bytes.fromhex(settings["cursor_secret"]),
            ef_search_filtered=ef_search_filtered,
            backlog_limit=backlog_limit,
            indexers=indexers,
            owns_embedder=owns_embedder,
            answerer=answerer,
            reranker=reranker,
        )
        if background_indexing:
            connected._indexer.start()  # which first indexes whatever a crash left queued
        return connected

    @staticmethod
    async def _read_settings(engine: AsyncEngine, embedder: Embedder) -> dict[str, str]:
        async with engine.begin() as connection:
            # The first start claims the database for this embedder and makes the cursor secret.
            await connection.execute(
                text(
                    "INSERT INTO engram_settings (key, value) VALUES ('embedder', :model), ('cursor_secret', :secret) "
                    "ON CONFLICT (key) DO NOTHING"
                ),
                {"model": embedder.name, "secret": secrets.token_hex(32)},
            )
            rows = await connection.execute(text("SELECT key, value FROM engram_settings"))
            settings = {row.key: row.value for row in rows}
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
    def database(self) -> AsyncEngine:
        return self._db

    async def close(self) -> None:
        await self._indexer.stop()
        await self._facets.stop()
        await self._db.dispose()
        await self._generic.dispose()
        if self._owns_embedder:
            await self._embedder.aclose()
        if self._answerer is not None:
            await self._answerer.aclose()

    async def finish_indexing(self) -> None:
        """Move the whole vector backlog into the index now (the indexer would, shortly)."""
        with database_errors():
            async with self._connection() as connection:
                await index_everything(connection)

    async def vector_backlog(self) -> int:
        """How many vectors wait for the index."""
        with database_errors():
            async with self._connection() as connection:
                return await backlog_size(connection)

    async def health(self) -> Health:
        try:
            async with asyncio.timeout(3):
                async with self._db.connect() as connection:
                    await connection.execute(text("SELECT 1"))
        except Exception as error:
            return Health(state="down", reason=classify(error).message)
        return Health(state="ok")

    # Writes.

    async def store(self, item: StoredItem) -> StoreReceipt:
        # Refused in the item's own words, not as items[0] of a batch the client never sent.
        return (await self._write([item.checked(self._limits)]))[0]

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        return await self._write(StoreManyRequest.model_construct(items=items).checked(self._limits))

    async def _write(self, checked: list[StoredItem]) -> list[StoreReceipt]:
        """Validated items, written in one transaction; a receipt each, in their order.

        The encoder is the costly part of a write, so each new item is embedded once: repeats in
        the batch and items already held are set aside first, and the vectors are made before the
        transaction, which then holds its ids' locks only as long as the insert takes.
        """
        texts = [item.render_text() for item in checked]
        rows = [item_row(item, text) for item, text in zip(checked, texts, strict=True)]
        first: dict[str, int] = {}  # each id's first copy in the batch
        for position, row in enumerate(rows):
            first.setdefault(row.id, position)
        positions = list(first.values())
        threads = [thread_of(checked[p]) for p in positions]
        with database_errors():
            async with self._connection() as connection:
                held = await self._held(connection, list(first))
                latest = await self._thread_latest(connection, threads)
        embedded = dict(zip(positions, texts_to_embed([texts[p] for p in positions], threads, latest), strict=True))
        vectors = await self._vectors({p: embedded[p] for p in positions if rows[p].id not in held})
        with database_errors():
            async with self._connection() as connection, connection.transaction():
                inserted = await self._insert(connection, [rows[p] for p in positions])
                # Held a moment ago and forgotten since: new again, so embedded now.
                late = {first[i]: embedded[first[i]] for i in inserted if first[i] not in vectors}
                vectors |= await self._vectors(late)
                backlog = await self._queue_vectors(connection, {i: vectors[first[i]] for i in inserted})
        self._facets.wrote(len(inserted))
        if backlog:
            self._indexer.wake()
        if backlog > self._backlog_limit:
            await self._indexer.catch_up(to=self._backlog_limit)
        seen: set[str] = set()
        receipts = []
        for item_id in (row.id for row in rows):
            receipts.append(StoreReceipt(id=item_id, replayed=item_id not in inserted or item_id in seen))
            seen.add(item_id)
        return receipts

    async def _vectors(self, texts: dict[int, str]) -> dict[int, np.ndarray]:
        """The vectors of the texts by position, in one encoder call; a text twice is embedded once."""
        if not texts:
            return {}
        distinct = list(dict.fromkeys(texts.values()))
        with embedder_errors():
            made = dict(zip(distinct, await self._embedder.embed(distinct), strict=True))
        return {position: made[text] for position, text in texts.items()}

    @staticmethod
    async def _held(connection: asyncpg.Connection, ids: list[str]) -> set[str]:
        numbered, values = positional(HELD_IDS, {"ids": ids})
        return {row["id"] for row in await connection.fetch(numbered, *values)}

    @staticmethod
    async def _thread_latest(
        connection: asyncpg.Connection, threads: list[ThreadKey | None]
    ) -> dict[ThreadKey, list[str]]:
        """The latest stored texts (oldest first) of the threads the batch writes to."""
        keys = list(dict.fromkeys(thread for thread in threads if thread))
        if not keys:
            return {}
        params = {"nss": [ns for ns, _ in keys], "threads": [thread for _, thread in keys], "before": BEFORE_ITEMS}
        numbered, values = positional(THREAD_LATEST, params)
        return {(row["ns"], row["thread"]): list(row["texts"]) for row in await connection.fetch(numbered, *values)}

    async def _insert(self, connection: asyncpg.Connection, rows: list[ItemRow]) -> set[str]:
        """The items' rows; the ids inserted (an item already held is not)."""
        await connection.execute(*positional(LOCK_IDS, {"ids": [row.id for row in rows]}))
        columns = dict(zip(INSERT_ITEMS_COLUMNS, zip(*rows, strict=True), strict=True))
        numbered, values = positional(INSERT_ITEMS, {name: list(column) for name, column in columns.items()})
        return {row["id"] for row in await connection.fetch(numbered, *values)}

    async def _queue_vectors(self, connection: asyncpg.Connection, vectors: dict[str, np.ndarray]) -> int:
        """The vectors into the backlog; how many wait for the index now."""
        if not vectors:
            return 0
        params = {"model": self._embedder.name, "ids": list(vectors), "vs": vector_array(list(vectors.values()))}
        numbered, values = positional(QUEUE_VECTORS, params)
        return int(await connection.fetchval(numbered, *values) or 0)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target = target.checked(self._limits)
        if isinstance(target, ForgetByIds):
            where, params = "i.id = ANY(:ids)", {"ids": list(dict.fromkeys(target.ids))}
        else:
            pred = filter_predicate(target.filter)
            where, params = pred.sql(), pred.params
        return await self._delete(where, params)

    async def forget_within(self, ids: list[str], reach: Reach) -> ForgetReport:
        request = ForgetWithinRequest(ids=ids, reach=reach).checked(self._limits)
        pred = filter_predicate(Filter(reach=request.reach))
        return await self._delete(
            f"i.id = ANY(:ids) AND {pred.sql()}", {"ids": list(dict.fromkeys(request.ids)), **pred.params}
        )

    async def _delete(self, where: str, params: dict[str, Any]) -> ForgetReport:
        with database_errors():
            async with self._db.begin() as connection:
                count = int(await connection.scalar(text(delete_sql(where)), params) or 0)
        self._facets.wrote(count)
        return ForgetReport(forgotten=count)

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

    async def _rows(self, sql: str, params: dict[str, Any], *, generic_plan: bool = False) -> list[Mapping[str, Any]]:
        """A read on a pooled connection, sent through asyncpg itself, in one round trip.

        SQLAlchemy keeps the pools (closed connections replaced, limits); the statement goes
        straight to the driver's prepared-statement cache. bench/HISTORY.md (10k, item 1):
        SQLAlchemy's execute cost 0.34 ms a statement against asyncpg's 0.045. ``generic_plan``
        takes the connection from the pool that reuses one plan per statement (plans_generic).
        """
        numbered, values = positional(sql, params)
        with database_errors():
            async with self._connection(generic_plan=generic_plan) as raw:
                return list(await raw.fetch(numbered, *values))

    @asynccontextmanager
    async def _connection(self, *, generic_plan: bool = False) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection's asyncpg connection, for statements sent to the driver itself.

        Taken from the pool as a raw connection, without the AsyncConnection around it: 0.06
        instead of 0.17 ms a checkout and return (100k copy, 900 each, ninth session).
        """
        pooled = await (self._generic if generic_plan else self._db).raw_connection()
        try:
            yield pooled.driver_connection  # type: ignore[misc]
        except BaseException:
            # SQLAlchemy never saw these statements, so it cannot tell a connection a failure
            # left half-way through a message exchange: it must not go back to the pool.
            await greenlet_spawn(pooled.invalidate)
            raise
        finally:
            await greenlet_spawn(pooled.close)

    def _breadth(self, pred: Predicate, *, exact: bool) -> int | None:
        return search_breadth(pred, exact=exact, filtered=self._ef_search_filtered)

    async def gather_statistics(self) -> None:
        """ANALYZE the items now and rank keywords by what it finds (autovacuum does it in time)."""
        with database_errors():
            async with self._connection() as connection:
                await connection.execute("ANALYZE engram_items")
        self.forget_term_statistics()

    def forget_term_statistics(self) -> None:
        """Read the keyword ranking's statistics again at the next search (after an ANALYZE, say)."""
        self._statistics.forget()

    async def _keyword_params(self, keywords: KeywordQuery, depth: int) -> dict[str, Any]:
        return keyword_params(self._ts_config, keywords, depth, await self._term_statistics())

    async def _keyword(self, keywords: KeywordQuery, request_filter: Filter, offset: int, count: int) -> list[Hit]:
        rows = await self._keyword_rows(keywords, filter_predicate(request_filter), offset, count)
        return [hit_of(row, float(row["score"])) for row in rows]

    async def _keyword_rows(
        self, keywords: KeywordQuery, pred: Predicate, offset: int, count: int
    ) -> list[Mapping[str, Any]]:
        params = {**await self._keyword_params(keywords, offset + count), "count": count, "offset": offset}
        sql = keyword_sql(pred, keywords, depth=offset + count)
        return await self._rows(sql, {**params, **pred.params}, generic_plan=plans_generic(pred))

    async def _vector(self, vector: np.ndarray, request_filter: Filter, offset: int, count: int) -> list[Hit]:
        rows = await self._vector_rows(vector, request_filter, filter_predicate(request_filter), offset, count)
        return [hit_of(row, float(row["score"])) for row in rows]

    async def _vector_rows(
        self, vector: np.ndarray, request_filter: Filter, pred: Predicate, offset: int, count: int
    ) -> list[Mapping[str, Any]]:
        """A vector page: by sketches when the filter admits few items, else through the index (then
        exactly, should the index give up on a selective filter)."""
        params = {"vec": query_vector(vector), "model": self._embedder.name, "depth": offset + count}
        if await self._admits_few(request_filter, pred):
            keys = sketch_keys(request_filter)
            params = {**params, "candidates": sketch_candidates(offset + count), "offset": offset}
            return await self._rows(
                sketch_sql(pred.sql(), keys),
                {**params, **pred.params, **keys.predicate.params},
            )
        for exact in (False, True):
            breadth = self._breadth(pred, exact=exact)
            rows = await self._rows(
                vector_sql(pred.sql(), exact=exact, dimension=self._embedder.dimension, breadth=breadth),
                {**params, "offset": offset, **pred.params},
                generic_plan=plans_generic(pred),
            )
            if exact or index_was_enough(rows, offset + count):
                return rows
        raise AssertionError("unreachable")

    async def _admits_few(self, request_filter: Filter, pred: Predicate) -> bool:
        return not pred.admits_all and ranks_by_sketch(request_filter, await self._term_statistics())

    async def _term_statistics(self) -> TermStatistics:
        return await self._statistics.current(lambda: self._rows(TERM_STATISTICS, {}))

    async def _hybrid(
        self, keywords: KeywordQuery, vector: np.ndarray, request_filter: Filter, offset: int, count: int
    ) -> list[Hit]:
        """The keyword and vector rankings' scores combined (fusion.fuse: each counts to a fixed
        depth, so every page cuts one order), each read to that depth or the page's end.

        The two rankings are two statements run at once on two pooled connections: PostgreSQL
        runs one statement on one core, so a hybrid fetch takes about as long as its slower half
        instead of both: at 100k (raw SQL, 200 questions twice, interleaved with the one-statement
        fusion it replaces) p50 23.3 -> 14.9 ms unfiltered, 26.4 -> 17.3 with a tag, 25.3 -> 17.2
        with a subtree, on 2 cores. Each reads its own snapshot, a moment
        apart: a write committed between them shows in one ranking only, as it may to any read
        that overlaps it; every write acknowledged before the fetch began is in both.
        """
        pred = filter_predicate(request_filter)
        depth = fusion_depth(offset + count)
        nearest = self._vector_rows(vector, request_filter, pred, 0, depth)
        if keywords.is_empty:
            keyword_rows, vector_rows = [], await nearest
        else:
            keyword_rows, vector_rows = await concurrently(self._keyword_rows(keywords, pred, 0, depth), nearest)
        rows = {row["id"]: row for row in (*keyword_rows, *vector_rows)}
        fused = fuse(
            [(row["id"], float(row["score"])) for row in keyword_rows],
            [(row["id"], float(row["score"])) for row in vector_rows],
            {item_id: row["seq"] for item_id, row in rows.items()},
        )
        return [hit_of(rows[item_id], score) for item_id, score in fused[offset : offset + count]]

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        request = request.checked(self._limits)
        hits = await self._rank(request.question, "hybrid", request.filter, 0, request.limit)
        if self._answerer is not None:
            return await self._answerer.answer(request.question, request.instructions, hits)
        return answers.compose(request.question, hits)

    async def list(self, request: ListRequest) -> ListPage:
        request = request.checked(self._limits)
        scope = scope_of("list", request.filter)
        after, ceiling = listing_position(self._cursors.resume(request.cursor, scope, None))
        pred = filter_predicate(request.filter)
        params = {"after": after, "ceiling": ceiling, "count": request.limit + 1, **pred.params}
        rows = await self._rows(list_sql(pred.sql()), params)
        page = rows[: request.limit]
        more = len(rows) > request.limit
        return ListPage(
            items=[hit_of(row, 0.0) for row in page],
            next_cursor=self._cursors.issue(scope, [page[-1]["seq"], rows[0]["ceiling"]]) if more else None,
        )

    async def get(self, request: GetRequest) -> list[Hit]:
        request = request.checked(self._limits)
        pred = filter_predicate(Filter(reach=request.reach)) if request.reach else filter_predicate(Filter())
        ids = list(dict.fromkeys(request.ids))
        rows = await self._rows(
            get_sql(pred.sql()),
            {"ids": ids, **pred.params},
        )
        found = {row["id"]: row for row in rows}
        return [hit_of(found[i], 0.0) for i in ids if i in found]

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        request = request.checked(self._limits)
        pred = filter_predicate(request.filter)
        (row,) = await self._rows(explore_sql(request.facet, pred), explore_params(request.facet, pred, request.limit))
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
