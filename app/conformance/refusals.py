"""What every failure must look like (contract §7): the envelope, and a refused request in it."""

from __future__ import annotations

from typing import Any

import httpx

from app.conformance.kit import expect, require

# Contract §8: a message begins with its code in words.
PREFIXES = {
    "invalid_request": "invalid request:",
    "unauthorized": "unauthorized:",
    "forbidden": "forbidden:",
    "not_found": "not found:",
    "method_not_allowed": "method not allowed:",
    "conflict": "conflict:",
    "payload_too_large": "payload too large:",
    "unavailable": "unavailable:",
    "unsupported": "unsupported:",
    "engine": "engine error:",
    "config": "configuration error:",
}


def envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The envelope of a failure answered with ``status`` and ``code``, held to every rule of its shape."""
    answer = expect(response, status, code)
    where = f"{response.request.method} {response.request.url.path}"
    require(isinstance(answer, dict), f"{where}: an error answer is not a json object")
    missing = {"code", "message", "retryable", "request_id"} - set(answer)
    require(not missing, f"{where}: the envelope lacks {sorted(missing)}")
    message = answer["message"]
    require(isinstance(message, str), f"{where}: the message is not a string")
    require(message.startswith(PREFIXES[code]), f"{where}: message {message!r} does not start with {PREFIXES[code]!r}")
    require(not message.endswith((".", "!", "?")), f"{where}: message {message!r} ends with punctuation")
    require(answer["retryable"] is (code == "unavailable"), f"{where}: retryable is {answer['retryable']!r}")
    header = response.headers.get("x-request-id")
    require(
        isinstance(answer["request_id"], str) and answer["request_id"] == header,
        f"{where}: request_id {answer['request_id']!r} is not the x-request-id header {header!r}",
    )
    require(None not in answer.values(), f"{where}: the envelope holds a null")
    return answer  # type: ignore[no-any-return]


def refused(response: httpx.Response, status: int = 400, naming: str | None = None) -> dict[str, Any]:
    """An ``invalid_request`` envelope with ``status``; a 422's ``details`` (or a 400's message) naming
    ``naming``, a field as the request wrote it (``filter.reach.inherit``, ``items[3]``)."""
    answer = envelope(response, status, "invalid_request")
    where = f"{response.request.method} {response.request.url.path}"
    if status == 422:
        details = answer.get("details")
        require(
            isinstance(details, list) and all(isinstance(d, dict) and {"field", "problem"} <= set(d) for d in details),
            f"{where}: a 422 without details of {{field, problem}}: {details!r}",
        )
        if naming is not None:
            fields = [d["field"] for d in details]
            require(any(naming in str(f) for f in fields), f"{where}: details name {fields}, not {naming!r}")
    elif naming is not None:
        require(naming in answer["message"], f"{where}: message {answer['message']!r} does not name {naming!r}")
    return answer
