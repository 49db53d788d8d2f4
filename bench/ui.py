"""``python -m bench.ui``: how long the explorer at ``/ui`` takes to show a store of 100,000 items.

The bench's corpus (bench/corpus.py: ~50 namespaces, 20 tags, half the items with ``observed_at``
over 16 months) is stored through ``store_many``, as a client stores it, into an embedded
PostgreSQL kept in ``--work`` (a later run reuses it and stores nothing), under a live
``engram serve`` with ENGRAM_EMBEDDER=wordllama. Once every vector is indexed, Debian's chromium
(Playwright) opens the page in a fresh browser context each time (nothing cached) and reads the
page's own marks: ``engram:results`` when the first page of items is drawn, ``engram:ready`` when
everything (tree, facets, histogram) is. Each ``/v1`` call's time is taken from the browser's
resource timing, so the slowest request of a load is named. The figures and the machine's load
average are printed; docs/explorer.md keeps them. Needs the ``dev`` extra (Playwright) and
``apt-get install chromium`` (ENGRAM_CHROMIUM names another).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.corpus import CorpusItem, build_corpus
from bench.engram_http import EngramHttp, http_session
from bench.server import embedded_postgres, engram_serve

DEFAULT_WORK = Path("/tmp/engram-bench-ui")
BATCH = 100
WRITERS = 2  # store_many calls at once: the machine's cores
# The page's marks (app/ui/static/js/main.js), read after each load.
MARKS = ("engram:results", "engram:ready")


def say(message: str) -> None:
    print(f"[bench.ui {datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


async def store(base_url: str, corpus: list[CorpusItem]) -> int:
    """Every item through store_many, WRITERS batches at a time; how many were new."""
    batches = [corpus[i : i + BATCH] for i in range(0, len(corpus), BATCH)]
    written = 0
    async with http_session(base_url, timeout_s=600) as session:
        http = EngramHttp(session)
        queue: asyncio.Queue[list[CorpusItem]] = asyncio.Queue()
        for batch in batches:
            queue.put_nowait(batch)

        async def writer() -> None:
            nonlocal written
            while not queue.empty():
                new = await http.store_batch(queue.get_nowait())
                written += new
                done = len(batches) - queue.qsize()
                if done % 100 == 0:
                    say(f"stored {done * BATCH:,} items")

        await asyncio.gather(*(writer() for _ in range(WRITERS)))
    return written


def held(base_url: str) -> int:
    answer = httpx.post(f"{base_url}/v1/explore", json={"facet": "kind", "limit": 1}, timeout=60)
    answer.raise_for_status()
    return int(answer.json()["total"])


def wait_indexed(base_url: str) -> None:
    """Until no vector waits for the HNSW index (GET /metrics), so no indexing runs beside the loads."""
    while True:
        metrics = httpx.get(f"{base_url}/metrics", timeout=30).text
        found = re.search(r"^engram_vector_backlog (\d+)", metrics, re.M)
        if found is None or found[1] == "0":
            return
        say(f"waiting for the index: {int(found[1]):,} vectors queued")
        time.sleep(5)


@dataclass
class Call:
    """One ``/v1`` call of a load: what it asked, when it left (ms after the navigation began), how long it took."""

    what: str
    start_ms: float
    took_ms: float


@dataclass
class Load:
    results_ms: float
    ready_ms: float
    calls: list[Call]


def call_of(request: Any, origin_ms: float) -> Call:
    """A finished request as a Call: its route, and the facet it counted for an explore."""
    body = request.post_data_json or {}
    what = request.url.split("/v1/", 1)[1] + (f" {body['facet']}" if "facet" in body else "")
    timing = request.timing
    return Call(what, timing["startTime"] - origin_ms, timing["responseEnd"])


def chromium() -> str:
    found = os.environ.get("ENGRAM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("bench.ui: no chromium (apt-get install -y chromium, or ENGRAM_CHROMIUM=/path/to/chrome)")
    return found


def load_once(browser: Any, base_url: str) -> Load:
    """One page load in a fresh context (no cache, no kept counts) at 1280 x 860, until everything is drawn."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    try:
        page = context.new_page()
        finished: list[Any] = []
        page.on("requestfinished", lambda r: finished.append(r) if "/v1/" in r.url else None)
        page.goto(f"{base_url}/ui")
        page.wait_for_function("() => document.body.dataset.state === 'ready'", timeout=120_000)
        marks = page.evaluate(
            "(names) => names.map((n) => performance.getEntriesByName(n, 'mark')[0]?.startTime ?? -1)", list(MARKS)
        )
        if min(marks) < 0:
            raise RuntimeError(f"the page did not set its marks {MARKS}: {marks}")
        origin = page.evaluate("() => performance.timeOrigin")
        return Load(marks[0], marks[1], [call_of(r, origin) for r in finished])
    finally:
        context.close()


def measure(base_url: str, loads: int) -> list[Load]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium())
        try:
            return [load_once(browser, base_url) for _ in range(loads)]
        finally:
            browser.close()


def report(loads: list[Load], items: int) -> None:
    results = [load.results_ms for load in loads]
    ready = [load.ready_ms for load in loads]
    say(f"{items:,} items, {len(loads)} loads, load average {load_average()}")
    say(
        "results visible, ms: "
        + ", ".join(f"{ms:.0f}" for ms in results)
        + f" (median {statistics.median(results):.0f})"
    )
    say("everything drawn, ms: " + ", ".join(f"{ms:.0f}" for ms in ready) + f" (median {statistics.median(ready):.0f})")
    last = loads[-1]
    say(f"the last load's {len(last.calls)} calls, in the order they left:")
    for call in sorted(last.calls, key=lambda c: c.start_ms)[:12]:
        say(f"  {call.what:<24} {call.took_ms:7.1f} ms, from {call.start_ms:6.0f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="items in the store (default 100000)")
    parser.add_argument("--loads", type=int, default=5, help="page loads measured (default 5)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"the database's home (default {DEFAULT_WORK})")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    with (
        embedded_postgres(args.work / "pg") as database,
        engram_serve(database.base_url, args.work, "wordllama") as base_url,
    ):
        if held(base_url) < args.n:
            say(f"drawing {args.n:,} items (bench/corpus.py, seed {args.seed})")
            corpus = build_corpus(args.n, args.seed)
            started = time.perf_counter()
            written = asyncio.run(store(base_url, corpus))
            say(f"stored {written:,} new items in {time.perf_counter() - started:.0f} s")
        wait_indexed(base_url)
        items = held(base_url)
        report(measure(base_url, args.loads), items)
    return 0


if __name__ == "__main__":
    sys.exit(main())
