"""Benchmarks: Engram through HTTP beside raw SQL and LangGraph's PostgresStore (``python -m bench``)."""
