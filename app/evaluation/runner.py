"""Stores a labelled set into a scratch namespace of a service, asks its questions, and forgets it all.

Everything goes through the public HTTP routes, so what is measured is what a client gets.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
from tqdm import tqdm

from app.evaluation.labelled import LabelledSet, Question

STORE_BATCH = 100
"""The most items POST /v1/store_many takes in one call (contract §9)."""

DEFAULT_CONCURRENCY = 4


class EvaluationError(Exception):
    """A failure that ends the command with one line: an unreachable service, a refusal."""


@dataclass(frozen=True)
class Ranking:
    """What one fetch answered, best first."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]


ANSWER_LIMIT = 10
"""Citations asked of each recall: LoCoMo's answers are measured over the top 10 hits, as the rankings are."""


@dataclass(frozen=True)
class Answered:
    """What recall answered a question, beside the baseline it must beat: the text of the top keyword hit."""

    answer: str
    top_keyword_hit: Annotated[str, "empty when keyword fetch found nothing"]


@dataclass(frozen=True)
class QuestionResult:
    question: Question
    gold_ids: Annotated[tuple[str, ...], "the service's ids of the gold items"]
    rankings: dict[str, Ranking]
    answered: Annotated[Answered | None, "None when answers were not asked or the question has no gold answer"] = None


@dataclass
class Run:
    """Everything one evaluation saw; the report and the details file are drawn from it."""

    labelled: LabelledSet
    scratch: str
    modes: tuple[str, ...]
    depth: Annotated[int, "hits read per question"]
    descriptor: dict[str, Any]
    answers: Annotated[bool, "also recall each question that has a gold answer"] = True
    ids: Annotated[dict[str, str], "item key -> the id the service gave it"] = field(default_factory=dict)
    results: list[QuestionResult] = field(default_factory=list)
    forgotten: int | None = None


def scratch_namespace() -> str:
    """A namespace no one else uses: the run's items and questions live below it."""
    return f"project:eval-{secrets.token_hex(6)}"


def _below(scratch: str, relative: str | None) -> str:
    return f"{scratch}/{relative}" if relative else scratch


def subtree(namespace: str) -> dict[str, Any]:
    """A filter admitting ``namespace`` and what lies below it, never its ancestors (the root among them)."""
    return {"reach": {"at": namespace, "inherit": False, "descendants": True}}


def _placed(body: dict[str, Any], scratch: str) -> dict[str, Any]:
    meta = dict(body.get("meta") or {})
    meta["namespace"] = _below(scratch, meta.get("namespace"))
    return {**body, "meta": meta}


async def _call(client: httpx.AsyncClient, method: str, route: str, body: Any = None) -> Any:
    """One request; a transport failure or an error envelope becomes an EvaluationError naming the route."""
    try:
        response = await client.request(method, route, json=body)
    except httpx.HTTPError as error:
        raise EvaluationError(f"cannot reach {client.base_url}: {error or type(error).__name__}") from None
    if response.is_success:
        return response.json()
    try:
        message = response.json().get("message") or response.reason_phrase
    except ValueError:
        message = response.reason_phrase
    raise EvaluationError(f"{method} {route} answered {response.status_code}: {message}")


async def describe(client: httpx.AsyncClient) -> dict[str, Any]:
    """GET /v1/engine: the fetch modes the service offers (and, when it says so, its embedder)."""
    descriptor = await _call(client, "GET", "/v1/engine")
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("fetch_modes"), list):
        raise EvaluationError(f"{client.base_url} does not answer GET /v1/engine like an engram service")
    return descriptor


def _bar(total: int, label: str, progress: bool) -> tqdm[Any]:
    return tqdm(total=total, desc=label, unit="", file=sys.stderr, disable=not progress, leave=False)


async def store(client: httpx.AsyncClient, run: Run, *, progress: bool) -> None:
    items = run.labelled.items
    with _bar(len(items), "storing", progress) as bar:
        for start in range(0, len(items), STORE_BATCH):
            batch = items[start : start + STORE_BATCH]
            body = {"items": [_placed(item.body, run.scratch) for item in batch]}
            try:
                answer = await _call(client, "POST", "/v1/store_many", body)
            except EvaluationError as error:
                raise EvaluationError(f"storing items {batch[0].key}..{batch[-1].key}: {error}") from None
            for item, receipt in zip(batch, answer["receipts"], strict=True):
                run.ids[item.key] = receipt["id"]
            bar.update(len(batch))


