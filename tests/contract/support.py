"""Helpers shared by the contract tests: how a refusal must look (contract §7)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from app.contract.errors import InvalidRequest
from app.contract.items import ITEM_ADAPTER, StoredItem

# Values quoted from the request keep their case; everything else is lowercase.
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def assert_message_style(error: InvalidRequest) -> None:
    """``invalid request: ...``, lowercase outside quoted values, no trailing punctuation."""
    message = error.message
    assert message.startswith("invalid request: "), message
    bare = _QUOTED.sub("", message)
    assert bare == bare.lower(), f"uppercase outside a quoted value: {message!r}"
    assert message == message.strip(), message
    assert message[-1] not in ".!?;:,", f"trailing punctuation: {message!r}"
    assert "\n" not in message


def refused(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """Run ``call``, which must raise a well-formed ``InvalidRequest``; return its message."""
    with pytest.raises(InvalidRequest) as caught:
        call(*args, **kwargs)
    assert_message_style(caught.value)
    return caught.value.message


def item(data: dict[str, Any]) -> StoredItem:
    """Parse an item the way the service does: schema first, then the contract's checks."""
    return ITEM_ADAPTER.validate_python(data).checked()


def item_id(data: dict[str, Any]) -> str:
    return item(data).fingerprint()
