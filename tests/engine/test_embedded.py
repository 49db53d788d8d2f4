"""The embedded server is started with our settings (app/engine/postgres/embedded.py)."""

from __future__ import annotations

from typing import Any

import pytest

from app.contract.errors import ConfigError
from app.engine.postgres.embedded import SETTINGS_FILE, auto_shared_buffers, shared_buffers_for, start_embedded
from tests.live import scratch

GB = 1024**3


def _shared_buffers(server: Any) -> str:
    lines = [line.strip() for line in server.psql("SHOW shared_buffers;").splitlines() if line.strip()]
    return lines[2]  # under the heading and its rule


def test_auto_is_a_quarter_of_memory_between_128_mb_and_2_gb() -> None:
    assert auto_shared_buffers(4 * GB) == "1024MB"
    assert auto_shared_buffers(24 * GB) == "2048MB"
    assert auto_shared_buffers(256 * 1024**2) == "128MB"
    assert auto_shared_buffers(None) == "128MB"


@pytest.mark.parametrize("value", ["512MB", "2GB", "64MB"])
def test_a_size_is_taken_as_written(value: str) -> None:
    assert shared_buffers_for(value) == value


@pytest.mark.parametrize("value", ["", "512", "1TB", "0MB", "512MB'\nfsync = off", "-1GB", "lots"])
def test_anything_else_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ConfigError, match="embedded_shared_buffers must be auto or a size"):
        shared_buffers_for(value)


def test_the_first_start_already_runs_with_the_settings_and_a_restart_takes_new_ones() -> None:
    with scratch("embedded") as root:
        _, server = start_embedded(root, shared_buffers="160MB")
        try:
            assert _shared_buffers(server) == "160MB"
            assert (root / "pg" / SETTINGS_FILE).read_text().endswith("shared_buffers = '160MB'\n")
        finally:
            server.cleanup()
        _, server = start_embedded(root, shared_buffers="192MB")
        try:
            assert _shared_buffers(server) == "192MB"
            # Included once, however many starts.
            assert (root / "pg" / "postgresql.conf").read_text().count(SETTINGS_FILE) == 1
        finally:
            server.cleanup()
