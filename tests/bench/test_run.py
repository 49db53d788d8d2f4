from app.embeddings.late import LateInteraction
from app.embeddings.protocol import Embedder
from bench.run import question_calls


async def test_a_question_is_encoded_as_a_late_interaction_service_encodes_it(embedder: Embedder) -> None:
    late = LateInteraction(threads=1)
    questions = ["where did Mirela move last spring?", "what does Tobiah cook on Sundays?"]
    calls = question_calls(embedder, late, questions)
    assert len(calls) == len(questions)
    assert all(late.remembered(q) is None for q in questions)
    for call in calls:
        assert await call() is None
    assert all(late.remembered(q) is not None for q in questions)  # each call made its token vectors
