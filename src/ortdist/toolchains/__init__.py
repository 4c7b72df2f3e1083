"""Toolchains: one implementation per kind behind the ``Toolchain`` protocol, picked from a registry.

A toolchain turns a spec (``toolchains/<name>.toml``) into a place where commands run: it
creates and caches its root, and wraps commands so they run inside it with given bind mounts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from ..errors import RecipeError
from ..paths import Cache
from .host_python import require_host_pythons
from .load import load_toolchain
from .spec import CompatRoot, ToolchainSpec


@dataclass(frozen=True)
class Bind:
    """A host path made visible at ``inside`` within the root."""

    host: Path
    inside: Path
    read_only: bool = False


@dataclass(frozen=True)
class ToolTree:
    """Packages unpacked beside a build root: what ``finish`` adds to the tree (wrappers, say) is
    versioned by ``layout``, which names the tree with the packages."""

    name: str
    packages: tuple[str, ...]
    finish: Callable[[Path], None]
    layout: str


class Toolchain(Protocol):
    spec: ToolchainSpec

    def preflight(self) -> None:
        """Refuse at once what would fail later (not root, a host tool missing, a toolchain this
        machine cannot run): called before the lock is taken and before anything is written."""
        ...

    def ensure_build_root(self, cache: Cache, log: TextIO) -> Path:
        """Create (once) and return the root with every build dependency installed."""
        ...

    def ensure_clean_root(self, cache: Cache, log: TextIO) -> Path:
        """Create (once) and return a root with only a bare Python, for post-build checks."""
        ...

    def ensure_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        """Create (once) and return a cross target's sysroot (its libraries, for --sysroot)."""
        ...

    def ensure_clean_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        """Create (once) and return a cross target's bare-Python root (checks, under the emulator)."""
        ...

    def ensure_python_overlay(self, cache: Cache, build_root: Path, version: str, log: TextIO) -> Path:
        """Create (once) and return the directory of another CPython ``version`` (bound at
        /ortdist/python/<version>): the binding for it is compiled, and its wheel checked, there."""
        ...

    def ensure_compat_root(self, cache: Cache, compat: CompatRoot, log: TextIO) -> Path:
        """Create (once) and return the older system ``compat`` names ([compat.<name>]): its suite
        with only its packages, where the compat step proves the build's outputs run."""
        ...

    def ensure_tool_tree(self, cache: Cache, build_root: Path, tree: ToolTree, log: TextIO) -> Path:
        """Create (once) and return ``tree``'s packages (with what of their dependencies the build
        root lacks) unpacked beside the build root, not installed in it. Programs a build runs
        only sometimes (distcc)."""
        ...

    def root_names(self, triple: str, steps: Collection[str], extra_python: Sequence[str]) -> tuple[str, ...]:
        """Names under <cache>/sysroots of the roots a build of ``steps`` for ``triple`` makes, the
        build root's first (pure: CI keys its caches by them)."""
        ...

    def installed_packages(self, root: Path) -> dict[str, str]:
        """Package -> version of everything installed in ``root`` (for the SBOM)."""
        ...

    def library_packages(self, root: Path) -> dict[str, str]:
        """Shared-library file name -> the package that installed it in ``root`` (for the SBOM)."""
        ...

    def wrap(
        self,
        root: Path,
        cmd: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        writable: Path | None = None,
    ) -> list[str]:
        """The host argv that runs ``cmd`` inside ``root`` (pure: builds the command, runs nothing);
        ``writable``: the root seen through an overlay whose writes land there (a daemon's)."""
        ...


def make_toolchain(spec: ToolchainSpec) -> Toolchain:
    from .debian import DebianSysroot
    from .plan_only import PlanOnlyToolchain

    if spec.plan_only:
        return PlanOnlyToolchain(spec)
    kinds: dict[str, Callable[[ToolchainSpec], Toolchain]] = {"debian-sysroot": DebianSysroot}
    if spec.kind not in kinds:
        raise RecipeError(
            f"toolchain kind {spec.kind!r} is not supported",
            where=f"toolchains/{spec.name}.toml",
            fix=f"kinds: {', '.join(kinds)}; or mark the toolchain plan_only = true",
        )
    return kinds[spec.kind](spec)


__all__ = ["Bind", "ToolTree", "Toolchain", "ToolchainSpec", "load_toolchain", "make_toolchain", "require_host_pythons"]
