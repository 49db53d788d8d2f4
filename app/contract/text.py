"""Checks every string must pass before it reaches storage."""

from __future__ import annotations

from typing import Any

from app.contract.errors import InvalidRequest


def check_storable(value: Any, where: str) -> None:
    """Refuse NUL characters and lone surrogates anywhere in a value.

    PostgreSQL cannot store NUL in text and UTF-8 cannot encode a lone
    surrogate; both must be a clear ``invalid_request``, never a driver error.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidRequest(f"{where} must not contain a nul character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest(f"{where} must be valid unicode (it holds a lone surrogate)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(key, where)
            check_storable(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_storable(item, f"{where}[{index}]")


# Unicode's White_Space: what "trimmed" and "blank" mean in the contract, as in the Rust seed's
# str::trim. Python's str.strip() also takes U+001C..U+001F (information separators) for space.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def trim(text: str) -> str:
    return text.strip(WHITE_SPACE)


def is_blank(text: str | None) -> bool:
    return text is None or not trim(text)
