"""``python -m bench.load``: the service under many clients at once, one replica and two, and what its
per-request telemetry costs.

One embedded PostgreSQL, seeded with a corpus, and live ``engram serve`` processes on it. Each case
is ``clients`` closed-loop clients (each sends its next request when the last is answered) spread
over ``replicas`` services, drawing operations from MIX, for a warm-up and then ``duration`` seconds
(and at most ``max_requests``): requests per second and p50/p99 per operation. The cases run in
turn, their order rotating, ``rounds`` times, so that a spell in which the shared machine is slower
falls on all of them.

The telemetry cost is the service's own CPU time per request (every thread of its process, read
from /proc), with the Observer (metrics) and the access line on or off, and with tracing on
(exported to a sink in this process), each a service of its own on the same database, taking turns
block by block on the same requests. CPU time, not latency: on 2 shared cores a few microseconds
are lost in the wait for a core, but they are still spent.

The clients are aiohttp (bench/engram_http.py says why), in this process, on the same cores.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson

from app.embeddings.blas import one_blas_thread
from bench.corpus import CorpusItem, Generator, build_corpus, build_queries
from bench.cpu import process_cpu_s
from bench.engram_http import JSON, EngramHttp, http_session
from bench.rawsql import wait_for_empty_backlog
from bench.run import machine_facts, say, settle, utc_stamp
from bench.server import Served, embedded_postgres, engram_migrate, engram_process
from bench.stats import summary

HERE = Path(__file__).resolve().parent
# What a client asks, by weight: mostly reads, as an agent's memory is asked more than it is told.
MIX = {
    "fetch_keyword": 20,
    "fetch_vector": 20,
    "fetch_hybrid": 20,
    "store": 15,
    "get": 10,
    "list": 10,
    "forget": 5,
}
OPERATIONS = tuple(MIX)
# The telemetry variants, each a service of its own: what runs beside every request.
BARE = "neither"
METRICS = "metrics"
ACCESS = "metrics + access line"
TRACED = "metrics + access line + tracing"
# The routes the telemetry cost is measured on: the floor (no database), where it is the largest
# share, and a keyword fetch, a typical read.
COST_ROUTES = ("GET /v1/engine", "POST /v1/fetch keyword")
COST_CONCURRENCY = 8
SEED_BATCH = 100


@dataclass
class Tally:
    """One case's measured answers: milliseconds per operation, and what was not a 2xx."""

    samples: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in OPERATIONS})
    failures: Counter[str] = field(default_factory=Counter)  # "operation status" -> count
    sent: int = 0


class Client:
    """One closed-loop client: its operations drawn from MIX, its own new items, its place in the list."""

    def __init__(self, index: int, session: aiohttp.ClientSession, corpus_ids: Sequence[str], seed: int) -> None:
        self._session = session
        self._rng = random.Random(seed * 1_000 + index)
        self._items = Generator(seed * 1_000 + index)
        self._corpus_ids = corpus_ids
        self._questions = build_queries(200, seed * 1_000 + index).questions
        self._index = index
        self._made = 0
        self._mine: list[str] = []  # ids this client stored, to forget
        self._cursor: str | None = None

    def _request(self, operation: str) -> tuple[str, dict[str, Any]]:
        if operation.startswith("fetch_"):
            query = self._rng.choice(self._questions)
            return "/v1/fetch", {"query": query, "mode": operation.removeprefix("fetch_"), "limit": 10}
        if operation == "store":
            self._made += 1
            return "/v1/store", self._items.item(self._index * 100_000 + self._made)
        if operation == "get":
            return "/v1/get", {"ids": self._rng.sample(list(self._corpus_ids), 5)}
        if operation == "list":
            return "/v1/list", {"limit": 20, **({"cursor": self._cursor} if self._cursor else {})}
        return "/v1/forget", {"ids": [self._mine.pop(self._rng.randrange(len(self._mine)))]}

    async def run(self, tally: Tally, measure_from: float, until: float, max_requests: int) -> None:
        while time.perf_counter() < until and tally.sent < max_requests:
            operation = self._rng.choices(OPERATIONS, weights=list(MIX.values()))[0]
            if operation == "forget" and not self._mine:
                operation = "store"
            path, body = self._request(operation)
            tally.sent += 1
            started = time.perf_counter()
            try:
                async with self._session.post(path, data=orjson.dumps(body), headers=JSON) as response:
                    payload = await response.read()
                    status = response.status
            except (aiohttp.ClientError, TimeoutError) as error:
                tally.failures[f"{operation} {type(error).__name__}"] += 1
                continue
            elapsed_ms = (time.perf_counter() - started) * 1000
            if status >= 300:
                tally.failures[f"{operation} {status}"] += 1
                continue
            if started >= measure_from:
                tally.samples[operation].append(elapsed_ms)
            if operation == "store":
                self._mine.append(orjson.loads(payload)["id"])
            elif operation == "list":
                self._cursor = orjson.loads(payload).get("next_cursor")


