"""The envelope (contract §5, §7): each route's documented shape, every failure in one shape, the
catalogue, request ids, and the key."""

from __future__ import annotations

from typing import Any

from app.conformance.kit import Probe, check, expect, require
from app.conformance.refusals import envelope, refused

CODES = {
    "invalid_request": (400, False),
    "unauthorized": (401, False),
    "forbidden": (403, False),
    "not_found": (404, False),
    "method_not_allowed": (405, False),
    "conflict": (409, False),
    "payload_too_large": (413, False),
    "unavailable": (503, True),
    "unsupported": (501, False),
    "engine": (500, False),
    "config": (500, False),
}
MODES = ("keyword", "vector", "hybrid")
DESCRIPTOR = {"id", "label", "description", "hosted", "needs_endpoint", "needs_key", "fetch_modes"}
HIT = {"id", "kind", "text", "meta", "score"}


def keys(answer: Any, required: set[str], optional: frozenset[str] | set[str] = frozenset(), where: str = "") -> Any:
    """``answer`` is an object with ``required`` keys, perhaps ``optional`` ones, and no null.

    Keys beyond the contract's are an engine's extensions (a forget's undo receipt, say): the
    contract does not close answers as it closes requests, so they are allowed, never null."""
    require(isinstance(answer, dict), f"{where}: the answer is not a json object")
    assert isinstance(answer, dict)
    require(required <= set(answer), f"{where}: lacks {sorted(required - set(answer))}")
    require(None not in answer.values(), f"{where}: holds a null (an unset field is left out)")
    return answer


def hits(answer: list[Any], where: str) -> None:
    require(isinstance(answer, list), f"{where}: not a list")
    for hit in answer:
        keys(hit, HIT, {"confidence"}, where)
        require(isinstance(hit["score"], (int, float)), f"{where}: a score that is not a number")
        require(isinstance(hit["meta"].get("source"), dict), f"{where}: a hit's meta without its source")
        require(("confidence" in hit) == (hit["kind"] == "learning"), f"{where}: confidence on a non-learning")


@check("envelope")
async def engine_descriptor_has_its_keys(probe: Probe) -> None:
    answer = keys(expect(await probe.client.get("/v1/engine"), 200), DESCRIPTOR, {"default_endpoint"}, "/v1/engine")
    for flag in ("hosted", "needs_endpoint", "needs_key"):
        require(isinstance(answer[flag], bool), f"/v1/engine: {flag} is not a boolean")
    modes = answer["fetch_modes"]
    require(isinstance(modes, list) and modes and set(modes) <= set(MODES), f"/v1/engine: fetch_modes {modes!r}")


@check("envelope")
async def health_is_a_state_never_an_envelope(probe: Probe) -> None:
    response = await probe.client.get("/v1/health")
    answer = expect(response, 503 if response.status_code == 503 else 200)
    state = answer.get("state") if isinstance(answer, dict) else None
    require(state in ("ok", "degraded", "down"), f"/v1/health: state {state!r}")
    keys(answer, {"state"} | ({"reason"} if state != "ok" else set()), {"reason"}, "/v1/health")
    require((response.status_code == 503) == (state == "down"), f"/v1/health: {state} with {response.status_code}")


@check("envelope")
async def error_catalogue_lists_the_contract_codes(probe: Probe) -> None:
    answer = keys(expect(await probe.client.get("/v1/errors"), 200), {"errors"}, where="/v1/errors")
    entries = answer["errors"]
    for entry in entries:
        keys(entry, {"code", "http_status", "retryable", "description"}, where="/v1/errors")
        require(isinstance(entry["description"], str) and entry["description"].strip(), "a blank description")
    listed = {entry["code"]: (entry["http_status"], entry["retryable"]) for entry in entries}
    require(len(entries) == len(listed), "/v1/errors lists a code twice")
    require(listed == CODES, f"/v1/errors lists {listed}, expected {CODES}")


@check("envelope")
async def writes_answer_their_shape(probe: Probe) -> None:
    item = probe.learning("the envelope family writes this")
    first = await probe.post("/v1/store", item)
    keys(expect(first, 201), {"id", "replayed"}, where="/v1/store")
    again = keys(expect(await probe.post("/v1/store", item), 200), {"id", "replayed"}, where="/v1/store again")
    require(again["replayed"] is True, "/v1/store: a repeat is not replayed: true")
    many = keys(await probe.call("/v1/store_many", {"items": [item]}), {"receipts"}, where="/v1/store_many")
    for receipt in many["receipts"]:
        keys(receipt, {"id", "replayed"}, where="/v1/store_many receipts")
    outside = probe.ns("agent:elsewhere")
    for path, body in [
        ("/v1/forget_within", {"ids": [again["id"]], "reach": {"at": outside, "inherit": False}}),
        ("/v1/forget", {"ids": [again["id"]]}),
    ]:
        answer = keys(await probe.call(path, body), {"forgotten"}, where=path)
        require(isinstance(answer["forgotten"], int), f"{path}: forgotten is not an integer")


