"""A statement as asyncpg takes it, and what every query family shares."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.engine.postgres.filters import Predicate

# The columns a hit is built from (rows.hit_of), as every ranking and listing selects them.
HIT_COLUMNS = "i.id, i.kind, i.text, i.meta, i.confidence"

_NAMED = re.compile(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)")


@functools.lru_cache(maxsize=512)
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with each ``:name`` as ``$n`` (a name twice, one number), and the names in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


def _maker_family() -> str:
    """The last part of the name of the module that made a statement (``writes``, ``keyword``...).

    Read from the caller's frame, past this module's own (``__init__``, ``bind``), when the
    statement is made: every statement gets a family without each plan naming one, and a few
    frames cost well under a microsecond. The families are the modules, so a metric labelled
    by one has a short, fixed set of values.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return module.rpartition(".")[2] or "other"


@dataclass(frozen=True, slots=True)
class Statement:
    """SQL with ``$n`` placeholders and its arguments in order; ``generic_plan``: it runs on the
    pool whose connections reuse one generic plan per statement (plans_generic); ``family``: what
    its time is counted under (app/telemetry/metrics.py), the module that made it unless given."""

    sql: str
    args: tuple[Any, ...] = ()
    generic_plan: bool = False
    family: str = field(default_factory=_maker_family, compare=False)

    @classmethod
    def bind(cls, sql: str, params: Mapping[str, Any] | None = None, *, generic_plan: bool = False) -> Statement:
        """A statement written with ``:name`` parameters (a filter's predicate binds its values by
        name), numbered as asyncpg wants them; the numbering of each text is cached."""
        numbered, names = _numbered(sql)
        values = params or {}
        return cls(numbered, tuple(values[name] for name in names), generic_plan)


def plans_generic(pred: Predicate) -> bool:
    """Whether a ranking under ``pred`` runs on one generic plan (the engine's second pool).

    Without a filter the values change no estimate (every tsquery comes from a CTE; a vector's
    distance orders the index the same whatever the vector), and planning is a good part of the
    statement; a connection that plans generic costs no extra round trip. With a filter
    its values decide the plan. docs/tuning.md#generic-plans
    """
    return pred.admits_all
