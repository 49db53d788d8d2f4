"""The service's Prometheus metrics, made once per process in prometheus-client's default registry.

Every label takes values from a short, fixed set (route templates, statement families, fetch
modes, embedder call kinds), so no request can add a series. What can only be read when a
scrape asks (pools, the vector backlog) is not here but in scrape.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Histogram

# From 1 ms to 10 s: a keyword read takes a few milliseconds, a large batch write seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_REQUESTS = Counter(
    "engram_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "engram_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer, by method and route template.",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)
FETCH_DURATION = Histogram(
    "engram_fetch_duration_seconds",
    "Time the engine took to rank a fetch page, by mode (keyword, vector, hybrid).",
    ["mode"],
    buckets=LATENCY_BUCKETS,
)
STATEMENT_DURATION = Histogram(
    "engram_db_statement_duration_seconds",
    "Time a database statement took on its connection, by family (the query module that planned it).",
    ["family"],
    buckets=LATENCY_BUCKETS,
)
EMBEDDER_CALLS = Counter(
    "engram_embedder_calls",
    "Calls to the encoder (texts not remembered from lately), by kind and outcome.",
    ["kind", "outcome"],
)
EMBEDDER_TEXTS = Counter("engram_embedder_texts", "Texts sent to the encoder, by kind.", ["kind"])
EMBEDDER_DURATION = Histogram(
    "engram_embedder_duration_seconds",
    "Time one encoder call took, by kind (documents or queries).",
    ["kind"],
    buckets=LATENCY_BUCKETS,
)
READ_STATEMENTS = Counter(
    "engram_read_statements",
    "Read statements with a read replica configured, by the server that answered (replica or primary) and why: "
    "caught_up (the replica had replayed what the read must see), behind (it had not within the wait), "
    "replica_down, not_a_replica, conflict (the replica cancelled it) or decides_a_write.",
    ["server", "reason"],
)
ITEMS_STORED = Counter("engram_items_stored", "Items stored new (a replay of an item already held is not counted).")
ITEMS_FORGOTTEN = Counter("engram_items_forgotten", "Items forgotten (removed, not previewed by a dry run).")


@contextmanager
def statement_timer(family: str) -> Iterator[None]:
    """Time one statement into its family's histogram, failed ones included."""
    started = time.perf_counter()
    try:
        yield
    finally:
        STATEMENT_DURATION.labels(family).observe(time.perf_counter() - started)


@contextmanager
def encoder_call(kind: str, texts: int) -> Iterator[None]:
    """Count and time one encoder call of ``texts`` texts; ``kind`` is documents or queries."""
    started = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        EMBEDDER_DURATION.labels(kind).observe(time.perf_counter() - started)
        EMBEDDER_CALLS.labels(kind, outcome).inc()
        EMBEDDER_TEXTS.labels(kind).inc(texts)
