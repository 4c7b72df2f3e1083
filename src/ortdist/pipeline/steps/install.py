"""The C library archive: ``cmake --install`` of the shared library, its headers and an SBOM."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ... import sbom
from ...checks import elf
from ...errors import PackageError
from ...fsutil import deterministic_tarball, remove_tree
from ...manifest import Artifact
from ...wheel.repair import check_no_executable_stack
from ..context import BuildContext
from ..sboms import SBOM_IN_ARCHIVE, sbom_inputs
from ..state import BuildState, CLibrary
from ..step import StepDef
from ..vendor import copy_ep_bundle


def carry_ep_bundle(ctx: BuildContext, state: BuildState, lib: Path, log: TextIO) -> None:
    """The vendor runtime an EP loads ([ep_bundle]) beside its provider library in lib/, whose
    RUNPATH becomes $ORIGIN: a C program loading the provider finds it, as the wheel's does."""
    if not ctx.plan.ep_bundle:
        return
    copy_ep_bundle(ctx, state, lib)
    for ep in (ep for ep in ctx.plan.providers if ep.name in ctx.plan.ep_bundle):
        library = lib / ep.provider_library
        if not library.is_file():
            raise PackageError(
                f"the {ep.name} provider library {ep.provider_library} is not in the C library archive",
                where=str(lib),
                fix="check logs/install.log: cmake --install puts provider libraries in lib/",
            )
        inside = ctx.layout.work.inside / library.relative_to(ctx.layout.work.host)
        ctx.runner.call(
            ctx.in_root(state.roots, ["patchelf", "--set-rpath", "$ORIGIN", str(inside)]),
            log=log,
            error=PackageError,
            what=f"setting the RUNPATH of {ep.provider_library} in the C library archive",
        )


def run(ctx: BuildContext, state: BuildState) -> CLibrary:
    plan, install = ctx.plan, ctx.layout.work / "install"
    remove_tree(install.host)
    with ctx.open_log("install") as log:
        ctx.runner.call(
            ctx.in_root(
                state.roots, ["cmake", "--install", str(ctx.layout.build.inside), *(["--strip"] if plan.strip else [])]
            ),
            log=log,
            error=PackageError,
            what="cmake --install",
        )
        carry_ep_bundle(ctx, state, install.host / "lib", log)
    files = sorted(p for p in install.host.rglob("*.so*") if p.is_file() and not p.is_symlink())
    libraries = [(str(p.relative_to(install.host)), p.read_bytes()) for p in files]
    check_no_executable_stack(libraries, "cmake --install")
    if plan.toolchain.deps_from_source:
        # Every dependency compiled in: the library promises what the toolchain's glibc does. A
        # toolchain that links the root's Debian libraries makes a library for that Debian only.
        glibc = plan.toolchain.glibc_for(plan.target.triple)
        policy = elf.policy(glibc, plan.toolchain.system_libraries, plan.repair_excludes)
        elf.check(libraries, policy, "the C library archive (cmake --install)")
    name = f"onnxruntime-{plan.recipe.name}-{plan.version.version}"
    archive = ctx.layout.out.host / f"{name}.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    subject = {"name": name, "version": plan.version.version, "description": "C library archive"}
    document = sbom.make_sbom(sbom_inputs(ctx, state, []), subject)
    (install.host / SBOM_IN_ARCHIVE).parent.mkdir(parents=True, exist_ok=True)
    (install.host / SBOM_IN_ARCHIVE).write_text(sbom.dumps(document), encoding="utf-8")
    deterministic_tarball(install.host, archive, name, ctx.source_date_epoch())
    extra = {"execution_providers": [ep.name for ep in plan.providers]}
    return CLibrary(archive=archive, artifacts=(Artifact(archive, "c-library", extra=extra),))


STEP = StepDef(run, reusable=True)
