"""Typed step outputs, and the state that collects them; the manifest is serialised from them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..errors import BuildError
from ..manifest import Artifact
from .layout import Roots, StepOutput


@dataclass(frozen=True, kw_only=True)
class Source(StepOutput):
    record: Mapping[str, Any]  # kind, file, url, sha256 (the SBOM's source entry)
    patches: tuple[Mapping[str, str], ...]

    def manifest(self) -> Mapping[str, Any]:
        return {"source": dict(self.record), "patches": [dict(p) for p in self.patches]}


@dataclass(frozen=True, kw_only=True)
class Models(StepOutput):
    """A reduced build's operator config, from the recipe's models converted to ORT format."""

    config: Path
    operators: tuple[str, ...]
    types: bool

    def manifest(self) -> Mapping[str, Any]:
        return {
            "reduced_ops": {
                "config": self.artifacts[-1].source.name,
                "types": self.types,
                "operators": list(self.operators),
            }
        }


@dataclass(frozen=True, kw_only=True)
class Configured(StepOutput):
    reconfigured: bool  # false: CMake did not run (the configure command was unchanged)

    def manifest(self) -> Mapping[str, Any]:
        return {"configure": {"reconfigured": self.reconfigured}}


@dataclass(frozen=True, kw_only=True)
class Compiled(StepOutput):
    tree_compile_s: float  # over every run since the tree was created
    compiler_cache: Mapping[str, Any]
    # Command seconds of the tree's last compile of each output, split into the dependencies ORT
    # compiles from source (``_deps/``) and ORT itself: what a cold build spends on each.
    command_seconds: Mapping[str, float] = field(default_factory=dict)
    ninja_no_work: bool = False  # ninja said "no work to do": this run compiled and linked nothing
    # --workers: the engine, the workers asked, used and left out, where compiles ran (distcc's log)
    workers: Mapping[str, Any] = field(default_factory=dict)

    def manifest(self) -> Mapping[str, Any]:
        return {
            "build_tree_compile_s": self.tree_compile_s,
            "compiler_cache": dict(self.compiler_cache),
            "compile_command_s": dict(self.command_seconds),
            "build": {"ninja_no_work": self.ninja_no_work},
            **({"workers": dict(self.workers)} if self.workers else {}),
        }


@dataclass(frozen=True)
class PerPython:
    """Outputs kept per CPython version, with the seconds each version cost (``key``)."""

    key: str  # binding_s, wheel_s, repair_s, check_s
    seconds: Mapping[str, float]
    timed: bool  # reported in the manifest's python_versions


@dataclass(frozen=True, kw_only=True)
class Bindings(StepOutput):
    modules: Mapping[str, Path]  # version -> the binding compiled for it
    times: PerPython
    ninja_no_work: bool = False  # ninja said "no work to do": every binding was up to date

    def manifest(self) -> Mapping[str, Any]:
        return {"binding": {"ninja_no_work": self.ninja_no_work}}


@dataclass(frozen=True, kw_only=True)
class CLibrary(StepOutput):
    archive: Path


@dataclass(frozen=True, kw_only=True)
class StaticLibrary(StepOutput):
    stage: Path  # lib/libonnxruntime.a, include/, pkg-config: the archive's tree
    system_libs: tuple[str, ...]
    archives_merged: Mapping[str, int]
    bytes: int

    def manifest(self) -> Mapping[str, Any]:
        return {
            "static_library": {
                "archives_merged": dict(self.archives_merged),
                "system_libs": list(self.system_libs),
                "bytes": self.bytes,
            }
        }


@dataclass(frozen=True, kw_only=True)
class CSmoke(StepOutput):
    needed: tuple[str, ...]
    binary_bytes: int
    models: tuple[Mapping[str, Any], ...]

    def manifest(self) -> Mapping[str, Any]:
        return {
            "c_smoke": {
                "needed": list(self.needed),
                "binary_bytes": self.binary_bytes,
                "models": [dict(m) for m in self.models],
            }
        }


@dataclass(frozen=True, kw_only=True)
class WebPackage(StepOutput):
    """The WebAssembly module's npm package, and its files' sizes against the stock package's."""

    package: Path
    stage: Path  # the package's tree: package.json, dist/, sboms/
    sizes: Mapping[str, int]
    stock_sizes: Mapping[str, int]

    def manifest(self) -> Mapping[str, Any]:
        return {"web_package": {"sizes": dict(self.sizes), "stock_sizes": dict(self.stock_sizes)}}


