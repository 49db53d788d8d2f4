"""The OpenAPI document: deterministic, every error documented, the bearer scheme declared."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app import __version__

DESCRIPTION = (
    "Engram stores what agents learn (documents, conversation turns, learnings) and fetches it back by "
    "keyword, by meaning or both. Every failure answers the error envelope; branch on its `code` "
    "(see `GET /v1/errors`). Reads take their arguments in a JSON body so queries stay out of URLs."
)


def build_openapi(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title="Engram",
        version=__version__,
        description=DESCRIPTION,
        routes=app.routes,
        separate_input_output_schemas=False,
    )
    document.setdefault("components", {})["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from ENGRAM_API_KEYS; required when the deployment configures keys.",
        }
    }
    document["security"] = [{"bearer": []}]
    return document


def render(document: dict[str, Any]) -> str:
    """Stable key order and a trailing newline, so the committed file diffs cleanly."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
