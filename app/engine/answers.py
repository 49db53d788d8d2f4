"""Extractive recall: an answer quoted from the best hits, with its citations.

No language model runs here; the answer is built from the stored text itself, so it never says
more than memory holds. The sentence quoted is the one that best answers what the question
asks: it shares the question's content words (stemmed; never speakers' names, role prefixes or
common words), carries what the question word wants (a place for "where", a time for "when"),
and comes from a hit retrieval ranked high, or opens the reply to a turn that asked it. Relative
times in it are resolved against when the item was observed (app/engine/times.py). docs/answers.md
has the rules and their measurements.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from app.contract.requests import Citation, Hit, RecallAnswer
from app.engine import times
from app.engine.sentences import Sentence, content_stems, speakers, split, words

MODEL = "engram-extractive-4"
SNIPPET_CHARS = 280
TARGET_WORDS = 30
"""The quoted words' budget: one sentence always fits, further ones only while all fit; a reader wants a
few words (LoCoMo's gold answers run ~5), so each further sentence must add what the first lacked."""
MAX_SENTENCES = 3
ENOUGH_SHARE = 0.7
"""A first sentence holding this (weighted) share of the question's words, the kind it asks for and a word
of its own is the answer alone: a second would only lengthen it (docs/answers.md#how-the-answer-is-built)."""
OWN_WORDS = 1
"""Words of its own, beyond the question's, that a sentence needs to be more than the question restated;
while the chosen only restate it, a sentence that says something of its own adds to them."""
TRIM_WORDS = 8
"""A quote this long, for a question that asks for a kind, keeps only its clauses holding that kind."""
CONTEXT_WORDS = 6
"""A chosen sentence shorter than this is cited with its neighbour, so the snippet reads on its own."""
NOTHING_STORED = "nothing relevant is stored: no memory within the filter answers this question"
NOTHING_SHARED = "no stored memory shares the question's words; the closest memory reads:"

# How much each piece of evidence weighs (docs/answers.md has the measurements): the share of the
# question's content words a sentence holds (a word rare among the hits' sentences weighing more, _share);
# holding what the question word asks for; the hit's rank
# (hybrid retrieval's order, which knows meaning the words miss: "live" finds "moved"); words of its own
# beyond the question's (a sentence that only restates the question answers nothing), up to NEW_WORDS;
# a question asked back ("how often do you walk them?") is pushed down; the words of the one the question
# names weigh more; the opening sentence of a reply weighs what the turn before it asked.
OVERLAP_WEIGHT = 1.0
KIND_WEIGHT = 0.5
RANK_WEIGHT = 0.4
NEW_WEIGHT = 0.3
NEW_WORDS = 4
ASKING_PENALTY = 0.5
SPEAKER_WEIGHT = 0.3
"""Said by the one the question names ("what does Ines play?"): a name is no evidence inside what was
said ("Hey Ines!"), but whose words they are is (docs/answers.md#how-the-answer-is-built)."""
REPLY_WEIGHT = 2.0
"""Weighs the question's words that the turn just before asked ("Which tea do you reach for first?") for
the sentence opening the reply ("Rooibos, every morning."), which shares none of them itself."""

PLACE, TIME, PERSON, NUMBER, NAME = "place", "time", "person", "number", "name"
# The question word decides what kind of words the answer must hold; first match wins. "When", "where",
# "who" and "which" ask only where the question starts: further in, they join a clause ("what did she cook
# when she lived in Lisbon?", "the town where they met").
_OPENS = r"^\W*(?:(?:since|until|from|to|with|for|by|of|in|on|at|about) )?"
QUESTION_KINDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), kind)
    for pattern, kind in (
        (r"\bhow (?:many|much|often|old|long)\b(?! ago)|\bwhat (?:number|percentage|amount)\b", NUMBER),
        (rf"{_OPENS}when\b|\bhow long ago\b|\b(?:what|which) (?:year|month|day|date|time)\b", TIME),
        (rf"{_OPENS}where\b|\b(?:which|what) (?:city|country|place|town|state)\b", PLACE),
        (rf"{_OPENS}who(?:m|se)?\b", PERSON),
        (rf"{_OPENS}which\b|\bwhat(?: is| was| are| were|'s)? (?:the |their |his |her |its )?names?\b(?: of\b)?", NAME),
    )
)

