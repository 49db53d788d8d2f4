"""One BLAS thread in a process that serves.

The service's matrix products are small (a MaxSim over a page's token vectors: ~12 x 384 by
384 x 1,200), and OpenBLAS, given every core, splits them over threads that keep spinning after
each one, holding the cores the encoders and PostgreSQL need next: a question never asked before
took ~1.4x as long with them (docs/tuning.md#one-blas-thread).
"""

from __future__ import annotations

import numpy  # noqa: F401 - loaded first: threadpoolctl limits the libraries the process has loaded
from threadpoolctl import threadpool_limits


def one_blas_thread() -> None:
    """Every BLAS library loaded in this process runs on one thread from now on."""
    threadpool_limits(limits=1, user_api="blas")
