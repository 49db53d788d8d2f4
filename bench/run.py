"""One measured run at one N: all three systems on one fresh embedded PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import asyncpg
import orjson
from tqdm import tqdm

from app.contract.meta import Filter
from app.embeddings.late import LateInteraction
from app.embeddings.protocol import Embedder
from app.embeddings.registry import build_embedder
from app.engine.context import texts_to_embed
from app.engine.fusion import fusion_depth
from app.engine.postgres.tokens import own_words
from app.settings import Settings
from bench import rawsql
from bench.corpus import CorpusItem, QuerySet, build_corpus, build_queries
from bench.cpu import CpuClock, postmaster_pid
from bench.engram_http import EngramHttp, http_session
from bench.equal_recall import LADDER, QUICK_LADDER, equal_recall_case
from bench.importing import import_case
from bench.langgraph_store import LangGraphStore, open_store
from bench.memory import resident
from bench.proposals import measure_proposals
from bench.rawsql import RawSql
from bench.server import Database, Served, embedded_postgres, engram_migrate, engram_process, service_settings
from bench.stats import Probe, measure, measure_in_blocks, measure_paired, summary, timed
from bench.truth import ExactNeighbours, recall_at_10

MODES = ("keyword", "vector", "hybrid")
VARIANTS = ("none", "tag", "subtree")
BATCH = 100
PAGE = 10
GET_IDS = 100  # distinct ids a get asks for


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def say(message: str) -> None:
    print(f"[bench {datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def bar(total: int, desc: str) -> tqdm:
    return tqdm(total=total, desc=desc, unit="op", mininterval=2.0, file=sys.stderr, leave=False)


def wire_filter(variant: str, tag: str, subtree: str) -> dict[str, Any]:
    """The three filter variants of every fetch: none, one tag, a namespace subtree."""
    if variant == "tag":
        return {"tags_any": [tag]}
    if variant == "subtree":
        return {"reach": {"at": subtree, "inherit": False, "descendants": True}}
    return {}


class Store(Protocol):
    async def store_batch(self, batch: list[CorpusItem]) -> int: ...


class Fetcher(Protocol):
    async def fetch(self, query: str, mode: str, request_filter: dict[str, Any], limit: int = 10) -> list[str]: ...


# The systems that search by vector only (LangGraph's store has no keyword search).
VECTOR_ONLY = ("langgraph", "langgraph_wide")


@dataclass(frozen=True)
class Ingesting:
    """A system to ingest into, and how to wait until what it acknowledged is indexed (if it indexes later).

    ``share`` picks the batches this system writes (of all, in corpus order): all, or every other one.
    Engram and its raw-SQL floor write alternate batches into one database: one HNSW graph grows
    to N instead of two (HNSW upkeep is most of a run: at 100k three ingests (2026-12-01)
    took 1,247 s of 1,534), each is timed on the same growing index, and every read floor then runs
    on the very rows, graph and statistics the service reads. In raw's turns the service's idle
    indexer finds the queue too (its 1 s poll) and helps: if anything, the floor is flattered.
    """

    name: str
    store: Store
    until_indexed: Callable[[], Awaitable[None]] | None = None
    share: slice = field(default_factory=lambda: slice(None))
    until_settled: Callable[[], Awaitable[None]] | None = None
    """Work the service does after the index (late-interaction token vectors): waited for before the
    next system's turn, so none of it runs in another's, and timed apart (``settled_rate``)."""


# The corpus is ingested in this many rounds, each system taking its turn in each round (the first
# system rotating): a VM whose pace changes for minutes at a time (on 2026-12-01 every figure
# ~1.5x slower from one moment on) then slows all three alike, not whichever ran during the slow spell.
ROUNDS = 10


async def ingest(
    systems: Sequence[Ingesting], corpus: list[CorpusItem], rounds: int = ROUNDS, clock: CpuClock | None = None
) -> dict[str, Any]:
    """Batches of 100, one after another; items per second of wall time, embedding included.

    Each system's round ends when what it acknowledged is indexed (``until_indexed``): a system
    that indexes vectors after acknowledging them (Engram, and its raw baseline) is timed to the
    rate at which items become searchable through the index, and leaves no work to the next.
    With a ``clock``, the CPU each side spent in a system's turns, per item (``cpu_ms``; and until
    settled, ``settled_cpu_ms``): on saturated cores a rate is the sum of what its sides cost.
    """
    batches = [corpus[i : i + BATCH] for i in range(0, len(corpus), BATCH)]
    per_round = -(-len(batches) // max(1, min(rounds, len(batches))))
    parts = [list(range(i, min(i + per_round, len(batches)))) for i in range(0, len(batches), per_round)]
    mine = {s.name: set(range(len(batches))[s.share]) for s in systems}
    samples: dict[str, list[float]] = {s.name: [] for s in systems}
    seconds: dict[str, list[float]] = {s.name: [] for s in systems}
    settled: dict[str, list[float]] = {s.name: [] for s in systems if s.until_settled is not None}
    acknowledged: dict[str, float] = dict.fromkeys(samples, 0.0)
    cpu: dict[str, Counter[str]] = {name: Counter() for name in samples}
    settled_cpu: dict[str, Counter[str]] = {name: Counter() for name in settled}
    written: dict[str, int] = dict.fromkeys(samples, 0)
    expected = {name: sum(len(batches[j]) for j in taken) for name, taken in mine.items()}
    progress = bar(sum(expected.values()), f"ingest ({', '.join(samples)} in turn, {len(parts)} rounds)")
    for number, part in enumerate(parts):
        turn = number % len(systems)
        for system in [*systems[turn:], *systems[:turn]]:
            before = clock.read() if clock else {}
            start = time.perf_counter()
            for batch in (batches[j] for j in part if j in mine[system.name]):
                elapsed, count = await timed(lambda batch=batch, system=system: system.store.store_batch(batch))
                samples[system.name].append(elapsed)
                written[system.name] += count
                progress.update(len(batch))
            acknowledged[system.name] += time.perf_counter() - start
            if system.until_indexed is not None:
                await system.until_indexed()
            seconds[system.name].append(time.perf_counter() - start)
            if clock:
                cpu[system.name].update(clock.since(before))
            if system.until_settled is not None:
                await system.until_settled()
                settled[system.name].append(time.perf_counter() - start)
                if clock:
                    settled_cpu[system.name].update(clock.since(before))
    progress.close()
    results = {}
    for name in samples:
        if written[name] != expected[name]:
            raise RuntimeError(f"{name} wrote {written[name]} of {expected[name]} items")
        total = sum(seconds[name])
        say(f"{name}: ingested {written[name]} items in {total:.1f} s ({written[name] / total:.0f} items/s)")
        results[name] = {
            "items": written[name],
            "seconds": round(total, 3),
            "acknowledged_s": round(acknowledged[name], 3),
            "rate": round(written[name] / total, 1),
            "batch_ms": summary(samples[name]),
            "rounds_s": [round(x, 2) for x in seconds[name]],
        }
        if clock:
            results[name]["cpu_ms"] = per_item(cpu[name], written[name])
        if name in settled:
            results[name]["settled_s"] = round(sum(settled[name]), 3)
            results[name]["settled_rate"] = round(written[name] / sum(settled[name]), 1)
            if clock:
                results[name]["settled_cpu_ms"] = per_item(settled_cpu[name], written[name])
    return results


def per_item(spent_s: Mapping[str, float], items: int) -> dict[str, float]:
    """CPU seconds by side as milliseconds an item."""
    return {side: round(seconds * 1000 / items, 3) for side, seconds in spent_s.items()}


class EncoderAlone:
    """The encoder by itself as a system of the ingest: each batch embedded, nothing stored.

    It takes its turn in every round with the others, so its texts/s are timed under the same
    spells of the shared machine's pace, and ``Engram ÷ encoder`` says what share of the encoder's
    own rate the service's whole write path keeps.
    """

    def __init__(self, encoder: Embedder) -> None:
        self._encoder = encoder

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        return len(await self._encoder.embed([item.text for item in batch]))


async def late_encoder_texts(corpus: Sequence[CorpusItem], batches: int = 10) -> dict[str, Any]:
    """The late-interaction encoder alone, as the service's token writer runs it (its own lanes, each
    item's own words): texts/s over ``batches`` batches of stored texts, no database."""
    late = await asyncio.to_thread(LateInteraction)
    texts = [own_words(item.text) for item in corpus[: batches * BATCH]]
    began = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        await asyncio.to_thread(late.items, texts[start : start + BATCH])
    return {"texts": len(texts), "rate": round(len(texts) / (time.perf_counter() - began), 1)}