_NUMBER_TEXT = (
    "two three four five six seven eight nine ten eleven twelve twenty thirty hundred thousand once twice "
    "dozen several couple"
)
_NUMBER_WORDS = frozenset(_NUMBER_TEXT.split())
_PEOPLE_TEXT = (
    "mom mother dad father sister brother son daughter wife husband partner friend friends boyfriend girlfriend "
    "kids children family grandma grandmother grandpa grandfather aunt uncle cousin neighbor neighbour boss "
    "colleague coworker teacher mentor"
)
_PEOPLE_WORDS = frozenset(_PEOPLE_TEXT.split())
_PLACE_TEXT = (
    "home city town country park beach lake mountain mountains museum school university college office church "
    "library restaurant cafe store shop gym studio hospital abroad village island forest river camp"
)
_PLACE_WORDS = frozenset(_PLACE_TEXT.split())
_NOT_NAMES = frozenset(["I", *times.MONTHS, *times.WEEKDAYS])
# Openers that carry nothing: "Wow, ", "By the way, ", "Yeah - ". A quote starts after them.
_OPENER = re.compile(
    r"^(?:(?:oh|ah|aw+|wow|hey|hi|yeah|yes|yep|ok|okay|well|so|haha|lol|omg|btw|by the way|anyway|also|thanks|"
    r"honestly|actually|oh man|man|great|cool|awesome|nice)\b\s*[,!.:;\u2013\u2014-]+\s*)+",
    re.IGNORECASE,
)
_PLACE_BEFORE = frozenset(["in", "to", "at", "from", "near", "around", "visit", "visited", "moved"])
_TITLE = re.compile(r'"[^"]+"|\u201c[^\u201d]+\u201d')
# Where a sentence divides into clauses: after a comma, semicolon or colon, or around a dash.
_CLAUSE = re.compile(r"((?<=[,;:])\s+|\s+[-\u2013\u2014]+\s+)")


def question_kind(question: str) -> str | None:
    """What the question word asks for (place, time, person, number, a name), None when it asks for no one
    kind."""
    for pattern, kind in QUESTION_KINDS:
        if pattern.search(question):
            return kind
    return None


def question_stems(question: str, ignored: frozenset[str]) -> frozenset[str]:
    """The question's evidence words: its content words less the phrase that asks ("how long", "what year"),
    whose words say what kind of answer is wanted, not what it is about."""
    for pattern, _ in QUESTION_KINDS:
        question = pattern.sub(" ", question)
    return content_stems(question, ignored)


def _names(sentence: str, ignored: frozenset[str]) -> list[tuple[str, str]]:
    """Capitalised words past the sentence's first, with the word before each: candidate names.
    A month, a weekday, "I" and speakers' names are not."""
    found = []
    tokens = words(sentence)
    for before, token in pairwise(tokens):
        if token[0].isupper() and token not in _NOT_NAMES and token.lower() not in ignored:
            found.append((before.lower(), token))
    return found


def holds_kind(sentence: str, kind: str | None, ignored: frozenset[str]) -> bool:
    """The sentence holds the kind of words the question asks for."""
    if kind is None:
        return False
    lowered = [w.lower() for w in words(sentence)]
    if kind == TIME:
        return times.carries_time(sentence)
    if kind == NUMBER:
        return any(w.isdigit() or w in _NUMBER_WORDS for w in lowered)
    if kind == PLACE:
        names = _names(sentence, ignored)
        return any(before in _PLACE_BEFORE for before, _ in names) or any(w in _PLACE_WORDS for w in lowered)
    if kind == NAME:
        return bool(_names(sentence, ignored) or _TITLE.search(sentence))
    return bool(_names(sentence, ignored)) or any(w in _PEOPLE_WORDS for w in lowered)


