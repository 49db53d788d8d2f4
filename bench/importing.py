"""The import case: the service's whole store exported with its vectors, then read back by
``engram import`` into a fresh database, timed as ingest is: until every vector is in the index.

The dump is what an operator moving a store would make (``POST /v1/export`` with
``include_vectors``): the vectors are the running embedder's, so the import stores them as they are
and embeds nothing. The import runs as an operator runs it, ``engram import FILE`` in a process of
its own, with the machine otherwise idle (the service and the baselines wait); the database is
dropped afterwards, so the fetch cases that follow read what they read without it.

``corpus_dump`` and ``engram_import`` are also how a size loaded by import fills its store
(bench/bulk.py): the corpus written in the same format without vectors, and the same command.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from app.contract.transfer import Checksum, item_line
from app.engine.postgres.indexer import index_everything
from app.engine.postgres.options import IndexerOptions
from bench import rawsql
from bench.corpus import CorpusItem
from bench.engram_http import EngramHttp
from bench.server import ENGRAM_BIN, Database, engram_env, engram_migrate

IMPORTED = "imported"
# engram import's last line: "engram: N items stored, M already held, K lines refused; trailer verified".
_SUMMARY = re.compile(r"engram: (\d+) items stored, (\d+) already held, (\d+) lines refused; trailer (\w+)")


async def import_case(http: EngramHttp, database: Database, work: Path, embedder: str, items: int) -> dict[str, Any]:
    """Export the service's ``items`` items with their vectors, import them into a fresh database; the figures."""
    dump = work / "dump.ndjson"
    started = time.perf_counter()
    size = await http.export_to(dump)
    exported_s = time.perf_counter() - started
    url = database.create(IMPORTED)
    await asyncio.to_thread(engram_migrate, url, work, embedder)  # the schema, as the ingest's service had it
    imported = await engram_import(dump, url, work, embedder, items)
    database.server.psql(f"DROP DATABASE {IMPORTED};")
    dump.unlink()
    return {
        **imported,
        "dump_mb": round(size / 2**20, 1),
        "export_s": round(exported_s, 3),
        "export_rate": round(items / exported_s, 1),
        "command": "engram import FILE (a dump of POST /v1/export with include_vectors)",
    }


# What an HNSW graph takes in memory a vector while pgvector builds it (256-dimension halfvec, m 16:
# it no longer fit 8 MB after 6,838 vectors), with room to spare.
GRAPH_BYTES = 1_300


def build_memory_mb(items: int) -> int:
    """ENGRAM_INDEX_BUILD_MEMORY_MB for an import of ``items``, as docs/self-hosting.md advises an operator:
    the whole graph in memory, never below the default."""
    return max(IndexerOptions.build_memory_mb, -(-items * GRAPH_BYTES // 2**20))


async def engram_import(dump: Path, url: str, work: Path, embedder: str, items: int) -> dict[str, Any]:
    """``engram import dump`` into the migrated database at ``url``, in a process of its own, as an operator
    runs it; timed from its start until its ``items`` vectors are all in the HNSW index."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        str(ENGRAM_BIN),
        "import",
        str(dump),
        env={
            **engram_env(url, work / "engram-data", embedder),
            "ENGRAM_INDEX_BUILD_MEMORY_MB": str(build_memory_mb(items)),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    acknowledged_s = time.perf_counter() - started
    summary = _SUMMARY.search(err.decode())
    if process.returncode != 0 or summary is None:
        raise RuntimeError(f"engram import exited with {process.returncode}: {err.decode()[-500:]}")
    stored, held, refused, trailer = int(summary[1]), int(summary[2]), int(summary[3]), summary[4]
    if (stored, held, refused, trailer) != (items, 0, 0, "verified"):
        raise RuntimeError(f"engram import stored {stored} of {items} items ({refused} refused, trailer {trailer})")
    connection = await rawsql.connect(url)
    try:
        await index_everything(connection)  # what the import's indexer left queued when it closed
        seconds = time.perf_counter() - started
        indexed = await connection.fetchval("SELECT count(*) FROM engram_embeddings")
    finally:
        await connection.close()
    if indexed != items:
        raise RuntimeError(f"{indexed} of {items} imported vectors are in the index")
    return {
        "items": stored,
        "seconds": round(seconds, 3),
        "acknowledged_s": round(acknowledged_s, 3),
        "rate": round(stored / seconds, 1),
    }


def corpus_dump(corpus: Sequence[CorpusItem], path: Path) -> int:
    """``corpus`` as a dump in the export format (app/contract/transfer.py): each item as the service
    stores it, without vectors (the importing service embeds them), then the trailer; the bytes written."""
    checksum = Checksum()
    written = 0
    with path.open("wb") as out:
        for item in corpus:
            line = item_line(item.id, orjson.loads(item.row["item"]), None, None)
            checksum.add(line)
            written += out.write(line)
        written += out.write(checksum.trailer())
    return written
