"""A scoped key never learns anything from outside its reach, on any route: a property over random worlds.

Each example is a random namespace tree of items, a key with a random reach and role, and a
random request reach; every read route is called with the key and every id, text, count and
facet value in the answers is checked against what the key and the request both admit. A
forget by the key must leave every item outside its reach in place. The same property, run
against a deliberately weakened enforcement, must find the leak. It holds for the MCP tools too,
called with the same key through ``/mcp`` by the SDK's own client.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app.contract.errors import catalogue
from app.contract.namespaces import Namespace, Reach
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres.engine import PostgresEngine
from app.engine.protocol import MemoryEngine
from app.engine.reference import ReferenceEngine
from app.engine.scoped import ScopedEngine
from app.main import create_app
from app.settings import Settings
from tests.support.engines import truncate

SEGMENTS = ["team:a", "team:b", "user:a", "user:b", "agent:a"]
WORDS = ["apple", "river", "stone", "green", "cloud"]
BOOT = {"authorization": "Bearer boot"}

namespaces = st.lists(st.sampled_from(SEGMENTS), max_size=3, unique=True).map("/".join)
reaches = st.builds(
    lambda at, inherit, descendants: {"at": at or "root", "inherit": inherit, "descendants": descendants},
    namespaces,
    st.booleans(),
    st.booleans(),
)


@dataclass
class World:
    items: list[tuple[str, str, str]]  # namespace, text, tag
    key_reach: dict[str, Any]
    role: str
    request_reach: dict[str, Any] | None


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """Items anywhere in a small tree, a key, and a request reach: none, anywhere, or below the key's."""
    key_reach = draw(reaches)
    below = draw(namespaces)
    inside = "/".join(part for part in (key_reach["at"].removeprefix("root"), below) if part) or "root"
    request_reach = draw(
        st.none()
        | reaches
        | st.fixed_dictionaries({"at": st.just(inside), "inherit": st.booleans(), "descendants": st.booleans()})
    )
    texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
    items = draw(
        st.lists(
            st.tuples(namespaces, texts, st.sampled_from("xy")),
            min_size=1,
            max_size=12,
            unique_by=lambda item: (item[0], item[1]),
        )
    )
    return World(items, key_reach, draw(st.sampled_from(["read", "write", "admin"])), request_reach)


def admits(reach: dict[str, Any] | None, namespace: str) -> bool:
    return reach is None or Reach(**reach).admits(Namespace.parse(namespace))


Call = Callable[[str, dict[str, Any]], Awaitable[tuple[int, Any]]]
"""A route called with the probe key: its status and its JSON."""
KeyCalls = Callable[[str], contextlib.AbstractAsyncContextManager[Call]]
STATUS = {entry.code: entry.http_status for entry in catalogue()}


def over_rest(client: httpx.AsyncClient) -> KeyCalls:
    @contextlib.asynccontextmanager
    async def calls(secret: str) -> AsyncIterator[Call]:
        async def call(route: str, body: dict[str, Any]) -> tuple[int, Any]:
            response = await client.post(route, json=body, headers={"authorization": f"Bearer {secret}"})
            return response.status_code, response.json()

        yield call

    return calls


def over_mcp(app: FastAPI) -> KeyCalls:
    """Each route as its MCP tool, through ``/mcp``; a refusal has the status of its envelope's code."""

    @contextlib.asynccontextmanager
    async def calls(secret: str) -> AsyncIterator[Call]:
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://engram.test",
            headers={"authorization": f"Bearer {secret}"},
        )
        async with http, Client(streamable_http_client("http://engram.test/mcp", http_client=http)) as client:

            async def call(route: str, body: dict[str, Any]) -> tuple[int, Any]:
                result = await client.call_tool(route.removeprefix("/v1/"), body)
                answer = result.structured_content
                return (STATUS[answer["code"]] if result.is_error else 200), answer

            yield call

    return calls


async def check_world(client: httpx.AsyncClient, world: World, key_calls: KeyCalls | None = None) -> None:
    """Store the world's items, make the key, call every route with it, and check each answer."""
    ids: dict[str, str] = {}
    for namespace, text, tag in world.items:
        item = {"type": "learning", "text": text, "kind": "fact", "confidence": 0.5}
        item["meta"] = {"namespace": namespace, "tags": [tag]} if namespace else {"tags": [tag]}
        stored = await client.post("/v1/store", json=item, headers=BOOT)
        ids[stored.json()["id"]] = namespace
    made = await client.post(
        "/v1/keys", json={"name": "probe", "role": world.role, "reach": world.key_reach}, headers=BOOT
    )
    async with (key_calls or over_rest(client))(made.json()["secret"]) as call:
        await check_calls(client, world, ids, call)


