"""Schemathesis hooks for NDJSON (``SCHEMATHESIS_HOOKS``, set by fuzz.sh): import bodies drawn as
lines, good and bad, and export answers read as the text the schema says they are."""

from __future__ import annotations

from typing import Any

import orjson
import schemathesis
from hypothesis import strategies as st

_ITEM = st.fixed_dictionaries(
    {
        "type": st.just("learning"),
        "text": st.text(min_size=0, max_size=40),
        "kind": st.sampled_from(["fact", "preference", "nope"]),
        "confidence": st.floats(allow_nan=True, allow_infinity=True),
    }
)
_LINE = st.one_of(
    _ITEM.map(lambda item: orjson.dumps({"item": item})),
    st.builds(
        lambda n, s: orjson.dumps({"trailer": {"count": n, "sha256": s}}), st.integers(-1, 5), st.text(max_size=8)
    ),
    st.binary(max_size=48),
    st.just(b"{}"),
)
schemathesis.openapi.media_type(
    "application/x-ndjson", st.lists(_LINE, min_size=1, max_size=6).map(lambda lines: b"\n".join(lines) + b"\n")
)


@schemathesis.deserializer("application/x-ndjson")
def ndjson_text(ctx: Any, response: Any) -> str:
    return str(response.content.decode("utf-8"))
