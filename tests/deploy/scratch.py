"""Moved to tests/support: the old names, for the PostgreSQL engine's tests until they import from there."""

from tests.support.processes import free_port
from tests.support.scratch import SKETCHES_OFF, ScratchServer, learnings, run_engram, scratch_server

__all__ = ["SKETCHES_OFF", "ScratchServer", "free_port", "learnings", "run_engram", "scratch_server"]
