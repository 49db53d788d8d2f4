"""``null`` in a request means unset (contract, introduction).

A field whose default is not None (``filter``, ``meta``, ``kinds``,
``scan_limit``, a reach's ``at``) would refuse ``null`` as a wrong type;
dropping the key first gives it its default, exactly as when it is omitted.
A required field keeps its ``null`` and is refused as missing a value.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def drop_unset_nulls(model: type[BaseModel], data: Any) -> Any:
    """``data`` without the ``null`` values of fields that have a default."""
    if not isinstance(data, dict):
        return data
    optional = {name for name, field in model.model_fields.items() if not field.is_required()}
    return {key: value for key, value in data.items() if value is not None or key not in optional}
