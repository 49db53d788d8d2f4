import asyncpg
import pytest

from app.embeddings.late import LateInteraction
from app.embeddings.protocol import Embedder
from app.engine.postgres.schema import driver_url
from bench.corpus import CorpusItem, build_corpus
from bench.cpu import CpuClock, postmaster_pid
from bench.report import comparison_lines
from bench.run import MODES, VARIANTS, Ingesting, ingest, question_calls
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
    # Both encodings in the same turns; the pair at once costs more than the vector alone.
    assert cases["encoding_late"]["p50"] > cases["encoding"]["p50"] > 0
    # New questions: the transformer's first vector case encodes each, so it costs more than its later ones.
    fetch = cases["fetch"]
    assert fetch["vector/none"]["bge-small"]["p50"] > fetch["vector/tag"]["bge-small"]["p50"]
    assert comparison_lines(results)[0] == "## Embedders compared at N = 200: wordllama and bge-small"