def question_calls(
    encoder: Embedder, late: LateInteraction, questions: Sequence[str]
) -> list[Callable[[], Awaitable[None]]]:
    """One call a question, encoded as a service with late interaction encodes a question it has not seen:
    the dense vector and the token vectors at once (app/engine/postgres/engine.py ``_rank``)."""

    async def both(question: str) -> None:
        await asyncio.gather(encoder.embed_queries([question]), asyncio.to_thread(late.question, question))

    return [lambda q=q: both(q) for q in questions]


def as_the_service_embeds(corpus: Sequence[CorpusItem]) -> list[str]:
    """Each item's text as the service hands it to the encoder when the corpus is written in order:
    an item of a thread after the end of the items before it in the thread (app/engine/context.py),
    so a conversation's text is longer than the one stored, and its batch is padded to that."""
    threads = [
        (item.namespace, str(item.wire["meta"]["thread_id"])) if item.wire.get("meta", {}).get("thread_id") else None
        for item in corpus
    ]
    return texts_to_embed([item.text for item in corpus], threads, {})


async def encoder_texts(encoder: Embedder, corpus: Sequence[CorpusItem], batches: int = 10) -> dict[str, Any]:
    """The encoder alone on batches of the stored texts and on the same batches as the service embeds them
    (``as_the_service_embeds``), the two in turn batch by batch: how much of the gap between the
    service and the encoder's rate on stored texts is longer texts rather than the write path."""
    service = as_the_service_embeds(corpus)
    step = max(1, len(corpus) // BATCH // batches)
    starts = list(range(0, len(corpus) - BATCH + 1, step * BATCH))[:batches]
    seconds = {"stored": 0.0, "as_the_service_embeds": 0.0}
    texts = {"stored": 0, "as_the_service_embeds": 0}
    chars: dict[str, list[float]] = {"stored": [], "as_the_service_embeds": []}
    with_context = 0
    for number, start in enumerate(starts):
        pairs = [
            ("stored", [c.text for c in corpus[start : start + BATCH]]),
            ("as_the_service_embeds", service[start : start + BATCH]),
        ]
        for name, batch in pairs if number % 2 == 0 else pairs[::-1]:
            began = time.perf_counter()
            await encoder.embed(batch)
            seconds[name] += time.perf_counter() - began
            texts[name] += len(batch)
            chars[name] += [float(len(text)) for text in batch]
        stored = [c.text for c in corpus[start : start + BATCH]]
        with_context += sum(a != b for a, b in zip(stored, service[start : start + BATCH], strict=True))
    out: dict[str, Any] = {
        name: {"texts": texts[name], "rate": round(texts[name] / seconds[name], 1), "chars": summary(chars[name])}
        for name in seconds
        if texts[name]
    }
    if "as_the_service_embeds" in out:
        out["as_the_service_embeds"]["with_context"] = with_context
    return out


def ticking(call: Callable[[], Awaitable[Any]], progress: tqdm) -> Callable[[], Awaitable[Any]]:
    async def run() -> Any:
        result = await call()
        progress.update(1)
        return result

    return run


async def run_calls(
    calls: Sequence[Callable[[], Awaitable[Any]]], desc: str, between: Probe | None = None
) -> tuple[dict[str, float], list[Any]]:
    progress = bar(len(calls), desc)
    try:
        return await measure([ticking(c, progress) for c in calls], warmup=min(10, len(calls)), between=between)
    finally:
        progress.close()


async def fetch_cases(
    systems: dict[str, Fetcher], queries: QuerySet, floor: Probe
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, list[list[str]]]]]:
    """p50/p95/p99 per system, mode and filter variant; the ids each query returned (for quality).

    In each case the systems answer each query in turn, in orders that change from query to query
    (``measure_paired``, ``turn_order``): a ratio is made of answers timed moments apart, whatever
    the shared machine's pace does over the case.
    After each Engram fetch, ``floor`` times an empty request: the HTTP floor in the rhythm of the
    fetches (a service that sat idle while PostgreSQL worked wakes up slower than one in a tight loop).
    """
    latency: dict[str, dict[str, Any]] = {name: {} for name in systems}
    answers: dict[str, dict[str, list[list[str]]]] = {name: {} for name in systems}
    for mode in MODES:
        for variant in VARIANTS:
            case = f"{mode}/{variant}"
            filters = [wire_filter(variant, t, s) for t, s in zip(queries.tags, queries.subtrees, strict=True)]
            taking = {name: system for name, system in systems.items() if mode == "vector" or name not in VECTOR_ONLY}
            if variant != "none" and mode == MODES[0]:
                await copies_read(systems, queries.questions, filters)
            for system in taking.values():
                prepare = getattr(system, "before_case", None)
                if prepare is not None:
                    await prepare(variant)
            progress = bar(len(taking) * len(filters), f"fetch {case} ({', '.join(taking)} in turn)")
            try:
                measured = await measure_paired(
                    {
                        name: [
                            ticking(lambda q=q, f=f, s=system, m=mode: s.fetch(q, m, f, PAGE), progress)
                            for q, f in zip(queries.questions, filters, strict=True)
                        ]
                        for name, system in taking.items()
                    },
                    warmup=min(10, len(filters)),
                    after={"engram": floor} if "engram" in taking else None,
                )
            finally:
                progress.close()
            for name, (stats, results) in measured.items():
                latency[name][case] = stats
                answers[name][case] = results
                say(f"{name} fetch {case}: p50 {stats['p50']:.2f} ms, p95 {stats['p95']:.2f} ms")
    return latency, answers


