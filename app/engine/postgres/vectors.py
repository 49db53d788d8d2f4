"""Vectors sent to PostgreSQL in pgvector's binary form.

As text the server parses every number; binary is several times faster for the same float32
values (docs/tuning.md#binary-vectors). Every pooled connection learns the types once
(``register_vector_types``, pool.prepare_connection); a statement's vector parameter is then an array
(``query_vector``), and a vector[] parameter a list of ``Vector`` (``vector_array``): asyncpg
reads a list of arrays as a two-dimensional array.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import numpy as np
from pgvector import Vector
from pgvector.asyncpg import register_vector

# The extension may live in any schema on the search path (Supabase puts it in "extensions"),
# or not be there yet: a database no migration has reached, which the engine then refuses.
VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = to_regtype('vector')"
)


async def register_vector_types(connection: asyncpg.Connection) -> None:
    """Teach one connection pgvector's binary forms of vector and halfvec, where the extension is."""
    schema = await connection.fetchval(VECTOR_SCHEMA)
    if schema is not None:
        await register_vector(connection, schema=schema)


def query_vector(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """One vector as a ``vector`` or ``halfvec`` parameter."""
    return np.asarray(vector, dtype=np.float32)


def vector_array(vectors: Sequence[Sequence[float]] | np.ndarray) -> list[Vector]:
    """Vectors as a ``vector[]`` parameter."""
    return [Vector(row) for row in np.asarray(vectors, dtype=np.float32)]
