"""CMake configure, re-run only when the configure command changed; reduced builds first
rewrite the kernel registrations with ORT's own reduce_op_kernels.py."""

from __future__ import annotations

from ... import relro
from ...defines import SHARED_LINKER_FLAGS
from ...errors import BuildError
from ...fsutil import remove_tree, sync_tree, write_if_changed
from ...log import log
from ...paths import IN_ROOT_SOURCE
from ...plan import BuildPlan
from .. import reuse
from ..context import BuildContext
from ..state import BuildState, Configured
from ..step import StepDef


def reduce_kernels_argv(plan: BuildPlan, build_dir: str, config: str) -> list[str]:
    """ORT's reduce_op_kernels.py as build.py runs it for this plan."""
    return [
        "python3",
        f"{IN_ROOT_SOURCE}/tools/ci_build/reduce_op_kernels.py",
        "--cmake_build_dir",
        build_dir,
        *(["--is_extended_minimal_build_or_higher"] if plan.recipe.features.minimal_build != "plain" else []),
        *(["--enable_type_reduction"] if plan.recipe.reduce.types else []),
        # EPs with registration tables of their own (CUDA) are reduced too.
        *(ep.reduce_flag for ep in plan.providers if ep.reduce_flag),
        config,
    ]


def reduce_kernels(ctx: BuildContext, state: BuildState) -> None:
    """reduce_op_kernels.py regenerates every file, so it writes to a staging tree and only files
    whose bytes changed reach the build tree (ninja then recompiles only those)."""
    stage = ctx.layout.work / "op-reduction"
    remove_tree(stage.host)
    stage.host.mkdir(parents=True)
    argv = reduce_kernels_argv(ctx.plan, str(stage.inside), str(ctx.layout.models.inside / "ops.config"))
    with ctx.open_log("reduce") as out:
        ctx.runner.call(ctx.in_root(state.roots, argv), log=out, error=BuildError, what="reduce_op_kernels.py")
    generated = stage.host / "op_reduction.generated"
    if not generated.is_dir():
        raise BuildError(
            "reduce_op_kernels.py wrote no op_reduction.generated tree", fix=f"see {ctx.log_path('reduce')}"
        )
    written = sync_tree(generated, ctx.layout.build.host / "op_reduction.generated")
    log.info(f"kernel registrations reduced ({written} generated files changed)")


def write_relro_script(ctx: BuildContext, state: BuildState) -> None:
    """The linker script the shared library's flags name (relro.py), from the linker's own default;
    rewritten only when its bytes change."""
    ld = ctx.tool("ld")
    verbose = ctx.runner.capture(
        ctx.in_root(state.roots, relro.verbose_argv(ld)), error=BuildError, what=f"{ld} --verbose"
    ).stdout
    script = relro.common_page_script(verbose, ld)
    target = ctx.layout.build.host / relro.SCRIPT_NAME
    if write_if_changed(target, script):
        log.info(f"RELRO ends on the common page: {relro.SCRIPT_NAME} from {ld}'s default script")


def run(ctx: BuildContext, state: BuildState) -> Configured:
    plan, build = ctx.plan, ctx.layout.build.host
    identity = build / ".ortdist-tree"
    if build.exists() and (not identity.is_file() or identity.read_text().strip() != plan.tree_identity()):
        log.info("source or toolchain changed: starting a fresh build tree")
        remove_tree(build)
    build.mkdir(parents=True, exist_ok=True)
    identity.write_text(plan.tree_identity() + "\n")
    ctx.layout.work.host.mkdir(parents=True, exist_ok=True)
    if plan.reduced:
        reduce_kernels(ctx, state)
    if relro.link_flag(plan.trees.build) in plan.cmake_defines.get(SHARED_LINKER_FLAGS, ""):
        write_relro_script(ctx, state)
    # CMake's file API: the bundler reads the real link graph of the library from its reply.
    query = build / ".cmake" / "api" / "v1" / "query" / "codemodel-v2"
    query.parent.mkdir(parents=True, exist_ok=True)
    query.touch()
    stamp = build / ".ortdist-configure"
    digest = plan.configure_digest()
    if stamp.is_file() and stamp.read_text().strip() == digest and (build / "build.ninja").is_file():
        log.info("configure is up to date")
        return Configured(reconfigured=False)
    (build / "CMakeCache.txt").unlink(missing_ok=True)
    stamp.unlink(missing_ok=True)
    log_path = ctx.log_path("configure")
    with ctx.open_log("configure") as out:
        code = ctx.runner.stream(ctx.in_root(state.roots, plan.configure_argv()), on_line=lambda _l: None, log=out)
    if code != 0:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        first = next((i for i, line in enumerate(lines) if line.startswith("CMake Error")), max(len(lines) - 15, 0))
        raise BuildError(
            "CMake configure failed:\n" + "\n".join(f"    {line}" for line in lines[first : first + 15]),
            where=f"recipe {plan.recipe.name}",
            fix=f"full log: {log_path}",
        )
    stamp.write_text(digest + "\n")
    return Configured(reconfigured=True)


# Later steps see CMake's cache: what configure decided.
STEP = StepDef(run, fingerprint=lambda ctx, _: reuse.content_digest(ctx.layout.build.host / "CMakeCache.txt"))