async def copies_read(systems: dict[str, Fetcher], questions: Sequence[str], filters: Sequence[dict[str, Any]]) -> None:
    """Each distinct filter asked once, untimed, by the systems that copy a filter's sketches into
    memory after its first ask (app/engine/postgres/mirror.py), then until the copies are there: the
    cases time the service as its users meet it after their first few searches, not while it reads."""
    for system in systems.values():
        settle = getattr(system, "copies_read", None)
        if settle is None:
            continue
        first = {orjson.dumps(f, option=orjson.OPT_SORT_KEYS): (q, f) for q, f in zip(questions, filters, strict=True)}
        for question, request_filter in first.values():
            await system.fetch(question, "vector", request_filter, PAGE)
        await settle()


async def walk_to_deep_page(first: Any, step: Callable[[Any], Awaitable[tuple[list[str], Any]]], pages: int) -> Any:
    state = first
    for _ in range(pages):
        _, state = await step(state)
        if state is None:
            raise RuntimeError("list ended before the deep page")
    return state


async def operation_calls(
    http: EngramHttp, corpus: list[CorpusItem], queries: QuerySet, rng: random.Random
) -> dict[str, list[Callable[[], Awaitable[Any]]]]:
    """The calls each operation besides fetch is timed with (recall, list, get, explore), for one service."""
    count = len(queries.questions)
    deep = await walk_to_deep_page(None, http.list_page, deep_pages(len(corpus)))
    id_sets = [[c.id for c in rng.sample(corpus, GET_IDS)] for _ in range(count)]
    return {
        "recall": [lambda q=q: http.recall(q) for q in queries.questions],
        "list_first": [lambda: http.list_page(None)] * count,
        "list_deep": [lambda: http.list_page(deep)] * count,
        "get_100": [lambda ids=ids: http.get(ids) for ids in id_sets],
        "explore_tag": [http.explore_tags] * explore_reps(count),
    }


