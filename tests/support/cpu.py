"""CPU spent on purpose, for the tests that check where the bench says CPU went."""

from __future__ import annotations

import time


def spend_cpu(seconds: float) -> None:
    """Run this thread for ``seconds`` of CPU time (not wall time: a busy machine makes it take longer)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
