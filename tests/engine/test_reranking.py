"""The optional re-ranking stage: the bundled cross-encoder, the order it makes, hybrid pages under it."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

import pytest

from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.requests import FetchRequest, Hit, RecallRequest
from app.embeddings.protocol import Embedder
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, PoolOptions
from app.engine.reranking import CrossEncoder, Reranker
from app.settings import Settings


@pytest.fixture(scope="module")
def cross_encoder() -> CrossEncoder:
    return CrossEncoder()


def learning(text: str) -> StoredItem:
    return ITEM_ADAPTER.validate_python({"type": "learning", "text": text, "kind": "fact", "confidence": 0.5}).checked()


def hit(number: int, text: str, score: float) -> Hit:
    return Hit(id=f"id{number}", kind="learning", text=text, meta={}, score=score)


def test_it_judges_the_passage_that_answers_above_one_that_shares_nothing(cross_encoder: CrossEncoder) -> None:
    question = "Where does the user live now?"
    texts = ["I live in Lisbon now, since March 2024.", "Deploys are on Thursdays."]
    lives, deploys = cross_encoder.score(question, texts)
    assert lives > deploys + 3


def test_a_pairs_score_does_not_depend_on_the_pairs_beside_it(cross_encoder: CrossEncoder) -> None:
    """The int8 model's scales are taken over a whole run: each pair runs alone, so a page's order
    cannot change with the hits that happen to be judged with it."""
    question = "What is the capital of France?"
    texts = ["Paris is the capital of France.", "Bananas are yellow. " * 30, "France", "Lisbon is in Portugal."]
    together = cross_encoder.score(question, texts)
    assert together == [cross_encoder.score(question, [text])[0] for text in texts]


def test_pairs_are_judged_in_lanes_at_once_on_a_single_threaded_session() -> None:
    """Each pair is a task for the lanes, which run at the same time (a lane that ran alone would
    leave the barrier waiting), on a session of one thread, with the scores one lane gives."""
    question = "Where does the user live now?"
    texts = ["I live in Lisbon now.", "Deploys are on Thursdays.", "The cat sleeps.", "Lisbon is sunny."]
    one_lane = CrossEncoder(threads=1).score(question, texts)
    lanes = CrossEncoder(threads=2)
    runner = lanes._model.model
    assert runner.model.get_session_options().intra_op_num_threads == 1
    both_running = threading.Barrier(2, timeout=10)
    met: set[int] = set()
    run_alone = runner.onnx_embed

    def meeting_the_other_lane(query: str, documents: list[str], **kwargs: object) -> object:
        if threading.get_ident() not in met:
            met.add(threading.get_ident())
            both_running.wait()  # BrokenBarrierError unless the other lane is running at the same time
        return run_alone(query, documents, **kwargs)

    runner.onnx_embed = meeting_the_other_lane
    try:
        judged = lanes.score(question, texts)
    finally:
        del runner.onnx_embed
    assert len(met) == 2
    assert judged == one_lane


async def test_the_first_hits_take_the_judged_order_and_every_place_keeps_its_score(
    cross_encoder: CrossEncoder,
) -> None:
    hits = [
        hit(0, "Bananas are yellow and sweet.", 0.9),
        hit(1, "Paris is the capital of France.", 0.8),
        hit(2, "The Eiffel tower stands in Paris, the French capital.", 0.7),
        hit(3, "Capital gains are taxed in France.", 0.6),
    ]
    reordered = await Reranker(cross_encoder, depth=3).reorder("What is the capital of France?", hits)
    assert [h.id for h in reordered[:2]] == ["id1", "id2"] and reordered[2].id == "id0"
    assert reordered[3] == hits[3]  # past the depth: untouched
    assert [h.score for h in reordered] == [0.9, 0.8, 0.7, 0.6]  # scores still fall down the ranking
    assert await Reranker(cross_encoder, depth=3).reorder("q", hits[:1]) == hits[:1]


def test_settings_turn_it_on_and_off(cross_encoder: CrossEncoder) -> None:
    assert Settings().reranker == "none" and Reranker.from_settings(Settings()) is None
    stage = Reranker.from_settings(Settings(reranker="cross-encoder", rerank_depth=12))
    assert stage is not None and stage.depth == 12 and stage.model.name == "ms-marco-minilm-l-12-v2"
    with pytest.raises(ValueError, match="reranker"):
        Settings(reranker="colbert")


@pytest.fixture
async def reranking_engine(
    pg_engine: PostgresEngine, database_url: str, embedder: Embedder, cross_encoder: CrossEncoder
) -> AsyncIterator[PostgresEngine]:
    """A second engine on the test's clean database, re-ranking hybrid's first 8 hits."""
    options = EngineOptions(pool=PoolOptions(size=4))
    engine = await PostgresEngine.connect(database_url, embedder, options=options, reranker=Reranker(cross_encoder, 8))
    yield engine
    await engine.close()


# Items about the question's words, some answering it: fusion and the cross-encoder order them apart.
TEXTS = [
    "Paris is the capital of France.",
    "Which city is the capital of France? City memo 3 asks, city by city.",
    "Lyon is a large city in France, known for its food.",
    "The capital budget of the city was cut.",
    "France's government sits in its capital, Paris, on the Seine.",
    "Marseille is the oldest city of France.",
    "Capital letters begin the name of every French city.",
    "Berlin is the capital of Germany.",
    "The French capital hosts the Louvre.",
    "A city guide to France lists Paris, Lyon and Nice.",
    "Nice is a city on the French Riviera.",
    "The capital of Spain is Madrid.",
]


async def test_hybrid_pages_are_cut_from_one_reranked_order(
    pg_engine: PostgresEngine, reranking_engine: PostgresEngine, cross_encoder: CrossEncoder
) -> None:
    question = "Which city is the capital of France?"
    await pg_engine.store_many([learning(text) for text in TEXTS])
    whole = (await reranking_engine.fetch(FetchRequest(query=question, mode="hybrid", limit=12))).hits
    fused = (await pg_engine.fetch(FetchRequest(query=question, mode="hybrid", limit=12))).hits
    scores = cross_encoder.score(question, [h.text for h in fused[:8]])
    judged = dict(zip((h.id for h in fused[:8]), scores, strict=True))
    assert [h.id for h in whole[:8]] == sorted(judged, key=lambda item_id: -judged[item_id])
    assert [h.id for h in whole[:8]] != [h.id for h in fused[:8]]  # the stage changed the order
    assert whole[8:] == fused[8:]  # past the depth: the fused order
    assert [h.score for h in whole] == [h.score for h in fused]
    paged: list[Hit] = []
    cursor = None
    while True:
        page = await reranking_engine.fetch(FetchRequest(query=question, mode="hybrid", limit=3, cursor=cursor))
        paged += page.hits
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [h.id for h in paged] == [h.id for h in whole]
    # keyword and vector fetches are not re-ranked
    for mode in ("keyword", "vector"):
        plain = await pg_engine.fetch(FetchRequest(query=question, mode=mode, limit=12))
        assert await reranking_engine.fetch(FetchRequest(query=question, mode=mode, limit=12)) == plain


async def test_recall_cites_the_reranked_hits(pg_engine: PostgresEngine, reranking_engine: PostgresEngine) -> None:
    question = "Which city is the capital of France?"
    await pg_engine.store_many([learning(text) for text in TEXTS])
    first = (await reranking_engine.fetch(FetchRequest(query=question, mode="hybrid", limit=3))).hits
    answer = await reranking_engine.recall(RecallRequest(question=question, limit=3))
    assert [c.id for c in answer.citations] == [h.id for h in first]
