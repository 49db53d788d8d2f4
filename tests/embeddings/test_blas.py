"""A serving process runs its BLAS on one thread (app/embeddings/blas.py), whatever the machine's cores.

Each check runs in a fresh interpreter: the limit is process-wide, and this one's may be set already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

# The BLAS libraries a fresh interpreter has loaded and their threads, before and after ``code``.
THREADS = """
import asyncio, json, sys
import numpy
from threadpoolctl import threadpool_info

def blas() -> list[int]:
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

before = blas()
{code}
print(json.dumps({{"before": before, "after": blas()}}))
"""


def threads_around(code: str, *args: str) -> dict[str, list[int]]:
    done = subprocess.run(
        [sys.executable, "-c", THREADS.format(code=code), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_one_blas_thread_limits_what_numpy_loaded_to_one_thread() -> None:
    seen = threads_around("from app.embeddings.blas import one_blas_thread\none_blas_thread()")
    assert seen["before"] and max(seen["before"]) == os.cpu_count()  # a BLAS, on every core unless limited
    assert seen["after"] == [1] * len(seen["before"])


def test_an_engine_opened_from_the_settings_runs_its_blas_on_one_thread(database_url: str) -> None:
    opened = """
from app.engine.postgres.service import open_postgres_engine
from app.settings import Settings

async def opened() -> None:
    engine = await open_postgres_engine(Settings(database_url=sys.argv[1], embedder="wordllama"))
    await engine.close()

asyncio.run(opened())
"""
    seen = threads_around(opened, database_url)
    assert max(seen["before"]) == os.cpu_count() and seen["after"] == [1] * len(seen["before"])
