"""What several migrations read from the database they upgrade."""

from __future__ import annotations

from alembic import op
from sqlalchemy import text


def stored_dimension() -> int:
    """The embedding dimension the schema was made for (``engram_settings``, written by migration 0001)."""
    value = op.get_bind().execute(text("SELECT value FROM engram_settings WHERE key = 'embedding_dim'")).scalar_one()
    return int(value)
