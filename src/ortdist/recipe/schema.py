"""JSON schema of recipes, generated from the model's fields and their help texts."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Literal

from .model import Recipe


def _type_schema(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return _object_schema(hint)  # type: ignore[arg-type]
    if origin is Literal:
        return {"enum": list(typing.get_args(hint))}
    if origin is tuple:
        return {"type": "array", "items": _type_schema(typing.get_args(hint)[0])}
    if origin in (Mapping, dict) or hint is Mapping:
        return {"type": "object", "additionalProperties": {"type": "string"}}
    if hint is bool:
        return {"type": "boolean"}
    if hint is str:
        return {"type": "string"}
    if hint is int:
        return {"type": "integer"}
    raise TypeError(f"no schema for {hint!r}")


def _object_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        prop = _type_schema(hints[f.name])
        prop["description"] = f.metadata["help"]
        if f.default is not dataclasses.MISSING:
            prop["default"] = list(f.default) if isinstance(f.default, tuple) else f.default
        elif f.default_factory is dataclasses.MISSING:
            required.append(f.name)
        props[f.name] = prop
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": props}
    if cls.__doc__:
        out["description"] = cls.__doc__.strip()
    if required:
        out["required"] = required
    return out


def recipe_schema() -> dict[str, Any]:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "ortdist recipe"}
    schema.update(_object_schema(Recipe))
    return schema


def recipe_schema_text() -> str:
    return json.dumps(recipe_schema(), indent=2, sort_keys=False) + "\n"