@check("envelope")
async def reads_answer_their_shape(probe: Probe) -> None:
    await probe.store_all([probe.learning("shapes of answers"), probe.document("a document about shapes")])
    scope = probe.scoped()
    modes = expect(await probe.client.get("/v1/engine"), 200)["fetch_modes"]
    for mode in modes:
        page = await probe.call("/v1/fetch", {"query": "shapes", "mode": mode, "limit": 1, "filter": scope})
        keys(page, {"hits"}, {"next_cursor"}, f"/v1/fetch {mode}")
        hits(page["hits"], f"/v1/fetch {mode}")
    listed = keys(await probe.call("/v1/list", {"limit": 2, "filter": scope}), {"items"}, {"next_cursor"}, "/v1/list")
    hits(listed["items"], "/v1/list")
    got = keys(await probe.call("/v1/get", {"ids": [listed["items"][0]["id"]]}), {"hits"}, where="/v1/get")
    hits(got["hits"], "/v1/get")
    answer = keys(
        await probe.call("/v1/recall", {"question": "what about shapes", "limit": 2, "filter": scope}),
        {"answer", "citations"},
        {"model"},
        "/v1/recall",
    )
    for citation in answer["citations"]:
        keys(citation, {"id", "kind", "snippet", "meta"}, {"score"}, "/v1/recall citations")
    explored = await probe.call("/v1/explore", {"facet": "kind", "limit": 5, "filter": scope})
    keys(explored, {"facet", "buckets", "total", "missing", "more_buckets", "truncated"}, where="/v1/explore")
    for bucket in explored["buckets"]:
        keys(bucket, {"value", "count"}, where="/v1/explore buckets")


@check("envelope")
async def every_refusal_is_the_envelope(probe: Probe) -> None:
    # One body each route refuses by its rules (400), and one it refuses by its shape (422).
    scope = probe.scoped()
    rules = {
        "/v1/store": probe.learning(" "),
        "/v1/store_many": {"items": []},
        "/v1/fetch": {"query": " ", "mode": "keyword", "limit": 1},
        "/v1/recall": {"question": " ", "limit": 1},
        "/v1/list": {"limit": 0, "filter": scope},
        "/v1/get": {"ids": []},
        "/v1/forget": {"ids": []},
        "/v1/forget_within": {"ids": [], "reach": probe.reach()},
        "/v1/explore": {"facet": "kind", "limit": 0, "filter": scope},
    }
    for path, body in rules.items():
        refused(await probe.post(path, body), 400)
        refused(await probe.post(path, {**body, "no_such_key": 1}), 422)


@check("envelope")
async def unknown_route_is_a_404_envelope(probe: Probe) -> None:
    envelope(await probe.client.get("/v1/no-such-route"), 404, "not_found")
    envelope(await probe.post("/v1/no-such-route", {}), 404, "not_found")


@check("envelope")
async def wrong_method_is_a_405_envelope(probe: Probe) -> None:
    envelope(await probe.client.post("/v1/health"), 405, "method_not_allowed")
    envelope(await probe.client.get("/v1/store"), 405, "method_not_allowed")
    envelope(await probe.client.delete("/v1/engine"), 405, "method_not_allowed")


@check("envelope")
async def unlisted_fetch_mode_is_unsupported(probe: Probe) -> None:
    modes = expect(await probe.client.get("/v1/engine"), 200)["fetch_modes"]
    for mode in set(MODES) - set(modes):
        body = {"query": "anything", "mode": mode, "limit": 1, "filter": probe.scoped()}
        envelope(await probe.post("/v1/fetch", body), 501, "unsupported")
        # The mode is checked before the rules (contract §8): a blank query is still unsupported.
        envelope(await probe.post("/v1/fetch", {**body, "query": " "}), 501, "unsupported")


@check("envelope")
async def request_id_is_echoed(probe: Probe) -> None:
    response = await probe.client.get("/v1/engine", headers={"x-request-id": "conformance-Abc-123"})
    expect(response, 200)
    require(response.headers.get("x-request-id") == "conformance-Abc-123", "a client's x-request-id is not echoed")
    failed = await probe.post("/v1/fetch", {"query": " ", "mode": "keyword", "limit": 1}, {"x-request-id": "r-1 ~ok"})
    answer = envelope(failed, 400, "invalid_request")
    require(answer["request_id"] == "r-1 ~ok", "the envelope's request_id is not the client's")


@check("envelope")
async def request_id_is_made_when_not_usable(probe: Probe) -> None:
    for sent in (None, "x" * 129):
        headers = {"x-request-id": sent} if sent else {}
        for response in (
            await probe.client.get("/v1/engine", headers=headers),
            await probe.client.get("/v1/health", headers=headers),
            await probe.post("/v1/list", {"limit": 0}, headers),
        ):
            made = response.headers.get("x-request-id")
            path = response.request.url.path
            require(bool(made) and made != sent, f"{path}: x-request-id {made!r} when the client sent {sent!r}")


@check("envelope")
async def missing_key_is_a_401(probe: Probe) -> None:
    """With a key given to the run, a call without it (or with a wrong one) is refused; without, the
    service is open and there is nothing to hold it to."""
    if "authorization" not in probe.client.headers:
        return
    for method, path in [("GET", "/v1/engine"), ("GET", "/v1/errors"), ("POST", "/v1/list"), ("GET", "/v1/nowhere")]:
        for key in (None, "Bearer not-the-key"):
            request = probe.client.build_request(method, path, json={"limit": 1} if method == "POST" else None)
            del request.headers["authorization"]
            if key:
                request.headers["authorization"] = key
            response = await probe.client.send(request)
            envelope(response, 401, "unauthorized")
            challenge = response.headers.get("www-authenticate", "")
            require(challenge.lower().startswith("bearer"), f"{path}: 401 with www-authenticate {challenge!r}")
    unkeyed = probe.client.build_request("GET", "/v1/health")
    del unkeyed.headers["authorization"]
    response = await probe.client.send(unkeyed)
    require(response.status_code in (200, 503), f"/v1/health without a key answered {response.status_code}")
