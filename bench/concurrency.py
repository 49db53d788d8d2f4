"""``python -m bench.concurrency``: Engram and LangGraph's async store at 1, 16 and 64 clients at once,
operation by operation; with ``--workers-sweep``, the service's processes and pool sizes at 16 clients.

One embedded PostgreSQL, a database each: Engram's behind a live ``engram serve`` on its defaults
(ENGRAM_EMBEDDER WordLlama, as in ``bench.load``: the figures are the service's and the database's,
not the encoder's), called through HTTP; LangGraph's ``AsyncPostgresStore`` (langgraph-checkpoint-postgres,
whose sync store ``python -m bench`` compares) in this process, on a psycopg pool as large as
Engram's two request pools together, with an encoder of its own of the same embedder. Both hold the
same ``--n`` items, stored, indexed, vacuumed and analyzed before anything is timed.

Before the cases, LangGraph's breadth for equal recall is found (``equal_breadth``: its ``hnsw.ef_search``
raised until its recall@10 over the first questions reaches that of Engram's vector search, the
comparison docs/decisions/2026-12-03-benchmark-at-equal-recall.md settles on), and a second pooled
store searches at it. A case is one client count and one operation group: fetch (Engram keyword, vector
and hybrid, and LangGraph's vector search, its only search, at its default breadth and at equal recall;
a page of 10 without a filter) or store (one new item:
Engram's ``POST /v1/store``, LangGraph's ``aput``; the same items for both). Each system in turn
runs ``clients`` closed-loop clients (each sends its next request when its last is answered):
unmeasured requests first, then ``--requests`` / ``--rounds`` timed from the first to the last
answer; ``--rounds`` times, in orders where each goes first equally often (``stats.turn_order``), so
a spell in which the shared machine runs slower falls on all of them. Every fetch case runs before
any store, so every fetch reads the same ``n`` items. Engram acknowledges a write before its vector is
in the HNSW index (LangGraph's put indexes first); after each of its store turns the harness waits,
untimed, until the index holds them, and reports how long that took.

LangGraph's async store sends every ``asearch`` and ``aput`` through one background task, which
gathers what concurrent callers queued into one batch run on one pooled connection: its pool does
not make its calls parallel. That is how it answers concurrent callers, and what is measured.

The workers sweep: ``engram serve`` runs one process (uvicorn's single server; there is no workers
setting). ``k`` services on one database, the clients spread evenly over them (each client keeps its
service, as a keep-alive connection keeps its worker), stand for ``k`` workers; the pool is
ENGRAM_POOL_SIZE with ENGRAM_POOL_OVERFLOW 0 (asyncpg opens connections as needed up to size +
overflow, so only the sum counts; the default 10 + 10 is the sweep's 20). Every configuration gets
fresh services, its clients asking the four operations in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from app.contract.meta import Filter
from app.embeddings.blas import one_blas_thread
from app.embeddings.protocol import Embedder
from app.embeddings.registry import build_embedder
from app.engine.postgres.options import PoolOptions
from app.settings import Settings
from bench import quiet_logging, runs
from bench.corpus import CorpusItem, build_corpus, build_queries
from bench.cpu import CpuClock, postmaster_pid
from bench.engram_http import EngramHttp, http_session
from bench.equal_recall import LADDER, QUICK_LADDER, breadth_for
from bench.langgraph_store import LangGraphStore, open_store
from bench.load import store_indexed
from bench.rawsql import wait_for_empty_backlog
from bench.run import machine_facts, say, settle, utc_stamp
from bench.server import Database, embedded_postgres, engram_migrate, engram_process
from bench.stats import summary, turn_order
from bench.truth import ExactNeighbours, recall_at_10

HERE = Path(__file__).resolve().parent
KIND = "concurrency"
CLIENTS = (1, 16, 64)
# The client count the target is judged at: Engram's requests/s at least LangGraph's.
TARGET_CLIENTS = 16
OPERATIONS = ("fetch_keyword", "fetch_vector", "fetch_hybrid", "store")
MODES = {"fetch_keyword": "keyword", "fetch_vector": "vector", "fetch_hybrid": "hybrid"}
# Each case's systems, by group; LangGraph searches by vector only, at its default breadth and at
# the breadth at which it finds what Engram's vector search finds (equal_breadth).
GROUPS = {
    "fetch": ("engram_keyword", "engram_vector", "engram_hybrid", "langgraph_vector", "langgraph_vector_equal"),
    "store": ("engram_store", "langgraph_store"),
}
# Which of a group's systems each operation's row sets beside which: (group, Engram, LangGraph judged
# against, LangGraph shown beside for information). The comparison is at equal recall
# (docs/decisions/2026-12-03-benchmark-at-equal-recall.md); a run from before had only the default.
PAIRS: dict[str, tuple[str, str, str, str | None]] = {
    "fetch_keyword": ("fetch", "engram_keyword", "langgraph_vector_equal", "langgraph_vector"),
    "fetch_vector": ("fetch", "engram_vector", "langgraph_vector_equal", "langgraph_vector"),
    "fetch_hybrid": ("fetch", "engram_hybrid", "langgraph_vector_equal", "langgraph_vector"),
    "store": ("store", "engram_store", "langgraph_store", None),
}
PAGE = 10
QUESTIONS = 1_000
# Questions LangGraph's breadth for equal recall is found on (the first of the questions asked).
RECALL_QUESTIONS = 200
QUICK_RECALL_QUESTIONS = 40
SEED_BATCH = 100
# The pools an Engram service answers requests from (app/engine/postgres/pool.py): LangGraph's pool is
# given as many connections as they may open together on their defaults.
ENGRAM_POOLS = 2
LANGGRAPH_POOL = ENGRAM_POOLS * (PoolOptions.size + PoolOptions.overflow)
SWEEP_WORKERS = (1, 2, 3)
SWEEP_POOLS = (5, 10, 20)
# A smoke run (--quick): every case and the table end to end in a minute or two.
QUICK_N = 500
QUICK_REQUESTS = 80
QUICK_WARMUP = 4
QUICK_ROUNDS = 1

# A call of one system: (client, index) -> its answer; ``index`` picks the question or the new item.
Call = Callable[[int, int], Awaitable[object]]


@dataclass
class Timed:
    """One closed-loop run: (index, milliseconds) of every 2xx answer, its wall time, what failed, and the
    CPU seconds each side spent meanwhile (CpuClock)."""

    samples: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)
    cpu_s: dict[str, float] = field(default_factory=dict)


def _failure(error: BaseException) -> str:
    """A failure's kind, short enough to count by: the exception's class and the head of its message."""
    text = str(error).split(":")[0][:60]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def closed_loop(call: Call, clients: int, indices: range, clock: CpuClock | None = None) -> Timed:
    """``clients`` callers, each taking the next index of ``indices`` as its last answer comes back; with
    ``clock``, the CPU each side spent meanwhile."""
    timed = Timed()
    before = clock.read() if clock is not None else {}
    shared: Iterator[int] = iter(indices)

    async def client(number: int) -> None:
        for index in shared:
            started = time.perf_counter()
            try:
                await call(number, index)
            except Exception as error:  # counted, not raised: a failure is a figure of the case
                timed.failures[_failure(error)] += 1
                continue
            timed.samples.append((index, (time.perf_counter() - started) * 1000))

    began = time.perf_counter()
    await asyncio.gather(*(client(number) for number in range(clients)))
    timed.seconds = time.perf_counter() - began
    if clock is not None:
        timed.cpu_s = clock.since(before)
    return timed


def figures(runs_: Sequence[Timed]) -> dict[str, Any]:
    """Rounds of one system as one: answers over the rounds' seconds together, latency over every answer."""
    seconds = sum(run.seconds for run in runs_)
    latencies = [ms for run in runs_ for _, ms in run.samples]
    failures: Counter[str] = Counter()
    for run in runs_:
        failures.update(run.failures)
    out: dict[str, Any] = {
        **summary(latencies),
        "seconds": round(seconds, 3),
        "per_s": round(len(latencies) / seconds, 1) if seconds else 0.0,
        "per_s_rounds": [round(len(run.samples) / run.seconds, 1) if run.seconds else 0.0 for run in runs_],
        "failures": dict(failures),
    }
    sides = {side for run in runs_ for side in run.cpu_s}
    answered = len(latencies) + sum(failures.values())
    if sides and answered:
        spent = {side: sum(run.cpu_s.get(side, 0.0) for run in runs_) for side in sorted(sides)}
        out["cpu_ms_per_request"] = {side: round(s * 1000 / answered, 3) for side, s in spent.items()}
        out["cores_busy"] = round(sum(spent.values()) / seconds, 2) if seconds else 0.0
    return out


