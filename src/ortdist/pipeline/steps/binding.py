"""The Python binding for each extra CPython, compiled against the core just built: the main
build's own binding commands with the other version's headers (see ortdist.binding)."""

from __future__ import annotations

import json

from ... import binding, ninjalog
from ...errors import BuildError
from ...inroot import python_layout
from .. import reuse
from ..context import BuildContext
from ..layout import StepOutput
from ..state import Bindings, BuildState, PerPython
from ..step import StepDef, ninja_state


def run(ctx: BuildContext, state: BuildState) -> Bindings:
    """Every extra version's ninja file, and one ninja run over all of them (``subninja``): the
    versions' compiles share the cores, with no idle core while one version's last, largest unit
    (onnxruntime_pybind_state.cc) compiles alone."""
    build = ctx.layout.build
    main = binding.main_build_headers((build.host / "CMakeCache.txt").read_text(encoding="utf-8"))
    listed = ctx.runner.capture(
        ctx.in_root(state.roots, ["ninja", "-C", str(build.inside), "-t", "commands", binding.TARGET]),
        error=BuildError,
        what="listing the binding's build commands",
    ).stdout
    modules, files = {}, []
    for version in ctx.plan.extra_python:
        layout = python_layout(version)
        out = ctx.layout.work / f"binding-{version}"
        out.host.mkdir(parents=True, exist_ok=True)
        headers = binding.Headers(
            python=layout["include"], numpy=layout["numpy_include"], extra=(layout["multiarch_include"],)
        )
        (out.host / "build.ninja").write_text(
            binding.binding_ninja(listed, main, headers, str(out.inside), str(build.inside)), encoding="utf-8"
        )
        files.append(str(out.inside / "build.ninja"))
        modules[version] = out.host / binding.MODULE
    top = ctx.layout.work / "bindings"
    top.host.mkdir(parents=True, exist_ok=True)
    (top.host / "build.ninja").write_text(binding.top_ninja(files), encoding="utf-8")
    with ctx.open_log("binding") as log:
        ctx.runner.call(
            ctx.in_root(state.roots, ["ninja", "-C", str(top.inside), "-j", str(ctx.jobs)]),
            log=log,
            error=BuildError,
            what=f"compiling the Python binding for {', '.join(ctx.plan.extra_python)}",
        )
    log_file = top.host / ".ninja_log"
    text = log_file.read_text(encoding="utf-8") if log_file.is_file() else ""
    seconds = binding.command_seconds(text, {v: str(ctx.layout.work.inside / f"binding-{v}") for v in modules})
    said = ctx.log_path("binding").read_text(encoding="utf-8", errors="replace").splitlines()
    return Bindings(
        modules=modules, times=PerPython("binding_s", seconds, timed=True), ninja_no_work=ninjalog.no_work(said)
    )


def fingerprint(ctx: BuildContext, output: StepOutput) -> str:
    """Later steps see the modules made and ninja's log of the bindings' build."""
    modules = json.dumps(reuse.encode(output.modules if isinstance(output, Bindings) else None))
    return reuse.chain(modules, ninja_state(ctx.layout.work.host / "bindings" / ".ninja_log"))


STEP = StepDef(run, fingerprint=fingerprint)
