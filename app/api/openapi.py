"""The OpenAPI document: deterministic, every error documented, the bearer scheme declared.

FastAPI's raw schema is valid but yields poor generated clients, so the document is
reshaped here for generators (``openapi-typescript``, ``openapi-python-client``). Only
the document changes: requests are still validated by the pydantic models, so the
wire is exactly what it was. The reshaping:

- in requests, every optional field is nullable (``anyOf: [X, {"type": "null"}]``),
  those with a default included: ``null`` means unset, so a generated client may send
  ``None``; in answers, optional fields have no ``null`` branch, since answers never
  carry ``null``. A model found in both (``Meta``) is written twice, the answer's copy
  under the name ``ANSWER_NAMES`` gives it (``StoredMeta``);
- inline enums become named schemas (``ItemKind``, ``FetchMode``, ...) shared by every use;
- the item union is referenced by name wherever it appears, and each member lists
  its ``type`` tag as required (the server refuses an item without it);
- unions of closed objects told apart by a required key are ``oneOf``, not ``anyOf``;
- ``GET /v1/health`` declares its ``Health`` answer instead of an empty schema.

The document is then checked: no anonymous object or union, no empty schema, every
operation with a unique operationId. A check that fails stops ``engram openapi``.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app import __version__
from app.api import positions
from app.contract.access import KeyRole
from app.contract.items import LearningKind, Role
from app.contract.meta import ItemKind, SourceKind
from app.contract.requests import Facet, FetchMode, Health
from app.contract.transfer import ImportReport

DESCRIPTION = (
    "Engram stores what agents learn (documents, conversation turns, learnings) and fetches it back by "
    "keyword, by meaning or both. Every failure answers the error envelope; branch on its `code` "
    "(see `GET /v1/errors`). Reads take their arguments in a JSON body so queries stay out of URLs. "
    "Optional fields are omitted when unset and never `null` in answers; a request may omit them "
    "or send `null`, which means the same."
)

REF = "#/components/schemas/"

# Every enum in the document, by name. An inline enum not listed here fails the build.
NAMED_ENUMS: dict[str, tuple[str, ...]] = {
    "ItemKind": get_args(ItemKind),
    "SourceKind": get_args(SourceKind),
    "FetchMode": get_args(FetchMode),
    "Facet": get_args(Facet),
    "Role": get_args(Role),
    "KeyRole": get_args(KeyRole),
    "TrailerState": get_args(ImportReport.model_fields["trailer"].annotation),
    "LearningKind": get_args(LearningKind),
    "HealthState": get_args(Health.model_fields["state"].annotation),
}

# Unions that pydantic writes inline, given a name so every client shares one type.
NAMED_UNIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "DocumentBody": (("TextBody", "UriBody"), "A document's body: text, or a uri (which the contract refuses)."),
}

# Models found in requests and in answers, whose optional fields are nullable only in requests: the
# name of their copy in answers. One not listed here fails the build.
ANSWER_NAMES: dict[str, str] = {
    "Meta": "StoredMeta",
    "Source": "StoredSource",
    "ToolCall": "StoredToolCall",
    "Reach": "KeyReach",
}

# The body of an NDJSON route (export's answer, import's body), named as every body is.
NDJSON_LINES = "NdjsonLines"

# Answers FastAPI cannot infer because the route returns a raw response.
DECLARED_ANSWERS: dict[tuple[str, str, str], str] = {("/v1/health", "get", "200"): "Health"}

_NULL = {"type": "null"}
_ANNOTATIONS = ("title", "description")


class DocumentShapeError(RuntimeError):
    """The document has a shape the generators handle badly; fix the model or this module."""


def build_openapi(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title="Engram",
        version=__version__,
        description=DESCRIPTION,
        routes=app.routes,
        separate_input_output_schemas=False,
        license_info={"name": "Apache-2.0", "identifier": "Apache-2.0"},
        servers=[{"url": "/", "description": "The service that serves this document."}],
    )
    document.setdefault("components", {})["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from ENGRAM_API_KEYS; required when the deployment configures keys.",
        }
    }
    document["security"] = [{"bearer": []}]
    document_positions(document)
    shape_for_generators(document)
    check_shape(document)
    return document


def document_positions(document: dict[str, Any]) -> None:
    """``Engram-Position`` (app/api/positions.py): answered by each write's 2xx, honoured by each read;
    the header and the parameter written once under ``components`` and referred to by each."""
    by_id = {op["operationId"]: op for ops in document["paths"].values() for op in ops.values() if "operationId" in op}
    missing = [name for name in (*positions.WRITES, *positions.READS) if name not in by_id]
    if missing:
        raise DocumentShapeError(f"positions name operations the document lacks: {missing}")
    name = positions.HEADER.replace("-", "")
    document["components"].setdefault("headers", {})[name] = positions.ANSWERED
    document["components"].setdefault("parameters", {})[name] = positions.PARAMETER
    for operation in positions.WRITES:
        for status, response in by_id[operation]["responses"].items():
            if status.startswith("2"):
                response.setdefault("headers", {})[positions.HEADER] = {"$ref": f"#/components/headers/{name}"}
    for operation in positions.READS:
        by_id[operation].setdefault("parameters", []).append({"$ref": f"#/components/parameters/{name}"})


def shape_for_generators(document: dict[str, Any]) -> None:
    """Reshape ``document`` in place (see the module docstring)."""
    schemas: dict[str, Any] = document["components"]["schemas"]
    for (path, method, status), name in DECLARED_ANSWERS.items():
        document["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"] = {
            "$ref": REF + name
        }
    for schema in list(schemas.values()):
        _require_tags(schema, schemas)
    _split_answers(document, schemas)
    for name, values in NAMED_ENUMS.items():
        schemas[name] = {"enum": list(values), "title": name, "type": "string"}
    schemas[NDJSON_LINES] = {
        "type": "string",
        "title": NDJSON_LINES,
        "description": "NDJSON: one JSON object a line, each ended by a newline (docs/lifecycle.md).",
    }
    for name, (members, description) in NAMED_UNIONS.items():
        schemas[name] = {"oneOf": [{"$ref": REF + m} for m in members], "title": name, "description": description}
    shaper = _Shaper(schemas)
    requested = reachable(document, "requests")
    for name in sorted(schemas):
        schemas[name] = shaper.top_level(schemas[name], nullable=name in requested)
    for media in _media_schemas(document):
        media["schema"] = shaper.nested(media["schema"])
    document["components"]["schemas"] = dict(sorted(schemas.items()))


def _split_answers(document: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Give answers their own copy of each model that requests share with them (``ANSWER_NAMES``)."""
    shared = reachable(document, "requests") & reachable(document, "answers")
    split = {
        name for name in shared if set(schemas[name].get("properties", {})) - set(schemas[name].get("required", []))
    }
    while True:  # a shared model that holds a split one is split too
        holders = {name for name in shared - split if _refs(schemas[name]) & split}
        if not holders:
            break
        split |= holders
    for name in sorted(split):
        if name not in ANSWER_NAMES:
            raise DocumentShapeError(f"{name} is in requests and answers: name its answer copy in ANSWER_NAMES")
    renamed = {REF + name: REF + ANSWER_NAMES[name] for name in split}
    answered_only = reachable(document, "answers") - reachable(document, "requests")
    for name in split:
        schemas[ANSWER_NAMES[name]] = {**schemas[name], "title": ANSWER_NAMES[name]}
    for name in answered_only | {ANSWER_NAMES[n] for n in split}:
        schemas[name] = _renamed(schemas[name], renamed)
    for media in _media_schemas(document, "answers"):
        media["schema"] = _renamed(media["schema"], renamed)


