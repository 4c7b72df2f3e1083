"""The static archive proven alone: a C program linked against nothing but libonnxruntime.a (and
the C runtime) runs the recipe's models, in the clean root or under a cross target's emulator."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import TextIO

from ...checks.c_smoke import (
    C_RUNTIME_SONAMES,
    IN_ROOT_C_SMOKE,
    c_smoke_cases,
    c_smoke_needed,
    compare_case_outputs,
    write_case_inputs,
)
from ...errors import CheckError
from ...fsutil import remove_tree
from ...paths import IN_ROOT_TARGET
from ...toolchains import Bind
from ..context import BuildContext
from ..runner import Command
from ..state import BuildState, CSmoke, StaticLibrary
from ..step import StepDef

PROGRAM = Path(__file__).resolve().parents[2] / "data" / "c_smoke" / "ort_smoke.c"


def target_command(ctx: BuildContext, state: BuildState, smoke: Path, argv: list[str], log: TextIO) -> Command:
    """A target binary from ``smoke`` (seen as /ortdist/c-smoke): natively in the clean root, which
    has none of the build's libraries; a cross target's under its emulator in the build root."""
    binds = (Bind(smoke, IN_ROOT_C_SMOKE),)
    cross = ctx.cross
    if cross:
        emulator = (cross.emulator, "-L", str(IN_ROOT_TARGET))
        roots = state.roots
        return Command((*emulator, *argv), roots.build, (*ctx.layout.binds(roots), *binds))
    return Command(tuple(argv), ctx.toolchain.ensure_clean_root(ctx.cache, log), binds)


def run(ctx: BuildContext, state: BuildState) -> CSmoke:
    static, work = state.get(StaticLibrary), ctx.layout.work
    smoke = work / "c-smoke"
    remove_tree(smoke.host)
    smoke.host.mkdir(parents=True)
    shutil.copyfile(PROGRAM, smoke.host / PROGRAM.name)
    cases = c_smoke_cases(ctx.plan, ctx.layout.models.host, smoke.host)
    stage = work / "static"
    pc = stage.inside / "lib" / "pkgconfig"
    compiler = ctx.compiler(state.roots)
    link = f" {shlex.join(compiler.link)}" if compiler.link else ""
    build = (
        f"cd {smoke.inside} && "
        f"{compiler.shell('c')} -O2 -c ort_smoke.c -I{stage.inside}/include && "
        # The C++ driver links, so libstdc++ can be linked statically: the binary needs only libc/libm.
        f"{compiler.shell('cxx')}{link} -o ort_smoke ort_smoke.o {stage.inside}/lib/libonnxruntime.a "
        f"-static-libstdc++ -static-libgcc $(PKG_CONFIG_PATH={pc} pkg-config --static --libs-only-l libonnxruntime "
        "| tr ' ' '\\n' | grep -v -e '^-lonnxruntime$' -e '^-lstdc++$' | tr '\\n' ' ') && "
        f"{ctx.tool('readelf')} -d ort_smoke > needed.txt"
    )
    with ctx.open_log("c-smoke") as log:
        ctx.runner.call(
            ctx.in_root(state.roots, ["/bin/sh", "-c", build]),
            log=log,
            error=CheckError,
            what="building the C smoke program",
        )
    needed = c_smoke_needed((smoke.host / "needed.txt").read_text(encoding="utf-8"))
    extra = [lib for lib in needed if not any(lib.startswith(ok) for ok in C_RUNTIME_SONAMES)]
    if extra:
        raise CheckError(
            f"the C program linked against libonnxruntime.a still needs {', '.join(extra)}",
            where=str(static.stage / "lib" / "libonnxruntime.a"),
            fix="a dependency was bundled as a shared library; see logs/bundle.log",
        )
    results = []
    for case in cases:
        here = smoke.host / "cases" / case.name
        remove_tree(here)
        write_case_inputs(case, here)
        inside = IN_ROOT_C_SMOKE / "cases" / case.name
        argv = [f"{IN_ROOT_C_SMOKE}/ort_smoke", f"{inside}/{case.model.name}", str(inside)]
        name = f"c-smoke-{case.name}"
        with ctx.open_log(name) as log:
            result = ctx.runner.capture(target_command(ctx, state, smoke.host, argv, log), check=False)
            log.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise CheckError(
                f"the C smoke program failed on {case.model.name} (exit {result.returncode}):\n    "
                + (result.stderr.strip() or result.stdout.strip()).replace("\n", "\n    "),
                where=str(case.model),
                fix=f"see {ctx.log_path(name)}",
            )
        results.append(compare_case_outputs(case, here))
    remove_tree(smoke.host / "cases")
    return CSmoke(needed=tuple(needed), binary_bytes=(smoke.host / "ort_smoke").stat().st_size, models=tuple(results))


STEP = StepDef(run, reusable=True)
