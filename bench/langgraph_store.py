"""The LangGraph baseline: its PostgresStore with its pgvector index, the service's encoder and dimension.

The encoder is an instance of its own (built as the service builds it): its memory of recent vectors
never holds a text another system embedded.

Mapping: an item is stored under its namespace path split on ``/`` (the root as
``("root",)``), keyed by its Engram id, with ``{"text": rendered text, "kind",
"tag_<t>": true per tag}``; only ``text`` is embedded. The namespace-subtree
reach becomes a namespace-prefix search; ``tags_any: [t]`` becomes the filter
``{"tag_<t>": true}`` (its filter compares top-level keys only, so a tag list
cannot be tested directly). LangGraph has no keyword search, so only vector
search is compared. The index and connection settings are LangGraph's defaults
(HNSW m=16, ef_construction=64; ``hnsw.ef_search`` 40), as a user gets them; opened with a
``breadth``, the same store is searched as far as Engram searches, to tell a wider search from a slower one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.store.base import PutOp
from langgraph.store.postgres import PoolConfig
from langgraph.store.postgres.aio import AsyncPostgresStore

from app.embeddings.protocol import Embedder
from bench.corpus import CorpusItem

# pgvector's default walk breadth, which LangGraph's store leaves as it is.
DEFAULT_EF_SEARCH = 40


def namespace_tuple(namespace: str) -> tuple[str, ...]:
    return tuple(namespace.split("/")) if namespace else ("root",)


class LangGraphStore:
    def __init__(self, store: AsyncPostgresStore, breadth: tuple[int, int] | None = None) -> None:
        self._store = store
        self._breadth = breadth

    async def before_case(self, variant: str) -> None:
        """Its search settings on the store's own connection, before a fetch case (``variant``: none, tag, subtree)."""
        if self._breadth is None:
            return
        unfiltered, filtered = self._breadth
        connection = self._store.conn
        await connection.execute(f"SET hnsw.ef_search = {unfiltered if variant == 'none' else filtered:d}")
        await connection.execute("SET hnsw.iterative_scan = relaxed_order")

    async def search_at(self, ef_search: int) -> None:
        """Its own search, walking ``ef_search`` candidates (nothing else changed: its filter still
        applies after the walk): how a user widens LangGraph's search (bench/equal_recall.py)."""
        await self._store.conn.execute(f"SET hnsw.ef_search = {ef_search:d}")

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        ops = [PutOp(namespace=namespace_tuple(item.namespace), key=item.id, value=_value(item)) for item in batch]
        await self._store.abatch(ops)
        return len(ops)

    async def store(self, item: CorpusItem) -> str:
        """One item through ``aput``, as an agent writes a memory (its store gathers the puts of
        concurrent callers into one batch); its key."""
        await self._store.aput(namespace_tuple(item.namespace), item.id, _value(item))
        return item.id

    async def fetch(self, query: str, mode: str, request_filter: dict[str, Any], limit: int = 10) -> list[str]:
        if mode != "vector":
            raise ValueError("LangGraph's store searches by vector only")
        prefix: tuple[str, ...] = ()
        store_filter: dict[str, Any] | None = None
        if "reach" in request_filter:
            prefix = namespace_tuple(request_filter["reach"]["at"])
        if "tags_any" in request_filter:
            (tag,) = request_filter["tags_any"]
            store_filter = {f"tag_{tag}": True}
        hits = await self._store.asearch(prefix, query=query, filter=store_filter, limit=limit)
        return [hit.key for hit in hits]


def _value(item: CorpusItem) -> dict[str, Any]:
    value: dict[str, Any] = {"text": item.text, "kind": item.row["kind"]}
    value.update({f"tag_{tag}": True for tag in item.tags})
    return value


@asynccontextmanager
async def open_store(
    url: str,
    embedder: Embedder,
    breadth: tuple[int, int] | None = None,
    *,
    pool_size: int | None = None,
    ef_search: int | None = None,
) -> AsyncIterator[LangGraphStore]:
    """Set up the store's tables and index in ``url`` (its own database) and yield it, on a connection of its own.

    ``breadth`` (unfiltered, filtered): searched as Engram searches, with ``hnsw.ef_search`` at those
    values and pgvector's iterative scan walking on past what a filter drops; a store of its own, so
    that its settings need not be swapped on one connection query by query.
    ``pool_size``: on a psycopg pool of at most that many connections (LangGraph's ``pool_config``),
    for concurrent callers; its connections cannot be set one by one, so not with a ``breadth``, but
    ``ef_search`` sets every one of them as it opens (how a user widens a pooled store's search).
    """
    if pool_size is not None and breadth is not None:
        raise ValueError("a pooled store searches at LangGraph's default breadth")

    async def embed(texts: list[str]) -> list[list[float]]:
        # LangGraph takes lists of floats, as the embedders made for it (LangChain's) return them.
        return (await embedder.embed(texts)).tolist()  # type: ignore[no-any-return]

    index = {"dims": embedder.dimension, "embed": embed, "fields": ["text"], "distance_type": "cosine"}
    if ef_search is not None and pool_size is None:
        raise ValueError("ef_search sets a pooled store's connections; a single one is set by search_at")
    pool: PoolConfig | None = None
    if pool_size is not None:
        pool = PoolConfig(min_size=1, max_size=pool_size)
        if ef_search is not None:
            pool["kwargs"] = {"options": f"-c hnsw.ef_search={int(ef_search)}"}
    async with AsyncPostgresStore.from_conn_string(url, index=index, pool_config=pool) as store:  # type: ignore[arg-type]
        await store.setup()
        yield LangGraphStore(store, breadth)
