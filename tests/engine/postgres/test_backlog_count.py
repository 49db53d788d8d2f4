"""Which writes count the vector backlog (indexer.BacklogCount), and that a write counting it past
the limit still indexes until it is within."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.indexer import COUNT_EVERY, BacklogCount
from tests.engine.postgres.support import learning
from tests.engine.postgres.test_indexer import quiet_engine


def test_a_count_is_due_once_every_so_many_vectors_queued() -> None:
    count = BacklogCount(every=3)
    assert [count.due(1) for _ in range(7)] == [False, False, True, False, False, True, False]
    assert count.due(0) is False
    assert count.due(3) is True, "a batch of as many as the period counts at once"


@pytest.fixture
async def limited(database_url: str, embedder: Any) -> AsyncIterator[PostgresEngine]:
    """No background indexer; a write that counts more than 10 queued indexes until it does not."""
    async for engine in quiet_engine(database_url, embedder, 10):
        yield engine


async def test_one_item_writes_keep_the_backlog_within_the_limit_and_one_period(limited: PostgresEngine) -> None:
    for n in range(3 * COUNT_EVERY):
        await limited.store(learning(f"one at a time {n}"))
        assert await limited.vector_backlog() <= 10 + COUNT_EVERY
    # The last write counted (the process queued a whole period since the count before).
    assert await limited.vector_backlog() <= 10