async def engram_suite(http: EngramHttp, corpus: list[CorpusItem], queries: QuerySet, rng: random.Random) -> dict:
    count = len(queries.questions)
    out: dict[str, Any] = {}
    out["floor"], _ = await run_calls([http.floor] * count, "engram floor")
    say(f"engram floor (GET /v1/engine): p50 {out['floor']['p50']:.2f} ms")
    for operation, calls in (await operation_calls(http, corpus, queries, rng)).items():
        out[operation], results = await run_calls(calls, f"engram {operation}")
        say(f"engram {operation}: p50 {out[operation]['p50']:.2f} ms, p95 {out[operation]['p95']:.2f} ms")
        if operation == "get_100" and any(len(got) != GET_IDS for got in results):
            raise RuntimeError(f"get answered fewer ids than asked for: {[len(g) for g in results][:5]}")
    return out


class RawFetcher:
    """RawSql behind the same ``fetch`` signature as the HTTP client."""

    def __init__(self, raw: RawSql) -> None:
        self.raw = raw

    async def fetch(self, query: str, mode: str, request_filter: dict[str, Any], limit: int = 10) -> list[str]:
        return await self.raw.fetch(query, mode, Filter.model_validate(request_filter), limit)

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        return await self.raw.store_batch(batch)

    async def copies_read(self) -> None:
        await self.raw.copies_read()


async def raw_suite(raw: RawSql, corpus: list[CorpusItem], queries: QuerySet, rng: random.Random) -> dict:
    count = len(queries.questions)
    out: dict[str, Any] = {}
    none = Filter()
    out["recall"], _ = await run_calls(
        [lambda q=q: raw.fetch(q, "hybrid", none) for q in queries.questions], "raw recall"
    )
    out["list_first"], _ = await run_calls([lambda: raw.list_page(0)] * count, "raw list first")
    deep = await walk_to_deep_page(0, raw.list_page, deep_pages(len(corpus)))
    out["list_deep"], _ = await run_calls([lambda: raw.list_page(deep)] * count, "raw list deep")
    id_sets = [[c.id for c in rng.sample(corpus, 100)] for _ in range(count)]
    out["get_100"], _ = await run_calls([lambda ids=ids: raw.get(ids) for ids in id_sets], "raw get")
    out["explore_tag"], _ = await run_calls([raw.explore_tags] * explore_reps(count), "raw explore")
    for key in ("recall", "list_first", "list_deep", "get_100", "explore_tag"):
        say(f"raw {key}: p50 {out[key]['p50']:.2f} ms, p95 {out[key]['p95']:.2f} ms")
    return out


def agreement(engram: dict[str, list[list[str]]], raw: dict[str, list[list[str]]]) -> dict[str, float]:
    """Share of queries where the service and its raw-SQL floor answered the same ids in the same order.

    Both read one database (same rows, graph and statistics), so keyword answers must be identical:
    if they are not, bench/rawsql.py no longer runs the engine's statements, its floor would
    measure something else, and the run stops. Vector and hybrid shares are reported.
    """
    shares = {
        case: round(sum(a == b for a, b in zip(engram[case], raw[case], strict=True)) / len(engram[case]), 4)
        for case in engram
    }
    drifted = {case: share for case, share in shares.items() if case.startswith("keyword/") and share < 1.0}
    if drifted:
        raise RuntimeError(
            f"raw SQL and the service disagree on keyword answers on the same database {drifted}: "
            "bench/rawsql.py is out of sync with app/engine/postgres/engine.py"
        )
    return shares


