"""An item's fingerprint is taken over RFC 8785 (JCS) bytes: ``canonical_json`` writes exactly what
``rfc8785`` writes, for every JSON value, and refuses what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from app.contract.canonical import canonical_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()))
)
keys = st.text(st.characters(exclude_categories=()), max_size=4)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)


def outcome(write: Any, value: Any) -> tuple[str, Any]:
    try:
        return "bytes", write(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as error:
        return "refused", type(error)


@settings(max_examples=2000, deadline=None)
@given(values)
def test_writes_what_rfc8785_writes(value: Any) -> None:
    assert outcome(canonical_json, value) == outcome(rfc8785.dumps, value)


@pytest.mark.parametrize(
    "value",
    [
        0.63, 1.0, -0.0, 9007199254740992.0, 0.0001, 0.00001, 1e15 + 0.5, 1e16, 1e21, 1.5e300, 5e-324, -2.5,
        2**53 - 1, 2**53, -(2**53), True, None, "",
        "é\u2028\x7f\x1f\n\"\\", "\ud800", {"\ue000": 1, "\U0001f600": 2, "a": 3},
        {"b": [1, {"a": None}], "a": []}, (1, 2), {1: "x"}, float("nan"), float("inf"),
    ],
)  # fmt: skip
def test_writes_what_rfc8785_writes_at_the_edges(value: Any) -> None:
    assert outcome(canonical_json, value) == outcome(rfc8785.dumps, value)
