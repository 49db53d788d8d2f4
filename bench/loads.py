"""How a size's store is filled (``python -m bench --load``), decided before anything heavy is imported.

``ingest``: Engram, its raw-SQL floor and LangGraph, batch by batch in turn (bench/run.py), for the
comparisons. ``import``: the corpus as an export dump read by ``engram import FILE``, Engram alone
(bench/bulk.py), for the absolute targets at sizes where ingesting three systems takes hours.
"""

from __future__ import annotations

LOADS = ("ingest", "import")
# From this size on, a size is loaded by ``engram import`` unless ``--load`` says otherwise.
IMPORT_FROM = 1_000_000


def load_for(n: int, asked: str | None) -> str:
    """How ``n`` is loaded: as ``--load`` asked, else by import from ``IMPORT_FROM`` items on."""
    if asked is not None:
        return asked
    return "import" if n >= IMPORT_FROM else "ingest"