async def load_case(
    sessions: Sequence[aiohttp.ClientSession],
    clients: int,
    corpus_ids: Sequence[str],
    *,
    seed: int,
    warmup_s: float,
    duration_s: float,
    max_requests: int,
) -> dict[str, Any]:
    """``clients`` clients spread evenly over ``sessions`` (one per replica): per operation its rate and latency."""
    tally = Tally()
    start = time.perf_counter()
    measure_from = start + warmup_s
    until = measure_from + duration_s
    members = [Client(i, sessions[i % len(sessions)], corpus_ids, seed) for i in range(clients)]
    await asyncio.gather(*(member.run(tally, measure_from, until, max_requests) for member in members))
    # To the last answer: a case cut short by max_requests is measured over the time it ran.
    measured_s = max(time.perf_counter() - measure_from, 1e-3)
    operations = {
        op: {**summary(samples), "per_s": round(len(samples) / measured_s, 1)} for op, samples in tally.samples.items()
    }
    answered = sum(len(samples) for samples in tally.samples.values())
    return {
        "seconds": round(measured_s, 2),
        "requests": answered,
        "per_s": round(answered / measured_s, 1),
        "operations": operations,
        "failures": dict(tally.failures),
    }


async def _cost_block(
    served: Served, session: aiohttp.ClientSession, route: str, requests: int, questions: Sequence[str]
) -> tuple[float, list[float]]:
    """``requests`` of ``route`` at COST_CONCURRENCY: the service's CPU microseconds per request, and latencies."""
    latencies: list[float] = []
    left = requests

    async def one() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            started = time.perf_counter()
            if route == "GET /v1/engine":
                call = session.get("/v1/engine")
            else:
                body = {"query": questions[left % len(questions)], "mode": "keyword", "limit": 10}
                call = session.post("/v1/fetch", data=orjson.dumps(body), headers=JSON)
            async with call as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{route} answered {response.status}")
            latencies.append((time.perf_counter() - started) * 1000)

    before = process_cpu_s(served.process.pid)
    await asyncio.gather(*(one() for _ in range(COST_CONCURRENCY)))
    await asyncio.sleep(0.05)  # what the request left to its process's other threads (the span exporter's)
    spent = process_cpu_s(served.process.pid) - before
    return spent / requests * 1e6, latencies