def _renamed(schema: Any, renamed: dict[str, str]) -> Any:
    if isinstance(schema, dict):
        return {k: renamed.get(v, v) if k == "$ref" else _renamed(v, renamed) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_renamed(item, renamed) for item in schema]
    return schema


def _refs(schema: Any) -> set[str]:
    """The names ``schema`` refers to directly."""
    if isinstance(schema, dict):
        found = {schema["$ref"].removeprefix(REF)} if isinstance(schema.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_refs(item) for item in schema))
    return set()


def reachable(document: dict[str, Any], side: str) -> set[str]:
    """The names of the schemas that request bodies (``requests``) or answers (``answers``) use."""
    schemas = document["components"]["schemas"]
    seen: set[str] = set()
    todo = set().union(*(_refs(media["schema"]) for media in _media_schemas(document, side)))
    while todo:
        name = todo.pop()
        if name not in seen and name in schemas:
            seen.add(name)
            todo |= _refs(schemas[name])
    return seen


class _Shaper:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    def top_level(self, schema: dict[str, Any], *, nullable: bool) -> dict[str, Any]:
        """A named schema: its own union or enum stays, what it holds is shaped; with ``nullable``
        (a request's), its optional properties accept ``null``."""
        schema = self._union(self._children(_without_null(schema)))
        if nullable and "properties" in schema:
            required = set(schema.get("required", ()))
            schema["properties"] = {
                key: value if key in required else _nullable(value) for key, value in schema["properties"].items()
            }
        return schema

    def nested(self, schema: dict[str, Any]) -> dict[str, Any]:
        schema = self._union(self._children(_without_null(schema)))
        if "enum" in schema:
            return _ref(self._enum_name(schema["enum"]), schema)
        if "oneOf" in schema:
            return _ref(self._union_name(schema), schema)
        return schema

    def _children(self, schema: dict[str, Any]) -> dict[str, Any]:
        schema = dict(schema)
        for bound in ("minimum", "maximum"):
            # FastAPI's document model holds bounds as floats; an integer's bounds stay integers.
            if schema.get("type") == "integer" and isinstance(schema.get(bound), float):
                schema[bound] = int(schema[bound])
        if "properties" in schema:
            schema["properties"] = {k: self.nested(v) for k, v in schema["properties"].items()}
        if isinstance(schema.get("items"), dict):
            schema["items"] = self.nested(schema["items"])
        if isinstance(schema.get("additionalProperties"), dict):
            schema["additionalProperties"] = self.nested(schema["additionalProperties"])
        for key in ("anyOf", "oneOf", "allOf"):
            if key in schema:
                schema[key] = [self.nested(branch) for branch in schema[key]]
        return schema

    def _union(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``anyOf`` of closed objects that each require a key the others lack is exactly ``oneOf``."""
        if "anyOf" not in schema:
            return schema
        branches = schema["anyOf"]
        if not _exclusive(branches, self.schemas):
            raise DocumentShapeError(f"a union whose members may overlap: {json.dumps(branches)}")
        schema = {k: v for k, v in schema.items() if k != "anyOf"}
        schema["oneOf"] = branches
        return schema

    def _enum_name(self, values: list[Any]) -> str:
        for name, known in NAMED_ENUMS.items():
            if list(known) == values:
                return name
        raise DocumentShapeError(f"an enum without a name: {values}; add it to NAMED_ENUMS")

    def _union_name(self, schema: dict[str, Any]) -> str:
        bare = _bare(schema)
        for name, named in sorted(self.schemas.items()):
            if _bare(named) == bare:
                return name
        raise DocumentShapeError(f"an anonymous union: {json.dumps(schema)}; give it a named model")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``X`` becomes ``anyOf: [X, null]``, the field's annotations and default beside it."""
    annotations = {k: v for k, v in schema.items() if k in (*_ANNOTATIONS, "default")}
    core = {k: v for k, v in schema.items() if k not in annotations}
    return {**annotations, "anyOf": [core, _NULL]}


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` becomes ``X`` with the field's annotations kept."""
    if "anyOf" not in schema or _NULL not in schema["anyOf"]:
        return schema
    branches = [b for b in schema["anyOf"] if b != _NULL]
    rest = {k: v for k, v in schema.items() if k != "anyOf" and not (k == "default" and v is None)}
    if len(branches) > 1:
        return {**rest, "anyOf": branches}
    (branch,) = branches
    if "$ref" in branch:
        return _ref(branch["$ref"].removeprefix(REF), rest)
    return {**rest, **branch}


def _ref(name: str, annotated: dict[str, Any]) -> dict[str, Any]:
    """A reference that keeps a field's description (a title beside a $ref only adds noise)."""
    ref: dict[str, Any] = {"$ref": REF + name}
    if "description" in annotated:
        ref["description"] = annotated["description"]
    return ref


def _bare(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in _ANNOTATIONS}


def _resolve(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    return schemas[schema["$ref"].removeprefix(REF)] if "$ref" in schema else schema


def _exclusive(branches: list[dict[str, Any]], schemas: dict[str, Any]) -> bool:
    """Every branch a closed object requiring a key no other branch declares: at most one can match."""
    resolved = [_resolve(b, schemas) for b in branches]
    if not all(s.get("type") == "object" and s.get("additionalProperties") is False for s in resolved):
        return False
    for index, schema in enumerate(resolved):
        others = set().union(*(set(o.get("properties", {})) for i, o in enumerate(resolved) if i != index))
        if not set(schema.get("required", ())) - others:
            return False
    return True


def _require_tags(schema: dict[str, Any], schemas: dict[str, Any]) -> None:
    """The discriminator's property is required in every member: without it the server refuses the item."""
    discriminator = schema.get("discriminator")
    if not discriminator:
        return
    tag = discriminator["propertyName"]
    for ref in discriminator["mapping"].values():
        member = schemas[ref.removeprefix(REF)]
        if tag not in member.get("required", []):
            member["required"] = [tag, *member.get("required", [])]


def _media_schemas(document: dict[str, Any], side: str = "both") -> list[dict[str, Any]]:
    """Every ``{"schema": ...}`` holder of a request body (``requests``), a response (``answers``) or both."""
    found = []
    for operations in document["paths"].values():
        for operation in operations.values():
            bodies = []
            if side in ("requests", "both"):
                bodies.append(operation.get("requestBody", {}))
            if side in ("answers", "both"):
                bodies.extend(operation.get("responses", {}).values())
            for body in bodies:
                found.extend(media for media in body.get("content", {}).values() if "schema" in media)
    return found


def check_shape(document: dict[str, Any]) -> None:
    """Refuse what generators handle badly, so a regression fails ``engram openapi``."""
    operation_ids = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not operation.get("operationId", "").isidentifier():
                raise DocumentShapeError(f"{method.upper()} {path} has no usable operationId")
            operation_ids.append(operation["operationId"])
    if len(set(operation_ids)) != len(operation_ids):
        raise DocumentShapeError("operationIds are not unique")
    for media in _media_schemas(document):
        if "$ref" not in media["schema"]:
            raise DocumentShapeError(f"an unnamed body or answer schema: {json.dumps(media['schema'])}")
    requested, answered = reachable(document, "requests"), reachable(document, "answers")
    for name, schema in document["components"]["schemas"].items():
        if name in requested and name in answered and _optional(schema):
            raise DocumentShapeError(f"{name}: in requests and answers alike; add it to ANSWER_NAMES")
        _check_nested(name, schema, top=True, nullable=name in requested)
        if name in requested:
            for key in _optional(schema):
                if _NULL not in schema["properties"][key].get("anyOf", []):
                    raise DocumentShapeError(f"{name}.{key}: an optional request field that does not take null")


def _optional(schema: dict[str, Any]) -> set[str]:
    return set(schema.get("properties", {})) - set(schema.get("required", []))


def _check_nested(where: str, schema: dict[str, Any], *, top: bool = False, nullable: bool = False) -> None:
    if not schema:
        raise DocumentShapeError(f"{where}: an empty schema says nothing to a generator")
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not (nullable and len(branches) == 2 and branches[1] == _NULL):
            raise DocumentShapeError(f"{where}: an anyOf other than a request's optional [X, null]")
        _check_nested(f"{where}?", branches[0])
        return
    if _NULL in schema.get("oneOf", []):
        raise DocumentShapeError(f"{where}: a null branch in a union")
    if not top and ("properties" in schema or "oneOf" in schema or "enum" in schema):
        raise DocumentShapeError(f"{where}: an anonymous object, union or enum")
    for key, child in schema.get("properties", {}).items():
        _check_nested(f"{where}.{key}", child, nullable=nullable)
    if isinstance(schema.get("items"), dict):
        _check_nested(f"{where}[]", schema["items"])
    for branch in schema.get("oneOf", []):
        _check_nested(f"{where}|", branch)


def render(document: dict[str, Any]) -> str:
    """Stable key order and a trailing newline, so the committed file diffs cleanly."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
