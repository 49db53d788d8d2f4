"""Fixtures for the reliability suite: live servers, each on its own data directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live import LiveServer, live_server
from tests.support.scratch import scratch


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    """An ``engram serve`` with auth on and its embedded database, shared by one module's tests."""
    with scratch("live") as tmp, live_server(tmp) as server:
        yield server
