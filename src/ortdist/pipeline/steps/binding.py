"""The Python binding for each extra CPython: the main build's own binding commands with the other
version's headers (see ortdist.binding), written before the compile so the build step's one ninja
run makes them beside the core; this step collects what that run made."""

from __future__ import annotations

import json
from pathlib import Path

from ... import binding, ninjalog
from ...errors import BuildError
from ...fsutil import write_if_changed
from ...inroot import python_layout
from .. import reuse
from ..context import BuildContext
from ..layout import Place, StepOutput
from ..state import Bindings, BuildState, Compiled, PerPython
from ..step import StepDef, ninja_state


def place(ctx: BuildContext, version: str) -> Place:
    """Where a version's ninja file, objects and module go."""
    return ctx.layout.work / f"binding-{version}"


def out_dir(ctx: BuildContext, version: str) -> str:
    return str(place(ctx, version).inside)


def module(ctx: BuildContext, version: str) -> Path:
    return place(ctx, version).host / binding.MODULE


def write_graph(ctx: BuildContext, state: BuildState) -> str:
    """Every extra version's ninja file and the top file over them and CMake's graph (in the
    build tree, ``binding.TOP``): one ninja run, the bindings scheduled with the core's own work.
    Returns the top file's name; needs the configured tree (``ninja -t commands`` reads its graph)."""
    build = ctx.layout.build
    main = binding.main_build_headers((build.host / "CMakeCache.txt").read_text(encoding="utf-8"))
    listed = ctx.runner.capture(
        ctx.in_root(state.roots, ["ninja", "-C", str(build.inside), "-t", "commands", binding.TARGET]),
        error=BuildError,
        what="listing the binding's build commands",
    ).stdout
    files, modules = [], []
    for version in ctx.plan.extra_python:
        layout = python_layout(version)
        out = place(ctx, version)
        out.host.mkdir(parents=True, exist_ok=True)
        headers = binding.Headers(
            python=layout["include"], numpy=layout["numpy_include"], extra=(layout["multiarch_include"],)
        )
        graph = binding.binding_ninja(listed, main, headers, out_dir(ctx, version))
        (out.host / "build.ninja").write_text(graph.ninja, encoding="utf-8")
        if graph.unity is not None:  # the same text keeps its mtime: the unit is not recompiled
            write_if_changed(out.host / binding.UNITY, graph.unity)
        files.append(str(out.inside / "build.ninja"))
        modules.append(f"{out_dir(ctx, version)}/{binding.MODULE}")
    (build.host / binding.TOP).write_text(binding.top_ninja(files, modules), encoding="utf-8")
    return binding.TOP


def run(ctx: BuildContext, state: BuildState) -> Bindings:
    """Each version's module as the build step's ninja run left it, and its commands' seconds
    from the build tree's ``.ninja_log`` (compile time, shared with the core's on the cores)."""
    modules = {version: module(ctx, version) for version in ctx.plan.extra_python}
    missing = [v for v, m in modules.items() if not m.is_file()]
    if missing:
        raise BuildError(
            f"the build made no Python binding for {', '.join(missing)}",
            where=str(ctx.layout.build.host / binding.TOP),
            fix=f"see {ctx.log_path('build')}; rerun the build (the build step writes that graph)",
        )
    log_file = ctx.layout.build.host / ".ninja_log"
    text = log_file.read_text(encoding="utf-8", errors="replace") if log_file.is_file() else ""
    seconds = binding.command_seconds(text, {v: out_dir(ctx, v) for v in modules})
    return Bindings(
        modules=modules,
        times=PerPython("binding_s", seconds, timed=True),
        ninja_no_work=state.get(Compiled).ninja_no_work,
    )


def fingerprint(ctx: BuildContext, output: StepOutput) -> str:
    """Later steps see the modules made and ninja's log of the build that made them."""
    modules = json.dumps(reuse.encode(output.modules if isinstance(output, Bindings) else None))
    return reuse.chain(modules, ninja_state(ctx.layout.build.host / ".ninja_log"))


def compile_groups(ctx: BuildContext) -> ninjalog.Group:
    """The build log's outputs as dependencies, ORT, its CUDA kernels, and the extra versions'
    bindings (apart from ORT's own, so its compile seconds compare with build.py's)."""
    prefix = str(ctx.layout.work.inside / "binding-")
    return lambda output: "python_bindings" if output.startswith(prefix) else ninjalog.compile_group(output)


STEP = StepDef(run, fingerprint=fingerprint)
