"""What every step is handed: the plan, the toolchain, where things live, and how to run commands."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from ..fsutil import sha256_file
from ..paths import IN_ROOT_TARGET, Cache
from ..plan import BuildPlan
from ..toolchains import Toolchain
from ..toolchains.spec import CrossTarget
from .layout import Layout, Roots
from .runner import Command, Result, Runner
from .target_compiler import TargetCompiler, target_compiler

T = TypeVar("T")


@dataclass(frozen=True)
class BuildContext:
    plan: BuildPlan
    toolchain: Toolchain
    cache: Cache
    layout: Layout
    recipe_path: Path
    jobs: int
    runner: Runner
    fresh: bool = False  # discard the recipe's build tree first (caches stay): a clean build
    reuse: bool = True  # take a packaging step's recorded outputs when its inputs are unchanged
    # ninja goes on past failing commands, so one run names every file a new toolchain or patch breaks
    keep_going: bool = False

    @functools.cached_property
    def recipe_sha256(self) -> str:
        return sha256_file(self.recipe_path)

    def log_path(self, name: str) -> Path:
        return self.layout.logs / f"{name}.log"

    def open_log(self, name: str) -> TextIO:
        """dist/<recipe>/logs/<name>.log, one per command group: the file an error points at."""
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        return self.log_path(name).open("w", encoding="utf-8")

    def each_python(self, versions: Sequence[str], work: Callable[[str], T]) -> tuple[dict[str, T], dict[str, float]]:
        """``work(version)`` for every version, side by side on the build's cores (each mostly waits
        on its own commands: pip, auditwheel, a check's Python): results and seconds in version
        order. Every version runs to its end; then the first error, in version order, is raised."""

        def timed(version: str) -> tuple[T, float]:
            started = time.monotonic()
            result = work(version)
            return result, round(time.monotonic() - started, 1)

        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(versions)))) as pool:
            futures = [(v, pool.submit(timed, v)) for v in versions]
        for _, future in futures:
            if future.exception() is not None:
                future.result()  # raises it
        done = {v: f.result() for v, f in futures}
        return {v: r for v, (r, _) in done.items()}, {v: s for v, (_, s) in done.items()}

    def source_date_epoch(self) -> int:
        """The source release's own timestamp, so rebuilds stamp the same times into archives."""
        return int((self.layout.source.host / "VERSION_NUMBER").stat().st_mtime)

    def env(self) -> dict[str, str]:
        """The build root's environment: compiler-cache settings, a fixed build date, cross facts."""
        return {
            **self.plan.compiler_cache.env(os.environ),
            "SOURCE_DATE_EPOCH": str(self.source_date_epoch()),
            **self.plan.toolchain.cross_facts(self.plan.target.triple, "env"),
        }

    def in_root(self, roots: Roots, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Command:
        """``argv`` in the build root with every tree of the layout mounted; ``env`` adds to ``env()``."""
        return Command(tuple(argv), roots.build, tuple(self.layout.binds(roots)), {**self.env(), **(env or {})})

    def host_capture(self, argv: Sequence[str], **options: Any) -> Result:
        """``argv`` on the host through the step's runner (recorded in unit tests), as run.capture takes it."""
        return self.runner.capture(Command(tuple(argv)), **options)

    def tool(self, name: str) -> str:
        """A binutils/compiler tool for the target (the cross prefix when there is one)."""
        return self.plan.toolchain.tool_prefix(self.plan.target.triple) + name

    def compiler(self, roots: Roots) -> TargetCompiler:
        """The target's C and C++ compilers as the build ran them (for what compiles outside CMake)."""
        sysroot = str(IN_ROOT_TARGET) if roots.target is not None else ""
        return target_compiler(self.plan.cmake_defines, self.tool(""), sysroot)

    @property
    def cross(self) -> CrossTarget | None:
        """The toolchain's [cross.<triple>] facts when the target is cross-built (emulator, libraries)."""
        return self.plan.toolchain.cross_targets.get(self.plan.target.triple)
