"""The compile: ninja in the build root through the compiler cache, with a progress bar."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from ... import ninjalog
from ...compiler_cache import CACHE_START_FAILED
from ...errors import BuildError
from ...progress import NinjaProgress, failure_excerpt
from ..context import BuildContext
from ..state import BuildState, Compiled
from ..step import StepDef, ninja_state


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


def run(ctx: BuildContext, state: BuildState) -> Compiled:
    lines: list[str] = []
    progress = NinjaProgress()

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
    build = shlex.join(ctx.plan.build_argv(ctx.jobs, ctx.keep_going))
    script = cc.around(build, str(stats.inside), str(start.inside))
    started = time.monotonic()
    with ctx.open_log("build") as out:
        code = ctx.runner.stream(ctx.in_root(state.roots, ["/bin/sh", "-c", script]), on_line=on_line, log=out)
        progress.close()
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
        ninjalog.seconds_by(ninja_log.read_text(encoding="utf-8", errors="replace"), ninjalog.dependency_or_ort)
        if ninja_log.is_file()
        else {}
    )
    return Compiled(
        tree_compile_s=tree_compile_s,
        compiler_cache={"name": cc.name, **cc.parse_stats(text)},
        command_seconds=split,
        ninja_no_work=ninjalog.no_work(lines),
    )


# Later steps see ninja's log: what the compile made.
STEP = StepDef(run, fingerprint=lambda ctx, _: ninja_state(ctx.layout.build.host / ".ninja_log"))
