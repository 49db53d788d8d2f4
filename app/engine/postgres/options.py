"""The PostgreSQL engine's options, grouped by what they tune; each default is stated here once.

Nothing here reads the environment: app/settings.py builds these from its fields, and the
engine, the query planners and the benchmark take them as they are. How each default was
chosen, and how to measure it again, is in docs/tuning.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

# How a filtered HNSW search keeps walking the index (pgvector's hnsw.iterative_scan).
IterativeScan = Literal["relaxed_order", "strict_order", "off"]


@dataclass(frozen=True)
class PoolOptions:
    """The engine's two asyncpg pools (one plans per value, one reuses generic plans), alike but for read-ahead."""

    size: int = 10  # docs/tuning.md#processes-and-pooled-connections
    """Connections each pool keeps open once opened."""
    overflow: int = 10  # docs/tuning.md#processes-and-pooled-connections
    """Connections each pool may open beyond ``size`` under load."""
    connect_timeout_s: float = 5.0
    """How long opening a connection, or waiting for a free one, may take."""
    statement_timeout_ms: int = 15_000
    """The server's statement_timeout on every pooled connection."""
    parallel_workers: int = 0  # docs/tuning.md#parallel-workers
    """max_parallel_workers_per_gather on every pooled connection: 0, no statement plans parallel
    workers, which fought the other half of a hybrid and the service's other requests for the cores."""
    custom_plan_io_concurrency: int = 0  # docs/tuning.md#read-ahead-under-a-filter
    """effective_io_concurrency on the pool that plans each statement for its values (filtered
    rankings, lists, writes). 0: such a statement reads its few scattered pages itself instead of
    queueing them for PostgreSQL 18's I/O workers, which wait for the cores the other half of a
    filtered hybrid is using. The generic pool (unfiltered rankings) keeps the server's read-ahead."""


@dataclass(frozen=True)
class HNSWOptions:
    """The HNSW index over half-precision vectors, and how far a search walks it."""

    m: int = 16  # docs/tuning.md#hnsw-build
    """Graph links per node (migration-frozen; used when ``engram reembed`` rebuilds the index)."""
    ef_construction: int = 80  # docs/tuning.md#hnsw-build
    """Candidates per insert while building (migration 0007's; used by ``engram reembed``)."""
    ef_search: int = 150  # docs/tuning.md#hnsw-search-breadth
    """Every connection's walk breadth: what an unfiltered search reads."""
    ef_search_filtered: int | None = 200  # docs/tuning.md#hnsw-search-breadth
    """A filtered search's breadth, set by its own statement; None keeps the connection's."""
    iterative_scan: IterativeScan = "relaxed_order"
    """How a filtered search keeps walking the index until it has enough rows."""


@dataclass(frozen=True)
class KeywordOptions:
    """How much of a keyword query's matches are scored (queries/keyword.py)."""

    pool: int = 300  # docs/tuning.md#keyword-pool-and-budget
    """The best this many scored matches lead every ranking."""
    budget: int = 4_000  # docs/tuning.md#keyword-pool-and-budget
    """Estimated rows of the rarest terms' matches that are scored."""
    scored: int = 1_500  # docs/tuning.md#keyword-scored
    """Without a filter, at most this many of those matches are scored, the fullest first."""
    middle: int = 20_000  # docs/tuning.md#keyword-middle
    """A short pool is topped up from terms up to this many estimated rows before the commonest."""
    settled: int = 100  # docs/tuning.md#keyword-settled
    """Once the rarer terms fill this many ranks, the commonest only fill the pool's tail."""
    broad: int = 100_000  # docs/tuning.md#keyword-broad-filters
    """A filter the statistics bound to more than this many items is ranked as no filter is: at
    most ``scored`` matches, those holding more of the operands first (its matches run past the budget)."""


@dataclass(frozen=True)
class SketchOptions:
    """Ranking a selective filter's few items by binary sketches instead of the HNSW walk."""

    max_admitted: int = 15_000  # docs/tuning.md#sketch-max-admitted
    """A filter the statistics bound to at most this many items is ranked by sketches."""
    candidates: int = 200  # docs/tuning.md#sketch-candidates
    """Sketch-nearest items ranked again by their vectors (at least four times the page's end)."""
    max_share: float = 0.10  # docs/tuning.md#filters-at-a-million-items
    """A filter bound to at most this share of the items is ranked by sketches too, up to ``max_sparse``
    items: the walk steps past about 1/share items for each admitted one, and misses more of them."""
    max_sparse: int = 100_000  # docs/tuning.md#filters-at-a-million-items
    """The most items a filter ranked by sketches for its share may admit (the scan reads every one)."""
    sparse_candidates: int = 400  # docs/tuning.md#filters-at-a-million-items
    """``candidates`` for a filter ranked by sketches for its share: more admitted items, more re-ranked."""
    sampled: int = 2_000  # docs/tuning.md#sketch-pruning
    """For a filter ranked by sketches for its share: its first postings read to bound the Hamming
    distance its candidates are looked for within (0: every admitted sketch sorted)."""
    sample_margin: float = 2.0  # docs/tuning.md#sketch-pruning
    """That bound holds this many times the candidates' share of the admitted items, by the sample."""


