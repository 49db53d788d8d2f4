"""The envelope checks pass against a faithful service and catch a catalogue that lies."""

from __future__ import annotations

from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.support import failed, outcomes_against


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["envelope"])) == []
