import asyncpg
import pytest

from app.embeddings.late import LateInteraction
from app.embeddings.protocol import Embedder
from app.engine.postgres.schema import driver_url
from bench.corpus import CorpusItem, QuerySet, build_corpus
from bench.cpu import CpuClock, postmaster_pid
from bench.report import comparison_lines
from bench.run import MODES, VARIANTS, Ingesting, ingest, new_questions, question_calls
from tests.support.cpu import spend_cpu
from tests.support.scratch import scratch


async def test_a_question_is_encoded_as_a_late_interaction_service_encodes_it(embedder: Embedder) -> None:
    late = LateInteraction(threads=1)
    questions = ["where did Mirela move last spring?", "what does Tobiah cook on Sundays?"]
    calls = question_calls(embedder, late, questions)
    assert len(calls) == len(questions)
    assert all(late.remembered(q) is None for q in questions)
    for call in calls:
        assert await call() is None
    assert all(late.remembered(q) is not None for q in questions)  # each call made its token vectors


def test_the_questions_asked_in_turn_are_new_to_both_services_and_each_asked_once() -> None:
    drawn = QuerySet(
        questions=["asked before", "fresh one", "fresh one", "fresh two", "fresh three"],
        tags=["t0", "t1", "t2", "t3", "t4"],
        subtrees=["s0", "s1", "s2", "s3", "s4"],
    )
    assert new_questions(drawn, {"asked before"}, 2) == [("fresh one", "t1", "s1"), ("fresh two", "t3", "s3")]
    every = new_questions(drawn, set(), 9)
    assert [q for q, _, _ in every] == ["asked before", "fresh one", "fresh two", "fresh three"]


class Busy:
    """A system whose store spends ``ms`` of this process's CPU an item."""

    def __init__(self, ms: float) -> None:
        self._ms = ms

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        spend_cpu(self._ms * len(batch) / 1000)
        return len(batch)


async def test_each_systems_turns_are_charged_the_cpu_spent_in_them_per_item(database_url: str) -> None:
    connection = await asyncpg.connect(driver_url(database_url))
    try:
        clock = CpuClock(await postmaster_pid(connection), [])
        settling = Busy(1.0)

        async def settled() -> None:  # work after the index: half as much again, charged to the settled figures
            await settling.store_batch(build_corpus(50))

        ingested = await ingest(
            [Ingesting("busy", Busy(3.0), until_settled=settled), Ingesting("idle", Busy(0.0))],
            build_corpus(400),
            rounds=2,
            clock=clock,
        )
    finally:
        await connection.close()
    busy, idle = ingested["busy"], ingested["idle"]
    assert sorted(busy["cpu_ms"]) == sorted(idle["cpu_ms"]) == ["harness", "postgres", "service"]
    assert busy["cpu_ms"]["harness"] >= 3.0 > idle["cpu_ms"]["harness"]
    assert busy["settled_cpu_ms"]["harness"] >= busy["cpu_ms"]["harness"] + 0.2  # 2 x 50 ms over 400 items
    assert "settled_cpu_ms" not in idle


@pytest.mark.slow
async def test_a_static_embedders_service_and_a_transformers_are_asked_in_turn_with_questions_new_to_both() -> None:
    """``--embedder wordllama --embedder bge-small`` in small: each measured, then both services asked every
    fetch case in turn, the transformer's two encodings timed beside the case that encodes its questions."""
    from bench.__main__ import measure_sizes

    with scratch("bench-embedders") as out:
        _, results = await measure_sizes([200], 20, 7, ["wordllama", "bge-small"], out / "runs", "test", quick=True)
    static, transformer = results
    assert "in_turn" not in static
    cases = transformer["in_turn"]
    assert cases["with"] == "wordllama" and cases["questions"] == 20
    assert set(cases["fetch"]) == {f"{m}/{v}" for m in MODES for v in VARIANTS}
    assert all(set(figures) == {"wordllama", "bge-small"} for figures in cases["fetch"].values())
    # Both encodings timed on every question, in the same turns as the case that encodes them. Which costs
    # more is for the run to report, not a test to assert: two timings on a shared machine can swap.
    assert cases["encoding"]["count"] == cases["encoding_late"]["count"] == 20
    assert cases["encoding"]["p50"] > 0 and cases["encoding_late"]["p50"] > 0
    assert all(f["count"] == 20 for figures in cases["fetch"].values() for f in figures.values())
    assert comparison_lines(results)[0] == "## Embedders compared at N = 200: wordllama and bge-small"
