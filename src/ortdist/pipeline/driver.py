"""Run a BuildPlan's steps in order: one build per cache at a time, each step timed and logged.

Resumable: the patched source and the sysroot are cached by content, the build tree persists
per recipe (ninja picks up where an interrupted run stopped), and CMake is re-run only when the
configure command changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from ..errors import BuildError, OrtdistError
from ..fsutil import remove_tree
from ..log import log
from ..paths import Cache
from .context import BuildContext
from .layout import StepOutput
from .state import BuildState
from .steps import (
    binding,
    bundle,
    c_smoke,
    check,
    configure,
    install,
    models,
    publish,
    repair,
    size,
    source,
    toolchain,
    wheel,
)
from .steps import build as compile_step

Step = Callable[[BuildContext, BuildState], StepOutput]

# Every step a plan may name, in the order they run; a plan picks the ones its recipe needs.
STEPS: Mapping[str, Step] = {
    "toolchain": toolchain.run,
    "source": source.run,
    "models": models.run,
    "configure": configure.run,
    "build": compile_step.run,
    "binding": binding.run,
    "install": install.run,
    "bundle": bundle.run,
    "c_smoke": c_smoke.run,
    "wheel": wheel.run,
    "repair": repair.run,
    "check": check.run,
    "size": size.run,
    "publish": publish.run,
}


@contextlib.contextmanager
def build_lock(cache: Cache, purpose: str = "a build") -> Iterator[None]:
    """One ORT build at a time per cache: a second ortdist waits instead of halving both."""
    try:
        cache.root.mkdir(parents=True, exist_ok=True)
        fh = (cache.root / "build.lock").open("w")
    except OSError as exc:  # e.g. a cache made by an earlier `sudo ortdist build`, now used without sudo
        raise OrtdistError(
            "cannot use the cache: "
            + (
                "it is not a directory" if cache.root.exists() and not cache.root.is_dir() else str(exc.strerror or exc)
            ),
            where=str(exc.filename or cache.root),
            fix="set ORTDIST_CACHE to a directory you own, or run as the user who made this one (sudo)",
        ) from exc
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info(f"another build holds the cache lock ({cache.root}); {purpose} waits for it to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def remove_stale_temps(directory: Path) -> None:
    """Temp dirs of a killed run (we hold the lock, so nobody else is writing them)."""
    if directory.is_dir():
        for entry in directory.iterdir():
            stale = ".tmp-" in entry.name or ".old-" in entry.name or entry.name.endswith(".part")
            if entry.name.startswith(".") and stale:
                remove_tree(entry)


def run_steps(ctx: BuildContext, state: BuildState, steps: Mapping[str, Step] = STEPS) -> BuildState:
    # Checked before the first step runs: not after a half-hour compile.
    unknown = [name for name in ctx.plan.steps if name not in steps]
    if unknown:
        raise BuildError(f"internal: the plan names step {unknown[0]!r}, which the pipeline does not have")
    for name in ctx.plan.steps:
        with log.step(name):
            started = time.monotonic()
            state.put(steps[name](ctx, state))
            state.timings[name] = round(time.monotonic() - started, 1)
    return state


def build(ctx: BuildContext) -> BuildState:
    """The whole build under the cache lock, after clearing what a killed run left behind."""
    ctx.layout.logs.mkdir(parents=True, exist_ok=True)
    state = BuildState()
    with build_lock(ctx.cache, f"building {ctx.plan.recipe.name}"):
        for directory in (ctx.cache.sources, ctx.cache.sysroots, ctx.layout.dist):
            remove_stale_temps(directory)
        if ctx.fresh:
            log.info(f"--fresh: discarding {ctx.layout.recipe_work}")
            remove_tree(ctx.layout.recipe_work)
        run_steps(ctx, state)
    state.timings["total"] = round(time.monotonic() - state.started, 1)
    return state