class Ranges:
    """Consecutive index ranges: the questions and new items each turn asks with, none handed out twice."""

    def __init__(self, limit: int | None = None) -> None:
        self._next = 0
        self._limit = limit

    def take(self, count: int) -> range:
        taken = range(self._next, self._next + count)
        self._next += count
        if self._limit is not None and self._next > self._limit:
            raise RuntimeError(f"more new items asked for than were made ({self._limit})")
        return taken


@dataclass(frozen=True)
class Plan:
    """What every case runs: its clients, its requests, and what it asks."""

    requests: int
    warmup: int
    rounds: int
    questions: list[str]
    items: list[CorpusItem]  # new items, never in the seeded corpus

    def warmup_for(self, clients: int) -> int:
        """Unmeasured requests before each turn: at least one per client."""
        return max(self.warmup, clients)

    def per_round(self, round_: int) -> int:
        share, extra = divmod(self.requests, self.rounds)
        return share + (1 if round_ < extra else 0)

    def items_needed(self, clients: Sequence[int]) -> int:
        """New items the store cases take: each turn's warm-up and share, one set for both systems."""
        return sum(self.rounds * self.warmup_for(c) + self.requests for c in clients)


def engram_calls(http: EngramHttp, plan: Plan) -> dict[str, Call]:
    questions, items = plan.questions, plan.items

    def fetch(mode: str) -> Call:
        return lambda _, i: http.fetch(questions[i % len(questions)], mode, {}, PAGE)

    calls = {f"engram_{mode}": fetch(mode) for mode in MODES.values()}
    calls["engram_store"] = lambda _, i: http.store(items[i])
    return calls


