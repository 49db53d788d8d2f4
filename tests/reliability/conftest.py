"""Fixtures for the reliability suite: live servers, each on its own data directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live import Database, LiveServer, live_server
from tests.support.scratch import scratch


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    """An ``engram serve`` with auth on and its embedded database, shared by one module's tests."""
    with scratch("live") as tmp, live_server(tmp) as server:
        yield server


@pytest.fixture(scope="module")
def database() -> Iterator[Database]:
    """An embedded PostgreSQL of the module's own, addressed by URL, that its tests may stop and start."""
    with scratch("db") as tmp:
        db = Database(tmp)
        yield db
        db.close()
