"""Request bodies derived from the request models themselves, so a new field is covered unasked.

Every route's body type is walked recursively (models, ``RootModel``, plain and tagged unions,
lists, optionals): for each field at each depth, a minimal valid body holding the path down to
it, with the field set to a chosen value. A field is *required* when the schema requires it (a
tagged union's tag included, whatever its default in the member).
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, RootModel
from pydantic.fields import FieldInfo

from app.api import keys
from app.api.routes import router


def request_bodies() -> list[tuple[str, Any]]:
    """Every POST route with the type its body is validated against."""
    return [
        (route.path, route.body_field.field_info.annotation)  # type: ignore[attr-defined]
        for route in (*router.routes, *keys.router.routes)
        if getattr(route, "body_field", None) is not None
    ]


Path = tuple[str | int, ...]


@dataclass(frozen=True)
class BodyField:
    """One field at one depth: ``body(value)`` is a valid minimal body with the field set to it."""

    route: str
    path: Path
    annotation: Any
    required: bool
    base: Any  # the minimal body holding the path's parents; the field itself left out

    @property
    def name(self) -> str:
        """The path as an error names it: ``items[0].meta.source.id``."""
        text = ""
        for part in self.path:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text

    def body(self, value: Any) -> Any:
        return _put(self.base, self.path, value)

    def without(self) -> Any:
        return _put(self.base, self.path, _ABSENT)

    def __str__(self) -> str:
        return f"{self.route} {self.name}"


_ABSENT = object()


def _put(body: Any, path: Path, value: Any) -> Any:
    head, *rest = path
    if isinstance(head, int):
        copy = list(body)
        copy[head] = _put(copy[head], tuple(rest), value) if rest else value
        return copy
    copy = dict(body)
    if rest:
        copy[head] = _put(copy[head], tuple(rest), value)
    elif value is _ABSENT:
        copy.pop(head, None)
    else:
        copy[head] = value
    return copy


def all_fields() -> list[BodyField]:
    return [field for route, annotation in request_bodies() for field in fields_of(route, annotation)]


def fields_of(route: str, annotation: Any) -> Iterator[BodyField]:
    for base, path, child, required in _walk(annotation):
        yield BodyField(route, path, child, required, base)


def _walk(annotation: Any, tag: str | None = None) -> Iterator[tuple[Any, Path, Any, bool]]:
    """(minimal body, path, the field's type, required) for every field below ``annotation``."""
    annotation, discriminator = _unwrap(annotation)
    discriminator = discriminator or tag
    members = _members(annotation)
    if members:
        for member in members:
            yield from _walk_member(member, members, discriminator)
    elif get_origin(annotation) is list:
        (element,) = get_args(annotation)
        for base, path, child, required in _walk(element):
            yield [base], (0, *path), child, required
    elif isinstance(annotation, type) and issubclass(annotation, RootModel):
        root = annotation.model_fields["root"]
        yield from _walk(root.annotation, _tag(root))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _walk_member(annotation, (annotation,), None)


def _walk_member(
    model: type[BaseModel], siblings: tuple[type[BaseModel], ...], discriminator: str | None
) -> Iterator[tuple[Any, Path, Any, bool]]:
    base = minimal(model, discriminator)
    for name, info in model.model_fields.items():
        required = info.is_required() or name == discriminator
        parent = {key: value for key, value in base.items() if key != name}
        yield parent, (name,), info.annotation, required
        child = _optional_inner(info)
        for below, path, annotation, needed in _walk(child, _tag(info)):
            yield {**parent, name: below}, (name, *path), annotation, needed
    if discriminator is None:
        # A plain union's object may name any member's keys: a sibling's key is an optional one here.
        own = set(model.model_fields)
        for sibling in siblings:
            for name, info in sibling.model_fields.items():
                if name not in own:
                    own.add(name)
                    yield base, (name,), info.annotation, False


def _tag(info: FieldInfo) -> str | None:
    return info.discriminator if isinstance(info.discriminator, str) else None


def _optional_inner(info: FieldInfo) -> Any:
    annotation = info.annotation
    if _is_union(annotation):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _unwrap(annotation: Any) -> tuple[Any, str | None]:
    discriminator = None
    while get_origin(annotation) is Annotated:
        annotation, *metadata = get_args(annotation)
        for item in metadata:
            if isinstance(item, FieldInfo) and isinstance(item.discriminator, str):
                discriminator = item.discriminator
    return annotation, discriminator


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _members(annotation: Any) -> tuple[type[BaseModel], ...]:
    if not _is_union(annotation):
        return ()
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    if all(isinstance(arg, type) and issubclass(arg, BaseModel) for arg in args) and len(args) > 1:
        return tuple(args)
    return ()


def minimal(annotation: Any, discriminator: str | None = None) -> Any:
    """The smallest valid JSON value of ``annotation``: required fields only, one list element."""
    annotation, tag = _unwrap(annotation)
    members = _members(annotation)
    if members:
        return minimal(members[0], tag or discriminator)
    if isinstance(annotation, type) and issubclass(annotation, RootModel):
        root = annotation.model_fields["root"]
        return minimal(root.annotation, _tag(root))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        body = {
            name: minimal(_optional_inner(info), _tag(info))
            for name, info in annotation.model_fields.items()
            if info.is_required() or name == discriminator
        }
        if discriminator is not None:
            body[discriminator] = annotation.model_fields[discriminator].default
        return body
    if _is_union(annotation):
        return minimal(next(arg for arg in get_args(annotation) if arg is not type(None)))
    origin = get_origin(annotation)
    if origin is list:
        return [minimal(get_args(annotation)[0])]
    if origin is Literal:
        return get_args(annotation)[0]
    return _SCALARS[annotation]


_SCALARS: dict[Any, Any] = {str: "x", int: 1, float: 0.5, bool: True, datetime: "2026-01-01T00:00:00Z"}


def wrong_values(annotation: Any) -> list[Any]:
    """JSON values of the wrong type (or outside the enum) for a field of ``annotation``."""
    inner, _ = _unwrap(annotation)
    if _is_union(inner):
        args = [arg for arg in get_args(inner) if arg is not type(None)]
        inner = _unwrap(args[0])[0] if len(args) == 1 else inner
    found: list[Any] = [[True], {"k": 1}, ["x"]]
    if inner not in (int, float):
        found.append(7)
    if inner is not str:
        found.append("Some Text")
    if get_origin(inner) is Literal:
        found.append("NotAChoice")
    if inner is not bool:
        found.append(False)
    return found
