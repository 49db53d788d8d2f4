"""The error catalogue of contract §7: one class per code, messages sanitised.

A message starts with the code's words (``invalid request: ...``), is lowercase
apart from values quoted from the request, carries no trailing punctuation, and
never carries a credential, a connection string, SQL or a stack trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

# A DSN (scheme://user:pass@host) or a key=value password fragment must never
# survive into a message, whatever produced it.
# Anchored at the start of a scheme's run and possessive within it: unanchored, a long run of
# letters was tried from every position, each trial scanning the rest of the run (quadratic: a
# 90,000-character namespace in a request held the event loop for 39 s).
_DSN = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://\S+", re.IGNORECASE)
_SECRET_PAIR = re.compile(r"(password|passwd|pwd|secret|token|key)\s*[=:]\s*\S+", re.IGNORECASE)


def shortened(text: str, limit: int = 200) -> str:
    """Text from the request, as a message repeats it: its first ``limit`` characters."""
    return text if len(text) <= limit else text[:limit] + "..."


def quoted(value: str) -> str:
    """A value from the request, quoted in a message."""
    return repr(shortened(value, 64))


def sanitise(detail: str, *, keep_case: bool = False) -> str:
    """Strip connection strings and secrets, trailing punctuation and newlines."""
    text = _DSN.sub("<redacted>", detail)
    text = _SECRET_PAIR.sub(r"\1=<redacted>", text)
    text = " ".join(text.split())
    if not keep_case:
        text = text.lower()
    return text.rstrip(" .!;:,")


class EngramError(Exception):
    """Base of every contract error; ``code`` is the stable value clients branch on."""

    code: ClassVar[str] = "engine"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False
    prefix: ClassVar[str] = "engine error"
    description: ClassVar[str] = ""

    def __init__(self, detail: str, *, details: list[dict[str, Any]] | None = None) -> None:
        # Details written by the service are lowercase; values quoted from the
        # request keep their case, so callers pass them already formatted.
        self.detail = sanitise(detail, keep_case=True)
        self.details = details
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.prefix}: {self.detail}" if self.detail else self.prefix

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.detail == self.detail  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.code, self.detail))


class InvalidRequest(EngramError):
    code = "invalid_request"
    http_status = 400
    prefix = "invalid request"
    description = "The request is malformed or refused by the contract; fix it before retrying."


class Unauthorized(EngramError):
    code = "unauthorized"
    http_status = 401
    prefix = "unauthorized"
    description = "The credential is missing or was rejected."


class Forbidden(EngramError):
    code = "forbidden"
    http_status = 403
    prefix = "forbidden"
    description = "The credential is valid but not allowed this write or this deployment."


class NotFound(EngramError):
    code = "not_found"
    http_status = 404
    prefix = "not found"
    description = "The route or the addressed item does not exist."


class MethodNotAllowed(EngramError):
    code = "method_not_allowed"
    http_status = 405
    prefix = "method not allowed"
    description = "The route exists but does not accept this method."


class Conflict(EngramError):
    code = "conflict"
    http_status = 409
    prefix = "conflict"
    description = "The write conflicts with what is held."


class PayloadTooLarge(EngramError):
    code = "payload_too_large"
    http_status = 413
    prefix = "payload too large"
    description = "The request body is over the configured size limit."


class Unavailable(EngramError):
    code = "unavailable"
    http_status = 503
    retryable = True
    prefix = "unavailable"
    description = "A transient failure such as the database being down or a timeout; the same call may succeed later."


class Unsupported(EngramError):
    code = "unsupported"
    http_status = 501
    prefix = "unsupported"
    description = "The engine does not offer this operation or fetch mode."


class EngineFailure(EngramError):
    code = "engine"
    http_status = 500
    prefix = "engine error"
    description = "The engine failed on its own; the message is sanitised."


class ConfigError(EngramError):
    code = "config"
    http_status = 500
    prefix = "configuration error"
    description = "The service is configured wrongly."


CATALOGUE: tuple[type[EngramError], ...] = (
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    Unavailable,
    Unsupported,
    EngineFailure,
    ConfigError,
)


@dataclass(frozen=True)
class CatalogueEntry:
    code: str
    http_status: int
    retryable: bool
    description: str


def catalogue() -> list[CatalogueEntry]:
    """Every code with its usual status, whether it is retryable, and one sentence."""
    return [CatalogueEntry(e.code, e.http_status, e.retryable, e.description) for e in CATALOGUE]
