"""The compile: ninja in the build root through the compiler cache, with a progress bar."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import ninjalog, workers
from ...compiler_cache import CACHE_START_FAILED
from ...errors import BuildError
from ...fsutil import remove_tree
from ...log import log
from ...progress import NinjaProgress, failure_excerpt
from ..context import BuildContext
from ..state import BuildState, Compiled
from ..step import StepDef, ninja_state
from . import binding


def account_compile(build_dir: Path, seconds: float) -> float:
    """Compile seconds spent on this build tree over every run since it was created: what the
    artifacts cost to compile, which a resumed or cached run's own time does not show."""
    ledger = build_dir / ".ortdist-compile-seconds"
    try:
        total = float(ledger.read_text(encoding="utf-8")) if ledger.is_file() else 0.0
    except ValueError:
        total = 0.0
    total = round(total + seconds, 1)
    ledger.write_text(f"{total}\n", encoding="utf-8")
    return total


def cache_start_error(ctx: BuildContext, output: Path) -> BuildError:
    """A compiler cache that cannot start: its own words, and where its backend comes from."""
    cc = ctx.plan.compiler_cache
    # sccache appends its stack trace: not for a person
    message = output.read_text(encoding="utf-8", errors="replace").split("Backtrace:", 1)[0]
    words = [line.strip() for line in message.splitlines() if line.strip()]
    backend = sorted(k for k in cc.passed(os.environ) if k not in cc.defaults)
    return BuildError(
        f"the compiler cache {cc.name} did not start, so nothing was compiled:\n    "
        + "\n    ".join(words[:8] or ["(it printed nothing)"]),
        where=f"{cc.name}'s settings in this environment: {', '.join(backend) or 'none (local disk)'}",
        fix="make the cache's backend reachable (e.g. SCCACHE_WEBDAV_ENDPOINT, SCCACHE_REDIS_ENDPOINT, "
        f"SCCACHE_BUCKET), unset its variables to cache on local disk, or build with --compiler-cache ccache; "
        f"its full output: {output}",
    )


@dataclass(frozen=True)
class Distributed:
    """What the compile sends to workers: the environment and the jobs they add (none: all local)."""

    env: Mapping[str, str]
    jobs: int
    record: dict[str, Any]
    client_log: Path | None = None  # distcc's log on the host, where compiles ran


def distribute(ctx: BuildContext, state: BuildState) -> Distributed:
    """The plan's workers probed (workers.py): those that compile the probe to this machine's bytes
    take ccache's misses; one that does not answer is left out with a warning (its share compiles
    here); one that answers with another compiler, or none, stops the build."""
    plan = ctx.plan
    if not plan.workers:
        return Distributed({}, 0, {})
    place = ctx.layout.work / "distcc"
    probe = place / "probe"
    remove_tree(place.host)
    probe.host.mkdir(parents=True)
    (probe.host / "probe.cc").write_text(workers.PROBE_SOURCE, encoding="utf-8")
    script = workers.probe_script(plan.workers, workers.probe_compiler(plan.cmake_defines), probe.inside)
    out = ctx.runner.capture(ctx.in_root(state.roots, ["/bin/sh", "-c", script]), check=False)
    logs = {
        n: (probe.host / f"w{n}.log").read_text(encoding="utf-8", errors="replace")
        for n in range(len(plan.workers))
        if (probe.host / f"w{n}.log").is_file()
    }
    results = workers.read_probe(plan.workers, out.stdout, logs)
    bad = [r for r in results if r.status in ("failed", "differs")]
    if bad or out.returncode != 0:
        said = {"failed": "answered but could not compile the probe", "differs": "compiled the probe differently"}
        lines = [f"{r.worker.spec} {said[r.status]}: {r.detail}" for r in bad] or [
            f"the probe did not compile here (exit {out.returncode}): {(out.stdout + out.stderr).strip()[-400:]}"
        ]
        raise BuildError(
            "a worker does not compile as this build does, so nothing was sent to any:\n    " + "\n    ".join(lines),
            where=workers.WHERE,
            fix=f"run `ortdist worker {plan.toolchain.name}` there (the same toolchain root), or leave it out; "
            f"distcc's own words: {probe.host}/w*.log",
        )
    used = [r.worker for r in results if r.usable]
    for r in results:
        if not r.usable:
            log.warning(f"worker {r.worker.spec} did not answer ({r.detail}): its share of the compile runs here")
    record: dict[str, Any] = {
        "engine": workers.ENGINE,
        "asked": [w.spec for w in plan.workers],
        "used": [w.spec for w in used],
        "left_out": {r.worker.spec: r.detail for r in results if not r.usable},
    }
    if not used:
        log.warning("no worker answered: compiling on this machine only")
        return Distributed({}, 0, record)
    env = workers.client_env(used, place.inside, os.environ)
    return Distributed(env, sum(w.slots for w in used), record, place.host / workers.CLIENT_LOG)


