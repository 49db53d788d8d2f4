"""A labelled set: items to store and questions naming the items that answer them.

Pure: the loaders read one file and build the model; nothing here talks to a service, so a set
can be checked (and its mistakes reported by line) before anything is stored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from app.contract.errors import InvalidRequest
from app.contract.namespaces import MAX_DEPTH, Namespace

SCRATCH_DEPTH = 1
"""Segments of the scratch namespace every set is stored under (``project:eval-<hex>``)."""

ALL = "all"
"""The name of the row that averages every question; no category may take it."""

UNCATEGORISED = "uncategorised"

LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
LOCOMO_DEFAULT_EXCLUDED = ("adversarial",)


class LabelledSetError(ValueError):
    """A set that cannot be read; the message is one line naming the file and, when known, the line."""


@dataclass(frozen=True)
class LabelledItem:
    """One item to store; ``body`` is exactly a POST /v1/store body, its namespace relative to the scratch."""

    key: str
    body: dict[str, Any]
    line: Annotated[int | None, "where the item was read, for messages"] = None


@dataclass(frozen=True)
class Question:
    """A question and the keys of the items that answer it."""

    key: str
    text: str
    gold: tuple[str, ...]
    category: str = UNCATEGORISED
    namespace: Annotated[str | None, "relative to the scratch namespace; None asks the whole scratch"] = None
    answer: Annotated[str | None, "the gold answer text, kept for answer measurements"] = None


@dataclass(frozen=True)
class LabelledSet:
    """Items and questions, with what the loader had to leave out."""

    items: tuple[LabelledItem, ...]
    questions: tuple[Question, ...]
    name: str = "set"
    skipped: Annotated[int, "questions dropped because no gold item was left"] = 0
    excluded_by_default: Annotated[tuple[str, ...], "categories asked only when named"] = ()
    not_asked: Annotated[int, "questions left out by the category selection"] = 0
    categories_seen: tuple[str, ...] = field(default=())

    def select(self, categories: tuple[str, ...] | None) -> LabelledSet:
        """The questions of ``categories``; None is every category but the ones excluded by default."""
        if categories is None:
            keep = [q for q in self.questions if q.category not in self.excluded_by_default]
        else:
            unknown = sorted(set(categories) - set(self.categories_seen))
            if unknown:
                known = ", ".join(self.categories_seen) or "none"
                raise LabelledSetError(f"{self.name}: no question has category {', '.join(unknown)} (known: {known})")
            keep = [q for q in self.questions if q.category in categories]
        return replace(self, questions=tuple(keep), not_asked=self.not_asked + len(self.questions) - len(keep))


def _relative_namespace(value: Any, where: str) -> str | None:
    """A namespace below the scratch: at most ``MAX_DEPTH - SCRATCH_DEPTH`` segments; None for the scratch."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise LabelledSetError(f"{where}: namespace must be a string")
    try:
        node = Namespace.parse(value)
    except InvalidRequest as error:
        raise LabelledSetError(f"{where}: {error.detail}") from None
    if node.depth > MAX_DEPTH - SCRATCH_DEPTH:
        raise LabelledSetError(
            f"{where}: namespace {value!r} has more than {MAX_DEPTH - SCRATCH_DEPTH} segments "
            "(it is stored below a one-segment scratch namespace)"
        )
    return node.path or None


def _string(record: dict[str, Any], name: str, where: str, *, required: bool = True) -> str | None:
    value = record.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise LabelledSetError(f"{where}: {name!r} must be a non-blank string")
    return value


