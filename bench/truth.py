"""The ground truth of recall@10: every stored vector ranked exactly (as stored, float32) in NumPy.

A scan in SQL per query (the engine's exact statement) cost ~90 ms at 100k, 53 s of the run
for 600 questions; here the vectors are read once (~3 s) and a ranking takes ~16 ms, with
the same answers in the same order (180 questions at 100k, 2026-12-01). Which items a
filter admits is still the engine's filter SQL, asked once per distinct filter. Ties rank
by ``seq``, as the engine's statements rank them.

At 1M the vectors are 1 GB of float32: they are read through a cursor a step at a time (never
a million rows of Python objects at once), and queries are ranked a block at a time, one
matrix product over every vector for the block (a product per query reads the whole 1 GB for
each, memory-bound; a block reads it once).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from app.contract.meta import Filter
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.queries.statement import Statement

# Indexed and still queued vectors alike: the truth is every item with a vector.
VECTORS = """
    SELECT e.item_id AS id, i.seq, e.embedding FROM engram_embeddings e JOIN engram_items i ON i.id = e.item_id
    WHERE e.model = $1
    UNION ALL
    SELECT e.item_id, i.seq, e.embedding FROM engram_vector_backlog e JOIN engram_items i ON i.id = e.item_id
    WHERE e.model = $1
"""
# Rows read per step of the cursor, and queries ranked per matrix product (a block's scores over
# 1M vectors are BLOCK x 4 MB).
LOAD_STEP = 50_000
BLOCK = 32


class ExactNeighbours:
    def __init__(self, connection: asyncpg.Connection, ids: list[str], seqs: np.ndarray, unit: np.ndarray) -> None:
        self._connection = connection
        self._ids = ids
        self._seqs = seqs
        self._unit = unit
        self._admitted: dict[str, np.ndarray] = {}

    @classmethod
    async def load(cls, connection: asyncpg.Connection, model: str) -> ExactNeighbours:
        """Every vector of ``model`` in ``connection``'s database (which gets pgvector's binary codec)."""
        await register_vector(connection)
        ids: list[str] = []
        seqs: list[int] = []
        chunks: list[np.ndarray] = []
        async with connection.transaction():
            # A bulk read on a connection set up as the engine's (15 s a statement): 1M rows take longer.
            # In no order: ties rank by seq in ``_best``, whatever order the rows came in.
            await connection.execute("SET LOCAL statement_timeout = 0")
            cursor = await connection.cursor(VECTORS, model)
            while rows := await cursor.fetch(LOAD_STEP):
                ids += [row["id"] for row in rows]
                seqs += [row["seq"] for row in rows]
                chunks.append(np.array([row["embedding"].to_numpy() for row in rows], dtype=np.float32))
        unit = np.concatenate(chunks) if chunks else np.zeros((0, 1), dtype=np.float32)
        del chunks
        unit /= np.sqrt(np.einsum("ij,ij->i", unit, unit))[:, None]  # in place: no second 1 GB
        return cls(connection, ids, np.array(seqs, dtype=np.int64), unit)

    async def admitted(self, request_filter: Filter) -> np.ndarray:
        """Row positions of the items the filter admits, by the engine's own filter SQL (cached)."""
        key = request_filter.model_dump_json()
        if key not in self._admitted:
            pred = filter_predicate(request_filter)
            admitted = Statement.bind(f"SELECT i.seq FROM engram_items i WHERE {pred.sql()}", pred.params)
            rows = await self._connection.fetch(admitted.sql, *admitted.args)
            seqs = np.array([row["seq"] for row in rows], dtype=np.int64)
            self._admitted[key] = np.flatnonzero(np.isin(self._seqs, seqs))
        return self._admitted[key]

    async def nearest(self, vector: np.ndarray, request_filter: Filter, k: int = 10) -> list[str]:
        """The ``k`` admitted items nearest ``vector`` by cosine distance; ties by ``seq``."""
        return (await self.nearest_many([vector], [request_filter], k))[0]

    async def nearest_many(
        self, vectors: Sequence[np.ndarray], filters: Sequence[Filter], k: int = 10
    ) -> list[list[str]]:
        """``nearest`` of each vector with its filter, ``BLOCK`` queries to a matrix product."""
        queries = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        found: list[list[str]] = []
        for start in range(0, len(queries), BLOCK):
            similarity = queries[start : start + BLOCK] @ self._unit.T  # one row of every vector per query
            for row, request_filter in zip(similarity, filters[start : start + BLOCK], strict=True):
                found.append(await self._best(1.0 - row, request_filter, k))
        return found

    async def _best(self, distance_to_all: np.ndarray, request_filter: Filter, k: int) -> list[str]:
        rows = await self.admitted(request_filter)
        # Every distance, then the admitted ones: cheaper than copying the admitted rows out first.
        distance = distance_to_all[rows]
        near = np.arange(len(rows))
        if len(rows) > k:  # only what is as near as the k-th can be in the top k, ties included
            near = np.flatnonzero(distance <= np.partition(distance, k - 1)[k - 1])
        best = near[np.lexsort((self._seqs[rows][near], distance[near]))][:k]
        return [self._ids[rows[i]] for i in best]

    async def count(self, request_filter: Filter) -> int:
        return len(await self.admitted(request_filter))


def recall_at_10(answers: list[list[str]], truths: list[list[str]]) -> float | None:
    """The mean share of each exact top ten an answer holds, over the queries that have one."""
    shares = [len(set(got) & set(truth)) / len(truth) for got, truth in zip(answers, truths, strict=True) if truth]
    return round(sum(shares) / len(shares), 4) if shares else None
