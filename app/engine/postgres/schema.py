"""The schema's lifecycle: run migrations (alembic, on SQLAlchemy), and refuse a database that is behind.

SQLAlchemy is here for alembic alone; the engine, the indexer and ``engram reembed`` reach the
database through asyncpg (pool.py).
"""

from __future__ import annotations

from importlib import resources

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, make_url

from app.contract.errors import ConfigError


def _asyncpg_url(url: str) -> URL:
    """Any PostgreSQL URL, its options as asyncpg reads them.

    ``postgres://`` is taken as ``postgresql://`` and libpq's ``sslmode`` as asyncpg's ``ssl``
    (the same modes): hosted providers hand out URLs in both forms.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise ConfigError("database url must be a postgresql:// url")
    if "sslmode" in parsed.query:
        if "ssl" not in parsed.query:
            parsed = parsed.update_query_dict({"ssl": parsed.query["sslmode"]})
        parsed = parsed.difference_update_query(["sslmode"])
    return parsed


def async_url(url: str) -> str:
    """The URL as SQLAlchemy's asyncpg dialect takes it (alembic's migrations)."""
    return _asyncpg_url(url).set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def driver_url(url: str) -> str:
    """The URL as asyncpg itself takes it (the engine's pools, ``engram reembed``): its DSN reads
    libpq's ``sslmode``, where SQLAlchemy's dialect passes ``ssl`` on as a keyword."""
    parsed = _asyncpg_url(url)
    if "ssl" in parsed.query:
        parsed = parsed.update_query_dict({"sslmode": parsed.query["ssl"]}).difference_update_query(["ssl"])
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def redacted(url: str) -> str:
    """The URL without its password, for start-up messages."""
    return make_url(url).render_as_string(hide_password=True)


def alembic_config(url: str, *, embedding_dim: int, text_search_config: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    config.attributes.update(url=async_url(url), embedding_dim=embedding_dim, text_search_config=text_search_config)
    return config


def upgrade(url: str, *, embedding_dim: int, text_search_config: str, revision: str = "head") -> None:
    """Bring the schema to ``revision``; running it twice changes nothing. Blocking: call from a thread."""
    command.upgrade(alembic_config(url, embedding_dim=embedding_dim, text_search_config=text_search_config), revision)


def downgrade(url: str, *, revision: str = "base") -> None:
    command.downgrade(alembic_config(url, embedding_dim=0, text_search_config="english"), revision)


def head_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


async def ensure_current(connection: asyncpg.Connection) -> None:
    """Refuse to serve a database whose schema is not at head (clear message, not a missing column later)."""
    exists = await connection.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL")
    current = await connection.fetchval("SELECT version_num FROM alembic_version") if exists else None
    head = head_revision()
    if current != head:
        raise ConfigError(
            f"database schema is at {current or 'nothing'} but this version needs {head}: run `engram migrate`"
        )
