"""Size limits the contract leaves to configuration (contract §9), as plain data."""

from __future__ import annotations

from dataclasses import dataclass

MAX_STORE_MANY = 100
MAX_GET_IDS = 200
MAX_FORGET_IDS = 1000
MAX_PAGE = 1000
MAX_BUCKETS = 500
MAX_SCAN_LIMIT = 50_000
DEFAULT_SCAN_LIMIT = 5_000


@dataclass(frozen=True)
class Limits:
    """Configured bounds on what one item or request may hold."""

    max_text_chars: int = 200_000
    max_query_chars: int = 4_000
    max_tags: int = 256
    max_tag_chars: int = 256
    max_field_chars: int = 2_048
    max_turns: int = 1_000
    max_id_chars: int = 128


DEFAULT_LIMITS = Limits()
