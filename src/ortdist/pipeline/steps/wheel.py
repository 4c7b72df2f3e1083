"""One wheel per CPython: the package staged from the build tree (the other versions with their
own binding), provider RUNPATHs set, built by scikit-build-core and re-tagged."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ... import binding
from ...errors import PackageError
from ...fsutil import remove_tree
from ...paths import IN_ROOT_TOOLS_VENV
from ...wheel import assemble, record, repair
from ..context import BuildContext
from ..state import Bindings, BuildState, Models, PerPython, Source, Wheels
from ..step import StepDef


def suffix(ctx: BuildContext, version: str) -> str:
    """Work-file suffix of a CPython version: none for the root's own (its paths stay as they
    were before several versions existed, so its wheel stays byte-identical)."""
    return "" if version == ctx.plan.python[0] else f"-{version}"


def set_provider_runpaths(ctx: BuildContext, state: BuildState, stage: Path) -> None:
    """Provider libraries whose vendor runtime comes from pip wheels (CUDA, cuDNN) get a
    RUNPATH into those wheels' directories, so loading the provider finds them."""
    libraries = [ep for ep in ctx.plan.providers if ep.pip_library_dirs]
    if not libraries:
        return
    with ctx.open_log("runpath") as log:
        for ep in libraries:
            library = stage / assemble.CAPI_DIR / ep.provider_library
            if not library.is_file():
                raise PackageError(
                    f"the {ep.name} provider library {ep.provider_library} is not in the package",
                    where=str(library.parent),
                    fix="check logs/build.log: ORT's pybind post-build step copies provider libraries into capi/",
                )
            inside = ctx.layout.work.inside / library.relative_to(ctx.layout.work.host)
            ctx.runner.call(
                ctx.in_root(
                    state.roots,
                    ["patchelf", "--set-rpath", assemble.provider_runpath(ep.pip_library_dirs), str(inside)],
                ),
                log=log,
                error=PackageError,
                what=f"setting the RUNPATH of {ep.provider_library}",
            )


def wheel_for(ctx: BuildContext, state: BuildState, version: str) -> Path:
    plan, work, sfx = ctx.plan, ctx.layout.work, suffix(ctx, version)
    models = state.find(Models)
    build_record = assemble.build_record(
        plan, ctx.recipe_sha256, state.get(Source).record["sha256"], list(models.operators) if models else None
    )
    stage = work / f"stage{sfx}"
    assemble.stage_package(ctx.layout.build.host / "onnxruntime", stage.host, plan, build_record)
    if sfx:  # the binding compiled for this version replaces the root Python's
        shutil.copyfile(state.get(Bindings).modules[version], stage.host / "onnxruntime" / "capi" / binding.MODULE)
    set_provider_runpaths(ctx, state, stage.host)
    project = work / f"wheelproj{sfx}"
    assemble.write_project(project.host, plan, ctx.layout.source.host, str(stage.inside / "onnxruntime"))
    raw = work / "wheel" / f"raw{sfx}"
    remove_tree(raw.host)
    raw.host.mkdir(parents=True)
    argv = [
        f"{IN_ROOT_TOOLS_VENV}/bin/pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--no-cache-dir",  # pip would copy each 22 MB wheel into its cache, never to use it
        "--wheel-dir",
        str(raw.inside),
        str(project.inside),
    ]
    with ctx.open_log(f"wheel{sfx}") as log:
        ctx.runner.call(
            ctx.in_root(state.roots, argv), log=log, error=PackageError, what="scikit-build-core wheel build"
        )
    wheel = repair.single_wheel(raw.host)
    # scikit-build-core tags the wheel for the interpreter it runs under (the root's own).
    return record.retag(wheel, version) if sfx else wheel


def run(ctx: BuildContext, state: BuildState) -> Wheels:
    raw, seconds = {}, {}
    for version in ctx.plan.python:
        started = time.monotonic()
        raw[version] = wheel_for(ctx, state, version)
        seconds[version] = round(time.monotonic() - started, 1)
    return Wheels(raw=raw, times=PerPython("wheel_s", seconds, timed=len(ctx.plan.python) > 1))


STEP = StepDef(run, reusable=True)
