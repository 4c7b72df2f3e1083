"""The Python binding for each extra CPython, compiled against the core just built: the main
build's own binding commands with the other version's headers (see ortdist.binding)."""

from __future__ import annotations

import time

from ... import binding
from ...errors import BuildError
from ...toolchains.debian_sysroot import python_layout
from ..context import BuildContext
from ..state import Bindings, BuildState, PerPython


def run(ctx: BuildContext, state: BuildState) -> Bindings:
    build = ctx.layout.build
    main = binding.main_build_headers((build.host / "CMakeCache.txt").read_text(encoding="utf-8"))
    listed = ctx.runner.capture(
        ctx.in_root(state.roots, ["ninja", "-C", str(build.inside), "-t", "commands", binding.TARGET]),
        error=BuildError,
        what="listing the binding's build commands",
    ).stdout
    modules, seconds = {}, {}
    for version in ctx.plan.extra_python:
        started = time.monotonic()
        layout = python_layout(version)
        out = ctx.layout.work / f"binding-{version}"
        out.host.mkdir(parents=True, exist_ok=True)
        headers = binding.Headers(
            python=layout["include"], numpy=layout["numpy_include"], extra=(layout["multiarch_include"],)
        )
        (out.host / "build.ninja").write_text(
            binding.binding_ninja(listed, main, headers, str(out.inside), str(build.inside)), encoding="utf-8"
        )
        with ctx.open_log(f"binding-{version}") as log:
            ctx.runner.call(
                ctx.in_root(state.roots, ["ninja", "-C", str(out.inside), "-j", str(ctx.jobs)]),
                log=log,
                error=BuildError,
                what=f"compiling the Python {version} binding",
            )
        modules[version] = out.host / binding.MODULE
        seconds[version] = round(time.monotonic() - started, 1)
    return Bindings(modules=modules, times=PerPython("binding_s", seconds, timed=True))
