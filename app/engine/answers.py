"""Extractive recall: an answer quoted from the best hits, with its citations.

No language model runs here; the answer is built from the stored text itself,
so it never says more than memory holds.
"""

from __future__ import annotations

import re

from app.contract.requests import Citation, Hit, RecallAnswer

MODEL = "engram-extractive-1"
SNIPPET_CHARS = 280
ANSWER_SENTENCES = 3
NOTHING_STORED = "nothing relevant is stored: no memory within the filter answers this question"

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
WORD = re.compile(r"\w+", re.UNICODE)
# Words that carry no meaning for overlap scoring.
COMMON_WORDS = frozenset(
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
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in WORD.findall(text.lower()) if w not in COMMON_WORDS}


def _clip(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _best_sentence(text: str, wanted: set[str]) -> tuple[int, str]:
    best = (0, "")
    for sentence in _SENTENCE.split(text):
        sentence = sentence.strip().lstrip("# ")
        if not sentence:
            continue
        overlap = len(content_words(sentence) & wanted)
        if overlap > best[0] or not best[1]:
            best = (overlap, sentence)
    return best


def compose(question: str, hits: list[Hit]) -> RecallAnswer:
    """Cite every hit (best first); quote the sentences that share the question's words."""
    if not hits:
        return RecallAnswer(answer=NOTHING_STORED, citations=[], model=MODEL)
    wanted = content_words(question)
    citations: list[Citation] = []
    quoted: list[str] = []
    for number, hit in enumerate(hits, start=1):
        overlap, sentence = _best_sentence(hit.text, wanted)
        snippet = _clip(sentence if overlap else hit.text)
        citations.append(Citation(id=hit.id, kind=hit.kind, snippet=snippet, meta=hit.meta, score=hit.score))
        if overlap and len(quoted) < ANSWER_SENTENCES:
            quoted.append(f"{_clip(sentence)} [{number}]")
    if quoted:
        answer = " ".join(quoted)
    else:
        answer = f"no stored memory shares the question's words; the closest memory reads: {citations[0].snippet} [1]"
    return RecallAnswer(answer=answer, citations=citations, model=MODEL)
