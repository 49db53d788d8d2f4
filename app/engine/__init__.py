"""Engines implement the memory contract; the HTTP layer only translates."""

from app.engine.protocol import MemoryEngine

__all__ = ["MemoryEngine"]
