"""Toolchains ortdist can plan for but not run yet (``plan_only = true``: macOS/Xcode, Windows/MSVC).

Their recipes are planned and unit-tested, and CI puts them on a runner that has what they need;
any attempt to use one stops with a ToolchainError that names the machine it needs, instead of
failing later inside a debootstrap or chroot that does not apply to it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from ..errors import ToolchainError
from ..paths import Cache
from . import Bind, ToolTree
from .spec import CompatRoot, ToolchainSpec


class PlanOnlyToolchain:
    def __init__(self, spec: ToolchainSpec) -> None:
        self.spec = spec

    def _refuse(self, what: str) -> NoReturn:
        raise ToolchainError(
            f"toolchain {self.spec.name!r} ({self.spec.kind}) needs {self.spec.needs}; "
            f"ortdist can plan for it but cannot {what} with it yet",
            where=f"toolchains/{self.spec.name}.toml",
            fix="`ortdist plan RECIPE` shows what the build would do; CI lists the recipe on a runner that has "
            "what the toolchain needs, for an implementation to run it there",
        )

    def preflight(self) -> None:
        self._refuse("build")

    def ensure_build_root(self, cache: Cache, log: TextIO) -> Path:
        self._refuse("build")

    def ensure_clean_root(self, cache: Cache, log: TextIO) -> Path:
        self._refuse("check wheels")

    def ensure_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        self._refuse("cross-build")

    def ensure_python_overlay(self, cache: Cache, build_root: Path, version: str, log: TextIO) -> Path:
        self._refuse(f"provide CPython {version}")

    def ensure_clean_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        self._refuse("cross-build")

    def ensure_compat_root(self, cache: Cache, compat: CompatRoot, log: TextIO) -> Path:
        self._refuse(f"check a build on Debian {compat.suite}")

    def ensure_tool_tree(self, cache: Cache, build_root: Path, tree: ToolTree, log: TextIO) -> Path:
        self._refuse(f"provide {tree.name}")

    def root_names(self, triple: str, steps: Collection[str], extra_python: Sequence[str]) -> tuple[str, ...]:
        return ()  # no roots: its builds run on the runner itself

    def installed_packages(self, root: Path) -> dict[str, str]:
        self._refuse("list packages")

    def library_packages(self, root: Path) -> dict[str, str]:
        self._refuse("list packages")

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
        self._refuse("run commands")
