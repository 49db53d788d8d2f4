"""The base of every object a request holds: closed, strictly typed, ``null`` read as unset."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from app.contract.nulls import drop_nulls, field_names


class Closed(BaseModel):
    """Requests are closed (an unknown key is refused) and typed strictly.

    The contract's rules beyond the schema are a model's ``checked(limits)``: it refuses what the
    contract refuses and returns the canonical copy (a name apart from pydantic's own ``validate``).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        return drop_nulls(data, field_names(cls))
