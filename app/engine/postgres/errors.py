"""Database failures as contract errors: transient ones retryable, the rest sanitised."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import asyncpg
from sqlalchemy import exc as sa_exc

from app.contract.errors import ConfigError, EngineFailure, EngramError, Unavailable, sanitise

logger = logging.getLogger("engram.engine")

_TRANSIENT = (
    OSError,  # refused, reset, unreachable
    TimeoutError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.QueryCanceledError,  # statement_timeout
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.InterfaceError,
    # A pooled connection the server dropped while asyncpg was mid-way through a message
    # exchange ("cannot switch to state 11; another operation (2) is in progress"): seen
    # in tests/reliability/test_faults.py when the database stops under traffic.
    asyncpg.InternalClientError,
    sa_exc.TimeoutError,  # alembic's SQLAlchemy pool had no connection in time
)


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# The server is there but will not have us: retrying will not help, the configuration must change.
_REFUSED = (asyncpg.InvalidAuthorizationSpecificationError, asyncpg.InvalidCatalogNameError)


def classify(error: BaseException) -> EngramError:
    """The contract error a database failure becomes; its message never holds SQL or a DSN."""
    if isinstance(error, EngramError):
        return error
    chain = list(_causes(error))
    if any(isinstance(e, _REFUSED) for e in chain):
        return ConfigError("the database refused the login or has no such database: check ENGRAM_DATABASE_URL")
    if any(isinstance(e, asyncpg.InsufficientPrivilegeError) for e in chain):
        return ConfigError(
            "the database role may not do what engram needs (create the vector extension, or tables in its "
            "schema): an administrator grants it or creates the extension first (README, a managed PostgreSQL)"
        )
    if any(isinstance(e, sa_exc.DBAPIError) and e.connection_invalidated for e in chain) or any(
        isinstance(e, _TRANSIENT) for e in chain
    ):
        return Unavailable("the database cannot be reached or timed out, retry shortly")
    # Log the driver's own message (never SQLAlchemy's, which quotes the SQL).
    root = chain[-1]
    logger.error("engine failure: %s: %s", type(root).__name__, sanitise(str(root)))
    return EngineFailure("the database failed to complete the operation")


@contextlib.contextmanager
def database_errors() -> Iterator[None]:
    try:
        yield
    except EngramError:
        raise
    except Exception as error:
        raise classify(error) from None
