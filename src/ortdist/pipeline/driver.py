"""Run a BuildPlan's steps in order: one build per cache at a time, each step timed and logged.

Resumable: the patched source and the sysroot are cached by content, the build tree persists
per recipe (ninja picks up where an interrupted run stopped), and CMake is re-run only when the
configure command changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from .. import children
from ..errors import BuildError, OrtdistError
from ..fsutil import remove_tree, unmount_below
from ..log import log
from ..paths import Cache
from . import reuse
from .context import BuildContext
from .state import BuildState
from .step import StepDef
from .steps import (
    binding,
    bundle,
    c_smoke,
    check,
    compat,
    configure,
    install,
    models,
    publish,
    repair,
    size,
    source,
    toolchain,
    web_package,
    web_smoke,
    wheel,
)
from .steps import build as compile_step

# Every step a plan may name, in the order they run; a plan picks the ones its recipe needs. What
# each step is (its run function, whether it is reusable, its fingerprint) is its module's STEP.
STEPS: Mapping[str, StepDef] = {
    "toolchain": toolchain.STEP,
    "source": source.STEP,
    "models": models.STEP,
    "configure": configure.STEP,
    "build": compile_step.STEP,
    "binding": binding.STEP,
    "install": install.STEP,
    "bundle": bundle.STEP,
    "c_smoke": c_smoke.STEP,
    "wheel": wheel.STEP,
    "repair": repair.STEP,
    "check": check.STEP,
    "compat": compat.STEP,
    "web_package": web_package.STEP,
    "web_smoke": web_smoke.STEP,
    "size": size.STEP,
    "publish": publish.STEP,
}


@contextlib.contextmanager
def build_lock(cache: Cache, purpose: str = "a build") -> Iterator[None]:
    """One ORT build at a time per cache: a second ortdist waits instead of halving both.

    The holder writes who it is into the lock file, so a waiter says what it waits for. Once
    the lock is ours, whatever a killed earlier holder left is cleared first: its process groups
    that still run (orphans of ``kill -9``), then its temp trees and partial downloads."""
    path = cache.root / LOCK
    try:
        cache.root.mkdir(parents=True, exist_ok=True)
        # Not "w": truncating before the lock is ours would erase the holder's record a waiter reads.
        fh = path.open("a+", encoding="utf-8")
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
            log.info(f"waiting for the cache lock ({cache.root}) held by {lock_holder(path)}; {purpose} starts then")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        holder = {"pid": os.getpid(), "purpose": purpose, "started": time.time(), "command": shlex.join(sys.argv)}
        fh.write(json.dumps(holder) + "\n")
        fh.flush()
        try:
            ledger = children.Ledger(cache.root / CHILDREN)
            clear_leftovers(cache, ledger)
            with children.recording(ledger):
                yield
        finally:
            fh.seek(0)
            fh.truncate()


LOCK = "build.lock"
CHILDREN = "children.json"  # the process groups the lock's holder has running (see children.Ledger)


def lock_holder(path: Path) -> str:
    """'pid N (building cpu-linux since 22:40: ortdist build cpu-linux)', from the lock file."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        since = time.strftime("%H:%M", time.localtime(float(holder["started"])))
        return f"pid {int(holder['pid'])} ({holder['purpose']} since {since}: {holder['command']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another ortdist"  # one that does not say (an older version), or is just starting


def clear_leftovers(cache: Cache, ledger: children.Ledger) -> None:
    """What a killed run left: first its still-running process groups (they may still write into
    the temp trees), then the temp trees and partial downloads in every cache directory."""
    for group in children.end_orphans(ledger):
        log.info(f"ended pid {group.pgid}, left running by an earlier ortdist that was killed: {group.command[:100]}")
    for directory in stale_dirs(cache):
        remove_stale_temps(directory)


