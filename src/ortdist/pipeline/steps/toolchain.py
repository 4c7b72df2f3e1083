"""The roots a build runs in: the build root, a cross target's sysroot, other CPythons."""

from __future__ import annotations

from ... import workers
from ...compiler_cache import ensure_tool
from ..context import BuildContext
from ..layout import Roots
from ..state import BuildState
from ..step import StepDef


def run(ctx: BuildContext, state: BuildState) -> Roots:
    plan = ctx.plan
    with ctx.open_log("toolchain") as log:
        build = ctx.toolchain.ensure_build_root(ctx.cache, log)
        target = (
            ctx.toolchain.ensure_target_root(ctx.cache, build, plan.target.triple, log)
            if plan.toolchain.is_cross(plan.target.triple)
            else None
        )
        pythons = {v: ctx.toolchain.ensure_python_overlay(ctx.cache, build, v, log) for v in plan.extra_python}
        distcc = ctx.toolchain.ensure_tool_tree(ctx.cache, build, workers.TREE, log) if plan.workers else None
    ctx.layout.compiler_cache.host.mkdir(parents=True, exist_ok=True)
    ensure_tool(plan.compiler_cache, ctx.cache)
    return Roots(
        build=build,
        target=target,
        pythons=pythons,
        packages=ctx.toolchain.installed_packages(build),
        target_packages=ctx.toolchain.installed_packages(target) if target else {},
        distcc=distcc,
    )


STEP = StepDef(run)
