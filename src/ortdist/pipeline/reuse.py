"""Skipping steps whose inputs have not changed: a no-op rebuild reuses the packaging steps' outputs.

The steps up to the compile always run. They are incremental already: the roots and sources are
verified against their manifests, CMake re-runs only for a new configure command, and ninja compiles
only what changed. Each of them then gives a fingerprint of what it produced:

- the roots and the source: their output (the tree names carry their digests);
- configure: the CMake cache's bytes;
- the compile and the bindings: ninja's logs, which gain a line for every output ninja rebuilds.

The packaging steps after the compile (install, wheels, repair, checks, size...) are skipped when
their inputs are unchanged. A step's inputs digest chains ortdist's own code, the plan (defines,
toolchain digest, Pythons), the recipe file, and every earlier step's fingerprint. A reusable step's
own fingerprint is its serialised output, so whatever depends on it is chained too. After a step
runs, its output is recorded with that digest and the size and mtime of every file the output
names, in ``<work>/<recipe>/steps/<step>.json``. A rerun with an equal digest, whose files are
still as recorded, takes the recorded output and says so; anything else runs the step again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from ..manifest import Artifact
from .layout import Roots, StepOutput
from .state import PerPython

RECORD_FORMAT = 1
PACKAGE = Path(__file__).resolve().parents[1]


def _types() -> dict[str, type[Any]]:
    found: dict[str, type[Any]] = {"PerPython": PerPython, "Artifact": Artifact, "Roots": Roots}
    pending: list[type[Any]] = [StepOutput]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending += cls.__subclasses__()
    return found


def encode(value: Any) -> Any:
    """A step output as JSON that decodes to an equal object: dataclasses by type name, paths,
    tuples and mappings marked, so nothing comes back as a list or str that was not one."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, "fields": fields}
    if isinstance(value, Path):
        return {"__path__": str(value)}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"only string keys can be recorded, not {sorted(map(repr, value))[:3]}")
        return {"__map__": {k: encode(v) for k, v in value.items()}}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"a step output holds a {type(value).__name__}, which cannot be recorded")


def decode(data: Any) -> Any:
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "__type__" in data:
        cls = _types().get(data["__type__"])
        if cls is None:
            raise ValueError(f"unknown recorded type {data['__type__']!r}")
        return cls(**{k: decode(v) for k, v in data["fields"].items()})
    if "__path__" in data:
        return Path(data["__path__"])
    if "__tuple__" in data:
        return tuple(decode(v) for v in data["__tuple__"])
    if "__map__" in data:
        return {k: decode(v) for k, v in data["__map__"].items()}
    raise ValueError(f"unrecognised recorded value with keys {sorted(data)[:4]}")


def paths_in(encoded: Any) -> Iterator[str]:
    """Every path an encoded output names."""
    if isinstance(encoded, list):
        for v in encoded:
            yield from paths_in(v)
    elif isinstance(encoded, dict):
        if "__path__" in encoded:
            yield encoded["__path__"]
        else:
            for v in encoded.values():
                yield from paths_in(v)


def file_state(path: str) -> str:
    """What a named path is now: a file's size and mtime, a directory, or missing."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return "missing"
    return "dir" if p.is_dir() else f"file {st.st_size} {st.st_mtime_ns}"


def files_of(encoded: Any) -> dict[str, str]:
    return {p: file_state(p) for p in sorted(set(paths_in(encoded)))}


def contents_of(encoded: Any) -> dict[str, str]:
    """Every named file's sha256 (a directory is "dir", its content the step's own business)."""
    return {p: "dir" if Path(p).is_dir() else content_digest(Path(p)) for p in sorted(set(paths_in(encoded)))}


def content_digest(path: Path) -> str:
    """A file's sha256, or "missing": ninja's and CMake's records of what they did."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


@functools.cache
def code_digest() -> str:
    """ortdist's own sources and data: a new ortdist repackages even when nothing else changed."""
    digest = hashlib.sha256()
    for path in sorted(p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix in (".py", ".toml", ".json")):
        digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def chain(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class Record:
    inputs: str
    output: Any  # encoded
    files: Mapping[str, str]
    seconds: float
    recorded_at: float


@dataclass(frozen=True)
class Reused:
    """A step taken from its record: what it did then."""

    output: StepOutput
    seconds: float
    recorded_at: float

    def manifest(self) -> dict[str, Any]:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.recorded_at))
        return {"seconds": self.seconds, "recorded_at": when}


@dataclass(frozen=True)
class StepRecords:
    """The records of one recipe's steps (``<work>/<recipe>/steps/``)."""

    directory: Path

    def path(self, step: str) -> Path:
        return self.directory / f"{step}.json"

    def load(self, step: str) -> Record | None:
        try:
            data = json.loads(self.path(step).read_text(encoding="utf-8"))
            if data.get("format") != RECORD_FORMAT:
                return None
            return Record(data["inputs"], data["output"], data["files"], data["seconds"], data["recorded_at"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def reusable(self, step: str, inputs: str) -> Reused | None:
        """The recorded output, if it was made from ``inputs`` and its files are untouched since."""
        found = self.load(step)
        if found is None or found.inputs != inputs or files_of(found.output) != dict(found.files):
            return None
        try:
            output = decode(found.output)
        except (TypeError, ValueError):  # a record of an output type that has since changed
            return None
        return Reused(output, found.seconds, found.recorded_at) if isinstance(output, StepOutput) else None

    def save(self, step: str, inputs: str, output: StepOutput, seconds: float) -> None:
        encoded = encode(output)
        document = {
            "format": RECORD_FORMAT,
            "inputs": inputs,
            "output": encoded,
            "files": files_of(encoded),
            "seconds": seconds,
            "recorded_at": time.time(),
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path(step), json.dumps(document, sort_keys=True) + "\n")

    def forget(self, step: str) -> None:
        self.path(step).unlink(missing_ok=True)
