"""A keyword query read as OR of its terms, with double-quoted phrases kept whole."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A double-quoted phrase, or a run of text between blanks and quotes (an unpaired quote is skipped).
_PART = re.compile(r'"([^"]*)"|[^\s"]+')
WORD = re.compile(r"\w+", re.UNICODE)
# Words the reference engine's keyword scoring skips, as PostgreSQL's english configuration skips its stop
# words (each is one of them), so a query of them alone matches nothing in either engine.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "did",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def stem(word: str) -> str:
    """A light suffix strip, standing in for the english configuration's stemmer in the reference engine."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


# Punctuation around a run that is no part of what it names: "(see main.py)." searches main.py.
# Leading dots and tildes too: in an item's text the parser reads " ./run.sh" as /run.sh.
_BEFORE = "([{<'`.~"
_AFTER = ")]}>,.;:!?'`"
# A run the parser indexes as one token (an email, a host or file name, a path, a version, a
# float, a URL): ASCII word characters joined by dots, at signs or slashes (ts_debug). Its words
# alone are not in the index, so as operands they would only match other items.
_TOKEN_TEXT = re.compile(r"[a-z0-9_.@/:~+-]+")
_TOKEN_JOIN = re.compile(r"[a-z0-9_][.@][a-z0-9_]|^/|://")
# Bounds the parse (a query is at most 4,000 characters): generous, as stop words are dropped
# only in PostgreSQL, whose configuration knows them.
MAX_PARSED = 256
# Bounds the tsquery so a pasted page cannot become a thousand-way OR: the first MAX_TERMS
# operands that are not all stop words (queries.keyword._KEYWORD_TERMS).
MAX_TERMS = 32


@dataclass(frozen=True)
class KeywordQuery:
    """Each operand's text, in query order, once: PostgreSQL's parser splits and normalises it
    as it did the items' text (``\\w+`` did not: ``alice@example.com`` is one token there).

    A run of several words is one operand: ``main.py`` or ``3.11.4`` alone, as the one token
    it is in the index; ``co-operation`` or ``tabs,spaces`` as the parser's phrase, and each
    of its words too, so the query still matches what holds only some of them. A quoted
    phrase is one operand, its words in that order."""

    texts: tuple[str, ...]

    @classmethod
    def parse(cls, query: str) -> KeywordQuery:
        texts: dict[str, None] = {}
        for match in _PART.finditer(query.lower()):
            if len(texts) >= MAX_PARSED:
                break
            phrase = match.group(1)
            if phrase is not None and len(WORD.findall(phrase)) > 1:
                texts[" ".join(phrase.split())] = None
                continue
            # Outside phrases every run is a term; a quoted single word is a term too.
            run = (match.group(0) if phrase is None else phrase).strip().lstrip(_BEFORE).rstrip(_AFTER)
            words = WORD.findall(run)
            if len(words) > 1:
                texts[run] = None
            if len(words) == 1 or not _is_token(run):
                texts.update(dict.fromkeys(words))
        return cls(tuple(texts)[:MAX_PARSED])

    def operands(self) -> list[str]:
        """Each operand as ``to_tsquery`` text: quoted whole, so no input is syntax and the parser
        reads it as it reads an item's text (a phrase's words joined by ``<->``)."""
        return ["'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in self.texts]

    @property
    def is_empty(self) -> bool:
        return not self.texts


def _is_token(run: str) -> bool:
    return bool(_TOKEN_TEXT.fullmatch(run) and _TOKEN_JOIN.search(run))