def deep_pages(n: int) -> int:
    """The page halfway through the items (pages of 100)."""
    return max(1, n // 200)


def explore_reps(count: int) -> int:
    """An explore over everything reads every item (~150 ms at 100k): 20 of them say as much as 50."""
    return max(20, count // 10)


async def quality(
    truth_db: ExactNeighbours,
    embedder: Embedder,
    queries: QuerySet,
    answers: dict[str, dict[str, list[list[str]]]],
) -> tuple[dict[str, Any], dict[str, list[list[str]]]]:
    """recall@10 of each system's vector answers against the exact ranking, and how often a page came
    back short; and the exact top ten of every query, by filter variant."""
    vectors = await embedder.embed_queries(queries.questions)
    out: dict[str, Any] = {}
    matched: dict[str, int] = {}
    exact_ms: list[float] = []
    exact: dict[str, list[list[str]]] = {}
    for variant in VARIANTS:
        totals: list[int] = []
        filters = [
            Filter.model_validate(wire_filter(variant, tag, subtree))
            for tag, subtree in zip(queries.tags, queries.subtrees, strict=True)
        ]
        elapsed, truths = await timed(lambda f=filters: truth_db.nearest_many(vectors, f))
        exact_ms += [elapsed / len(filters)] * len(filters)  # ranked a block at a time: the mean a query
        for request_filter, tag, subtree in zip(filters, queries.tags, queries.subtrees, strict=True):
            key = f"{variant}:{tag if variant == 'tag' else subtree if variant == 'subtree' else ''}"
            if key not in matched:
                matched[key] = await truth_db.count(request_filter)
            totals.append(matched[key])
        exact[variant] = truths
        for system, per_case in answers.items():
            got = per_case.get(f"vector/{variant}")
            if got is None:
                continue
            rows, short = [], 0
            for returned, total in zip(got, totals, strict=True):
                rows.append(len(returned))
                short += int(len(returned) < min(PAGE, total))
            out.setdefault(system, {})[f"vector/{variant}"] = {
                "recall_at_10": recall_at_10(got, truths),
                "mean_rows": round(sum(rows) / len(rows), 2),
                "short_pages": short,
                "queries": len(rows),
            }
    out["exact_scan_ms"] = summary(exact_ms)
    out["filter_matches"] = {
        v: summary([float(c) for k, c in matched.items() if k.startswith(v + ":")]) for v in VARIANTS
    }
    return out, exact


async def equal_recall(
    http: EngramHttp,
    langgraph: Fetcher,
    widened: LangGraphStore,
    queries: QuerySet,
    exact: dict[str, list[list[str]]],
    measured_quality: dict[str, Any],
    *,
    quick: bool,
) -> dict[str, Any]:
    """Each vector case with LangGraph's breadth raised until its recall@10 reaches Engram's
    (bench/equal_recall.py): the three p50s, each with its recall, and the breadths tried."""
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        case = f"vector/{variant}"
        filters = [wire_filter(variant, t, s) for t, s in zip(queries.tags, queries.subtrees, strict=True)]
        target = measured_quality["engram"][case]["recall_at_10"] or 0.0
        ladder = QUICK_LADDER if quick else LADDER
        out[case] = found = await equal_recall_case(
            http, langgraph, widened, queries.questions, filters, exact[variant], target, ladder
        )
        wide, ours = found["langgraph_equal"], found["engram"]
        say(
            f"equal recall {case}: Engram recall {ours['recall_at_10']:.3f} p50 {ours['p50']:.2f} ms; LangGraph at "
            f"ef_search {wide['ef_search']} recall {wide['recall_at_10']:.3f} p50 {wide['p50']:.2f} ms"
        )
    return out


async def plans(raw: RawSql, embedder: Embedder, queries: QuerySet) -> dict[str, str]:
    """EXPLAIN (ANALYZE, BUFFERS) of one representative query per fetch case (the service's database)."""
    out: dict[str, str] = {}
    question, tag, subtree = queries.questions[0], queries.tags[0], queries.subtrees[0]
    (vector,) = await embedder.embed_queries([question])
    for mode in MODES:
        for variant in VARIANTS:
            if mode == "hybrid":
                out[f"{mode}/{variant}"] = (
                    f"-- the keyword/{variant} and vector/{variant} statements above, run at once on two connections,"
                    f" each to depth {fusion_depth(11)} (app/engine/fusion.py)"
                )
                continue
            request_filter = Filter.model_validate(wire_filter(variant, tag, subtree))
            statement = await raw.fetch_statement(question, mode, request_filter, vector)
            out[f"{mode}/{variant}"] = f"-- query: {question!r} tag {tag!r} subtree {subtree!r}\n" + (
                await raw.explain(statement)
            )
    return out


def machine_facts(database: Database) -> dict[str, Any]:
    def command(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    cpu = next(
        (line.split(":", 1)[1].strip() for line in command("lscpu").splitlines() if line.startswith("Model name")), "?"
    )
    memory = next((line.split()[1] for line in command("free", "-g").splitlines() if line.startswith("Mem:")), "?")
    return {
        "nproc": command("nproc"),
        # Other work on the machine skews every figure; the load says how much there was.
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "cpu": cpu,
        "memory_gib": memory,
        "python": platform.python_version(),
        "postgres": database.setting("server_version"),
        "shared_buffers": database.setting("shared_buffers"),
        "work_mem": database.setting("work_mem"),
    }


async def settle(urls: Sequence[str]) -> float:
    """What autovacuum and the checkpointer would do after a bulk load, done before any fetch is timed.

    Statistics for the planners, visibility maps, and the dirty pages the ingest left in shared
    buffers written out, for all three systems alike; otherwise the vacuums the inserts triggered
    and the next checkpoint land, by chance, in the first fetch cases. Its seconds.
    """
    start = time.perf_counter()
    for url in urls:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute("VACUUM (ANALYZE)")
        finally:
            await connection.close()
    connection = await asyncpg.connect(urls[0])
    try:
        await connection.execute("CHECKPOINT")
    finally:
        await connection.close()
    return time.perf_counter() - start


class Clock:
    """Seconds per phase of a run, in order: where the run's wall time goes (the issue bounds it at 100k)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self._seconds[phase] = self._seconds.get(phase, 0.0) + now - self._last
        self._last = now

    @property
    def phases(self) -> dict[str, float]:
        return {phase: round(seconds, 1) for phase, seconds in self._seconds.items()}


def ended(result: dict[str, Any], clock: Clock, started: float, served: Served, database: Database) -> None:
    """A size's last figures: the resident memory of its service and of PostgreSQL (bench/memory.py) once
    every case has run, where its time went, and the machine's load at the end."""
    memory = result["memory"] = resident(served.process.pid, database.server.pgdata)
    result["phases_s"] = clock.phases
    result["duration_s"] = round(time.perf_counter() - started, 1)
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    say(
        f"N={result['n']}: done in {result['duration_s']:.0f} s; resident memory: service "
        f"{memory['service_rss_mib']:.0f} MiB, PostgreSQL {memory['postgres_pss_mib']:.0f} MiB (PSS over its processes)"
    )


@dataclass(frozen=True)
class Stand:
    """A measured run's service, still live: the growth cases ask it and a larger one in turn, the
    embedder cases a static embedder's and a transformer's at one size."""

    n: int
    http: EngramHttp
    corpus: list[CorpusItem]
    queries: QuerySet
    embedder: str
    """Its ENGRAM_EMBEDDER."""
    rescored: Mapping[str, bool] = field(default_factory=dict)
    """Which modes' first hits it re-scores by late interaction (its result's ``late_interaction``)."""


def drawn(n: int, query_count: int, seed: int) -> tuple[list[CorpusItem], QuerySet, random.Random]:
    """A size's corpus, its queries, and the draw of the ids a get asks for: the same for the same seed."""
    return build_corpus(n, seed), build_queries(query_count, seed + 100), random.Random(seed + 200)


@asynccontextmanager
async def measured_run(
    n: int, query_count: int, seed: int, embedder_setting: str, quick: bool = False
) -> AsyncIterator[tuple[dict[str, Any], dict[str, str], Stand]]:
    """Measure everything at ``n`` with the encoder ENGRAM_EMBEDDER=``embedder_setting`` gives; yield the
    results, the query plans and the service, which stays up (its database too) until the context ends.

    Every system gets the encoder as the service builds it (``build_embedder``), each an instance of its
    own: the service's in its process, one for raw SQL, one for LangGraph, so that no system finds in
    its memory of recent vectors a text another one embedded. The encoder's own rate is timed through
    the raw instance's inner model (no memory), which the raw floor's memory never sees. ``quick`` (a
    smoke run) leaves out the proposed statement shapes and tries three breadths for equal recall, not eleven.
    """
    started = time.perf_counter()
    clock = Clock()
    say(f"N={n}: building the corpus (seed {seed})")
    corpus, queries, rng = drawn(n, query_count, seed)
    settings = Settings(embedder=embedder_setting)
    embedder = build_embedder(settings)
    langgraph_embedder = build_embedder(settings)
    encoder: Embedder = getattr(embedder, "inner", embedder)
    result: dict[str, Any] = {
        "n": n,
        "queries": query_count,
        "seed": seed,
        "batch": BATCH,
        "page": PAGE,
        "quick": quick,
    }
    result["embedder"] = {"setting": embedder_setting, "name": embedder.name, "dimension": embedder.dimension}
    service = service_settings(embedder_setting)
    late = service.late_interaction_on
    # Which modes' first hits the service re-scores by late interaction (app/engine/interaction.py).
    result["late_interaction"] = {"hybrid": late, "vector": late and service.engine_options.late.vector}
    depths = service.engine_options.late
    result["late_depths"] = {"hybrid": depths.hybrid_depth, "vector": depths.vector_depth}
    result["vector_backlog_limit"] = rawsql.BACKLOG_LIMIT
    result["vector_indexers"] = rawsql.INDEXERS
    result["raw_shares_database"] = True
    result["truth"] = "numpy"
    result["started_at"] = utc_stamp()
    clock.lap("corpus")
    session = {
        **rawsql.ENGINE_SESSION,
        "hnsw.ef_search (filtered, per statement)": str(rawsql.EF_SEARCH_FILTERED),
        "plan_cache_mode (rankings without a filter: a second pool of connections)": "force_generic_plan",
    }
    result["session_settings"] = {
        "engram": session,
        "raw": session,
        "langgraph": "PostgreSQL and pgvector defaults (hnsw.ef_search 40, no iterative scan)",
        "langgraph_wide": (
            f"hnsw.ef_search {rawsql.EF_SEARCH}, filtered {rawsql.EF_SEARCH_FILTERED}, iterative scan relaxed_order"
        ),
    }
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as tmp:
        work = Path(tmp)
        with embedded_postgres(work) as database:
            result["machine"] = machine_facts(database)
            # Engram and its raw-SQL floor share a database (each writes half the corpus, see
            # Ingesting.share); LangGraph has its own.
            urls = {name: database.create(name) for name in ("engram", "langgraph")}
            engram_migrate(urls["engram"], work, embedder_setting)
            with engram_process(urls["engram"], work, embedder_setting) as served:
                say(
                    f"engram serve is up at {served.base_url} "
                    "(its database on the embedded server, shared with raw SQL)"
                )
                async with http_session(served.base_url) as session:
                    http = EngramHttp(session)
                    raw_conn = await rawsql.connect(urls["engram"])
                    raw_second = await rawsql.connect(urls["engram"])
                    raw_generic = [await rawsql.connect(urls["engram"], generic_plan=True) for _ in range(2)]
                    raw_indexing = await rawsql.indexing_pool(urls["engram"])
                    exact_conn = await rawsql.connect(urls["engram"])
                    try:
                        raw = RawSql(
                            (raw_conn, raw_second), (raw_generic[0], raw_generic[1]), embedder, indexing=raw_indexing
                        )
                        wide = (rawsql.EF_SEARCH, rawsql.EF_SEARCH_FILTERED)
                        async with (
                            open_store(urls["langgraph"], langgraph_embedder) as langgraph,
                            open_store(urls["langgraph"], langgraph_embedder, breadth=wide) as langgraph_wide,
                            open_store(urls["langgraph"], langgraph_embedder) as langgraph_widened,
                        ):
                            clock.lap("start")
                            # The raw floor's items share the service's table: its writer makes their token
                            # vectors too (after a poll), between raw's turn and the next.
                            settled_tokens = partial(rawsql.wait_for_token_vectors, raw_conn) if late else None
                            ingested = await ingest(
                                [
                                    Ingesting(
                                        "engram",
                                        http,
                                        partial(rawsql.wait_for_empty_backlog, raw_conn),
                                        share=slice(0, None, 2),
                                        until_settled=settled_tokens,
                                    ),
                                    Ingesting(
                                        "raw",
                                        RawFetcher(raw),
                                        raw.until_indexed,
                                        share=slice(1, None, 2),
                                        until_settled=settled_tokens,
                                    ),
                                    Ingesting("langgraph", langgraph),
                                    Ingesting("encoder", EncoderAlone(encoder)),
                                ],
                                corpus,
                                clock=CpuClock(await postmaster_pid(raw_conn), [served.process.pid]),
                            )
                            result["engram"], result["raw"], result["langgraph"] = (
                                {"ingest": ingested[name]} for name in ("engram", "raw", "langgraph")
                            )
                            result["raw"]["ingest"]["phases_ms"] = {k: summary(v) for k, v in raw.phases.items()}
                            result["encoder"] = {"ingest": ingested["encoder"]}
                            clock.lap("ingest")
                            result["encoder"]["texts"] = await encoder_texts(encoder, corpus)
                            if late:
                                result["encoder"]["late_texts"] = await late_encoder_texts(corpus)
                            clock.lap("encoder texts")
                            imported = await import_case(http, database, work, embedder_setting, n)
                            result["engram"]["import"] = imported
                            say(
                                f"engram import: {imported['items']} items in {imported['seconds']:.1f} s "
                                f"({imported['rate']:.0f} items/s; store_many {result['engram']['ingest']['rate']:.0f})"
                            )
                            clock.lap("import")
                            settled = await settle(list(urls.values()))
                            say(f"databases vacuumed, analyzed and checkpointed in {settled:.1f} s")
                            result["settle_s"] = round(settled, 1)
                            systems = {
                                "engram": http,
                                "raw": RawFetcher(raw),
                                "langgraph": langgraph,
                                "langgraph_wide": langgraph_wide,
                            }
                            floor = Probe(http.floor)
                            clock.lap("settle")
                            latency, answers = await fetch_cases(systems, queries, floor)
                            clock.lap("fetch")
                            result["engram"]["floor_between_fetches"] = summary(floor.samples)
                            result["agreement"] = agreement(answers["engram"], answers["raw"])
                            result["engram"].update(await engram_suite(http, corpus, queries, rng))
                            result["raw"].update(await raw_suite(raw, corpus, queries, rng))
                            clock.lap("other operations")
                            result["langgraph_wide"] = {}
                            for name in systems:
                                result[name]["fetch"] = latency[name]
                            # The encoder itself: every system remembers the queries it embedded in the first
                            # vector case, so this is what a query never asked before adds to a fetch.
                            embed_calls = [lambda q=q: encoder.embed_queries([q]) for q in queries.questions]
                            result["embed_query_ms"], _ = await measure(embed_calls)
                            if late:
                                late_encoder = await asyncio.to_thread(LateInteraction)
                                result["embed_question_late_ms"], _ = await measure(
                                    question_calls(encoder, late_encoder, queries.questions)
                                )
                            say("quality: exact rankings for recall@10")
                            truth = await ExactNeighbours.load(exact_conn, embedder.name)
                            result["quality"], exact = await quality(truth, embedder, queries, answers)
                            clock.lap("exact truth")
                            # Vector fetches re-scored by late interaction are not in cosine order: no breadth
                            # of LangGraph's answers them, and the index's recall is the raw floor's.
                            if not result["late_interaction"]["vector"]:
                                result["equal_recall"] = await equal_recall(
                                    http, langgraph, langgraph_widened, queries, exact, result["quality"], quick=quick
                                )
                                clock.lap("equal recall")
                        if not quick:
                            say("proposed statement shapes")
                            filters = {
                                v: [
                                    Filter.model_validate(wire_filter(v, t, s))
                                    for t, s in zip(queries.tags, queries.subtrees, strict=True)
                                ]
                                for v in VARIANTS
                            }
                            result["proposals"] = await measure_proposals(
                                raw, embedder, queries, filters, answers["raw"], truth
                            )
                            clock.lap("statement shapes")
                        profile = await plans(raw, embedder, queries)
                        clock.lap("plans")
                        # The server holds LangGraph's database too: its memory is all three systems'.
                        ended(result, clock, started, served, database)
                        yield (
                            result,
                            profile,
                            Stand(n, http, corpus, queries, embedder_setting, result["late_interaction"]),
                        )
                    finally:
                        await raw_conn.close()
                        await raw_second.close()
                        for connection in raw_generic:
                            await connection.close()
                        await raw_indexing.close()
                        await exact_conn.close()
                        await langgraph_embedder.aclose()
                        await embedder.aclose()


async def growth_cases(small: Stand, large: Stand, seed: int) -> dict[str, Any]:
    """Every p50 of the growth target (each fetch case, recall, list, get, explore) at both sizes,
    the two services asked in turn, ten calls at a time (``measure_in_blocks``).

    Each size's own run measured it minutes apart from the other, and the shared machine's pace
    drifts by more than the target's margin over minutes: between the two runs of one bench
    (2026-12-03) raw vector/none went 1.36 -> 4.77 ms in one and 3.43 -> 5.31 in another.
    """
    queries = small.queries
    if queries != large.queries:
        raise ValueError("the growth cases ask both sizes the same questions")
    say(f"growth: N={small.n:,} and N={large.n:,} asked in turn")
    out: dict[str, Any] = {"sizes": [small.n, large.n], "block": 10}
    out["started_at"] = utc_stamp()
    stands = {str(small.n): small, str(large.n): large}

    async def paired(name: str, calls: dict[str, list[Callable[[], Awaitable[Any]]]]) -> None:
        measured = out[name] = await asked_in_turn(f"growth {name}", calls)
        say(f"growth {name}: p50 " + " -> ".join(f"{m['p50']:.2f}" for m in measured.values()) + " ms")

    for mode in MODES:
        for variant in VARIANTS:
            filters = [wire_filter(variant, t, s) for t, s in zip(queries.tags, queries.subtrees, strict=True)]
            pairs = list(zip(queries.questions, filters, strict=True))
            await paired(
                f"{mode}/{variant}",
                {
                    k: [lambda q=q, f=f, s=s, m=mode: s.http.fetch(q, m, f, PAGE) for q, f in pairs]
                    for k, s in stands.items()
                },
            )
    rng = random.Random(seed + 300)
    calls = {k: await operation_calls(s.http, s.corpus, queries, rng) for k, s in stands.items()}
    for operation in calls[str(small.n)]:
        await paired(operation, {k: calls[k][operation] for k in stands})
    return out


async def asked_in_turn(
    label: str, calls: dict[str, list[Callable[[], Awaitable[Any]]]]
) -> dict[str, dict[str, float]]:
    """Each system's calls in turn, ten at a time (``measure_in_blocks``), behind one progress bar."""
    progress = bar(sum(len(c) for c in calls.values()), f"{label} ({', '.join(calls)} in turn)")
    try:
        return await measure_in_blocks({k: [ticking(c, progress) for c in v] for k, v in calls.items()})
    finally:
        progress.close()


def new_questions(drawn: QuerySet, asked: set[str], count: int) -> list[tuple[str, str, str]]:
    """Up to ``count`` of the drawn questions, each with its tag and subtree, none of them in ``asked``
    and none twice: questions a service meets for the first time, as it meets a question never asked."""
    seen = set(asked)
    fresh: list[tuple[str, str, str]] = []
    for q, t, s in zip(drawn.questions, drawn.tags, drawn.subtrees, strict=True):
        if q not in seen and len(fresh) < count:
            seen.add(q)
            fresh.append((q, t, s))
    return fresh


async def embedder_cases(static: Stand, transformer: Stand, seed: int) -> dict[str, Any]:
    """Every fetch case asked of a static embedder's service and a transformer's at one size, in turn ten
    calls at a time (``measure_in_blocks``), with questions neither has seen; beside them, the
    transformer's encoding of each question alone, in the same turns.

    Two runs minutes apart differ by more than the comparison's margins (keyword, which embeds nothing,
    read 2.97 ms in one run and 3.50 in the next). The questions are new to both services, so the first
    vector case encodes each of them as a question never asked does; the cases after find them remembered.
    """
    if static.n != transformer.n:
        raise ValueError("the embedder cases compare two services at one size")
    count = len(transformer.queries.questions)
    asked = set(static.queries.questions) | set(transformer.queries.questions)
    fresh = new_questions(build_queries(count * 2, seed + 400), asked, count)
    say(f"embedders: {static.embedder} and {transformer.embedder} at N={static.n:,} asked in turn")
    out: dict[str, Any] = {"with": static.embedder, "started_at": utc_stamp(), "block": 10, "questions": len(fresh)}
    stands = {static.embedder: static, transformer.embedder: transformer}
    # The encoder as each case's bound counts it, on instances that remember nothing (``inner``).
    wrapped = build_embedder(Settings(embedder=transformer.embedder))
    encoder: Embedder = getattr(wrapped, "inner", wrapped)
    late = await asyncio.to_thread(LateInteraction) if any(transformer.rescored.values()) else None
    encodings: dict[str, list[Callable[[], Awaitable[Any]]]] = {
        "encoding": [lambda q=q: encoder.embed_queries([q]) for q, _, _ in fresh]
    }
    if late is not None:
        encodings["encoding_late"] = question_calls(encoder, late, [q for q, _, _ in fresh])
    try:
        for mode in MODES:
            for variant in VARIANTS:
                case = f"{mode}/{variant}"
                pairs = [(q, wire_filter(variant, t, s)) for q, t, s in fresh]
                calls = {
                    name: [lambda q=q, f=f, h=stand.http, m=mode: h.fetch(q, m, f, PAGE) for q, f in pairs]
                    for name, stand in stands.items()
                }
                # The encodings take their turns beside the one case that encodes its questions.
                if case == "vector/none":
                    calls |= encodings
                measured = await asked_in_turn(f"embedders {case}", calls)
                for name in encodings:
                    if name in measured:
                        out[name] = measured.pop(name)
                out.setdefault("fetch", {})[case] = measured
                say(f"embedders {case}: p50 " + " / ".join(f"{k} {m['p50']:.2f}" for k, m in measured.items()) + " ms")
    finally:
        await wrapped.aclose()
    return out