def langgraph_calls(store: LangGraphStore, widened: LangGraphStore, plan: Plan) -> dict[str, Call]:
    questions, items = plan.questions, plan.items
    return {
        "langgraph_vector": lambda _, i: store.fetch(questions[i % len(questions)], "vector", {}, PAGE),
        "langgraph_vector_equal": lambda _, i: widened.fetch(questions[i % len(questions)], "vector", {}, PAGE),
        "langgraph_store": lambda _, i: store.store(items[i]),
    }


async def equal_breadth(
    engram_url: str, langgraph_url: str, http: EngramHttp, encoder: Embedder, questions: Sequence[str], *, quick: bool
) -> dict[str, Any]:
    """LangGraph's ``hnsw.ef_search`` at which its recall@10 over ``questions`` (no filter) reaches that of
    Engram's vector search, or its best (bench/equal_recall.py); both recalls, and the breadths tried."""
    connection = await asyncpg.connect(engram_url)
    try:
        exact = await ExactNeighbours.load(connection, encoder.name)
        truths = [await exact.nearest(vector, Filter()) for vector in await encoder.embed_queries(list(questions))]
    finally:
        await connection.close()
    engram_recall = recall_at_10([await http.fetch(q, "vector", {}, PAGE) for q in questions], truths) or 0.0
    async with open_store(langgraph_url, encoder) as single:
        ladder = QUICK_LADDER if quick else LADDER
        filters = [{} for _ in questions]
        ef_search, recall, tried = await breadth_for(single, questions, filters, truths, engram_recall, ladder)
    return {
        "questions": len(questions),
        "engram_recall_at_10": engram_recall,
        "ef_search": ef_search,
        "recall_at_10": recall,
        "reached": recall >= engram_recall,
        "ladder": tried,
    }