@dataclass(frozen=True)
class MirrorOptions:
    """Filter keys' sketch postings copied into the service's memory and scanned there (mirror.py)."""

    budget_mb: int = 256  # docs/tuning.md#sketch-mirror
    """Memory the copies may hold, the least lately asked dropped first; 0: none, the statement scans."""
    floor: int = 1_000  # docs/tuning.md#sketch-mirror
    """A key with fewer postings is left to the statement, which scans so few as fast as a copy serves."""
    fold_s: float = 5.0
    """How often a copy takes in the postings filed since it was read (each ranking reads those anyway)."""
    reread_s: float = 300.0
    """How often a copy is read again, which drops the forgotten items it still holds."""


@dataclass(frozen=True)
class IndexerOptions:
    """The background vector indexer (indexer.py) and the writes that wait for it."""

    backlog_limit: int = 500
    """A write that leaves more vectors than this waiting for the index indexes until it does not."""
    workers: int = 2
    """Background workers moving queued vectors into the index, a pooled connection each."""
    background: bool = True
    """Off: only writes past the limit and ``finish_indexing`` index (tests that keep a backlog)."""
    catch_up: bool = True
    """Off: no write indexes on its own time, or counts the backlog to know whether it should."""
    rebuild_least: int = 10_000  # docs/tuning.md#bulk-index-build
    """``finish_indexing`` builds the index afresh for a backlog this long and as long as the index."""
    build_memory_mb: int = 1_024  # docs/tuning.md#bulk-index-build
    """maintenance_work_mem of that build; a graph that outgrows it is built on disk, slower."""

    def deferred(self) -> IndexerOptions:
        """For a bulk load (``engram import``): every vector stays queued until ``finish_indexing``."""
        return replace(self, background=False, catch_up=False)


@dataclass(frozen=True)
class UndoOptions:
    """How long forgotten items can be restored (0: never, a forget is final), and how often the
    sweeper drops what is older."""

    window_s: float = 600.0
    sweep_every_s: float = 60.0


@dataclass(frozen=True)
class ReplicaOptions:
    """Reads on a streaming replica (replica.py), when the engine is given one."""

    wait_ms: int = 250
    """How long a read that presents a position waits for the replica to replay it before the
    primary answers it instead."""
    retry_s: float = 5.0
    """After the replica fails to answer, reads go to the primary this long before it is tried again."""


@dataclass(frozen=True)
class RetentionOptions:
    """How often the sweeper erases the items whose retention expiry has passed (reads leave them
    out from that moment: the sweep bounds how long they stay on disk); 0: never (tests)."""

    sweep_every_s: float = 60.0


@dataclass(frozen=True)
class LateOptions:
    """How late interaction re-scores a ranking's first hits (app/engine/interaction.py), when the
    engine has a late-interaction encoder (ENGRAM_LATE_INTERACTION)."""

    vector: bool = True
    """Vector fetches re-scored too (ENGRAM_LATE_INTERACTION_VECTOR): the index's first hits by cosine,
    ordered by cosine and MaxSim together (docs/decisions/2026-12-06-vector-mode-re-scored.md)."""
    vector_depth: int = 30  # docs/tuning.md#vector-re-scoring
    """How many of the vector ranking's first hits are re-scored."""
    vector_weight: float = 0.7  # docs/tuning.md#vector-re-scoring
    """MaxSim's share of a re-scored vector hit's score; its cosine's is the rest."""
    hybrid_depth: int = 30  # docs/tuning.md#hybrid-re-scoring
    """How many of the fused ranking's first hits are re-scored."""
    hybrid_weight: float = 0.5  # docs/tuning.md#hybrid-re-scoring
    """MaxSim's share of a re-scored hybrid hit's score; its fused score's is the rest."""


@dataclass(frozen=True)
class EngineOptions:
    """Everything PostgresEngine.connect is tuned by."""

    pool: PoolOptions = field(default_factory=PoolOptions)
    """The connection pools."""
    hnsw: HNSWOptions = field(default_factory=HNSWOptions)
    """The vector index and its walks."""
    keyword: KeywordOptions = field(default_factory=KeywordOptions)
    """Keyword ranking's budgets."""
    sketch: SketchOptions = field(default_factory=SketchOptions)
    """Sketch ranking of selective filters."""
    mirror: MirrorOptions = field(default_factory=MirrorOptions)
    """Sketches scanned in the service's memory."""
    indexer: IndexerOptions = field(default_factory=IndexerOptions)
    """The vector indexer."""
    undo: UndoOptions = field(default_factory=UndoOptions)
    """The undo window of forgets."""
    replica: ReplicaOptions = field(default_factory=ReplicaOptions)
    """Reads on a replica (used only with one)."""
    retention: RetentionOptions = field(default_factory=RetentionOptions)
    """The sweeper of expired items."""
    late: LateOptions = field(default_factory=LateOptions)
    """Re-scoring by late interaction (used only with its encoder)."""