async def check_calls(client: httpx.AsyncClient, world: World, ids: dict[str, str], call: Call) -> None:
    everything = Reach(**world.key_reach).node.is_root and world.key_reach["descendants"]
    visible = {i for i, ns in ids.items() if everything or admits(world.key_reach, ns)}
    narrowed = {i for i in visible if admits(world.request_reach, ids[i])}
    names_outside = (
        world.request_reach is not None
        and not everything
        and not admits(world.key_reach, Reach(**world.request_reach).node.path)
    )

    def within(found: set[str], allowed: set[str], what: str) -> None:
        leaked = found - allowed
        assert not leaked, f"{what} leaked {[ids.get(i, i) for i in leaked]}"

    request_filter = {"reach": world.request_reach} if world.request_reach else {}
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("/v1/list", {"limit": 1000, "filter": request_filter}),
        *[
            ("/v1/fetch", {"query": " ".join(WORDS), "mode": mode, "limit": 100, "filter": {**request_filter, **extra}})
            for mode in ("keyword", "vector", "hybrid")
            for extra in ({}, {"tags_any": ["x"]})
        ],
        ("/v1/recall", {"question": " ".join(WORDS), "limit": 100, "filter": request_filter}),
        *[("/v1/explore", {"facet": f, "limit": 500, "filter": request_filter}) for f in ("namespace", "tag", "kind")],
    ]
    for route, body in bodies:
        status, answer = await call(route, body)
        if names_outside:
            assert status == 403, (route, answer)
            continue
        assert status == 200, (route, answer)
        if route == "/v1/explore":
            assert answer["total"] == len(narrowed), f"explore counts {answer['total']}, reachable {len(narrowed)}"
            if body["facet"] == "namespace":
                shown = {b["value"] for b in answer["buckets"]}
                assert shown <= {ids[i] or "root" for i in narrowed}, f"explore shows {shown}"
            continue
        hits = answer.get("items") or answer.get("hits") or answer.get("citations") or []
        within({hit["id"] for hit in hits}, narrowed, route)
        if route == "/v1/list":
            assert {hit["id"] for hit in hits} == narrowed, "list misses reachable items"
    get_reach = {"reach": world.request_reach} if world.request_reach else {}
    status, got = await call("/v1/get", {"ids": list(ids), **get_reach})
    if names_outside:
        assert status == 403
    else:
        within({hit["id"] for hit in got["hits"]}, narrowed if world.request_reach else visible, "/v1/get")
    # Destructive last: a forget by the key leaves everything outside what it may write.
    writable = {i for i in ids if everything or admits({**world.key_reach, "inherit": False}, ids[i])}
    for body in ({"ids": list(ids)}, {"filter": {"tags_any": ["x", "y"]}}):
        status, answer = await call("/v1/forget", body)
        assert status == (200 if world.role == "admin" else 403), answer
        left = await client.post("/v1/list", json={"limit": 1000}, headers=BOOT)
        gone = set(ids) - {hit["id"] for hit in left.json()["items"]}
        within(gone, writable, "/v1/forget")


Opener = Callable[[], contextlib.AbstractAsyncContextManager[MemoryEngine]]


def run_property(open_engine: Opener, examples: int, *, shrink: bool = True, mcp: bool = False) -> None:
    @settings(
        max_examples=examples,
        phases=list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(world=worlds())
    def scoped_keys_never_leak(world: World) -> None:
        async def once() -> None:
            async with open_engine() as engine:

                async def given_engine(_: Settings) -> MemoryEngine:
                    return engine

                app = create_app(Settings(api_keys="boot"), engine_factory=given_engine)
                async with app.router.lifespan_context(app):
                    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
                    async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
                        await check_world(client, world, over_mcp(app) if mcp else None)

        asyncio.run(once())

    scoped_keys_never_leak()


@pytest.fixture
def open_engine(request: pytest.FixtureRequest, embedder: WordLlamaEmbedder) -> Opener:
    if request.param == "reference":

        @contextlib.asynccontextmanager
        async def reference() -> AsyncIterator[MemoryEngine]:
            yield ReferenceEngine(embedder)

        return reference
    url = request.getfixturevalue("database_url")

    @contextlib.asynccontextmanager
    async def postgres() -> AsyncIterator[MemoryEngine]:
        engine = await PostgresEngine.connect(url, embedder)
        try:
            await truncate(engine)
            yield engine
        finally:
            await engine.close()

    return postgres


@pytest.mark.parametrize("open_engine", ["reference", "postgres"], indirect=True)
def test_a_scoped_key_never_sees_outside_its_reach(open_engine: Opener) -> None:
    run_property(open_engine, examples=60)


@pytest.mark.parametrize("open_engine", ["reference", "postgres"], indirect=True)
def test_a_scoped_key_never_sees_outside_its_reach_over_mcp(open_engine: Opener) -> None:
    run_property(open_engine, examples=30, mcp=True)


@pytest.mark.parametrize("open_engine", ["reference"], indirect=True)
def test_the_property_finds_a_weakened_check_over_mcp(open_engine: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tools call the engine as the routes do, so a weakened ``get`` leaks over MCP too, and is caught."""

    async def unfiltered_get(self: ScopedEngine, request: Any) -> Any:
        self._access.check_named(request.reach)
        return await self._engine.get(request)

    monkeypatch.setattr(ScopedEngine, "get", unfiltered_get)
    with pytest.raises(ExceptionGroup) as caught:  # raised within the SDK client's task group
        run_property(open_engine, examples=200, shrink=False, mcp=True)
    assert caught.group_contains(AssertionError, match="/v1/get leaked")


@pytest.mark.parametrize("open_engine", ["reference"], indirect=True)
def test_the_property_finds_a_weakened_check(open_engine: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    """``get`` that forgets to drop outside ids: the property must catch it."""

    async def unfiltered_get(self: ScopedEngine, request: Any) -> Any:
        self._access.check_named(request.reach)
        return await self._engine.get(request)

    monkeypatch.setattr(ScopedEngine, "get", unfiltered_get)
    with pytest.raises(AssertionError, match="/v1/get leaked"):
        run_property(open_engine, examples=200, shrink=False)


@pytest.mark.parametrize("open_engine", ["postgres"], indirect=True)
def test_the_property_finds_sql_that_drops_the_keys_reach(open_engine: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PostgreSQL filter without the key's reach: every read route leaks, and the property says so."""
    monkeypatch.setattr("app.engine.postgres.filters.ScopedFilter", type("NoFilterIsScoped", (), {}))
    with pytest.raises(AssertionError, match=r"leaked|explore counts|explore shows"):
        run_property(open_engine, examples=200, shrink=False)
