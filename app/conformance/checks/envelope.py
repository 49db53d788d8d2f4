"""The envelope (contract §7): every failure in one shape, the catalogue, request ids."""

from __future__ import annotations

from app.conformance.kit import Probe, check, expect, require

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
PREFIXES = {
    "invalid_request": "invalid request:",
    "not_found": "not found:",
    "method_not_allowed": "method not allowed:",
}


def _envelope(answer: object, code: str) -> None:
    require(isinstance(answer, dict), "an error answer is not a json object")
    assert isinstance(answer, dict)
    require(set(answer) >= {"code", "message", "retryable", "request_id"}, f"an envelope lacks a key: {sorted(answer)}")
    require(answer["code"] == code, f"code {answer['code']!r}, expected {code!r}")
    message = answer["message"]
    require(message.startswith(PREFIXES.get(code, "")), f"message {message!r} does not start with its code's words")
    require(not message.endswith((".", "!")), f"message {message!r} ends with punctuation")


@check("envelope")
async def error_catalogue_lists_the_contract_codes(probe: Probe) -> None:
    answer = expect(await probe.client.get("/v1/errors"), 200)
    listed = {entry["code"]: (entry["http_status"], entry["retryable"]) for entry in answer["errors"]}
    require(listed == CODES, f"/v1/errors lists {listed}, expected {CODES}")


@check("envelope")
async def unknown_route_is_a_404_envelope(probe: Probe) -> None:
    response = await probe.client.get("/v1/no-such-route")
    _envelope(expect(response, 404), "not_found")


@check("envelope")
async def wrong_method_is_a_405_envelope(probe: Probe) -> None:
    response = await probe.client.post("/v1/health")
    _envelope(expect(response, 405), "method_not_allowed")


@check("envelope")
async def request_id_is_echoed(probe: Probe) -> None:
    response = await probe.client.get("/v1/engine", headers={"x-request-id": "conformance-Abc-123"})
    expect(response, 200)
    require(response.headers.get("x-request-id") == "conformance-Abc-123", "a client's x-request-id is not echoed")
    failed = await probe.post("/v1/fetch", {"query": " ", "mode": "keyword", "limit": 1}, {"x-request-id": "r-1"})
    answer = expect(failed, 400, "invalid_request")
    require(
        answer["request_id"] == "r-1" == failed.headers.get("x-request-id"),
        "the envelope's request_id is not the header's",
    )