@dataclass(frozen=True, kw_only=True)
class WebSmoke(StepOutput):
    """The module run by onnxruntime-web's own JS: each model's outcome, per runtime (node, browser)."""

    runs: Mapping[str, tuple[Mapping[str, Any], ...]]

    def manifest(self) -> Mapping[str, Any]:
        return {"web_smoke": {where: [dict(m) for m in models] for where, models in self.runs.items()}}


@dataclass(frozen=True, kw_only=True)
class Wheels(StepOutput):
    raw: Mapping[str, Path]  # version -> the wheel scikit-build-core made (re-tagged), or one swapped from it
    times: PerPython
    swapped: tuple[str, ...] = ()  # the versions whose wheel is the first one's with their binding

    def manifest(self) -> Mapping[str, Any]:
        return {"wheel_swapped_binding": list(self.swapped)} if self.swapped else {}


@dataclass(frozen=True, kw_only=True)
class Repaired(StepOutput):
    wheels: Mapping[str, Path]  # version -> the repaired wheel, SBOM inside
    times: PerPython
    how: Mapping[str, str] = field(default_factory=dict)  # version -> "auditwheel", "derived", "derived-kept"

    def manifest(self) -> Mapping[str, Any]:
        return {"repair": dict(self.how)} if self.how else {}


@dataclass(frozen=True, kw_only=True)
class Checks(StepOutput):
    main: Mapping[str, Any]  # the root Python's clean-root result
    others: Mapping[str, Any]  # version -> result, for the other CPythons
    times: PerPython

    def manifest(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {"clean_root_check": dict(self.main)}
        if self.others:
            out["clean_root_check_other_python"] = dict(self.others)
        return out


@dataclass(frozen=True, kw_only=True)
class Compat(StepOutput):
    """The older systems the build was proven on (the toolchain's [compat.*]), one entry each: name,
    suite, glibc, check, ok, seconds, root, and the check's details."""

    results: tuple[Mapping[str, Any], ...]

    def manifest(self) -> Mapping[str, Any]:
        return {"compat": [dict(r) for r in self.results]}


@dataclass(frozen=True, kw_only=True)
class Size(StepOutput):
    report: Mapping[str, Any]

    def manifest(self) -> Mapping[str, Any]:
        return {"size": dict(self.report)}


@dataclass(frozen=True, kw_only=True)
class Published(StepOutput):
    entries: tuple[Mapping[str, Any], ...]

    def manifest(self) -> Mapping[str, Any]:
        return {"artifacts": [dict(e) for e in self.entries]}


OutputT = TypeVar("OutputT")


@dataclass
class BuildState:
    """The outputs of the steps run so far, in order, and their durations."""

    outputs: dict[type[Any], Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    reused: dict[str, dict[str, Any]] = field(default_factory=dict)  # step -> when and how long it ran

    def put(self, output: StepOutput) -> None:
        self.outputs[type(output)] = output

    def get(self, kind: type[OutputT]) -> OutputT:
        found = self.outputs.get(kind)
        if found is None:
            raise BuildError(
                f"internal: a step needs {kind.__name__}, which no earlier step produced",
                fix="the plan's step order is wrong; report this as a bug",
            )
        return found  # type: ignore[no-any-return]

    def find(self, kind: type[OutputT]) -> OutputT | None:
        return self.outputs.get(kind)

    @property
    def roots(self) -> Roots:
        return self.get(Roots)

    def artifacts(self) -> list[Artifact]:
        return [a for out in self.outputs.values() for a in out.artifacts]

    def manifest_sections(self) -> dict[str, Any]:
        """Every output's manifest keys, plus python_versions merged from the per-version steps."""
        sections: dict[str, Any] = {}
        versions: dict[str, dict[str, float]] = {}
        for out in self.outputs.values():
            sections.update(out.manifest())
            times = getattr(out, "times", None)
            if isinstance(times, PerPython) and times.timed:
                for version, seconds in times.seconds.items():
                    versions.setdefault(version, {})[times.key] = seconds
        if versions:
            sections["python_versions"] = versions
        return sections
