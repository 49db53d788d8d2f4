"""Engram: a self-hosted HTTP memory service for AI agents."""

__version__ = "0.1.0"
