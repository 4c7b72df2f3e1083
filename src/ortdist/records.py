"""The JSON files ortdist writes and reads back later (a build's manifest, smoke reports, device
proofs and their bundles, publish records, bench results): one loader, and each kind's fields as
data. A file that is missing, a directory, empty, not UTF-8, not JSON, not an object, from another
ortdist (its ``schema``), or without a field a reader needs is a named error: what, which file, how
to fix, never a traceback or a silently dropped build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import DataError, OrtdistError

REBUILD = "delete it, or rebuild the recipe (ortdist build <recipe>) to write it again"


@dataclass(frozen=True)
class Kind:
    """One kind of file: what to call it, the fields every reader of it needs (name -> JSON types),
    the schema version ortdist writes into it (None: it carries none), and how to fix a bad one."""

    what: str
    fields: Mapping[str, tuple[type, ...]] = field(default_factory=lambda: MappingProxyType({}))
    schema: int | None = None
    fix: str = REBUILD


MANIFEST = Kind("build manifest", MappingProxyType({"artifacts": (list,)}), schema=1)
SMOKE_REPORT = Kind(
    "smoke report",
    MappingProxyType({"wheel": (str,), "wheel_sha256": (str,), "passed": (bool,)}),
    fix="run the smoke suite again (ortdist smoke <wheel>) to write it",
)
DEVICE_PROOF = Kind(
    "device proof",
    MappingProxyType({"wheel": (str,), "wheel_sha256": (str,), "passed": (bool,)}),
    fix="pass the folder `device-proof run` wrote (its --out), unchanged",
)
PROOF_BUNDLE = Kind(
    "device-proof bundle manifest",
    MappingProxyType({"recipe": (str,), "wheel": (str,), "wheel_sha256": (str,), "python": (str,)}),
    fix="carry the whole .device-proof/<recipe> folder `device-proof prepare` wrote",
)
PUBLISH_RECORD = Kind("publish record", MappingProxyType({"uploaded": (list,)}), fix="publish again, or delete it")
BENCH_RESULTS = Kind("bench results", fix="delete it; `nox -s bench` measures every part again")
KINDS = (MANIFEST, SMOKE_REPORT, DEVICE_PROOF, PROOF_BUNDLE, PUBLISH_RECORD, BENCH_RESULTS)

_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true or false",
    int: "a number",
    float: "a number",
}


def _json_type(value: object) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def load(path: Path, kind: Kind, error: type[OrtdistError] = DataError) -> dict[str, Any]:
    """``path``'s JSON object, checked as ``kind``; ``error``: the class of the command's errors."""

    def bad(what: str) -> OrtdistError:
        return error(f"the {kind.what} {what}", where=str(path), fix=kind.fix)

    if path.is_dir():
        raise bad("is a directory, not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise bad("does not exist") from None
    except UnicodeDecodeError:
        raise bad("is not UTF-8 text") from None
    except OSError as exc:
        raise bad(f"cannot be read ({exc.strerror})") from None
    if not text.strip():
        raise bad("is empty")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise bad(f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise bad(f"is not a JSON object but {_json_type(data)}")
    if kind.schema is not None and data.get("schema", kind.schema) != kind.schema:
        raise bad(f"has schema {data.get('schema')!r}, from another ortdist (this one reads {kind.schema})")
    for name, types in kind.fields.items():
        if name not in data:
            raise bad(f"lacks the field {name!r}")
        value = data[name]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise bad(f"has {name!r} as {_json_type(value)}, not {' or '.join(_JSON_TYPES[t] for t in types)}")
    return data