def _jsonl_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    records = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            text = line.strip()
            if not text or text.startswith("//"):
                continue
            where = f"{path.name} line {number}"
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise LabelledSetError(f"{where}: not JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise LabelledSetError(f"{where}: a line holds one JSON object")
            records.append((number, record))
    return records


_ITEM_KEYS = {"type", "key", "item"}
_QUESTION_KEYS = {"type", "key", "question", "gold", "category", "namespace", "answer"}


def read_jsonl(path: str | Path) -> LabelledSet:
    """Read the JSONL format of docs/evaluation.md; a mistake ends with one line naming its line."""
    path = Path(path)
    items: list[LabelledItem] = []
    questions: list[tuple[int, Question]] = []
    seen: dict[str, int] = {}
    for number, record in _jsonl_records(path):
        where = f"{path.name} line {number}"
        kind = record.get("type")
        allowed = _ITEM_KEYS if kind == "item" else _QUESTION_KEYS if kind == "question" else None
        if allowed is None:
            raise LabelledSetError(f'{where}: \'type\' must be "item" or "question"')
        unknown = sorted(set(record) - allowed)
        if unknown:
            raise LabelledSetError(f"{where}: unknown key {', '.join(map(repr, unknown))} for type {kind!r}")
        key = _string(record, "key", where)
        assert key is not None
        if key in seen:
            raise LabelledSetError(f"{where}: duplicate key {key!r} (first on line {seen[key]})")
        seen[key] = number
        if kind == "item":
            body = record.get("item")
            if not isinstance(body, dict):
                raise LabelledSetError(f"{where}: 'item' must be an object (a POST /v1/store body)")
            meta = body.get("meta")
            if meta is not None and not isinstance(meta, dict):
                raise LabelledSetError(f"{where}: 'item.meta' must be an object")
            _relative_namespace((meta or {}).get("namespace"), where)
            items.append(LabelledItem(key=key, body=body, line=number))
            continue
        gold = record.get("gold")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g for g in gold):
            raise LabelledSetError(f"{where}: 'gold' must be a non-empty list of item keys")
        category = _string(record, "category", where, required=False) or UNCATEGORISED
        if category == ALL:
            raise LabelledSetError(f"{where}: category {ALL!r} is reserved for the row over every question")
        question = Question(
            key=key,
            text=_string(record, "question", where) or "",
            gold=tuple(dict.fromkeys(gold)),
            category=category,
            namespace=_relative_namespace(record.get("namespace"), where),
            answer=_string(record, "answer", where, required=False),
        )
        questions.append((number, question))
    item_keys = {item.key for item in items}
    for number, question in questions:
        missing = [g for g in question.gold if g not in item_keys]
        if missing:
            raise LabelledSetError(f"{path.name} line {number}: gold names no item: {', '.join(missing)}")
    if not questions:
        raise LabelledSetError(f"{path.name}: holds no question")
    return LabelledSet(
        items=tuple(items),
        questions=tuple(q for _, q in questions),
        name=path.stem,
        categories_seen=tuple(dict.fromkeys(q.category for _, q in questions)),
    )


_MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_SESSION_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})\s*", re.I)