async def open_connections(monitor: asyncpg.Connection) -> dict[str, int]:
    """Client connections open per database now, the harness's own monitor left out."""
    rows = await monitor.fetch(
        "SELECT datname, count(*) AS open FROM pg_stat_activity "
        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY datname"
    )
    return {row["datname"]: int(row["open"]) for row in rows if row["datname"]}


async def run_case(
    group: str,
    clients: int,
    calls: dict[str, Call],
    plan: Plan,
    questions: Ranges,
    items: Ranges,
    after_turn: dict[str, Callable[[], Awaitable[float]]],
    clocks: dict[str, CpuClock],
) -> dict[str, Any]:
    """One group at ``clients``: every system of it ``plan.rounds`` times in turn, each turn warmed first.

    Both systems of a round ask the same questions or store the same new items (their own databases).
    ``after_turn[name]``, when given, runs after that system's turn, untimed; its seconds are kept.
    ``clocks[name]``: what that system's CPU is read from.
    """
    names = list(GROUPS[group])
    timed: dict[str, list[Timed]] = {name: [] for name in names}
    waited: dict[str, list[float]] = {name: [] for name in after_turn}
    orders = []
    source = items if group == "store" else questions
    for round_ in range(plan.rounds):
        warm, measured = source.take(plan.warmup_for(clients)), source.take(plan.per_round(round_))
        order = turn_order(names, round_)
        orders.append(order)
        for name in order:
            await closed_loop(calls[name], clients, warm)
            timed[name].append(await closed_loop(calls[name], clients, measured, clocks[name]))
            if name in after_turn:
                waited[name].append(round(await after_turn[name](), 2))
    case: dict[str, Any] = {
        "clients": clients,
        "group": group,
        "orders": orders,
        "systems": {name: figures(timed[name]) for name in names},
    }
    if waited:
        case["untimed_after_turn_s"] = waited
    return case


