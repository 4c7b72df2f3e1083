from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ortdist.cli import SCHEMA_PATH
from ortdist.recipe.schema import recipe_schema, recipe_schema_text


def test_committed_schema_matches_the_model(project: Path) -> None:
    committed = (project / SCHEMA_PATH).read_text(encoding="utf-8")
    assert committed == recipe_schema_text(), "recipes/recipe.schema.json drifted: run `ortdist schema --write`"


def walk(node: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, prop in node.get("properties", {}).items():
        out.append((name, prop))
        out += walk(prop)
    return out


def test_every_field_is_documented_and_closed() -> None:
    schema = recipe_schema()
    assert schema["required"] == ["name", "description"]
    assert schema["additionalProperties"] is False
    for name, prop in walk(schema):
        assert prop["description"], name
    props = schema["properties"]
    assert props["linkage"]["enum"] == ["shared", "static", "both", "wasm"]
    assert props["wheel"]["properties"]["python"]["default"] == ["3.13"]
    assert props["source"]["properties"]["kind"]["enum"] == ["debian", "git", "path"]
    json.dumps(schema)
