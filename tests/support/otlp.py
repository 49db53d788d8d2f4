"""A small OTLP/HTTP trace receiver: what a collector would be sent, decoded with OpenTelemetry's own protobuf classes.

It accepts ``POST /v1/traces`` (protobuf, gzipped or not) on a loopback port, in a thread of the
test process, and keeps every span it is sent, flattened to names, ids and plain attribute values.
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

SERVER = SpanProto.SPAN_KIND_SERVER
CLIENT = SpanProto.SPAN_KIND_CLIENT


def plain(value: AnyValue) -> Any:
    """An attribute's value as Python: a string, number, bool, list or dict."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: plain(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: tuple[str, ...]  # each event's name and attributes, as text

    def everything(self) -> str:
        """Every name and value the span carries, as one text to search for what must not be there."""
        return repr((self.name, self.attributes, self.resource, self.events))


@dataclass
class Receiver:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], *, timeout_s: float = 60.0) -> list[ReceivedSpan]:
        """The spans once ``done`` holds for them; fails with what came if it never does."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            spans = self.received()
            if done(spans):
                return spans
            time.sleep(0.1)
        raise AssertionError(f"the spans never matched; received {[(s.name, s.kind) for s in self.received()]}")

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = [
            ReceivedSpan(
                name=span.name,
                kind=span.kind,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=span.parent_span_id.hex(),
                attributes=attributes(span.attributes),
                resource=attributes(resource_spans.resource.attributes),
                events=tuple(f"{event.name} {attributes(event.attributes)!r}" for event in span.events),
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self.lock:
            self.requests += 1
            self.spans += spans


@contextlib.contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver on a free loopback port, its base URL as OTEL_EXPORTER_OTLP_ENDPOINT takes it."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            receiver.add(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not each POST
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
