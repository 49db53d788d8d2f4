"""The runner against the real app over the embedded PostgreSQL: store, ask, score, forget."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.evaluation import report
from app.evaluation.labelled import LabelledItem, LabelledSet, Question, read_jsonl, read_locomo
from app.evaluation.runner import EvaluationError, evaluate, subtree
from tests.support.engines import ClientFactory

TINY = Path(__file__).parent / "tiny.jsonl"
LOCOMO_LIKE = Path(__file__).parent / "locomo-like.json"


async def listed(client: httpx.AsyncClient, filter: dict[str, object]) -> list[dict[str, object]]:
    response = await client.post("/v1/list", json={"filter": filter, "limit": 1000})
    assert response.status_code == 200
    return response.json()["items"]


async def store_bystanders(client: httpx.AsyncClient) -> None:
    """Items a user keeps at the root and in a project of their own: an evaluation must not touch them."""
    for namespace in (None, "project:mine"):
        body = {"type": "learning", "text": "zanzibarine otter", "kind": "fact", "confidence": 1.0}
        if namespace:
            body["meta"] = {"namespace": namespace}
        assert (await client.post("/v1/store", json=body)).status_code == 201


async def test_rankings_come_back_for_every_question_and_mode_and_the_scratch_is_emptied(
    client: httpx.AsyncClient,
) -> None:
    await store_bystanders(client)
    labelled = read_jsonl(TINY)
    run = await evaluate(client, labelled, progress=False, scratch="project:eval-test1")

    assert run.modes == ("keyword", "vector", "hybrid")
    assert set(run.ids) == {"otter", "kettle", "lantern", "garden"}
    assert len(set(run.ids.values())) == 4
    assert [r.question.key for r in run.results] == ["q-otter", "q-kettle", "q-lantern", "q-garden"]
    for result in run.results:
        assert set(result.rankings) == {"keyword", "vector", "hybrid"}
        for ranking in result.rankings.values():
            assert ranking.ids and len(ranking.ids) == len(ranking.scores)
            assert set(ranking.ids) <= set(run.ids.values())  # never a bystander
    alice = {run.ids["kettle"], run.ids["lantern"]}
    kettle = next(r for r in run.results if r.question.key == "q-kettle")
    assert set(kettle.rankings["vector"].ids) == alice  # asked within user:alice only
    whole = next(r for r in run.results if r.question.key == "q-garden")
    assert len(whole.rankings["vector"].ids) == 4  # asked within the whole scratch

    assert run.forgotten == 4
    assert await listed(client, subtree("project:eval-test1")) == []
    assert len(await listed(client, {})) == 2


async def test_a_set_with_unique_words_scores_full_marks_in_keyword_and_hybrid(client: httpx.AsyncClient) -> None:
    run = await evaluate(client, read_jsonl(TINY), modes=["keyword", "hybrid"], progress=False)
    doc = report.document(run, (1, 5, 10))
    assert set(doc["modes"]) == {"keyword", "hybrid"}
    for mode in ("keyword", "hybrid"):
        for category in ("all", "exact", "named"):
            scores = doc["modes"][mode][category]
            assert scores["recall@1"] == scores["mrr"] == scores["ndcg@10"] == 1.0
        assert doc["modes"][mode]["all"]["count"] == 4
    assert (doc["set"], doc["items"], doc["questions"]) == ("tiny", 4, 4)
    # Only q-lantern has a gold answer; its top keyword hit is the lantern turn, which holds it.
    assert list(doc["answers"]) == ["all", "named"]
    answers = doc["answers"]["all"]
    assert answers["count"] == 1 and answers["top_hit_holds_gold"] == 1.0 and answers["words"] > 0
    assert "answers" in report.text(doc)
    assert report.check({"modes": {m: doc["modes"]["keyword"] for m in report.CHECKED_MODES}}, "recall@10") == []


async def test_a_question_whose_gold_is_not_ranked_scores_zero(client: httpx.AsyncClient) -> None:
    items = (
        LabelledItem("a", {"type": "learning", "text": "alpha walrus", "kind": "fact", "confidence": 1}),
        LabelledItem("b", {"type": "learning", "text": "beta heron", "kind": "fact", "confidence": 1}),
    )
    questions = (Question("q", "walrus", ("b",), "miss"),)
    run = await evaluate(client, LabelledSet(items, questions), modes=["keyword"], progress=False)
    assert run.results[0].rankings["keyword"].ids == (run.ids["a"],)  # only the item holding the word matches
    scores = report.document(run, (1, 10))["modes"]["keyword"]["miss"]
    assert scores["recall@10"] == scores["mrr"] == scores["ndcg@10"] == 0.0


async def test_a_refused_batch_ends_in_one_error_and_what_was_stored_is_forgotten(client: httpx.AsyncClient) -> None:
    good = [
        LabelledItem(f"k{i}", {"type": "learning", "text": f"note {i}", "kind": "fact", "confidence": 1})
        for i in range(100)
    ]
    bad = LabelledItem("blank", {"type": "learning", "text": " ", "kind": "fact", "confidence": 1})
    labelled = LabelledSet((*good, bad), (Question("q", "note", ("k1",)),))
    with pytest.raises(EvaluationError, match=r"storing items blank\.\.blank: POST /v1/store_many answered 400"):
        await evaluate(client, labelled, progress=False, scratch="project:eval-test2")
    assert await listed(client, subtree("project:eval-test2")) == []
    assert await listed(client, {}) == []


async def test_keep_leaves_the_items_in_the_scratch(client: httpx.AsyncClient) -> None:
    run = await evaluate(client, read_jsonl(TINY), modes=["keyword"], keep=True, progress=False)
    assert run.forgotten is None
    assert len(await listed(client, subtree(run.scratch))) == 4


async def test_a_mode_the_service_lacks_is_refused_before_anything_is_stored(client: httpx.AsyncClient) -> None:
    with pytest.raises(EvaluationError, match="does not offer semantic fetch"):
        await evaluate(client, read_jsonl(TINY), modes=["semantic"], progress=False)
    assert await listed(client, {}) == []


async def test_a_refused_key_is_one_error(make_client: ClientFactory) -> None:
    async with make_client(api_keys="right") as guarded:
        guarded.headers["Authorization"] = "Bearer wrong"
        with pytest.raises(EvaluationError, match="GET /v1/engine answered 401: unauthorized"):
            await evaluate(guarded, read_jsonl(TINY), progress=False)


async def test_a_refused_question_stops_the_asking_and_the_scratch_is_still_emptied(client: httpx.AsyncClient) -> None:
    labelled = read_jsonl(TINY)
    too_long = Question("q-long", "word " * 1000, ("otter",), "long")
    labelled = LabelledSet(labelled.items, (*labelled.questions, too_long))
    with pytest.raises(EvaluationError, match=r"asking q-long \(keyword\): POST /v1/fetch answered 400"):
        await evaluate(client, labelled, progress=False, scratch="project:eval-test3")
    assert await listed(client, subtree("project:eval-test3")) == []


async def test_no_answers_skips_recall(client: httpx.AsyncClient) -> None:
    run = await evaluate(client, read_jsonl(TINY), modes=["keyword"], progress=False, answers=False)
    assert all(r.answered is None for r in run.results)
    doc = report.document(run, (1,))
    assert "answers" not in doc and "answers" not in report.text(doc)


async def test_the_answers_report_counts_when_questions_dated_from_their_relative_evidence(
    client: httpx.AsyncClient,
) -> None:
    # "When did Tobiah paddle across the reservoir?": the evidence says "on Sunday", said on Monday 15 March 2021.
    run = await evaluate(client, read_locomo(LOCOMO_LIKE), modes=["hybrid"], progress=False)
    paddle = next(r for r in run.results if r.question.text.startswith("When did Tobiah paddle"))
    assert paddle.answered is not None and paddle.answered.answer.startswith("March 14, 2021 \u2014 Tobiah:")
    doc = report.document(run, (1,))
    assert (doc["answers"]["all"]["when_relative"], doc["answers"]["all"]["when_dated"]) == (1, 1.0)
    assert "when questions whose evidence says a relative time: 1, answered with its date: 1.000" in report.text(doc)
    # Other questions and other categories add nothing to the count.
    assert "when_relative" not in doc["answers"]["temporal"]