@dataclass(frozen=True)
class Candidate:
    """A sentence of a hit, scored for a question."""

    hit: int
    sentence: Sentence
    matched: frozenset[str]
    stems: frozenset[str]
    kind: bool
    score: float
    share: float = 0.0
    """The share of the question's words it holds itself."""
    asked: frozenset[str] = frozenset()
    """The question's words the turn it replies to asked, when it opens a reply."""

    @property
    def eligible(self) -> bool:
        """Chosen alone only when it has words of its own: a bare "Hey Tomas!" never is."""
        return len(self.stems) >= 2 or bool(self.matched)

    @property
    def restates(self) -> bool:
        """It holds fewer than OWN_WORDS words beyond the question's: it may say what was asked, not the answer."""
        return len(self.stems - self.matched) < OWN_WORDS

    @property
    def answers(self) -> bool:
        """It shares the question's words, holds the wanted kind, or replies to a turn that asked them."""
        return bool(self.matched or self.kind or self.asked)


def _candidates(
    question: str, hits: list[Hit], sentences: list[list[Sentence]], ignored: frozenset[str]
) -> list[Candidate]:
    """Every sentence of every hit (``sentences``, hit by hit), scored by the weights above; speakers' names
    (``ignored``) count in none of it."""
    wanted = question_stems(question, ignored)
    kind = question_kind(question)
    out = []
    named = {w.lower() for w in words(question)} & ignored
    stems_of = [[content_stems(sentence.text, ignored) for sentence in item] for item in sentences]
    share = _share(wanted, [stems for item in stems_of for stems in item])
    asked = _asked(hits, sentences, wanted, ignored)
    for rank, item in enumerate(sentences):
        prior = RANK_WEIGHT / math.sqrt(rank + 1)
        for sentence, stems in zip(item, stems_of[rank], strict=True):
            matched = stems & wanted
            holds = holds_kind(sentence.text, kind, ignored)
            prompted = asked.get((rank, sentence.position), frozenset()) - matched
            score = OVERLAP_WEIGHT * share(matched) + prior + KIND_WEIGHT * holds + REPLY_WEIGHT * share(prompted)
            score += NEW_WEIGHT * min(len(stems - wanted), NEW_WORDS) / NEW_WORDS
            if sentence.text.endswith("?"):
                score -= ASKING_PENALTY
            if sentence.speaker and named & {w.lower() for w in words(sentence.speaker)}:
                score += SPEAKER_WEIGHT
            out.append(Candidate(rank, sentence, matched, stems, holds, score, share(matched), prompted))
    return out


def _share(wanted: frozenset[str], sentences: list[frozenset[str]]) -> Callable[[frozenset[str]], float]:
    """The weighted share of the question's words a set of them holds. A word weighs log(1 + n / (1 + d)),
    n the hits' sentences, d those holding it: "dog" in every sentence says little about which one answers,
    "harmonica" in one says much (docs/answers.md#how-the-answer-is-built)."""
    weight = {w: math.log(1 + len(sentences) / (1 + sum(w in stems for stems in sentences))) for w in wanted}
    total = sum(weight.values())
    if not total:
        return lambda found: 0.0
    return lambda found: sum(weight[w] for w in found) / total


def _turn_before(hits: list[Hit]) -> dict[int, int]:
    """For a hit holding a conversation's turns, the hit holding the turn just before them, when it is
    among the hits too: the same namespace and thread, ``meta.turns`` adjoining."""
    last_turn: dict[tuple[str | None, str, int], int] = {}
    for index, hit in enumerate(hits):
        if hit.meta.thread_id is not None and hit.meta.turns is not None:
            last_turn[(hit.meta.namespace, hit.meta.thread_id, hit.meta.turns.last)] = index
    before = {}
    for index, hit in enumerate(hits):
        if hit.meta.thread_id is None or hit.meta.turns is None or hit.meta.turns.first == 0:
            continue
        found = last_turn.get((hit.meta.namespace, hit.meta.thread_id, hit.meta.turns.first - 1))
        if found is not None:
            before[index] = found
    return before