def stale_dirs(cache: Cache) -> list[Path]:
    """Every cache directory a temp tree, an ``.old-`` tree or a ``.part`` file is made in."""

    def subdirs(path: Path) -> list[Path]:
        try:
            return sorted(p for p in path.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return []

    root = cache.root
    fixed = [root, cache.downloads, cache.downloads / "ep-wheels", cache.sources, cache.sysroots, root / "tools"]
    fixed += [root / "smoke", *subdirs(root / "wheelhouse")]
    recipes = subdirs(root / "work")
    return [*fixed, *recipes, *(r / "work" for r in recipes), *(d for r in recipes for d in subdirs(r / "work"))]


def is_stale(name: str) -> bool:
    """Names only a run in progress uses: temp siblings, replaced trees, downloads, apt state."""
    marks = ".tmp-" in name or ".old-" in name or name.endswith((".part", ".apt-state"))
    return name.startswith(".") and marks


def remove_stale_temps(directory: Path) -> None:
    """Temp trees and files of a killed run (we hold the lock, so nobody else is writing them):
    anything mounted below a tree is unmounted first; what cannot be removed is an error naming it."""
    try:
        entries = sorted(e for e in directory.iterdir() if is_stale(e.name))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise OrtdistError(
            f"cannot list {directory} to remove what an interrupted run left there: {exc.strerror}",
            where=str(directory),
            fix="check its owner and permissions (ortdist runs as root for the debian-sysroot toolchain)",
        ) from exc
    for entry in entries:
        try:
            if entry.is_dir() and not entry.is_symlink():
                unmount_below(entry)
                remove_tree(entry)
            else:
                entry.unlink(missing_ok=True)
        except OSError as exc:
            raise OrtdistError(
                f"cannot remove {entry}, left by an interrupted run: {exc.strerror or exc}",
                where=str(entry),
                fix=f"remove it by hand (as the user that ran ortdist): rm -rf {shlex.quote(str(entry))}",
            ) from exc


def build_inputs(ctx: BuildContext) -> str:
    """The digest every step's inputs start from: ortdist itself, the plan, the toolchain, the recipe."""
    plan = json.dumps(ctx.plan.summary(), sort_keys=True)
    return reuse.chain(reuse.code_digest(), plan, ctx.plan.toolchain.digest, ctx.recipe_sha256)


def run_steps(ctx: BuildContext, state: BuildState, steps: Mapping[str, StepDef] = STEPS) -> BuildState:
    """Each step in order; a packaging step whose inputs digest equals its record's is not run
    again: its recorded outputs are taken, and the manifest says so (``reused_steps``)."""
    # Checked before the first step runs: not after a half-hour compile.
    unknown = [name for name in ctx.plan.steps if name not in steps]
    if unknown:
        raise BuildError(f"internal: the plan names step {unknown[0]!r}, which the pipeline does not have")
    records = reuse.StepRecords(ctx.layout.recipe_work / "steps")
    base = inputs = build_inputs(ctx)
    for name in ctx.plan.steps:
        step = steps[name]
        with log.step(name):
            started = time.monotonic()
            chained = reuse.chain(inputs, name)  # every step before it: what the steps after it chain on
            # A step that says what it depends on is keyed by that (and ortdist, plan and recipe).
            key = reuse.chain(base, name, step.inputs(ctx, state)) if step.inputs else chained
            found = records.reusable(name, key) if ctx.reuse and step.reusable else None
            if found is not None:
                said = "what it checks is unchanged" if step.inputs else "inputs unchanged"
                log.info(
                    f"{name}: {said} since {found.manifest()['recorded_at']}; "
                    f"reusing its outputs (it took {found.seconds:.1f} s then)"
                )
                output = found.output
                state.reused[name] = found.manifest()
            else:
                records.forget(name)  # an interrupted run must not leave an older record to trust
                output = step.run(ctx, state)
            state.put(output)
            state.timings[name] = round(time.monotonic() - started, 1)
            if found is None and step.reusable:
                records.save(name, key, output, state.timings[name])
            inputs = reuse.chain(chained, step.fingerprint_of(ctx, output))
    return state


def build(ctx: BuildContext) -> BuildState:
    """The whole build under the cache lock, after clearing what a killed run left behind."""
    ctx.layout.logs.mkdir(parents=True, exist_ok=True)
    state = BuildState()
    with build_lock(ctx.cache, f"building {ctx.plan.recipe.name}"):
        for directory in (ctx.layout.dist, *(d for d in sorted(ctx.layout.dist.glob("*")) if d.is_dir())):
            remove_stale_temps(directory)
        if ctx.fresh:
            log.info(f"--fresh: discarding {ctx.layout.recipe_work}")
            remove_tree(ctx.layout.recipe_work)
        run_steps(ctx, state)
    state.timings["total"] = round(time.monotonic() - state.started, 1)
    return state