async def compare(
    database: Database, work: Path, args: argparse.Namespace, plan: Plan, seeded: list[CorpusItem], postmaster: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Both systems seeded with ``seeded``; every fetch case, then every store case. The cases, and how
    the systems were set up."""
    urls = {name: database.create(name) for name in ("engram", "langgraph")}
    engram_migrate(urls["engram"], work, args.embedder)
    encoder = build_embedder(Settings(embedder=args.embedder))
    monitor = await asyncpg.connect(database.url("postgres"))
    cases: list[dict[str, Any]] = []
    equal: dict[str, Any] = {}
    try:
        with engram_process(urls["engram"], _dir(work, "engram"), args.embedder) as served:
            async with open_store(urls["langgraph"], encoder, pool_size=LANGGRAPH_POOL) as langgraph:
                say(f"seeding {len(seeded):,} items into each")
                await store_indexed(served.base_url, urls["engram"], seeded)
                for start in range(0, len(seeded), SEED_BATCH):
                    await langgraph.store_batch(seeded[start : start + SEED_BATCH])
                await settle(list(urls.values()))
                backlog = await asyncpg.connect(urls["engram"])
                async with AsyncExitStack() as stack:
                    session = await stack.enter_async_context(
                        http_session(served.base_url, connections=max(args.clients))
                    )
                    asked = plan.questions[: QUICK_RECALL_QUESTIONS if args.quick else RECALL_QUESTIONS]
                    equal = await equal_breadth(
                        urls["engram"], urls["langgraph"], EngramHttp(session), encoder, asked, quick=args.quick
                    )
                    say(
                        f"equal recall: Engram's vector {equal['engram_recall_at_10']:.3f}, LangGraph at ef_search "
                        f"{equal['ef_search']} {equal['recall_at_10']:.3f}"
                    )
                    widened = await stack.enter_async_context(
                        open_store(urls["langgraph"], encoder, pool_size=LANGGRAPH_POOL, ef_search=equal["ef_search"])
                    )
                    calls = {**engram_calls(EngramHttp(session), plan), **langgraph_calls(langgraph, widened, plan)}

                    async def indexed() -> float:
                        began = time.perf_counter()
                        await wait_for_empty_backlog(backlog)
                        return time.perf_counter() - began

                    questions, items = Ranges(), Ranges(len(plan.items))
                    engram_clock = CpuClock(postmaster, [served.process.pid])
                    clocks = {
                        name: engram_clock if name.startswith("engram") else CpuClock(postmaster) for name in calls
                    }
                    try:
                        for group in GROUPS:
                            for clients in args.clients:
                                after = {"engram_store": indexed} if group == "store" else {}
                                case = await run_case(group, clients, calls, plan, questions, items, after, clocks)
                                case["connections_open"] = await open_connections(monitor)
                                case["load_average"] = [round(x, 2) for x in os.getloadavg()]
                                cases.append(case)
                                say(f"{group} at {clients} clients: " + _rates(case))
                    finally:
                        await backlog.close()
    finally:
        await monitor.close()
        await encoder.aclose()
    setup = {
        "engram": "engram serve on its defaults (one process; two asyncpg pools of "
        f"{PoolOptions.size} + {PoolOptions.overflow} overflow) but ENGRAM_EMBEDDER={args.embedder}; aiohttp, "
        "one keep-alive session with a connection per client, in the harness's process",
        "langgraph": "AsyncPostgresStore.from_conn_string(pool_config=PoolConfig(min_size=1, "
        f"max_size={LANGGRAPH_POOL})), its index on text (cosine), asearch and aput in the harness's process; "
        "HNSW and ef_search at LangGraph's defaults (m 16, ef_construction 64, ef_search 40); at equal recall, "
        f"a second such store whose connections search at ef_search {equal['ef_search']}",
        "langgraph_pool": LANGGRAPH_POOL,
        "equal_recall": equal,
    }
    return cases, setup


def _rates(case: dict[str, Any]) -> str:
    return ", ".join(f"{name} {s['per_s']:.0f}/s" for name, s in case["systems"].items())


async def sweep(url: str, work: Path, args: argparse.Namespace, plan: Plan, postmaster: int) -> dict[str, Any]:
    """At ``TARGET_CLIENTS`` clients, each (workers, pool) configuration on fresh services, the configurations
    in rotating order ``plan.rounds`` times: the mix's rate and latency, and each operation's."""
    configs = [(w, p) for w in args.sweep_workers for p in args.sweep_pool]
    indices = Ranges()
    timed: dict[tuple[int, int], list[Timed]] = {config: [] for config in configs}
    for round_ in range(plan.rounds):
        shift = round_ % len(configs)
        for workers, pool in configs[shift:] + configs[:shift]:
            env = {"ENGRAM_POOL_SIZE": str(pool), "ENGRAM_POOL_OVERFLOW": "0"}
            with ExitStack() as services:
                served = [
                    services.enter_context(engram_process(url, _dir(work, f"sweep-{i}"), args.embedder, env=env))
                    for i in range(workers)
                ]
                sessions = [http_session(s.base_url, connections=TARGET_CLIENTS) for s in served]
                try:
                    call = _mixed([EngramHttp(s) for s in sessions], plan)
                    await closed_loop(call, TARGET_CLIENTS, indices.take(plan.warmup_for(TARGET_CLIENTS)))
                    clock = CpuClock(postmaster, [s.process.pid for s in served])
                    run = await closed_loop(call, TARGET_CLIENTS, indices.take(plan.per_round(round_)), clock)
                finally:
                    for session in sessions:
                        await session.close()
                connection = await asyncpg.connect(url)
                try:
                    await wait_for_empty_backlog(connection)
                finally:
                    await connection.close()
            timed[(workers, pool)].append(run)
            say(f"sweep round {round_ + 1}: {workers} worker(s), pool {pool}: {len(run.samples) / run.seconds:.0f}/s")
    out = []
    for workers, pool in configs:
        runs_ = timed[(workers, pool)]
        operations = {
            op: summary([ms for run in runs_ for index, ms in run.samples if OPERATIONS[index % len(OPERATIONS)] == op])
            for op in OPERATIONS
        }
        out.append({"workers": workers, "pool": pool, **figures(runs_), "operations": operations})
    return {
        "clients": TARGET_CLIENTS,
        "requests": plan.requests,
        "rounds": plan.rounds,
        "mix": "each request the next of " + ", ".join(OPERATIONS),
        "pool_setting": "ENGRAM_POOL_SIZE, ENGRAM_POOL_OVERFLOW=0, per pool, two pools a service",
        "configs": out,
    }


def _mixed(https: Sequence[EngramHttp], plan: Plan) -> Call:
    """A sweep client's request: client ``c`` on service ``c mod k``, request ``i`` the ``i mod 4``-th operation;
    a store takes a new item from the end of ``plan.items`` backwards (the comparison takes them from the front)."""
    questions, items = plan.questions, plan.items

    async def call(client: int, index: int) -> object:
        http = https[client % len(https)]
        operation = OPERATIONS[index % len(OPERATIONS)]
        turn = index // len(OPERATIONS)
        if operation == "store":
            return await http.store(items[-1 - turn])
        return await http.fetch(questions[turn % len(questions)], MODES[operation], {}, PAGE)

    return call


def _dir(work: Path, name: str) -> Path:
    path = work / name
    path.mkdir(parents=True, exist_ok=True)
    return path


async def measure(args: argparse.Namespace, work: Path, command: str) -> dict[str, Any]:
    requests, warmup, rounds = args.requests, args.warmup, args.rounds
    sweep_requests, sweep_rounds = args.sweep_requests, args.sweep_rounds
    probe = Plan(requests, warmup, rounds, [], [])
    compare_items = probe.items_needed(args.clients)
    configs = len(args.sweep_workers) * len(args.sweep_pool) if args.workers_sweep else 0
    # Every fourth request of the sweep (warm-ups too) stores a new item.
    sweep_items = -(-configs * (sweep_rounds * probe.warmup_for(TARGET_CLIENTS) + sweep_requests) // len(OPERATIONS))
    say(f"building {args.n:,} items and {compare_items + sweep_items:,} new ones (seed {args.seed})")
    corpus = build_corpus(args.n + compare_items + sweep_items, args.seed)
    plan = Plan(requests, warmup, rounds, build_queries(QUESTIONS, args.seed + 100).questions, corpus[args.n :])
    record: dict[str, Any] = {
        "kind": KIND,
        "command": command,
        "started_at": utc_stamp(),
        "quick": args.quick,
        "n": args.n,
        "seed": args.seed,
        "embedder": args.embedder,
        "clients": args.clients,
        "requests": requests,
        "warmup": warmup,
        "rounds": rounds,
        "page": PAGE,
    }
    with embedded_postgres(work / "pg") as database:
        record["machine"] = machine_facts(database)
        connection = await asyncpg.connect(database.url("postgres"))
        try:
            postmaster = await postmaster_pid(connection)
        finally:
            await connection.close()
        record["cases"], record["setup"] = await compare(database, work, args, plan, corpus[: args.n], postmaster)
        if args.workers_sweep:
            # On Engram's database as the comparison left it, its own service stopped.
            sweep_plan = Plan(sweep_requests, warmup, sweep_rounds, plan.questions, plan.items)
            record["sweep"] = await sweep(database.url("engram"), work, args, sweep_plan, postmaster)
        record["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    record["finished_at"] = utc_stamp()
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, help="items in each system before the cases (default 10000)")
    parser.add_argument("--clients", type=int, action="append", help="concurrent clients; repeat (default 1 16 64)")
    parser.add_argument("--requests", type=int, help="timed requests per system and case (default 2000)")
    parser.add_argument("--warmup", type=int, help="unmeasured requests before each turn, at least one a client (50)")
    parser.add_argument("--rounds", type=int, help="turns per system and case, in balanced order (default 2)")
    parser.add_argument(
        "--embedder", default="wordllama", help="ENGRAM_EMBEDDER of the service and LangGraph's encoder"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE, help="where runs/ and RESULTS.md are (default bench/)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: N = {QUICK_N}, {QUICK_REQUESTS} requests a case, {QUICK_ROUNDS} round; its report goes "
        "beside its JSON in runs/, RESULTS.md is left alone",
    )
    parser.add_argument(
        "--workers-sweep",
        action="store_true",
        help=f"then {TARGET_CLIENTS} clients on 1, 2, 3 services (workers) x pools of 5, 10, 20 connections",
    )
    parser.add_argument("--sweep-workers", type=int, action="append", help="services of the sweep; repeat (1 2 3)")
    parser.add_argument("--sweep-pool", type=int, action="append", help="pool sizes of the sweep; repeat (5 10 20)")
    parser.add_argument("--sweep-requests", type=int, help="timed requests per sweep configuration (default 3000)")
    parser.add_argument("--sweep-rounds", type=int, help="turns per sweep configuration, rotating (default 3)")
    args = parser.parse_args(argv)
    quiet_logging()
    # The harness's BLAS on one thread, as the service's: threads spinning after a product here would hold
    # the cores the systems it measures need (docs/tuning.md#one-blas-thread).
    one_blas_thread()
    args.n = args.n or (QUICK_N if args.quick else 10_000)
    args.requests = args.requests or (QUICK_REQUESTS if args.quick else 2_000)
    args.sweep_requests = args.sweep_requests or (args.requests if args.quick else 3_000)
    args.sweep_rounds = args.sweep_rounds or (QUICK_ROUNDS if args.quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (QUICK_WARMUP if args.quick else 50)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else 2)
    args.clients = sorted(set(args.clients or CLIENTS))
    args.sweep_workers = sorted(set(args.sweep_workers or SWEEP_WORKERS))
    args.sweep_pool = sorted(set(args.sweep_pool or SWEEP_POOLS))
    if args.n < 100 or min(args.clients) < 1 or args.requests < args.rounds or args.warmup < 0:
        parser.error("--n must be at least 100, --clients at least 1, --requests at least --rounds")
    if args.sweep_requests < args.sweep_rounds:
        parser.error("--sweep-requests must be at least --sweep-rounds")
    if min(args.sweep_workers) < 1 or min(args.sweep_pool) < 1:
        parser.error("--sweep-workers and --sweep-pool must be at least 1")
    command = ("python -m bench.concurrency " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    with tempfile.TemporaryDirectory(prefix="engram-concurrency-") as tmp:
        record = asyncio.run(measure(args, Path(tmp), command))
    name = runs.run_name(record["started_at"], [args.n], args.embedder, quick=args.quick, kind=KIND)
    path = args.out / runs.RUNS / f"{name}.json"
    runs.write_run(path, record)
    say(f"wrote {path}")
    from bench.concurrency_report import concurrency_lines

    page = "\n".join(concurrency_lines(record, record if "sweep" in record else None))
    print(page)
    if args.quick:
        path.with_suffix(".md").write_text(page)
        say(f"wrote its report {path.with_suffix('.md')} (RESULTS.md is drawn from full runs only)")
    elif runs.latest(args.out):  # the page of every run: redrawn with this one
        from bench.report import write_report

        write_report(runs.latest(args.out), args.out / "RESULTS.md", args.out / "latency.png")
        say(f"wrote {args.out / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