async def telemetry_costs(
    variants: dict[str, Served], *, blocks: int, requests: int, seed: int
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per route and variant: the median over blocks of CPU µs per request, and the latency summary.

    The variants take turns block by block (who goes first rotating), on the same requests.
    """
    questions = build_queries(200, seed + 300).questions
    costs: dict[str, dict[str, dict[str, Any]]] = {}
    sessions = {name: http_session(served.base_url) for name, served in variants.items()}
    try:
        for route in COST_ROUTES:
            per_request: dict[str, list[float]] = {name: [] for name in variants}
            latencies: dict[str, list[float]] = {name: [] for name in variants}
            for name, served in variants.items():  # warm: connections, statement caches, memo
                await _cost_block(served, sessions[name], route, max(COST_CONCURRENCY, requests // 5), questions)
            names = list(variants)
            for block in range(blocks):
                turn = block % len(names)
                for name in names[turn:] + names[:turn]:
                    cpu_us, times = await _cost_block(variants[name], sessions[name], route, requests, questions)
                    per_request[name].append(cpu_us)
                    latencies[name] += times
            costs[route] = {
                name: {
                    "cpu_us_per_request": round(statistics.median(per_request[name]), 1),
                    "cpu_us_blocks": [round(x, 1) for x in per_request[name]],
                    "latency_ms": summary(latencies[name]),
                }
                for name in variants
            }
            say(f"{route}: " + ", ".join(f"{n} {c['cpu_us_per_request']} µs" for n, c in costs[route].items()))
    finally:
        for session in sessions.values():
            await session.close()
    return costs


@contextmanager
def otlp_sink() -> Iterator[str]:
    """A collector that takes every OTLP/HTTP export and keeps nothing: tracing's cost without a collector's."""

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def tracing_installed() -> bool:
    return importlib.util.find_spec("opentelemetry.sdk") is not None


def variant_settings(sink: str | None) -> dict[str, tuple[dict[str, str], list[str] | None]]:
    """Each telemetry variant's environment over the bench's (ENGRAM_LOG_LEVEL=warning) and its command."""
    unobserved = [sys.executable, "-m", "bench.unobserved"]
    access = {"ENGRAM_LOG_LEVEL": "info", "ENGRAM_LOG_FORMAT": "json"}
    variants: dict[str, tuple[dict[str, str], list[str] | None]] = {
        BARE: ({}, unobserved),
        METRICS: ({}, None),
        ACCESS: (access, None),
    }
    if sink is not None:
        variants[TRACED] = ({**access, "OTEL_EXPORTER_OTLP_ENDPOINT": sink}, None)
    return variants


async def seed_corpus(base_url: str, database_url: str, n: int, seed: int) -> list[str]:
    """``n`` corpus items stored through the service, indexed, vacuumed and analyzed: the ids."""
    corpus = build_corpus(n, seed)
    await store_indexed(base_url, database_url, corpus)
    await settle([database_url])
    return [item.id for item in corpus]


async def store_indexed(base_url: str, database_url: str, items: Sequence[CorpusItem]) -> None:
    """``items`` stored through the service in batches of SEED_BATCH, back once every vector is in the index."""
    async with http_session(base_url) as session:
        http = EngramHttp(session)
        for start in range(0, len(items), SEED_BATCH):
            await http.store_batch(list(items[start : start + SEED_BATCH]))
    connection = await asyncpg.connect(database_url)
    try:
        await wait_for_empty_backlog(connection)
    finally:
        await connection.close()


async def measure(args: argparse.Namespace, work: Path, command: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "kind": "load",
        "command": command,
        "started_at": utc_stamp(),
        "n": args.n,
        "seed": args.seed,
        "embedder": args.embedder,
        "mix": MIX,
        "warmup_s": args.warmup,
        "duration_s": args.duration,
        "max_requests": args.max_requests,
        "rounds": args.rounds,
        "client": "aiohttp, one keep-alive session per replica, in the harness's process",
    }
    with embedded_postgres(work / "pg") as database:
        result["machine"] = machine_facts(database)
        url = database.create("engram")
        engram_migrate(url, work, args.embedder)
        # One after the other: every service keeps the connections it opened, and the replicas' and the
        # variants' together would be more than the database admits.
        result["cases"] = await load_cases(args, url, work)
        if args.cost_blocks:
            result["telemetry"] = await telemetry_section(args, url, work)
        result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["finished_at"] = utc_stamp()
    return result


async def load_cases(args: argparse.Namespace, url: str, work: Path) -> list[dict[str, Any]]:
    """The corpus stored, then every (replicas, clients) case ``args.rounds`` times, in rotating order."""
    with ExitStack() as services:
        replicas = [
            services.enter_context(engram_process(url, _dir(work, f"replica-{i}"), args.embedder))
            for i in range(max(args.replicas))
        ]
        say(f"seeding {args.n:,} items")
        corpus_ids = await seed_corpus(replicas[0].base_url, url, args.n, args.seed)
        cases = [(r, c) for r in sorted(set(args.replicas)) for c in sorted(set(args.clients))]
        runs: dict[tuple[int, int], list[dict[str, Any]]] = {case: [] for case in cases}
        for round_ in range(args.rounds):
            order = cases[round_ % len(cases) :] + cases[: round_ % len(cases)]
            for count, clients in order:
                sessions = [http_session(s.base_url, connections=clients) for s in replicas[:count]]
                try:
                    run = await load_case(
                        sessions,
                        clients,
                        corpus_ids,
                        seed=args.seed + round_,
                        warmup_s=args.warmup,
                        duration_s=args.duration,
                        max_requests=args.max_requests,
                    )
                finally:
                    for session in sessions:
                        await session.close()
                runs[(count, clients)].append(run)
                say(f"round {round_ + 1}: {count} replica(s), {clients} clients: {run['per_s']} requests/s")
        return [merged(count, clients, runs[(count, clients)]) for count, clients in cases]


async def telemetry_section(args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    """Each telemetry variant a service of its own on the database, measured in turn (telemetry_costs)."""
    with otlp_sink() as sink, ExitStack() as services:
        variants = {
            name: services.enter_context(
                engram_process(url, _dir(work, f"variant-{i}"), args.embedder, env=env, command=command)
            )
            for i, (name, (env, command)) in enumerate(variant_settings(sink if tracing_installed() else None).items())
        }
        return {
            "concurrency": COST_CONCURRENCY,
            "blocks": args.cost_blocks,
            "requests_per_block": args.cost_requests,
            "access_log": "ENGRAM_LOG_FORMAT=json at info, to a file",
            "tracing": "OTLP/HTTP to a sink in the harness's process" if TRACED in variants else None,
            "routes": await telemetry_costs(
                variants, blocks=args.cost_blocks, requests=args.cost_requests, seed=args.seed
            ),
        }


def _dir(work: Path, name: str) -> Path:
    path = work / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def merged(replicas: int, clients: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A case's rounds as one: rates over the rounds' seconds together, latencies the median of the rounds'."""
    seconds = sum(run["seconds"] for run in runs)
    failures: Counter[str] = Counter()
    for run in runs:
        failures.update(run["failures"])
    operations = {}
    for op in OPERATIONS:
        counts = [run["operations"][op]["count"] for run in runs]
        answered = [run["operations"][op] for run in runs if run["operations"][op]["count"]]
        operations[op] = {
            "count": sum(counts),
            "per_s": round(sum(counts) / seconds, 1) if seconds else 0.0,
            **{q: round(statistics.median(o[q] for o in answered), 3) for q in ("p50", "p99") if answered},
        }
    requests = sum(run["requests"] for run in runs)
    return {
        "replicas": replicas,
        "clients": clients,
        "seconds": round(seconds, 2),
        "requests": requests,
        "per_s": round(requests / seconds, 1) if seconds else 0.0,
        "per_s_rounds": [run["per_s"] for run in runs],
        "operations": operations,
        "failures": dict(failures),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5_000, help="items stored before the load (default 5000)")
    parser.add_argument("--clients", type=int, action="append", help="concurrent clients; repeat (default 16 64)")
    parser.add_argument("--replicas", type=int, action="append", help="services on the database; repeat (default 1 2)")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per case and round (20)")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each (3)")
    parser.add_argument("--max-requests", type=int, default=100_000, help="most requests per case and round")
    parser.add_argument("--rounds", type=int, default=2, help="times each case runs, in rotating order (2)")
    parser.add_argument("--cost-blocks", type=int, default=6, help="telemetry-cost blocks per variant; 0: skip (6)")
    parser.add_argument("--cost-requests", type=int, default=1_500, help="requests per telemetry-cost block (1500)")
    parser.add_argument("--embedder", default="wordllama", help="ENGRAM_EMBEDDER of the services (wordllama)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE, help="where results/load.json goes (and RESULTS.md)")
    args = parser.parse_args(argv)
    args.clients = args.clients or [16, 64]
    args.replicas = args.replicas or [1, 2]
    if min(args.clients) < 1 or min(args.replicas) < 1 or args.n < 10 or args.duration <= 0:
        parser.error("--clients and --replicas must be at least 1, --n at least 10, --duration above 0")
    # The harness's BLAS on one thread, as the service's (docs/tuning.md#one-blas-thread).
    one_blas_thread()
    command = "python -m bench.load " + shlex.join(sys.argv[1:] if argv is None else argv)
    results_dir = args.out / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="engram-load-") as tmp:
        result = asyncio.run(measure(args, Path(tmp), command.strip()))
    path = results_dir / "load.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    say(f"wrote {path}")
    if any(results_dir.glob("n*.json")):  # the page of every run: redrawn with this one
        from bench import runs
        from bench.report import write_report

        write_report(runs.latest(args.out), args.out / "RESULTS.md", args.out / "latency.png")
        say(f"wrote {args.out / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
