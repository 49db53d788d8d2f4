"""API keys in ``engram_keys`` (migration 0013)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg

from app.contract.errors import NotFound, quoted
from app.contract.keys import KeyInfo, KeyRequest, NewKey, new_key_id, new_secret, secret_digest
from app.contract.namespaces import Reach
from app.engine.postgres.queries.statement import Statement

_COLUMNS = (
    "id, name, role, reach_at, reach_inherit, reach_descendants, expires_at, created_at, last_used_at, revoked_at"
)


def key_of(row: asyncpg.Record) -> KeyInfo:
    return KeyInfo(
        id=row["id"],
        name=row["name"],
        role=row["role"],
        reach=Reach(at=row["reach_at"], inherit=row["reach_inherit"], descendants=row["reach_descendants"]),
        expires_at=row["expires_at"],
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )


class PostgresKeys:
    """The key statements, run by ``run`` (the engine's: its pool, its error mapping)."""

    def __init__(self, run: Callable[[Statement], Awaitable[list[asyncpg.Record]]]) -> None:
        self._run = run

    async def _rows(self, sql: str, *args: object) -> list[asyncpg.Record]:
        return await self._run(Statement(sql, args))

    async def create(self, request: KeyRequest) -> NewKey:
        request = request.checked()
        secret = new_secret()
        reach = request.reach
        (row,) = await self._rows(
            f"INSERT INTO engram_keys (id, name, secret_sha256, role, reach_at, reach_inherit, reach_descendants,"
            f" expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {_COLUMNS}",
            new_key_id(),
            request.name,
            secret_digest(secret),
            request.role,
            reach.at,
            reach.inherit,
            reach.descendants,
            request.expires_at,
        )
        return NewKey(key=key_of(row), secret=secret)

    async def list(self) -> list[KeyInfo]:
        return [key_of(row) for row in await self._rows(f"SELECT {_COLUMNS} FROM engram_keys ORDER BY created_at, id")]

    async def revoke(self, key_id: str) -> KeyInfo:
        rows = await self._rows(
            f"UPDATE engram_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING {_COLUMNS}",
            key_id,
        )
        if not rows:
            raise NotFound(f"no key {quoted(key_id)}")
        return key_of(rows[0])

    async def find(self, digest: bytes) -> KeyInfo | None:
        rows = await self._rows(f"SELECT {_COLUMNS} FROM engram_keys WHERE secret_sha256 = $1", digest)
        return key_of(rows[0]) if rows else None

    async def any(self) -> bool:
        (row,) = await self._rows("SELECT EXISTS (SELECT 1 FROM engram_keys) AS held")
        return bool(row["held"])

    async def stamp_use(self, key_id: str, now: datetime) -> None:
        await self._rows("UPDATE engram_keys SET last_used_at = $2 WHERE id = $1", key_id, now.astimezone(UTC))
