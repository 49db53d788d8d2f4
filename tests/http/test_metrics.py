"""GET /metrics: Prometheus text that moves with real requests, bounded labels, behind the perimeter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.embeddings.measured import MeasuredEmbedder
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, MirrorOptions, PoolOptions
from app.engine.postgres.pool import Pools
from app.settings import Settings
from app.telemetry import scrape as scrape_module
from tests.support.engines import ClientFactory, app_client

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
ITEM = {"type": "learning", "text": "the staging database runs on port 5433", "kind": "fact", "confidence": 0.9}


def samples(text: str) -> Samples:
    """Every sample of an exposition by name and labels; the parse fails on text that is not Prometheus's."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(seen: Samples, name: str, **labels: str) -> float:
    return seen.get((name, frozenset(labels.items())), 0.0)


async def scrape(client: httpx.AsyncClient, **kwargs: Any) -> Samples:
    response = await client.get("/metrics", **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


async def test_counters_move_with_requests(client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scrape's bound on its backlog read is not what is asked here: a loaded machine once took
    # longer than its second (the tests below ask what a slow or absent database gives).
    monkeypatch.setattr(scrape_module, "READ_TIMEOUT_S", 60.0)
    before = await scrape(client)
    assert (await client.post("/v1/store", json=ITEM)).status_code == 201
    assert (await client.post("/v1/store", json=ITEM)).status_code == 200  # a replay: not stored again
    fetched = await client.post("/v1/fetch", json={"query": "staging database", "mode": "keyword", "limit": 3})
    assert fetched.status_code == 200 and fetched.json()["hits"]
    item_id = fetched.json()["hits"][0]["id"]
    forgotten = await client.post("/v1/forget", json={"ids": [item_id]})
    assert forgotten.json()["forgotten"] == 1
    after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    store = {"method": "POST", "route": "/v1/store"}
    assert moved("engram_http_requests_total", **store, status="201") == 1
    assert moved("engram_http_requests_total", **store, status="200") == 1
    assert moved("engram_http_request_duration_seconds_count", **store) == 2
    assert moved("engram_http_requests_total", method="GET", route="/metrics", status="200") == 1
    assert moved("engram_items_stored_total") == 1
    assert moved("engram_items_forgotten_total") == 1
    assert moved("engram_fetch_duration_seconds_count", mode="keyword") == 1
    assert moved("engram_fetch_duration_seconds_count", mode="hybrid") == 0
    # Statements counted by the query module that planned them.
    assert moved("engram_db_statement_duration_seconds_count", family="writes") >= 3
    assert moved("engram_db_statement_duration_seconds_count", family="keyword") >= 1
    # Read as the scrape asks: the pools, and the backlog from a database that answers.
    assert value(after, "engram_database_up") == 1
    assert ("engram_vector_backlog", frozenset()) in after
    for pool in ("custom", "generic"):
        assert value(after, "engram_db_pool_max_connections", pool=pool) > 0
        assert ("engram_db_pool_connections", frozenset({("pool", pool), ("state", "idle")})) in after
        assert ("engram_db_pool_waiting", frozenset({("pool", pool)})) in after


async def test_the_sketches_a_filtered_search_copies_into_memory_are_gauged(database_url: str, embedder: Any) -> None:
    """A vector search under a tag the statistics bound to few items has the tag's sketches read into the
    process's memory, in the background (app/engine/postgres/mirror.py): the scrape says how many keys
    and bytes."""
    every_key = EngineOptions(mirror=MirrorOptions(floor=0))  # a key of a dozen items copied too
    engine = await PostgresEngine.connect(database_url, embedder, options=every_key)
    async with app_client(engine) as client:
        tagged = [{**ITEM, "text": f"the tides turn at {n}", "meta": {"tags": ["tides"]}} for n in range(12)]
        assert (await client.post("/v1/store_many", json={"items": tagged})).status_code == 200
        await engine.finish_indexing()  # the sketches filed
        await engine.gather_statistics()  # the tag bound to few items
        before = await scrape(client)
        search = {"query": "when do the tides turn", "mode": "vector", "limit": 5, "filter": {"tags_any": ["tides"]}}
        seen = before
        for _ in range(250):  # the copy is read in the background: the first searches scan in PostgreSQL
            assert (await client.post("/v1/fetch", json=search)).status_code == 200
            seen = await scrape(client)
            if value(seen, "engram_sketch_copies_bytes") > 0:
                break
            await asyncio.sleep(0.02)
    assert value(before, "engram_sketch_copies") == 0
    assert value(seen, "engram_sketch_copies") == 1
    assert value(seen, "engram_sketch_copies_bytes") >= 12 * (8 + 40 + 8)  # a seq, an id, a sketch each


async def test_unknown_routes_are_one_label_value(client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    paths = [f"/v1/items/{n}" for n in range(5)] + ["/wp-admin/setup.php", "/v1/fetch/", "/%7Bid%7D"]
    for path in paths:
        assert (await client.get(path)).status_code == 404
    assert (await client.request("BREW", "/v1/fetch")).status_code == 405
    text = (await client.get("/metrics")).text
    after = samples(text)
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert value(after, "engram_http_requests_total", **unmatched) - value(
        before, "engram_http_requests_total", **unmatched
    ) == len(paths)
    assert value(after, "engram_http_requests_total", method="other", route="/v1/fetch", status="405") >= 1
    routes = {dict(labels).get("route") for name, labels in after if name == "engram_http_requests_total"}
    assert not {path for path in paths if path in routes}
    assert "wp-admin" not in text and "BREW" not in text
    assert all(route == "unmatched" or route.startswith(("/v1/", "/metrics", "/openapi.json")) for route in routes)


async def test_metrics_are_behind_the_perimeter(make_client: ClientFactory) -> None:
    async with make_client(api_keys="boot") as client:
        refused = await client.get("/metrics")
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
        assert "engram_" not in refused.text
        assert (await client.post("/v1/fetch", json={})).status_code == 401
        seen = await scrape(client, headers={"authorization": "Bearer boot"})
        # Refused before routing, and still named by the route it was refused at.
        assert value(seen, "engram_http_requests_total", method="GET", route="/metrics", status="401") >= 1
        assert value(seen, "engram_http_requests_total", method="POST", route="/v1/fetch", status="401") >= 1
        # A key of one namespace would see counts of all: refused.
        made = await client.post(
            "/v1/keys",
            json={"name": "reader", "role": "read", "reach": {"at": "team:acme"}},
            headers={"authorization": "Bearer boot"},
        )
        scoped = {"authorization": f"Bearer {made.json()['secret']}"}
        assert (await client.get("/metrics", headers=scoped)).status_code == 403


async def test_public_metrics_need_no_key(make_client: ClientFactory) -> None:
    async with make_client(api_keys="boot", metrics_public=True) as client:
        await scrape(client)
        assert (await client.get("/v1/engine")).status_code == 401  # only /metrics is opened
        assert (await client.get("/metrics/")).status_code == 401


async def test_metrics_are_not_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    assert "/metrics" not in (await client.get("/openapi.json")).json()["paths"]


@asynccontextmanager
async def engine_on(port: int) -> AsyncIterator[PostgresEngine]:
    """An engine whose database is at ``port`` of this machine, its pools opened lazily (as the service's are)."""
    options = PoolOptions(connect_timeout_s=30.0)
    from app.engine.postgres.options import HNSWOptions

    pools = await Pools.open(f"postgresql://engram@127.0.0.1:{port}/engram", options, HNSWOptions())
    engine = PostgresEngine(pools, WordLlamaEmbedder(), cursor_secret=b"0" * 32)
    try:
        yield engine
    finally:
        await engine.close()


async def test_a_scrape_with_the_database_gone_still_answers() -> None:
    # Nothing listens: every connection is refused.
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    # A configured key is checked without the database (a key held there could not be).
    async with engine_on(port) as engine, app_client(engine, Settings(api_keys="boot")) as client:
        seen = await scrape(client, headers={"authorization": "Bearer boot"})
        assert value(seen, "engram_database_up") == 0
        assert not [name for name, _ in seen if name == "engram_vector_backlog"]
        assert value(seen, "engram_db_pool_connections", pool="custom", state="in_use") == 0
        assert (await client.get("/v1/health")).json()["state"] == "down"
        assert (await client.get("/v1/engine")).status_code == 401


async def test_a_scrape_does_not_wait_on_a_database_that_never_answers() -> None:
    # A server that accepts connections and says nothing: the connect would wait its 30 s.
    held: list[asyncio.StreamWriter] = []
    silent = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        async with engine_on(port) as engine, app_client(engine, Settings(metrics_public=True)) as client:
            seen = await scrape(client)
            assert value(seen, "engram_database_up") == 0
            assert not [name for name, _ in seen if name == "engram_vector_backlog"]
    finally:
        for writer in held:
            writer.close()
        silent.close()


async def test_encoder_calls_are_counted_by_kind() -> None:
    embedder = MeasuredEmbedder(WordLlamaEmbedder())
    before = samples(_exposition())
    await embedder.embed(["one stored text", "another"])
    await embedder.embed_queries(["a question"])
    after = samples(_exposition())
    for kind, texts in (("documents", 2), ("queries", 1)):
        assert (
            value(after, "engram_embedder_calls_total", kind=kind, outcome="ok")
            - value(before, "engram_embedder_calls_total", kind=kind, outcome="ok")
            == 1
        )
        assert (
            value(after, "engram_embedder_texts_total", kind=kind)
            - value(before, "engram_embedder_texts_total", kind=kind)
            == texts
        )
        assert value(after, "engram_embedder_duration_seconds_count", kind=kind) > 0


def _exposition() -> str:
    from prometheus_client import REGISTRY, generate_latest

    return generate_latest(REGISTRY).decode()
