"""Checks every string must pass before it reaches storage."""

from __future__ import annotations

import unicodedata
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


# What shows nothing though it is not white space: the rest of Unicode's default-ignorable code
# points (the combining grapheme joiner, Hangul fillers, Khmer inherent vowels, variation
# selectors). Format characters (category Cf: zero-width space and joiners, the byte order mark,
# the soft hyphen, bidi marks, tags) are told by their category.
_IGNORABLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)
_SPACE = frozenset(WHITE_SPACE)


def trim(text: str) -> str:
    """Without Unicode white space at either end: namespaces (which have their own grammar)."""
    return text.strip(WHITE_SPACE)


def is_blank(text: str | None) -> bool:
    """Empty, or only white space and characters that show nothing (``"\u200b"`` is as blank as ``" "``)."""
    return text is None or all(_shows_nothing(char) for char in text)


def _shows_nothing(char: str) -> bool:
    return char in _SPACE or char in _IGNORABLE or unicodedata.category(char) == "Cf"
