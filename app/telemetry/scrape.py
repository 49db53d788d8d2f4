"""What ``GET /metrics`` answers: the counters and histograms, and gauges read as the scrape asks.

The pools and the sketch copies are read from memory; the vector backlog is one ``count(*)`` on the database, bounded
by READ_TIMEOUT_S so that a scrape of a service whose database is gone answers at once, with
``engram_database_up 0`` and no backlog gauge, rather than hanging or failing.

One process (``engram serve``) holds every metric in its own memory. Run under several worker
processes, each would hold its own; with ``PROMETHEUS_MULTIPROC_DIR`` set, prometheus-client
keeps the counters and histograms in files there instead, and a scrape adds up every process's
(the gauges read at scrape time are the answering process's own).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Long enough for a count of a backlog kept short (ENGRAM_VECTOR_BACKLOG_LIMIT), short beside
# Prometheus's default scrape timeout of 10 s.
READ_TIMEOUT_S = 1.0

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


@runtime_checkable
class Gauged(Protocol):
    """An engine with pools and a vector backlog (the PostgreSQL engine)."""

    def pool_usage(self) -> Sequence[Any]: ...

    def sketch_copies(self) -> tuple[int, int]: ...

    async def vector_backlog(self) -> int: ...


class _Families(Collector):
    """Metric families made for one scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


async def live_families(engine: object) -> list[Metric]:
    """The pools' connections now, and the vector backlog when the database answers in time."""
    if not isinstance(engine, Gauged):
        return []
    connections = GaugeMetricFamily(
        "engram_db_pool_connections", "Open connections of each pool, in use or idle.", labels=["pool", "state"]
    )
    waiting = GaugeMetricFamily(
        "engram_db_pool_waiting", "Callers waiting for a connection from each pool.", labels=["pool"]
    )
    largest = GaugeMetricFamily(
        "engram_db_pool_max_connections", "The most connections each pool may open.", labels=["pool"]
    )
    for usage in engine.pool_usage():
        connections.add_metric([usage.pool, "in_use"], usage.in_use)
        connections.add_metric([usage.pool, "idle"], usage.idle)
        waiting.add_metric([usage.pool], usage.waiting)
        largest.add_metric([usage.pool], usage.max_size)
    keys, held = engine.sketch_copies()
    copies = GaugeMetricFamily(
        "engram_sketch_copies", "Filter keys whose sketches this process holds in memory (ENGRAM_SKETCH_MIRROR_MB)."
    )
    copies.add_metric([], keys)
    copied = GaugeMetricFamily("engram_sketch_copies_bytes", "Memory those copies hold.")
    copied.add_metric([], held)
    families: list[Metric] = [connections, waiting, largest, copies, copied]
    up = GaugeMetricFamily(
        "engram_database_up", "1 when this scrape read the vector backlog from the database in time, else 0."
    )
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            backlog = await engine.vector_backlog()
    except Exception:  # unreachable, refused or slow: said by the gauge, never a failed scrape
        up.add_metric([], 0)
        return [*families, up]
    up.add_metric([], 1)
    waiting_vectors = GaugeMetricFamily(
        "engram_vector_backlog", "Vectors stored but not yet in the HNSW index (searched exactly until they are)."
    )
    waiting_vectors.add_metric([], backlog)
    return [*families, up, waiting_vectors]


def _process_registry() -> Collector:
    """The default registry, or every worker's files in multiprocess mode."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


async def exposition(engine: object) -> bytes:
    """Every metric in Prometheus's text format."""
    live = CollectorRegistry()
    live.register(_Families(await live_families(engine)))
    return generate_latest(_process_registry()) + generate_latest(live)
