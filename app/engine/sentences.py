"""A hit's text as sentences, and the words of a sentence that can count as evidence.

An item's rendered text carries framing that says nothing about its content: a conversation
line starts with its role (``user:``) and, in transcripts, a speaker's name (``Ines:``); a
document starts with ``# title``. Counted as words, that framing made "Hey Tomas!" the best answer
to any question naming Tomas. Here the framing is split off, kept apart (a speaker still says who
said it), and only the remaining words are evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from py_rust_stemmers import SnowballStemmer

WORD = re.compile(r"\w+(?:'\w+)?", re.UNICODE)
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=\S)")
_ROLE = re.compile(r"^(?:user|assistant|system|tool):\s*", re.IGNORECASE)
# A transcript's speaker: one to three capitalised words and a colon, then the words said.
_SPEAKER = re.compile(r"^([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s+(?=\S)")

ROLE_WORDS = frozenset(["user", "assistant", "system", "tool"])
"""Role names: in a question ("where does the user live?") they name the one remembered, not a word to match."""

# Function words, chat fillers and question words: present in nearly every sentence or question,
# so sharing them is no evidence that a sentence answers anything.
_COMMON = """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each even ever few for from further get gets got had hadn't has hasn't have haven't having he
    he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is
    isn't it it's its itself just let's like me more most much must mustn't my myself no nor not now of off
    on once only or other ought our ours ourselves out over own really same shan't she she'd she'll she's
    should shouldn't so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up us very was wasn't
    we we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom
    whose why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself
    yourselves yes yeah yep ok okay oh hey hi hello wow thanks thank lol haha hmm um cool awesome great nice
    sure totally definitely glad sounds sound kind thing things lot lots one also still well
    go going gone went make made say said tell told know knew think thought feel felt
"""
COMMON_WORDS = frozenset(_COMMON.split())

_STEMMER = SnowballStemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball (Porter 2) English: "moved", "moving" and "move" all read "move", where stripping
    "-ed" would leave "mov"; the stemmer is the Rust one fastembed already installs, ~1 µs a word."""
    return str(_STEMMER.stem_word(word))


def words(text: str) -> list[str]:
    """The words of ``text`` as written (case kept), apostrophes inside a word kept ("don't")."""
    return WORD.findall(text)


def content_stems(text: str, ignored: frozenset[str] = frozenset()) -> frozenset[str]:
    """The stems of the words that can be evidence: not common, not role names, not in ``ignored``
    (lowercased names of the speakers), not a lone letter or digit."""
    out = set()
    for word in words(text.lower()):
        if word in COMMON_WORDS or word in ROLE_WORDS or word in ignored or len(word) < 2:
            continue
        out.add(stem(word))
    return frozenset(out)


@dataclass(frozen=True)
class Sentence:
    """One sentence of one hit, framing split off; ``line`` numbers the item's non-blank lines (a turn
    each, in a conversation), so a sentence that opens a line is known to reply to the line before."""

    text: str
    speaker: str | None = None
    position: int = 0
    line: int = 0


def split(text: str) -> list[Sentence]:
    """The sentences of a rendered item, in order, each with the speaker of its line when a conversation
    turn names one (``user: Ines: ...``); a document's "Note: ..." names no speaker."""
    out: list[Sentence] = []
    lines = 0
    for raw in text.splitlines():
        speaker, line = _framing(raw)
        parts = [part.strip() for part in _SPLIT.split(line) if part.strip()]
        for part in parts:
            out.append(Sentence(text=part, speaker=speaker, position=len(out), line=lines))
        lines += bool(parts)
    return out


def _framing(raw: str) -> tuple[str | None, str]:
    """A line's speaker (None when it names none) and its words, role prefix and title marker removed."""
    line = raw.strip()
    if line.startswith("#"):
        return None, line.lstrip("#").strip()
    role = _ROLE.match(line)
    if role is None:
        return None, line
    line = line[role.end() :]
    match = _SPEAKER.match(line)
    if match is None:
        return None, line
    return match.group(1), line[match.end() :]


def speakers(texts: list[str]) -> frozenset[str]:
    """The lowercased words of every speaker named in ``texts``: never evidence, in a question or a hit."""
    names: set[str] = set()
    for text in texts:
        for raw in text.splitlines():
            speaker, _ = _framing(raw)
            if speaker:
                names.update(w.lower() for w in words(speaker))
    return frozenset(names)
