"""One measured run at one N on a store loaded by ``engram import``: Engram alone.

Ingesting Engram, its raw-SQL floor and LangGraph batch by batch (bench/run.py ``measured_run``)
takes hours at 1M on 2 cores (LangGraph alone stores ~300 items a second, and every batch grows an
HNSW graph on disk). The targets at 1M are absolute (bench/report.py ``targets``), so at that size
the store is filled through the project's own bulk path: the corpus written as a dump in the export
format (without vectors), read by ``engram import FILE`` into a fresh database with no service up
(the import leaves every vector queued and builds the HNSW index afresh at the end:
app/engine/postgres/indexer.py ``rebuild_index``), timed as the load rate. Then the service is
started on it and asked what ``measured_run`` asks of it: the fetch cases, recall@10 against the
exact ranking, the other operations; and the resident memory of the service and of PostgreSQL.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from app.embeddings.registry import build_embedder
from app.settings import Settings
from bench import rawsql
from bench.engram_http import EngramHttp, http_session
from bench.importing import corpus_dump, engram_import
from bench.rawsql import RawSql
from bench.run import (
    PAGE,
    Clock,
    Stand,
    drawn,
    ended,
    engram_suite,
    fetch_cases,
    machine_facts,
    plans,
    quality,
    say,
    settle,
    utc_stamp,
)
from bench.server import embedded_postgres, engram_migrate, engram_process
from bench.stats import Probe, measure, summary
from bench.truth import ExactNeighbours


@asynccontextmanager
async def imported_run(
    n: int, query_count: int, seed: int, embedder_setting: str, quick: bool = False
) -> AsyncIterator[tuple[dict[str, Any], dict[str, str], Stand]]:
    """Measure Engram at ``n`` loaded by ``engram import``; yield the results, the query plans and the
    service, which stays up (its database too) until the context ends, as ``measured_run`` does."""
    started = time.perf_counter()
    clock = Clock()
    say(f"N={n}: building the corpus (seed {seed}); loaded by engram import, Engram alone")
    corpus, queries, rng = drawn(n, query_count, seed)
    embedder = build_embedder(Settings(embedder=embedder_setting))
    encoder = getattr(embedder, "inner", embedder)
    result: dict[str, Any] = {
        "n": n,
        "queries": query_count,
        "seed": seed,
        "page": PAGE,
        "quick": quick,
        "load": "import",
        "embedder": {"setting": embedder_setting, "name": embedder.name, "dimension": embedder.dimension},
        "vector_indexers": rawsql.INDEXERS,
        "truth": "numpy",
        "started_at": utc_stamp(),
        "session_settings": {
            "engram": {
                **rawsql.ENGINE_SESSION,
                "hnsw.ef_search (filtered, per statement)": str(rawsql.EF_SEARCH_FILTERED),
            }
        },
    }
    clock.lap("corpus")
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        work = Path(tmp)
        with embedded_postgres(work) as database:
            result["machine"] = machine_facts(database)
            url = database.create("engram")
            dump = work / "corpus.ndjson"
            size = await asyncio.to_thread(corpus_dump, corpus, dump)
            clock.lap("dump")
            await asyncio.to_thread(engram_migrate, url, work, embedder_setting)
            say(f"engram import: {n:,} items, {size / 2**20:.0f} MB of NDJSON without vectors")
            loaded = await engram_import(dump, url, work, embedder_setting, n)
            dump.unlink()
            result["engram"] = {
                "load": {
                    **loaded,
                    "dump_mb": round(size / 2**20, 1),
                    "command": "engram import FILE (the corpus as a dump in the export format, without vectors)",
                }
            }
            say(f"engram import: {n:,} items in {loaded['seconds']:.1f} s ({loaded['rate']:.0f} items/s)")
            clock.lap("load")
            settled = await settle([url])
            result["settle_s"] = round(settled, 1)
            say(f"database vacuumed, analyzed and checkpointed in {settled:.1f} s")
            clock.lap("settle")
            with engram_process(url, work, embedder_setting) as served:
                say(f"engram serve is up at {served.base_url}")
                async with http_session(served.base_url) as session:
                    http = EngramHttp(session)
                    custom = (await rawsql.connect(url), await rawsql.connect(url))
                    generic = (
                        await rawsql.connect(url, generic_plan=True),
                        await rawsql.connect(url, generic_plan=True),
                    )
                    exact_conn = await rawsql.connect(url)
                    try:
                        clock.lap("start")
                        floor = Probe(http.floor)
                        latency, answers = await fetch_cases({"engram": http}, queries, floor)
                        result["engram"]["fetch"] = latency["engram"]
                        result["engram"]["floor_between_fetches"] = summary(floor.samples)
                        clock.lap("fetch")
                        result["engram"].update(await engram_suite(http, corpus, queries, rng))
                        clock.lap("other operations")
                        embed_calls = [lambda q=q: encoder.embed_queries([q]) for q in queries.questions]
                        result["embed_query_ms"], _ = await measure(embed_calls)
                        say("quality: exact rankings for recall@10")
                        truth = await ExactNeighbours.load(exact_conn, embedder.name)
                        result["quality"], _ = await quality(truth, embedder, queries, answers)
                        del truth  # 1 GB at 1M: not kept while the service stays up
                        clock.lap("exact truth")
                        profile = await plans(RawSql(custom, generic, embedder), embedder, queries)
                        clock.lap("plans")
                        ended(result, clock, started, served, database)
                        yield result, profile, Stand(n, http, corpus, queries, embedder_setting)
                    finally:
                        for connection in (*custom, *generic, exact_conn):
                            await connection.close()
                        await embedder.aclose()
