"""Turns a run into numbers: a table per mode and category, a JSON document, a details file, the check."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from app.contract.items import ITEM_ADAPTER
from app.engine import answers as extractive
from app.engine import times
from app.evaluation.labelled import ALL
from app.evaluation.metrics import (
    NDCG_DEPTH,
    holds_gold,
    mean,
    ndcg_at,
    recall_at,
    reciprocal_rank,
    token_f1,
    word_count,
)
from app.evaluation.runner import EvaluationError, QuestionResult, Run

Scores = dict[str, float]
"""One row: ``recall@k`` for each k, ``mrr``, ``ndcg@10`` and ``count``."""


def row(rankings: Sequence[Sequence[str]], golds: Sequence[Sequence[str]], ks: Sequence[int]) -> Scores:
    """The means over questions of one mode (and one category)."""
    scores: Scores = {
        f"recall@{k}": mean([recall_at(r, g, k) for r, g in zip(rankings, golds, strict=True)]) for k in ks
    }
    scores["mrr"] = mean([reciprocal_rank(r, g) for r, g in zip(rankings, golds, strict=True)])
    scores[f"ndcg@{NDCG_DEPTH}"] = mean([ndcg_at(r, g) for r, g in zip(rankings, golds, strict=True)])
    scores["count"] = len(rankings)
    return scores


def table(run: Run, ks: Sequence[int]) -> dict[str, dict[str, Scores]]:
    """mode -> category -> scores; ``all`` first, then the categories in the order the set names them."""
    categories = list(dict.fromkeys(r.question.category for r in run.results))
    out: dict[str, dict[str, Scores]] = {}
    for mode in run.modes:
        by_category: dict[str, Scores] = {}
        for category in [ALL, *categories]:
            chosen = [r for r in run.results if category == ALL or r.question.category == category]
            by_category[category] = row([r.rankings[mode].ids for r in chosen], [r.gold_ids for r in chosen], ks)
        out[mode] = by_category
    return out


ANSWER_COLUMNS = ("holds_gold", "f1", "words", "top_hit_holds_gold", "top_hit_f1")
"""The answers table: recall's answer against the gold answer, then the top keyword hit's text against it."""


def answer_row(answered: Sequence[QuestionResult]) -> Scores:
    """The means over questions that were recalled: holds-gold rate, token F1, answer length in words, and the
    same two scores for the baseline (the first keyword hit's whole text)."""
    pairs = [(r.answered.answer, r.answered.top_keyword_hit, r.question.answer or "") for r in answered if r.answered]
    return {
        "holds_gold": mean([float(holds_gold(answer, gold)) for answer, _, gold in pairs]),
        "f1": mean([token_f1(answer, gold) for answer, _, gold in pairs]),
        "words": mean([float(word_count(answer)) for answer, _, _ in pairs]),
        "top_hit_holds_gold": mean([float(holds_gold(top, gold)) for _, top, gold in pairs]),
        "top_hit_f1": mean([token_f1(top, gold) for _, top, gold in pairs]),
        "count": len(pairs),
    }


def answer_table(run: Run) -> dict[str, Scores]:
    """category -> answer scores, ``all`` first; empty when no question was recalled. The ``all`` row also
    says how many "when" questions have evidence that says a relative time, and the share of them dated."""
    recalled = [r for r in run.results if r.answered is not None]
    if not recalled:
        return {}
    categories = list(dict.fromkeys(r.question.category for r in recalled))
    table = {
        category: answer_row([r for r in recalled if category == ALL or r.question.category == category])
        for category in [ALL, *categories]
    }
    relative, dated = when_dated(run, recalled)
    table[ALL] |= {"when_relative": relative, "when_dated": dated}
    return table


def when_dated(run: Run, recalled: Sequence[QuestionResult]) -> tuple[int, float]:
    """The "when" questions whose gold evidence says a relative time ("I went last Tuesday"), and the share of
    them whose answer writes the date one of those times means on the day its evidence was said: what the
    time rule (docs/answers.md#the-time-rule) is for."""
    said = {item.key: ITEM_ADAPTER.validate_python(item.body) for item in run.labelled.items}
    asked = 0
    answered = 0
    for result in recalled:
        if result.answered is None or extractive.question_kind(result.question.text) != extractive.TIME:
            continue
        meanings = {
            found.meaning
            for key in result.question.gold
            if key in said
            for found in times.resolve(said[key].render_text(), said[key].meta.observed_at)
        }
        if meanings:
            asked += 1
            answered += any(meaning in result.answered.answer for meaning in meanings)
    return asked, answered / asked if asked else 0.0


def embedder_name(run: Run, fallback: str | None) -> str | None:
    """The descriptor's ``embedder`` when the service reports one, else what the caller knows (embedded runs)."""
    reported = run.descriptor.get("embedder")
    if isinstance(reported, str):
        return reported
    if isinstance(reported, dict) and isinstance(reported.get("name"), str):
        return reported["name"]
    return fallback


def document(run: Run, ks: Sequence[int], *, embedder: str | None = None) -> dict[str, Any]:
    """The ``--json`` output."""
    labelled = run.labelled
    result: dict[str, Any] = {
        "set": labelled.name,
        "items": len(labelled.items),
        "questions": len(labelled.questions),
        "skipped": labelled.skipped,
        "not_asked": labelled.not_asked,
        "engine": {k: run.descriptor[k] for k in ("id", "label", "description") if k in run.descriptor},
        "k": list(ks),
        "modes": table(run, ks),
    }
    answers = answer_table(run)
    if answers:
        result["answers"] = answers
    name = embedder_name(run, embedder)
    if name is not None:
        result["embedder"] = name
    return result


def text(doc: dict[str, Any]) -> str:
    """The plain table for a person: one block per mode, one row per category."""
    ks = doc["k"]
    columns = [*(f"recall@{k}" for k in ks), "mrr", f"ndcg@{NDCG_DEPTH}"]
    lines = [
        f"set {doc['set']}: {doc['items']} items, {doc['questions']} questions"
        + (f" ({doc['skipped']} skipped: no gold item)" if doc["skipped"] else "")
        + (f" ({doc['not_asked']} in categories not asked)" if doc["not_asked"] else "")
    ]
    engine = doc.get("engine", {})
    if engine:
        lines.append(f"engine {engine.get('id', '?')}" + (f", embedder {doc['embedder']}" if "embedder" in doc else ""))
    width = max([len(ALL), *map(len, doc["modes"]), *(len(c) for mode in doc["modes"].values() for c in mode)])
    for mode, categories in doc["modes"].items():
        lines.append("")
        lines.append(f"{mode:<{width}}  " + "  ".join(f"{c:>9}" for c in columns) + "  " + f"{'n':>5}")
        for category, scores in categories.items():
            values = "  ".join(f"{scores[c]:>9.3f}" for c in columns)
            lines.append(f"{category:<{width}}  {values}  {int(scores['count']):>5}")
    answers = doc.get("answers")
    if answers:
        width = max(width, len("answers"), *map(len, answers))
        size = max(map(len, ANSWER_COLUMNS))
        lines.append("")
        lines.append(f"{'answers':<{width}}  " + "  ".join(f"{c:>{size}}" for c in ANSWER_COLUMNS) + f"  {'n':>5}")
        for category, scores in answers.items():
            values = "  ".join(f"{scores[c]:>{size}.{1 if c == 'words' else 3}f}" for c in ANSWER_COLUMNS)
            lines.append(f"{category:<{width}}  {values}  {int(scores['count']):>5}")
        relative = int(answers[ALL].get("when_relative", 0))
        if relative:
            lines.append(
                f"when questions whose evidence says a relative time: {relative}, "
                f"answered with its date: {answers[ALL]['when_dated']:.3f}"
            )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CheckFailure:
    category: str
    hybrid: float
    best_mode: str
    best: float

    def __str__(self) -> str:
        return f"hybrid {self.category}: {self.hybrid:.3f} < {self.best_mode} {self.best:.3f}"


CHECKED_MODES = ("keyword", "vector", "hybrid")


def check(doc: dict[str, Any], metric: str, tolerance: float = 0.0, *, overall: bool = False) -> list[CheckFailure]:
    """Every row (only ``all`` when ``overall``) where hybrid's ``metric`` is below the better of keyword's
    and vector's by more than ``tolerance``."""
    modes = doc["modes"]
    missing = [m for m in CHECKED_MODES if m not in modes]
    if missing:
        raise EvaluationError(f"--check compares keyword, vector and hybrid; not measured: {', '.join(missing)}")
    failures = []
    for category, scores in modes["hybrid"].items():
        if overall and category != ALL:
            continue
        best_mode = max(("keyword", "vector"), key=lambda m: modes[m][category][metric])
        best = modes[best_mode][category][metric]
        if scores[metric] < best - tolerance - 1e-12:
            failures.append(CheckFailure(category, scores[metric], best_mode, best))
    return failures


def write_details(run: Run, stream: IO[str]) -> None:
    """One JSON line per question and mode, enough to score or fuse the rankings again offline."""
    keys_of: dict[str, list[str]] = {}
    for key, item_id in run.ids.items():
        keys_of.setdefault(item_id, []).append(key)
    for result in run.results:
        question = result.question
        for mode, ranking in result.rankings.items():
            line = {
                "key": question.key,
                "mode": mode,
                "category": question.category,
                "question": question.text,
                "gold": list(result.gold_ids),
                "gold_keys": list(question.gold),
                "ids": list(ranking.ids),
                "scores": list(ranking.scores),
                "keys": [keys_of.get(i, [None])[0] for i in ranking.ids],
            }
            if question.answer is not None:
                line["answer"] = question.answer
            if result.answered is not None:
                line["recalled"] = result.answered.answer
            stream.write(json.dumps(line, ensure_ascii=False) + "\n")