def _asked(
    hits: list[Hit], sentences: list[list[Sentence]], wanted: frozenset[str], ignored: frozenset[str]
) -> dict[tuple[int, int], frozenset[str]]:
    """(hit, position) of each sentence opening a reply -> the question's words its prompt holds. A reply
    is a line after a line that asks (ends a sentence with "?"): the next line of the same item, or the
    first line of the item holding the next turn of its thread."""
    lines: list[list[list[Sentence]]] = []
    for item in sentences:
        grouped: list[list[Sentence]] = []
        for sentence in item:
            if not grouped or grouped[-1][0].line != sentence.line:
                grouped.append([])
            grouped[-1].append(sentence)
        lines.append(grouped)

    def prompt_words(line: list[Sentence]) -> frozenset[str]:
        if not any(s.text.endswith("?") for s in line):
            return frozenset()
        return frozenset().union(*(content_stems(s.text, ignored) for s in line)) & wanted

    out: dict[tuple[int, int], frozenset[str]] = {}
    for index, before in _turn_before(hits).items():
        if lines[index] and lines[before]:
            out[(index, lines[index][0][0].position)] = prompt_words(lines[before][-1])
    for index, item in enumerate(lines):
        for prompt, reply in pairwise(item):
            out[(index, reply[0].position)] = prompt_words(prompt)
    return {key: found for key, found in out.items() if found}


def _said(hit: Hit) -> datetime | None:
    return hit.meta.observed_at


def _quote(candidate: Candidate, hit: Hit, kind: str | None, ignored: frozenset[str]) -> str:
    """``Ines: "I went yesterday" (yesterday = May 7, 2023) [2]``. A "when" question is answered with the date
    first, ``May 7, 2023 — Ines: "I went yesterday" [2]``; one whose sentence names no time gets the day it
    was said, the best date memory holds, given as such."""
    text = _trimmed(_without_opener(candidate.sentence.text), kind, ignored)
    said = _said(hit)
    resolved = times.resolve(text, said)
    quoted = f'"{_clip(text)}"'
    if candidate.sentence.speaker:
        quoted = f"{candidate.sentence.speaker}: {quoted}"
    if kind == TIME and resolved:
        quoted = f"{resolved[0].meaning} \u2014 {quoted}"
        resolved = resolved[1:]
    notes = [f"{r.phrase} = {r.meaning}" for r in resolved]
    if kind == TIME and said is not None and not times.carries_time(text):
        notes.append(f"said {times.day_text(said.date())}")
    if notes:
        quoted += f" ({'; '.join(notes)})"
    return f"{quoted} [{candidate.hit + 1}]"


def _trimmed(text: str, kind: str | None, ignored: frozenset[str]) -> str:
    """For a question asking for a kind, a long sentence cut to its clauses that hold it, what is left out
    marked "…": "What a day - we finally launched the boat last week!" answers "when?" as "… we finally
    launched the boat last week!". The sentence as it is when no clause holds the kind, or every clause does."""
    if kind is None or len(words(text)) < TRIM_WORDS:
        return text
    pieces = _CLAUSE.split(text)  # clause, separator, clause, ...
    clauses = pieces[::2]
    keep = [holds_kind(clause, kind, ignored) for clause in clauses]
    if not any(keep) or all(keep):
        return text
    out = "" if keep[0] else "… "
    for index, clause in enumerate(clauses):
        if not keep[index]:
            continue
        if index > 0 and keep[index - 1]:
            out += pieces[2 * index - 1]
        elif index > 0 and out.strip() != "…":
            out += " … "
        out += clause if index + 1 == len(clauses) or keep[index + 1] else clause.rstrip(",;:")
    return out if keep[-1] else f"{out} …"