def session_time(text: str) -> str:
    """``1:56 pm on 8 May, 2023`` as RFC 3339 UTC; LoCoMo's times carry no zone, so UTC is assumed."""
    match = _SESSION_TIME.fullmatch(text)
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None:
        raise ValueError(f"unreadable session time {text!r}")
    hour = int(match.group(1)) % 12 + (12 if match.group(3).lower() == "p" else 0)
    moment = datetime(int(match.group(6)), month, int(match.group(4)), hour, int(match.group(2)), tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def evidence_ids(evidence: list[Any]) -> list[str]:
    """LoCoMo evidence strings split and normalised: ``D8:6; D9:17`` and ``D:11:26``, ``D30:05`` -> ``D30:5``.

    Strings that name no turn at all (a bare ``D``) are dropped here; ids naming a turn the
    conversation lacks are dropped by the caller, which knows the turns.
    """
    ids: list[str] = []
    for entry in evidence:
        if not isinstance(entry, str):
            continue
        for token in re.split(r"[;,\s]+", entry):
            match = _EVIDENCE.fullmatch(token.strip())
            if match:
                ids.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return list(dict.fromkeys(ids))


def _session_number(name: str) -> int | None:
    match = re.fullmatch(r"session_(\d+)", name)
    return int(match.group(1)) if match else None


def _locomo_items(sample_id: str, conversation: dict[str, Any], where: str) -> list[LabelledItem]:
    items = []
    sessions = sorted((n, k) for k in conversation if (n := _session_number(k)) is not None)
    for _, name in sessions:
        turns = conversation[name]
        if not isinstance(turns, list):
            raise LabelledSetError(f"{where}: {name} is not a list of turns")
        stamp = conversation.get(f"{name}_date_time")
        try:
            at = session_time(stamp) if isinstance(stamp, str) else None
        except ValueError as error:
            raise LabelledSetError(f"{where}: {error}") from None
        for index, turn in enumerate(turns):
            dia_id, speaker, text = turn.get("dia_id"), turn.get("speaker"), turn.get("text")
            if not all(isinstance(v, str) for v in (dia_id, speaker, text)):
                raise LabelledSetError(f"{where}: {name} turn {index} lacks dia_id, speaker or text")
            said = f"{speaker}: {text}"
            caption = turn.get("blip_caption")
            if isinstance(caption, str) and caption.strip():
                said += f" [shares {caption.strip()}]"
            line: dict[str, Any] = {"role": "user", "text": said}
            meta: dict[str, Any] = {
                "namespace": f"user:{sample_id}",
                "thread_id": name,
                "turns": {"first": index, "last": index},
                "source": {"kind": "conversation", "id": dia_id},
            }
            if at is not None:
                line["at"] = at
                meta["observed_at"] = at
            body = {"type": "conversation", "turns": [line], "meta": meta}
            items.append(LabelledItem(key=f"{sample_id}/{dia_id}", body=body))
    return items


def read_locomo(path: str | Path) -> LabelledSet:
    """LoCoMo's own JSON: one item per dialogue turn, one namespace per conversation (docs/evaluation.md)."""
    path = Path(path)
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise LabelledSetError(f"{path.name}: not JSON ({error.msg})") from None
    if not _is_locomo(samples):
        raise LabelledSetError(f"{path.name}: not LoCoMo (a list of objects with conversation and qa)")
    items: list[LabelledItem] = []
    questions: list[Question] = []
    skipped = 0
    for position, sample in enumerate(samples):
        sample_id = sample.get("sample_id") or f"sample-{position}"
        where = f"{path.name} sample {sample_id}"
        if not isinstance(sample_id, str):
            raise LabelledSetError(f"{path.name} sample {position}: sample_id must be a string")
        _relative_namespace(f"user:{sample_id}", where)
        turns = _locomo_items(sample_id, sample["conversation"], where)
        items.extend(turns)
        known = {item.key for item in turns}
        for number, qa in enumerate(sample["qa"]):
            category = LOCOMO_CATEGORIES.get(qa.get("category"), str(qa.get("category")))
            gold = [f"{sample_id}/{e}" for e in evidence_ids(qa.get("evidence") or [])]
            gold = [g for g in gold if g in known]
            text = qa.get("question")
            if not gold or not isinstance(text, str) or not text.strip():
                skipped += 1
                continue
            answer = qa.get("answer", qa.get("adversarial_answer"))
            questions.append(
                Question(
                    key=f"{sample_id}/q{number}",
                    text=text,
                    gold=tuple(gold),
                    category=category,
                    namespace=f"user:{sample_id}",
                    answer=None if answer is None else str(answer),
                )
            )
    return LabelledSet(
        items=tuple(items),
        questions=tuple(questions),
        name=path.stem,
        skipped=skipped,
        excluded_by_default=LOCOMO_DEFAULT_EXCLUDED,
        categories_seen=tuple(dict.fromkeys(q.category for q in questions)),
    )


def _is_locomo(document: Any) -> bool:
    return (
        isinstance(document, list)
        and bool(document)
        and all(isinstance(s, dict) and isinstance(s.get("conversation"), dict) and "qa" in s for s in document)
    )


def _looks_like_locomo(path: Path) -> bool:
    """A JSON list (not JSON lines) whose objects hold ``conversation`` and ``qa``."""
    with path.open(encoding="utf-8") as handle:
        head = handle.read(1)
        while head and head.isspace():
            head = handle.read(1)
    if head != "[":
        return False
    try:
        return _is_locomo(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError:
        return False


def bundled(name: str) -> Path | None:
    """The file of a bundled set (``app/evaluation/sets/<name>.jsonl``), None when there is none."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        return None
    candidate = resources.files("app.evaluation") / "sets" / f"{name}.jsonl"
    return Path(str(candidate)) if candidate.is_file() else None


def bundled_names() -> list[str]:
    folder = resources.files("app.evaluation") / "sets"
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(".jsonl") for p in folder.iterdir() if p.name.endswith(".jsonl"))


def load(path_or_name: str | Path) -> LabelledSet:
    """A file (LoCoMo JSON or JSONL, told apart by content) or the name of a bundled set."""
    path = Path(path_or_name)
    if not path.is_file():
        found = bundled(str(path_or_name))
        if found is None:
            names = ", ".join(bundled_names()) or "none"
            raise LabelledSetError(f"{path_or_name}: no such file, nor a bundled set (bundled: {names})")
        path = found
    try:
        return read_locomo(path) if _looks_like_locomo(path) else read_jsonl(path)
    except UnicodeDecodeError:
        raise LabelledSetError(f"{path.name}: not UTF-8 text") from None
