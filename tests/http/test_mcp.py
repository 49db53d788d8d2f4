"""The MCP tools over streamable HTTP, against a live ``engram serve``, with the SDK's own client.

The tools carry the REST routes' schemas, answers and scope: a key sees over MCP exactly what it
sees over REST, and a key the perimeter refuses never reaches a tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from app.contract.items import StoreItem
from app.contract.requests import (
    ExploreRequest,
    FetchRequest,
    ForgetRequest,
    GetRequest,
    ListRequest,
    RecallRequest,
    StoreReceipt,
)
from tests.support.live import LiveServer, fingerprint, learning, live_server
from tests.support.mcp import answer, refusal
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

BOOT = "mcp-boot-key"
ALICE = "team:acme/user:alice"
BOB = "team:acme/user:bob"


@pytest.fixture(scope="module")
def served() -> Iterator[LiveServer]:
    with scratch("mcp") as tmp, live_server(tmp, api_key=BOOT) as server:
        yield server


@asynccontextmanager
async def tools(server: LiveServer, secret: str, statuses: list[int] | None = None) -> AsyncIterator[Client]:
    """The SDK's client on ``/mcp`` with ``secret`` as its bearer key; every response checked for credentials."""

    async def inspect(response: httpx2.Response) -> None:
        seen = (await response.aread()).decode("utf-8", "replace")
        server.leaks += [f"a credential in an MCP answer: {s[:6]}..." for s in server.secrets if s in seen]
        if statuses is not None:
            statuses.append(response.status_code)

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {secret}"}, timeout=60, event_hooks={"response": [inspect]}
    )
    async with http, Client(streamable_http_client(f"{server.base_url}/mcp", http_client=http)) as client:
        yield client


def schema_of(model: Any) -> dict[str, Any]:
    return {"type": "object", **TypeAdapter(model).json_schema()}


async def make_key(server: LiveServer, role: str, at: str, **reach: Any) -> str:
    """The secret of a ``role`` key at ``at`` alone (no ancestors), ``reach`` adding to that."""
    _, secret = await server.make_key(f"{role} at {at}", role, {"at": at, "inherit": False, **reach})
    return secret


async def test_the_tools_carry_the_routes_schemas_and_hints(served: LiveServer) -> None:
    async with tools(served, BOOT) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    models = {
        "store": StoreItem,
        "fetch": FetchRequest,
        "recall": RecallRequest,
        "get": GetRequest,
        "list": ListRequest,
        "explore": ExploreRequest,
        "forget": ForgetRequest,
    }
    for name, model in models.items():
        assert listed[name].input_schema == schema_of(model), name
        assert listed[name].description, name
    assert listed["store"].output_schema == {"type": "object", **StoreReceipt.model_json_schema(mode="serialization")}
    hints = {name: tool.annotations for name, tool in listed.items()}
    assert hints["forget"].destructive_hint is True and hints["forget"].read_only_hint is False  # type: ignore[union-attr]
    assert hints["forget_within"].destructive_hint is True  # type: ignore[union-attr]
    assert hints["restore"].read_only_hint is False and hints["restore"].destructive_hint is False  # type: ignore[union-attr]
    for read in ("fetch", "recall", "get", "list", "explore"):
        assert hints[read].read_only_hint is True, read  # type: ignore[union-attr]
    store = hints["store"]
    assert store.read_only_hint is False and store.destructive_hint is False and store.idempotent_hint is True  # type: ignore[union-attr]


async def test_store_fetch_recall_get_list_explore_forget(served: LiveServer) -> None:
    namespace = "team:round/user:trip"
    item = learning("the deploy window is friday afternoon", namespace=namespace, tags=["ops"])
    other = learning("the office plant needs water on tuesdays", namespace=namespace)
    async with tools(served, BOOT) as client, served.client() as rest:
        stored = await answer(client, "store", item)
        assert stored == {"id": fingerprint(item), "replayed": False}
        assert await answer(client, "store", item) == {"id": stored["id"], "replayed": True}
        receipts = await answer(client, "store_many", {"items": [other]})
        ids = [stored["id"], receipts["receipts"][0]["id"]]
        within = {"reach": {"at": namespace, "inherit": False}}
        for mode in ("keyword", "vector", "hybrid"):
            page = await answer(
                client, "fetch", {"query": "when is the deploy window?", "mode": mode, "limit": 5, "filter": within}
            )
            assert page["hits"][0]["id"] == ids[0], mode
        recalled = await answer(
            client, "recall", {"question": "when is the deploy window?", "limit": 2, "filter": within}
        )
        assert recalled["citations"][0]["id"] == ids[0] and recalled["answer"]
        got = await answer(client, "get", {"ids": [*ids, "0" * 40]})
        # The same JSON the route answers.
        assert got == (await rest.post("/v1/get", json={"ids": [*ids, "0" * 40]})).json()
        assert [hit["id"] for hit in got["hits"]] == ids
        listed = await answer(client, "list", {"limit": 10, "filter": within})
        assert [hit["id"] for hit in listed["items"]] == ids
        explored = await answer(client, "explore", {"facet": "tag", "limit": 5, "filter": within})
        assert explored["buckets"] == [{"value": "ops", "count": 1}] and explored["total"] == 2
        assert (await answer(client, "forget", {"ids": [ids[0]]}))["forgotten"] == 1
        assert (await answer(client, "forget", {"ids": [ids[0]]}))["forgotten"] == 0
        assert (await answer(client, "forget", {"filter": within}))["forgotten"] == 1
        assert (await answer(client, "get", {"ids": ids}))["hits"] == []


