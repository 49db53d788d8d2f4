"""Alembic migrations for the PostgreSQL engine (shipped inside the wheel)."""