def _without_opener(text: str) -> str:
    """The sentence from its first word that says something; all of it when it is nothing but openers."""
    rest = _OPENER.sub("", text)
    return rest[0].upper() + rest[1:] if rest else text


def _choose(candidates: list[Candidate], kind: str | None) -> list[Candidate]:
    """The best sentence, alone when it holds most of the question's words, the kind it asks for and a word
    of its own; else others too, while they add question words or the wanted kind the chosen lack (or, while
    the chosen only restate the question, words of their own) and the answer stays within TARGET_WORDS."""
    ranked = sorted((c for c in candidates if c.eligible), key=lambda c: -c.score)
    if not ranked:
        return []
    chosen = [ranked[0]]
    if (ranked[0].kind or kind is None) and ranked[0].share >= ENOUGH_SHARE and not ranked[0].restates:
        return chosen
    covered = set(ranked[0].matched)
    has_kind = ranked[0].kind
    length = len(words(ranked[0].sentence.text))
    for candidate in ranked[1:]:
        if len(chosen) == MAX_SENTENCES:
            break
        if candidate.sentence.text.endswith("?"):
            continue  # a question asked back answers nothing
        adds = bool(candidate.matched - covered) or (candidate.kind and not has_kind)
        if not (adds or (not candidate.restates and all(c.restates for c in chosen))):
            continue
        size = len(words(candidate.sentence.text))
        if length + size > TARGET_WORDS:
            continue
        chosen.append(candidate)
        covered |= candidate.matched
        has_kind = has_kind or candidate.kind
        length += size
    return chosen


def _clip(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _snippet(candidate: Candidate, sentences: list[Sentence]) -> str:
    """The sentence used; a short one with the sentence after it (or before, at the end) for context."""
    text = candidate.sentence.text
    if len(words(text)) < CONTEXT_WORDS and len(sentences) > 1:
        at = candidate.sentence.position
        after = at + 1 < len(sentences)
        text = f"{text} {sentences[at + 1].text}" if after else f"{sentences[at - 1].text} {text}"
    return _clip(text)


def compose(question: str, hits: list[Hit]) -> RecallAnswer:
    """Cite every hit (best first), each by the sentence that serves the question best; answer with the
    best sentence, and more only when they add to it."""
    if not hits:
        return RecallAnswer(answer=NOTHING_STORED, citations=[], model=MODEL)
    ignored = speakers([h.text for h in hits])
    sentences = [split(hit.text) for hit in hits]
    candidates = _candidates(question, hits, sentences, ignored)
    kind = question_kind(question)
    chosen = _choose(candidates, kind)
    # Each hit's best sentence, eligible ones first: the one quoted, for a hit the answer used.
    best_of_hit: dict[int, Candidate] = {}
    for candidate in candidates:
        held = best_of_hit.get(candidate.hit)
        if held is None or (candidate.eligible, candidate.score) > (held.eligible, held.score):
            best_of_hit[candidate.hit] = candidate
    citations: list[Citation] = []
    for number, hit in enumerate(hits):
        candidate = best_of_hit.get(number)
        snippet = _snippet(candidate, sentences[number]) if candidate else _clip(hit.text)
        citations.append(Citation(id=hit.id, kind=hit.kind, snippet=snippet, meta=hit.meta, score=hit.score))
    if not chosen:
        return RecallAnswer(answer=f"{NOTHING_SHARED} {citations[0].snippet} [1]", citations=citations, model=MODEL)
    quotes = [_quote(c, hits[c.hit], kind, ignored) for c in chosen]
    answer = " ".join(quotes)
    if not any(c.answers for c in chosen):
        answer = f"{NOTHING_SHARED} {answer}"
    return RecallAnswer(answer=answer, citations=citations, model=MODEL)