async def _ask(client: httpx.AsyncClient, run: Run, question: Question, mode: str) -> Ranking:
    body = {
        "query": question.text,
        "mode": mode,
        "filter": subtree(_below(run.scratch, question.namespace)),
        "limit": run.depth,
    }
    try:
        answer = await _call(client, "POST", "/v1/fetch", body)
    except EvaluationError as error:
        raise EvaluationError(f"asking {question.key} ({mode}): {error}") from None
    hits = answer["hits"]
    return Ranking(ids=tuple(h["id"] for h in hits), scores=tuple(float(h["score"]) for h in hits))


async def _recall(client: httpx.AsyncClient, run: Run, question: Question) -> Answered:
    """POST /v1/recall within the question's namespace, and the first keyword hit's text as the baseline."""
    where = subtree(_below(run.scratch, question.namespace))
    try:
        recalled = await _call(
            client, "POST", "/v1/recall", {"question": question.text, "filter": where, "limit": ANSWER_LIMIT}
        )
        top = await _call(
            client, "POST", "/v1/fetch", {"query": question.text, "mode": "keyword", "filter": where, "limit": 1}
        )
    except EvaluationError as error:
        raise EvaluationError(f"asking {question.key} (recall): {error}") from None
    return Answered(answer=recalled["answer"], top_keyword_hit=top["hits"][0]["text"] if top["hits"] else "")


def _answers_asked(run: Run, question: Question) -> bool:
    return run.answers and question.answer is not None


async def ask(client: httpx.AsyncClient, run: Run, *, concurrency: int, progress: bool) -> None:
    questions = run.labelled.questions
    gate = asyncio.Semaphore(concurrency)
    calls = len(questions) * len(run.modes) + sum(1 for q in questions if _answers_asked(run, q))
    with _bar(calls, "asking", progress) as bar:

        async def one(question: Question) -> QuestionResult:
            rankings = {}
            for mode in run.modes:
                async with gate:
                    rankings[mode] = await _ask(client, run, question, mode)
                bar.update(1)
            answered = None
            if _answers_asked(run, question):
                async with gate:
                    answered = await _recall(client, run, question)
                bar.update(1)
            gold = tuple(dict.fromkeys(run.ids[key] for key in question.gold))
            return QuestionResult(question=question, gold_ids=gold, rankings=rankings, answered=answered)

        # A task group, not gather: one failed question cancels the others before the clean-up runs.
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(q)) for q in questions]
        except* EvaluationError as failed:
            raise failed.exceptions[0] from None
        run.results = [task.result() for task in tasks]


async def forget(client: httpx.AsyncClient, scratch: str) -> int:
    """Remove everything in the scratch namespace; the count of items removed."""
    answer = await _call(client, "POST", "/v1/forget", {"filter": subtree(scratch)})
    return int(answer["forgotten"])


def choose_modes(requested: Sequence[str] | None, offered: Sequence[str]) -> tuple[str, ...]:
    """The requested modes (every offered one by default); a mode the service lacks is an error."""
    if requested is None:
        return tuple(offered)
    missing = [m for m in requested if m not in offered]
    if missing:
        raise EvaluationError(f"the service does not offer {', '.join(missing)} fetch (it offers {', '.join(offered)})")
    return tuple(dict.fromkeys(requested))


async def evaluate(
    client: httpx.AsyncClient,
    labelled: LabelledSet,
    *,
    modes: Sequence[str] | None = None,
    depth: int = 10,
    concurrency: int = DEFAULT_CONCURRENCY,
    keep: bool = False,
    progress: bool = True,
    scratch: str | None = None,
    settle: Callable[[], Awaitable[None]] | None = None,
    answers: bool = True,
) -> Run:
    """Store, ask every question in every mode (and recall it, when ``answers`` and it has a gold answer),
    and (unless ``keep``) forget the scratch namespace.

    ``settle`` is awaited between storing and asking (a private service gathers its statistics there).

    The forgetting runs in a ``finally``: a failure or a Ctrl-C part way still leaves the service
    as it was found.
    """
    descriptor = await describe(client)
    run = Run(
        labelled=labelled,
        scratch=scratch or scratch_namespace(),
        modes=choose_modes(modes, descriptor["fetch_modes"]),
        depth=depth,
        descriptor=descriptor,
        answers=answers,
    )
    try:
        await store(client, run, progress=progress)
        if settle is not None:
            await settle()
        await ask(client, run, concurrency=concurrency, progress=progress)
    finally:
        if not keep:
            try:
                run.forgotten = await forget(client, run.scratch)
            except EvaluationError as error:
                raise EvaluationError(f"{error}; the items stay in namespace {run.scratch}") from None
    return run
