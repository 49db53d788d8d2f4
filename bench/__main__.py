"""``python -m bench --n 10000 --n 100000``: measure, keep the run's JSON (bench/runs.py), redraw RESULTS.md."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from app.embeddings.blas import one_blas_thread
from bench import quiet_logging, runs
from bench.loads import IMPORT_FROM, LOADS
from bench.report import default_embedder

HERE = Path(__file__).resolve().parent
# The embedders that need nothing but their name (fastembed and openai need a model or an endpoint).
BENCH_EMBEDDERS = ("bge-small", "minilm", "wordllama")
# A smoke run (--quick): the whole harness end to end in under two minutes on 2 shared cores.
QUICK_N = 500
QUICK_QUERIES = 20
QUICK_EMBEDDER = "wordllama"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Engram through HTTP, the same SQL through asyncpg, and LangGraph's PostgresStore, side by side.",
    )
    parser.add_argument("--n", type=int, action="append", help="corpus size; repeat for several (default 10000 100000)")
    parser.add_argument("--queries", type=int, help="queries per measured case (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE, help="where runs/, RESULTS.md and latency.png go")
    parser.add_argument(
        "--embedder",
        choices=BENCH_EMBEDDERS,
        action="append",
        help="the encoder of the service and both baselines (ENGRAM_EMBEDDER; default the service's: "
        f"{default_embedder()}, or {QUICK_EMBEDDER} with --quick); repeat for several: each size is measured "
        "with each, then a static embedder's service and each transformer's are asked in turn",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: N = {QUICK_N}, {QUICK_QUERIES} queries, {QUICK_EMBEDDER}, no statement shapes; its report "
        "goes beside its JSON in runs/, RESULTS.md is left alone",
    )
    parser.add_argument(
        "--load",
        choices=LOADS,
        help="how each size's store is filled: ingest (Engram, its raw-SQL floor and LangGraph, batch by batch in "
        "turn: the comparisons) or import (the corpus as an export dump read by `engram import FILE`, Engram alone: "
        f"the absolute targets; minutes instead of hours at 1M); default import from N = {IMPORT_FROM:,}, "
        "ingest below. See docs/benchmarks.md",
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="ENGRAM_NAME=VALUE",
        help="start every service of the run with this setting too (repeat for several), e.g. "
        "ENGRAM_LATE_INTERACTION=false to measure a default against its alternative; the run's JSON keeps them",
    )
    parser.add_argument("--report-only", action="store_true", help="measure nothing: redraw RESULTS.md")
    parser.add_argument(
        "--publish",
        type=Path,
        metavar="RUN",
        help="measure nothing: keep RUN (a file under runs/) in the tree's results/, each size (or each --n) with "
        "its query plans, then redraw RESULTS.md",
    )
    args = parser.parse_args(argv)
    from bench.server import OWN_SETTINGS, SERVICE_SETTINGS

    for given in args.service_env:
        name, equals, value = given.partition("=")
        if not equals or not name.startswith("ENGRAM_") or name in OWN_SETTINGS:
            parser.error(f"--service-env takes ENGRAM_NAME=VALUE, not one of {', '.join(OWN_SETTINGS)}: {given!r}")
        SERVICE_SETTINGS[name] = value
    quiet_logging()
    # The harness's BLAS on one thread, as the service's: threads spinning after a product here would hold
    # the cores the systems it measures need (docs/tuning.md#one-blas-thread).
    one_blas_thread()
    # Imported after logging is set up: some of their imports log at INFO.
    from bench.report import write_report
    from bench.run import say

    sizes = args.n or ([QUICK_N] if args.quick else [10_000, 100_000])
    queries = args.queries or (QUICK_QUERIES if args.quick else 200)
    embedders = list(dict.fromkeys(args.embedder or [QUICK_EMBEDDER if args.quick else default_embedder()]))
    if any(n < 200 for n in sizes) or queries < 20:
        parser.error("--n must be at least 200 and --queries at least 20")
    if args.publish is not None:
        try:
            kept = runs.publish(args.publish, args.out, default_embedder(), args.n)
        except (OSError, ValueError, KeyError) as error:
            parser.error(f"--publish {args.publish}: {error}")
        for path in kept:
            say(f"kept {path}")
    if args.report_only or args.publish is not None:
        write_report(runs.latest(args.out), args.out / "RESULTS.md", args.out / "latency.png")
        return 0
    # A stop asked with SIGTERM unwinds as Ctrl-C does: the service and the databases are stopped.
    signal.signal(signal.SIGTERM, _interrupt)
    command = ("python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    path, results = asyncio.run(
        measure_sizes(
            sorted(sizes),
            queries,
            args.seed,
            embedders,
            args.out / runs.RUNS,
            command,
            quick=args.quick,
            load=args.load,
        )
    )
    say(f"wrote {path}")
    if args.quick:
        write_report(results, path.with_suffix(".md"), path.with_suffix(".png"), analysis=False)
        say(f"wrote its report {path.with_suffix('.md')} (RESULTS.md is drawn from full runs only)")
    else:
        write_report(runs.latest(args.out), args.out / "RESULTS.md", args.out / "latency.png")
        say(f"wrote {args.out / 'RESULTS.md'} and {args.out / 'latency.png'}")
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


async def measure_sizes(
    sizes: list[int],
    queries: int,
    seed: int,
    embedders: list[str],
    runs_dir: Path,
    command: str,
    *,
    quick: bool,
    load: str | None = None,
) -> tuple[Path, list[dict[str, Any]]]:
    """Each size measured with each embedder in turn, its service kept up, its store filled as ``load``
    says (loads.load_for); then each size beside the one ten times larger, asked in turn
    (run.growth_cases), into the larger one's results, and at each size a static embedder's service
    beside each transformer's, asked in turn (run.embedder_cases), into the transformer's. The run's one
    file is written as each size ends, and again with each comparison."""
    from bench.bulk import imported_run
    from bench.loads import load_for
    from bench.report import STATIC_EMBEDDERS
    from bench.run import embedder_cases, growth_cases, measured_run, say, utc_stamp

    started_at = utc_stamp()
    path = runs_dir / f"{runs.run_name(started_at, sizes, '-'.join(embedders), quick=quick)}.json"
    results: list[dict[str, Any]] = []
    record = runs.run_record(command, started_at, quick=quick, results=results)
    async with AsyncExitStack() as kept:
        stands = {}
        measured = {}
        for n in sizes:
            for embedder in embedders:
                run = imported_run if load_for(n, load) == "import" else measured_run
                result, plans, stands[n, embedder] = await kept.enter_async_context(
                    run(n, queries, seed, embedder, quick)
                )
                result["command"] = command
                result["plans"] = plans
                results.append(result)
                measured[n, embedder] = result
                runs.write_run(path, record)
                say(f"N={n:,}, {embedder}: wrote {path}")
        for (n, embedder), stand in stands.items():
            if (n * 10, embedder) in stands:
                measured[n * 10, embedder]["growth"] = await growth_cases(stand, stands[n * 10, embedder], seed)
                runs.write_run(path, record)
                say(f"wrote the growth from {n:,} into {path}")
            static = next((stands[n, s] for s in STATIC_EMBEDDERS if (n, s) in stands), None)
            if static is not None and embedder not in STATIC_EMBEDDERS:
                measured[n, embedder]["in_turn"] = await embedder_cases(static, stand, seed)
                runs.write_run(path, record)
                say(f"wrote {static.embedder} beside {embedder} at {n:,} into {path}")
    return path, results


if __name__ == "__main__":
    sys.exit(main())
