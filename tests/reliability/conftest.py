"""Fixtures for the reliability suite: live servers, each on its own data directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.live import LiveServer, live_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """An ``engram serve`` with auth on and its embedded database, shared by one module's tests."""
    with live_server(tmp_path_factory.mktemp("live")) as server:
        yield server