def run(ctx: BuildContext, state: BuildState) -> Compiled:
    lines: list[str] = []
    progress = NinjaProgress()
    distributed = distribute(ctx, state)

    def on_line(line: str) -> None:
        lines.append(line)
        progress.feed(line)

    cc = ctx.plan.compiler_cache
    stats = ctx.layout.work / "compiler-cache-stats.txt"
    stats.host.unlink(missing_ok=True)
    # One shell in one mount namespace: a cache server (sccache) started by the first command
    # serves the build and is stopped before the namespace, and its bind mounts, go away.
    start = ctx.layout.work / "compiler-cache-start.txt"
    start.host.unlink(missing_ok=True)
    # Extra CPythons: their bindings join the core's graph (binding.write_graph), one ninja run.
    manifest = binding.write_graph(ctx, state) if ctx.plan.extra_python else None
    build = shlex.join(ctx.plan.build_argv(ctx.jobs + distributed.jobs, ctx.keep_going, manifest))
    script = cc.around(build, str(stats.inside), str(start.inside))
    started = time.monotonic()
    try:
        with ctx.open_log("build") as out:
            command = ctx.in_root(state.roots, ["/bin/sh", "-c", script], distributed.env)
            code = ctx.runner.stream(command, on_line=on_line, log=out)
            progress.close()
    finally:
        # A stopped sitting (Ctrl-C, SIGTERM) counts too: the next run resumes from its objects.
        tree_compile_s = account_compile(ctx.layout.build.host, time.monotonic() - started)
    text = stats.host.read_text(encoding="utf-8", errors="replace") if stats.host.is_file() else ""
    if code == CACHE_START_FAILED and cc.start and start.host.is_file():
        raise cache_start_error(ctx, start.host)
    if code != 0:
        excerpt = failure_excerpt(lines)
        detail = (
            f"failed target: {excerpt.target}\n    command: {excerpt.command}\n"
            + "\n".join(f"    {e}" for e in excerpt.errors)
            if excerpt
            else "\n".join(f"    {line}" for line in lines[-15:])
        )
        raise BuildError(
            f"the build failed (exit {code}):\n    {detail}",
            where=f"recipe {ctx.plan.recipe.name}",
            fix=f"full log: {ctx.log_path('build')}; rerun the same command to resume after fixing",
        )
    ninja_log = ctx.layout.build.host / ".ninja_log"
    split = (
        ninjalog.seconds_by(ninja_log.read_text(encoding="utf-8", errors="replace"), binding.compile_groups(ctx))
        if ninja_log.is_file()
        else {}
    )
    record = distributed.record
    if distributed.client_log is not None:
        client = distributed.client_log
        said = client.read_text(encoding="utf-8", errors="replace") if client.is_file() else ""
        record = {**record, "compiles": workers.compiled_where(said), "retried": workers.retried(said)}
    return Compiled(
        tree_compile_s=tree_compile_s,
        workers=record,
        compiler_cache={"name": cc.name, **cc.parse_stats(text)},
        command_seconds=split,
        ninja_no_work=ninjalog.no_work(lines),
    )


# Later steps see ninja's log: what the compile made.
STEP = StepDef(run, fingerprint=lambda ctx, _: ninja_state(ctx.layout.build.host / ".ninja_log"))
