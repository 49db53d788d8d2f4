"""An item's id computed offline by the contract's rule (contract §1), written apart from the service's.

The kit holds a service's ids to this, so it must not borrow the service's own code: a bug
shared by both would pass. It covers what the kit stores (plain strings, small numbers, keys
in ASCII), not the whole of RFC 8785.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

# The contract's worked examples and their ids.
WORKED_EXAMPLES: list[tuple[dict[str, Any], str]] = [
    (
        {
            "type": "learning",
            "text": "prefers tabs over spaces",
            "kind": "preference",
            "confidence": 0.8,
            "meta": {"namespace": "team:acme/agent:writer", "tags": ["style"]},
        },
        "19fc22b957ecd5727c7e03dda8c2e1979528da36",
    ),
    ({"type": "document", "body": {"text": "Ownership moves values."}}, "3dfde0d493051480bc1642e0eca4865c5894fcc3"),
]

EMPTY_LISTS_LEFT_OUT = ("tags", "tool_calls")


def fingerprint(item: dict[str, Any]) -> str:
    """40 lowercase hex characters: the first 20 bytes of SHA-256 over the canonical JSON."""
    return hashlib.sha256(canonical(item).encode()).hexdigest()[:40]


def canonical(item: dict[str, Any]) -> str:
    """The item after defaults, without ``meta.observed_at``, unset fields, empty lists and the root
    namespace, timestamps in UTC; keys sorted, no white space, integral numbers without ``.0``."""
    meta = dict(item.get("meta") or {})
    meta.setdefault("source", {"kind": "agent"})
    meta.pop("observed_at", None)
    if (namespace := meta.get("namespace")) is not None:
        meta["namespace"] = namespace.strip()
        if meta["namespace"] in ("", "root"):
            del meta["namespace"]
    shaped = _pruned({**item, "meta": meta})
    for turn in shaped.get("turns", []):
        if "at" in turn:
            turn["at"] = utc(turn["at"])
    return json.dumps(shaped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _pruned(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _pruned(inner)
            for key, inner in value.items()
            if inner is not None and not (key in EMPTY_LISTS_LEFT_OUT and inner == [])
        }
    if isinstance(value, list):
        return [_pruned(inner) for inner in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def utc(instant: str) -> str:
    """An RFC 3339 instant as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``, the fraction without trailing zeros."""
    moment = datetime.fromisoformat(instant.replace("Z", "+00:00")).astimezone(UTC)
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
