"""auditwheel repair of the first version's wheel (a cross target's libraries and strip come from
its sysroot), or the last build's repair kept for a raw wheel like it; the other versions' derived
from it where that is exactly what auditwheel would make (wheel.derive); each wheel's libraries
checked, the provider RUNPATHs verified to survive, and the SBOM added."""

from __future__ import annotations

import time
import zipfile
from pathlib import Path, PurePosixPath

from ... import wheelnames as names
from ...checks import elf, fatbin
from ...errors import PackageError
from ...fsutil import remove_tree
from ...manifest import Artifact
from ...paths import IN_ROOT_TARGET, IN_ROOT_TOOLS_VENV
from ...wheel import assemble, derive, repair
from ..context import BuildContext
from ..sboms import add_wheel_sbom
from ..state import BuildState, PerPython, Repaired, Wheels
from ..step import StepDef
from .wheel import suffix


def target_repair_env(ctx: BuildContext) -> list[str]:
    """For a cross target: ``env`` putting its ``strip`` first on PATH (auditwheel --strip calls
    plain ``strip``, which cannot read another machine's ELF) and naming its libraries, where it
    has any to graft (auditwheel grafts them from there)."""
    if not ctx.cross:
        return []
    tools = ctx.layout.work / "target-tools"
    remove_tree(tools.host)
    tools.host.mkdir(parents=True)
    (tools.host / "strip").symlink_to(f"/usr/bin/{ctx.tool('strip')}")  # resolved inside the root
    joined = ":".join(str(p).replace("{target}", str(IN_ROOT_TARGET)) for p in ctx.cross.library_path)
    return [
        "env",
        *([f"LD_LIBRARY_PATH={joined}"] if joined else []),
        f"PATH={tools.inside}:/usr/sbin:/usr/bin:/sbin:/bin",
    ]


def verify_provider_runpaths(ctx: BuildContext, state: BuildState, wheel: Path, sfx: str) -> None:
    """The RUNPATH into NVIDIA's wheels must survive auditwheel: without it the provider only
    loads where the user set LD_LIBRARY_PATH, which the GPU proof would not notice."""
    expected = {
        ep.provider_library: assemble.provider_runpath(ep.pip_library_dirs)
        for ep in ctx.plan.providers
        if ep.pip_library_dirs or ep.name in ctx.plan.ep_bundle
    }
    if not expected:
        return
    probe = ctx.layout.work / "wheel" / f"runpath{sfx}"
    remove_tree(probe.host)
    probe.host.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        for library in expected:
            member = f"{assemble.CAPI_DIR}/{library}"
            if member not in zf.namelist():
                raise PackageError(f"the repaired wheel has no {member}", where=wheel.name, fix="see logs/repair.log")
            (probe.host / library).write_bytes(zf.read(member))
    for library, runpath in expected.items():
        found = ctx.runner.capture(
            ctx.in_root(state.roots, ["patchelf", "--print-rpath", str(probe.inside / library)]),
            error=PackageError,
            what=f"reading the RUNPATH of {library}",
        ).stdout.strip()
        if not assemble.search_path_keeps(found, runpath):
            raise PackageError(
                f"{library} in the repaired wheel has the search path {found!r}, which lost entries of {runpath!r}",
                where=wheel.name,
                fix="auditwheel dropped them (it discards entries that point outside the wheel): see "
                "logs/repair.log and set the path again after the repair",
            )
    remove_tree(probe.host)


def auditwheel(ctx: BuildContext, state: BuildState, version: str, raw_wheel: Path, target_env: list[str]) -> Path:
    """auditwheel repair of one version's raw wheel (its output uncompressed), its tag held to the
    toolchain's glibc promise."""
    sfx = suffix(ctx, version)
    repaired = ctx.layout.work / "wheel" / f"repaired{sfx}"
    remove_tree(repaired.host)
    repaired.host.mkdir(parents=True)
    raw_inside = str(ctx.layout.work.inside / "wheel" / f"raw{sfx}" / raw_wheel.name)
    argv = repair.auditwheel_argv(raw_inside, str(repaired.inside), ctx.plan.repair_excludes, strip=ctx.plan.strip)
    with ctx.open_log(f"repair{sfx}") as log:
        ctx.runner.call(
            ctx.in_root(state.roots, [*target_env, *argv]),
            log=log,
            error=PackageError,
            what="auditwheel repair",
        )
        wheel = repair.single_wheel(repaired.host)
        glibc = ctx.plan.toolchain.glibc_for(ctx.plan.target.triple)
        try:
            repair.check_glibc_promise(wheel.name, glibc, ctx.plan.toolchain.name)
        except PackageError:
            # Which symbol versions asked for the newer glibc: a second full ELF analysis, so
            # only when the error needs it (4 s a wheel).
            show = ctx.runner.capture(
                ctx.in_root(state.roots, [*target_env, f"{IN_ROOT_TOOLS_VENV}/bin/auditwheel", "show", raw_inside]),
                check=False,
            )
            log.write(show.stdout + show.stderr)
            raise
    return wheel


def derived(ctx: BuildContext, version: str, raw_wheel: Path, first: Path) -> Path:
    """One version's raw wheel made into what auditwheel made of the first one's (wheel.derive)."""
    repaired = ctx.layout.work / "wheel" / f"repaired{suffix(ctx, version)}"
    remove_tree(repaired.host)
    repaired.host.mkdir(parents=True)
    return derive.derive(raw_wheel, first, repaired.host)


