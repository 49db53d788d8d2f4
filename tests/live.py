"""Moved to tests/support: the old names, for the PostgreSQL engine's tests until they import from there."""

from tests.support.live import LiveServer
from tests.support.live import serve_env as _engram_env
from tests.support.live import stop_postgres as _stop_postgres
from tests.support.live import wait_healthy as _wait_healthy
from tests.support.processes import ENGRAM, free_port
from tests.support.scratch import scratch

__all__ = ["ENGRAM", "LiveServer", "_engram_env", "_stop_postgres", "_wait_healthy", "free_port", "scratch"]