async def test_contract_errors_are_tool_errors_with_the_envelope(served: LiveServer) -> None:
    async with tools(served, BOOT) as client:
        blank = await refusal(client, "fetch", {"query": " ", "mode": "keyword", "limit": 5})
        assert blank["code"] == "invalid_request" and blank["message"] == "invalid request: query must not be blank"
        shape = await refusal(client, "fetch", {"mode": "sideways", "limit": 5})
        assert shape["code"] == "invalid_request" and shape["message"].startswith("invalid request: the body does not")
        assert {problem["field"] for problem in shape["details"]} == {"query", "mode"}
        empty = await refusal(client, "forget", {"filter": {}})
        assert empty["code"] == "invalid_request" and "empty filter" in empty["message"]
        with pytest.raises(MCPError) as unknown:  # no such tool: a protocol error, not a tool's
            await client.call_tool("create_key", {})
        assert unknown.value.message == "no tool 'create_key'"


async def test_a_scoped_key_sees_and_changes_only_its_reach(served: LiveServer) -> None:
    async with served.client() as rest:
        for text, namespace in [
            ("alice prefers green tea", ALICE),
            ("alice drafts on mondays", f"{ALICE}/agent:writer"),
            ("bob prefers green coffee", BOB),
            ("the team ships on fridays", "team:acme"),
        ]:
            assert (await rest.post("/v1/store", json=learning(text, namespace=namespace, tags=["shared"]))).is_success
    alice_admin = await make_key(served, "admin", ALICE, descendants=True)
    reader = await make_key(served, "read", ALICE, descendants=True)
    async with tools(served, alice_admin) as client:
        listed = await answer(client, "list", {"limit": 100, "filter": {"tags_any": ["shared"]}})
        assert {hit["text"] for hit in listed["items"]} == {"alice prefers green tea", "alice drafts on mondays"}
        for mode in ("keyword", "vector", "hybrid"):
            page = await answer(client, "fetch", {"query": "prefers green", "mode": mode, "limit": 50})
            assert {hit["meta"]["namespace"] for hit in page["hits"]} <= {ALICE, f"{ALICE}/agent:writer"}, mode
        explored = await answer(client, "explore", {"facet": "namespace", "limit": 10})
        assert {b["value"] for b in explored["buckets"]} == {ALICE, f"{ALICE}/agent:writer"}
        assert explored["total"] == 2
        recalled = await answer(client, "recall", {"question": "who prefers green?", "limit": 5})
        assert {c["meta"]["namespace"] for c in recalled["citations"]} <= {ALICE, f"{ALICE}/agent:writer"}
        outside = await refusal(client, "list", {"limit": 5, "filter": {"reach": {"at": BOB}}})
        assert (
            outside["code"] == "forbidden"
            and outside["message"] == f"forbidden: namespace '{BOB}' is outside this key's reach"
        )
        written = await refusal(client, "store", learning("not hers", namespace=BOB))
        assert written["code"] == "forbidden" and f"'{BOB}'" in written["message"]
        # Forgetting everything tagged "shared" removes alice's two items, not bob's or the team's.
        assert (await answer(client, "forget", {"filter": {"tags_any": ["shared"]}}))["forgotten"] == 2
    async with tools(served, reader) as client:
        refused = await refusal(client, "store", learning("a reader writes", namespace=ALICE))
        assert refused["code"] == "forbidden" and refused["message"] == "forbidden: a read key may not store"
        assert (await refusal(client, "forget", {"ids": ["0" * 40]}))["code"] == "forbidden"
    async with served.client() as rest:
        left = (await rest.post("/v1/list", json={"limit": 100, "filter": {"tags_any": ["shared"]}})).json()
    assert {hit["text"] for hit in left["items"]} == {"bob prefers green coffee", "the team ships on fridays"}


async def test_an_unknown_key_is_refused_before_any_tool(served: LiveServer) -> None:
    statuses: list[int] = []
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's transport fails in its task group
        async with tools(served, "not-a-key", statuses) as client:
            await client.list_tools()
    assert refused.group_contains(MCPError)
    assert statuses and set(statuses) == {401}
    async with httpx.AsyncClient(base_url=served.base_url, headers={"Authorization": "Bearer not-a-key"}) as raw:
        response = await raw.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == "unauthorized"


async def test_only_post_is_served(served: LiveServer) -> None:
    """Stateless: no event stream to open with GET (held open with nothing to send), no session to DELETE."""
    async with served.client(timeout=10) as raw:
        for method in ("GET", "DELETE"):
            response = await raw.request(method, "/mcp", headers={"accept": "text/event-stream"})
            assert response.status_code == 405 and response.headers["allow"] == "POST", method
            assert response.json()["code"] == "method_not_allowed"