def check_bundled(ctx: BuildContext, wheel: Path) -> None:
    """Every [ep_bundle] file is in the wheel beside the provider under its own name: a vendor
    runtime that finds its plugins beside itself breaks if a repair renamed or dropped one."""
    with zipfile.ZipFile(wheel) as zf:
        members = set(zf.namelist())
    for ep, files in ctx.plan.ep_bundle.items():
        lost = [f for f in files if f"{assemble.CAPI_DIR}/{PurePosixPath(f).name}" not in members]
        if lost:
            raise PackageError(
                f"the repaired wheel lacks {PurePosixPath(lost[0]).name} of [ep_bundle.{ep}] in {assemble.CAPI_DIR}",
                where=wheel.name,
                fix="see logs/repair.log: the repair renamed or dropped it (exclude it from grafting)",
            )


def finish(ctx: BuildContext, state: BuildState, version: str, wheel: Path) -> Path:
    """What every repaired wheel must be, however it was repaired: no executable stack, each
    library within its tag's promise, provider RUNPATHs kept, CUDA code for every architecture the
    recipe promises; then its SBOM."""
    libraries = elf.wheel_libraries(wheel)
    repair.check_no_executable_stack(libraries, wheel.name)
    # What the tag promises, from the libraries' own DT_NEEDED and version needs: auditwheel allows
    # all of manylinux's list, the toolchain's [promise] may allow less.
    promised = names.required_glibc(wheel.name) or ctx.plan.toolchain.glibc_for(ctx.plan.target.triple)
    elf.check(
        libraries, elf.policy(promised, ctx.plan.toolchain.system_libraries, ctx.plan.repair_excludes), wheel.name
    )
    verify_provider_runpaths(ctx, state, wheel, suffix(ctx, version))
    check_bundled(ctx, wheel)
    if ctx.plan.builds_cuda:
        # The GPUs it promises, from the CUDA libraries' own device code (.nv_fatbin).
        fatbin.check(libraries, ctx.plan.recipe.cuda.architectures, wheel.name)
    add_wheel_sbom(ctx, state, wheel)
    return wheel


def kept_key(ctx: BuildContext, state: BuildState, target_env: list[str]) -> str:
    """What auditwheel's decisions depend on besides the wheel: its arguments (paths aside), the
    root it runs in (its auditwheel), the glibc promise, and the code that derives from it."""
    argv = repair.auditwheel_argv("RAW", "OUT", ctx.plan.repair_excludes, strip=ctx.plan.strip)
    promise = ctx.plan.toolchain.glibc_for(ctx.plan.target.triple)
    return derive.kept_key([argv, target_env, str(state.roots.build), promise])


def run(ctx: BuildContext, state: BuildState) -> Repaired:
    """auditwheel for the first version, unless the last build's repair is kept for a raw wheel
    like this one (wheel.derive.Kept: the patch loop); every other version side by side, derived
    from that repair when auditwheel only re-tagged it and the version's libraries need the same
    (else by auditwheel too); every wheel then checked and given its SBOM."""
    plan, raw = ctx.plan, state.get(Wheels).raw
    target_env = target_repair_env(ctx)  # shared by every version's repair: made once, first
    first_version = plan.python[0]
    started = time.monotonic()
    kept, key = derive.Kept(ctx.layout.work.host / "wheel" / "kept"), kept_key(ctx, state, target_env)
    rows = derive.fingerprint(raw[first_version])
    # --no-reuse: auditwheel really runs (a kept repair is a reuse like any other)
    first = kept.matching(key, raw[first_version], rows) if ctx.reuse else None
    how: dict[str, str] = {}
    if first is not None:
        faithful = True
        how[first_version] = "derived-kept"
    else:
        first = auditwheel(ctx, state, first_version, raw[first_version], target_env)
        how[first_version] = "auditwheel"
        # auditwheel changed nothing but tags, and the same change gives back its own wheel
        faithful = derive.retag_only(raw[first_version], first) and derive.reproduces(raw[first_version], first)
        if faithful:
            kept.keep(key, rows, first)
        else:
            kept.forget()
    first_s = time.monotonic() - started
    template = first

    def repaired(version: str) -> Path:
        if faithful and derive.same_needs(raw[version], raw[first_version]):
            how[version] = "derived-kept" if how[first_version] == "derived-kept" else "derived"
            return derived(ctx, version, raw[version], template)
        how[version] = "auditwheel"
        return auditwheel(ctx, state, version, raw[version], target_env)

    others = plan.extra_python if how[first_version] == "auditwheel" else plan.python
    # the first wheel is the others' template: it gets its SBOM only once they are made
    made, seconds = ctx.each_python(others, repaired)
    made = {first_version: first, **made}
    wheels, finished = ctx.each_python(plan.python, lambda version: finish(ctx, state, version, made[version]))
    seconds = {v: round(finished[v] + seconds.get(v, first_s), 1) for v in plan.python}
    artifacts = []
    for version, wheel in wheels.items():
        extra = {
            "execution_providers": [ep.name for ep in plan.providers],
            "provider_names": [ep.provider for ep in plan.providers],
            "distribution": plan.distribution,
            "python": version,
        }
        artifacts.append(Artifact(wheel, "wheel", tag=names.wheel_tag(wheel.name), extra=extra))
    return Repaired(
        wheels=wheels,
        times=PerPython("repair_s", seconds, timed=len(plan.python) > 1),
        artifacts=tuple(artifacts),
        how={v: how[v] for v in plan.python},
    )


STEP = StepDef(run, reusable=True)
