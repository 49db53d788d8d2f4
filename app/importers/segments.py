"""Foreign ids as namespace segment ids, which are 1-128 of ``A-Z a-z 0-9 _ -`` (contract §3)."""

from __future__ import annotations

import re

_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")


def segment_id(value: object) -> str:
    """``value`` with every other character as ``_``, cut to 128; ``_`` for an empty one."""
    return _OUTSIDE.sub("_", str(value))[:128] or "_"


def below(namespace: str | None, *segments: str) -> str | None:
    """``segments`` appended to ``namespace`` (the root when None)."""
    parts = [p for p in (namespace, *segments) if p]
    return "/".join(parts) or None
