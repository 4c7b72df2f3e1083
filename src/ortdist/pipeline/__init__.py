"""The build as an explicit pipeline: a table of steps, each ``run(ctx, state) -> output``."""

from __future__ import annotations

from pathlib import Path

from ..fsutil import allow_removals_under
from ..paths import Cache
from ..plan import BuildPlan
from ..toolchains import Toolchain
from .context import BuildContext
from .driver import STEPS, build, build_lock
from .layout import Layout, Place, Roots
from .runner import Command, RecordingRunner, Runner, SubprocessRunner
from .state import BuildState


def make_context(
    plan: BuildPlan,
    toolchain: Toolchain,
    cache: Cache,
    dist: Path,
    recipe_path: Path,
    jobs: int,
    *,
    fresh: bool = False,
    reuse: bool = True,
    keep_going: bool = False,
    runner: Runner | None = None,
) -> BuildContext:
    """A context over the real subprocess runner unless another is given (tests).

    The recipe's dist directory becomes a place this run may delete in (see fsutil.check_removable)."""
    allow_removals_under(dist)
    return BuildContext(
        plan=plan,
        toolchain=toolchain,
        cache=cache,
        layout=Layout.for_plan(plan, cache, dist),
        recipe_path=recipe_path,
        jobs=jobs,
        runner=runner or SubprocessRunner(toolchain),
        fresh=fresh,
        reuse=reuse,
        keep_going=keep_going,
    )


__all__ = [
    "STEPS",
    "BuildContext",
    "BuildState",
    "Command",
    "Layout",
    "Place",
    "RecordingRunner",
    "Roots",
    "Runner",
    "SubprocessRunner",
    "build",
    "build_lock",
    "make_context",
]
