"""A keyword query read as OR of its terms, with double-quoted phrases kept whole."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PHRASE = re.compile(r'"([^"]*)"')
_WORD = re.compile(r"\w+", re.UNICODE)
# Bounds the tsquery so a pasted page cannot become a thousand-way OR.
MAX_TERMS = 32


@dataclass(frozen=True)
class KeywordQuery:
    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, query: str) -> KeywordQuery:
        phrases: list[tuple[str, ...]] = []
        terms: list[str] = []
        for match in _PHRASE.finditer(query):
            words = tuple(_WORD.findall(match.group(1).lower()))
            if len(words) > 1 and words not in phrases:
                phrases.append(words)
        # Outside phrases every word is a term; a quoted single word is a term too.
        rest = _PHRASE.sub(lambda m: m.group(1) if len(_WORD.findall(m.group(1))) == 1 else " ", query)
        for word in _WORD.findall(rest.lower()):
            if word not in terms:
                terms.append(word)
        return cls(tuple(terms[:MAX_TERMS]), tuple(phrases[:MAX_TERMS]))

    def operands(self) -> list[str]:
        """Each term and phrase as ``to_tsquery`` text, every word quoted, so no input is syntax.

        Words are ``\\w+`` only, which holds no quote, backslash or operator.
        """
        return [f"'{t}'" for t in self.terms] + [" <-> ".join(f"'{w}'" for w in phrase) for phrase in self.phrases]

    def operand_words(self) -> list[str]:
        """Each operand's words as plain text, in the order of ``operands``."""
        return [*self.terms, *(" ".join(phrase) for phrase in self.phrases)]

    def to_tsquery(self) -> str:
        """The whole query for ``to_tsquery``: OR of the operands."""
        return " | ".join(f"({operand})" for operand in self.operands())

    @property
    def is_empty(self) -> bool:
        return not self.terms and not self.phrases
