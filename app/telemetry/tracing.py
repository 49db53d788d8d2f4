"""Traces over OTLP/HTTP: a server span per request, a client span per SQL statement (docs/operations.md#traces).

Imported only when a collector is named (Settings.tracing): a service without one loads no SDK,
installs no tracer provider and adds nothing to a request. The spans are OpenTelemetry's own
FastAPI and asyncpg instrumentations'; this module chooses what they may carry:

- statements as their SQL text, ``$1`` placeholders and all, never their parameters (an item's text,
  a query, a key's hash are parameters);
- no request or response header unless the operator names it (OTel's capture variables), and
  ``Authorization`` and cookies redacted even then;
- the request id and the key's public id on the server span, the trace id on the access log line;
- only work a request started: the vector indexer's background statements are not traced.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import __version__
from app.contract.errors import ConfigError

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
    from opentelemetry.trace import Link, SpanKind
    from opentelemetry.trace.span import TraceState
    from opentelemetry.util.types import Attributes
except ImportError as missing:  # the extra is not installed
    raise ConfigError(
        "OTEL_EXPORTER_OTLP_ENDPOINT is set, but the tracing packages are not installed: "
        "pip install 'engram[tracing]', or unset it"
    ) from missing

REQUEST_ID = "engram.request_id"
KEY_ID = "engram.key_id"
# Probes and scrapes come every few seconds and say nothing about a request: not traced unless
# OTEL_PYTHON_FASTAPI_EXCLUDED_URLS (or OTEL_PYTHON_EXCLUDED_URLS) says otherwise.
EXCLUDED_URLS = "/v1/health,/metrics"
# Redacted from any header an operator chooses to capture (OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_*).
SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie")


class RequestsOnly(Sampler):
    """Spans with no parent are kept only when they are a request's server span; the rest as ``inner`` says.

    The indexer's workers run statements outside any request: each would be a trace of its own.
    """

    def __init__(self, inner: Sampler) -> None:
        self._inner = inner

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if not parent.is_valid and kind is not SpanKind.SERVER:
            return SamplingResult(Decision.DROP)
        return self._inner.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"RequestsOnly{{{self._inner.get_description()}}}"


class SpanStamp:
    """Outermost of the service's middlewares, inside the server span: the trace id into the request's
    state (for the access line), the request id and key id onto the span as the answer starts (the
    perimeter settles both, its refusals included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        span = trace.get_current_span()
        if scope["type"] != "http" or not span.is_recording():
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["trace_id"] = trace.format_trace_id(span.get_span_context().trace_id)

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                if request_id := state.get("request_id"):
                    span.set_attribute(REQUEST_ID, request_id)
                access = state.get("access")
                if access is not None and access.key_id is not None:
                    span.set_attribute(KEY_ID, access.key_id)  # the key's public id, never its secret
            await send(message)

        await self.app(scope, receive, stamped)


def _resource() -> Resource:
    """``engram`` and its version, unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise."""
    given = OTELResourceDetector().detect().attributes
    return Resource.create({SERVICE_NAME: "engram", SERVICE_VERSION: __version__, **given})


def _headers(variable: str) -> list[str]:
    return [name.strip().lower() for name in os.environ.get(variable, "").split(",") if name.strip()]


class Tracing:
    """The tracer provider of a service whose traces are exported; shut down with the service."""

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider

    def shutdown(self) -> None:
        """Export what is still buffered (at most the exporter's timeout), then stop."""
        self._provider.shutdown()


def start_tracing(app: FastAPI) -> Tracing:
    """Install the tracer provider, exporting over OTLP/HTTP as the OTEL_* variables say, and instrument
    ``app`` and asyncpg. Called once, when the app is made."""
    provider = TracerProvider(resource=_resource())
    provider.sampler = RequestsOnly(provider.sampler)  # OTEL_TRACES_SAMPLER's choice, for requests
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    AsyncPGInstrumentor(capture_parameters=False).instrument(tracer_provider=provider)
    app.add_middleware(SpanStamp)
    excluded = os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS") or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=excluded or EXCLUDED_URLS,
        # The ASGI message spans (a receive and a send per request) say nothing the server span does not.
        exclude_spans=["receive", "send"],
        http_capture_headers_sanitize_fields=[
            *SECRET_HEADERS,
            *_headers("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS"),
        ],
    )
    return Tracing(provider)
