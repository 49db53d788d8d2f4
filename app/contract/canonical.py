"""RFC 8785 (JCS) canonical JSON: the bytes an item's fingerprint, its id, is taken over (contract §1).

``rfc8785`` writes it in Python, slowly enough to be most of a batch's fingerprinting
(docs/tuning.md#canonical-json). Where the json module's C encoder writes the same bytes
(strings, booleans, null, integers within ±(2**53 - 1), floats whose shortest form needs no
exponent, keys within the Basic Multilingual Plane) it writes them; the rest goes to
``rfc8785``. tests/contract/test_canonical.py holds the two to the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

_SAFE_INTEGER = 2**53 - 1
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")).encode


class _Elsewhere(Exception):
    """A value the C encoder would write differently from JCS."""


def canonical_json(value: Any) -> bytes:
    """``value`` in JCS form; rfc8785's errors for what JCS cannot hold."""
    try:
        return _encode(_plain(value)).encode()
    except (_Elsewhere, UnicodeEncodeError):  # the second: a lone surrogate, which rfc8785 refuses
        return rfc8785.dumps(value)


def _plain(value: Any) -> Any:
    """``value`` as the C encoder writes it in JCS form, or _Elsewhere."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
            return value
        raise _Elsewhere
    if isinstance(value, float):
        # JCS writes an integral float as an integer (1.0 as 1, -0.0 as 0); between 1e-4 and 1e16
        # Python's shortest form, like ECMAScript's, needs no exponent.
        if value.is_integer():
            if abs(value) <= _SAFE_INTEGER:
                return int(value)
            raise _Elsewhere
        if 1e-4 <= abs(value) < 1e16:
            return value
        raise _Elsewhere
    if isinstance(value, dict):
        # JCS orders keys by UTF-16 code units, Python by code points: the same within the BMP.
        if not all(isinstance(key, str) and _within_bmp(key) for key in value):
            raise _Elsewhere
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    raise _Elsewhere


def _within_bmp(key: str) -> bool:
    return key.isascii() or all(c < "\ud800" or "\ue000" <= c <= "\uffff" for c in key)
