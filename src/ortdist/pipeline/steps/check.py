"""The clean-root check: each wheel installed into a fresh venv in a root with nothing but its
CPython (a cross target's under the emulator) runs a model; outputs compared with onnx.reference.
A wheel pip would install as the one the last passing check did, but for some files' bytes, gets
that venv with those files replaced (checks/installed.py)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import wheelhouse
from ...checks import installed
from ...checks.clean_root import libraries_to_load, verify_check_result, write_check_case
from ...errors import CheckError
from ...fsutil import remove_tree
from ...inroot import Venv, in_root_python, overlay_venv_commands, python_layout, venv_commands
from ...log import log
from ...paths import IN_ROOT, IN_ROOT_TARGET, IN_ROOT_WHEELHOUSE
from ...toolchains import Bind
from ..context import BuildContext
from ..runner import Command
from ..state import BuildState, Checks, PerPython, Repaired
from ..step import StepDef
from .wheel import suffix

PACKAGE = Path(__file__).resolve().parents[2]
NOT_RUN = (
    "built against this host's CPython {python} headers (pyconfig.h for {arch}); no CPython {python} "
    "for {arch} is reachable offline (Debian, PyPI, npm), so the wheel was checked from its ELF files only"
)


def check_one(ctx: BuildContext, state: BuildState, python: str, wheel: Path, roots: CheckRoots) -> dict[str, Any]:
    """The probe's result for one wheel; a failure is a CheckError naming each problem."""
    plan, sfx = ctx.plan, suffix(ctx, python)
    check = ctx.layout.work.host / f"check{sfx}"
    remove_tree(check)
    model_file, tolerance = write_check_case(plan, ctx.layout.models.host, check)
    libraries = libraries_to_load(plan)
    shutil.copyfile(PACKAGE / "checks" / "probe.py", check / "probe.py")
    shutil.copyfile(PACKAGE / "smoke" / "proof.py", check / "proof.py")
    arch = plan.target.arch
    house = ctx.cache.wheelhouse(python, arch)
    wheelhouse.fill(
        house,
        python,
        list(plan.version.python_requires),
        arch,
        capture=ctx.host_capture,
        error=CheckError,
        what="downloading the wheel's runtime dependencies",
    )
    cross = ctx.cross
    with ctx.open_log(f"check{sfx}") as out:
        venv = ctx.layout.recipe_work / f"check-venv{sfx}"
        binds = [
            Bind(wheel.parent, IN_ROOT / "wheel", read_only=True),
            Bind(house, IN_ROOT_WHEELHOUSE, read_only=True),
            Bind(check, IN_ROOT / "check"),
            Bind(venv, IN_ROOT / "venv"),
        ]
        check_root = roots.root
        if roots.target is not None:
            binds.append(Bind(roots.target, IN_ROOT_TARGET, read_only=True))
        overlay = state.roots.pythons.get(python)
        interpreter = f"python{python}"  # the (target) root's own
        if overlay is not None:  # another CPython, unpacked
            binds.append(Bind(overlay, in_root_python(python), read_only=True))
            interpreter = python_layout(python)["executable"]
        # pip runs from the (target) root's pip wheel, rather than ensurepip installing a copy into a
        # venv that lives for one check (3 s a wheel); a cross target's processes under its emulator.
        cmds = (
            venv_commands(interpreter, "/ortdist/venv", cross.emulator, str(IN_ROOT_TARGET))
            if cross
            else overlay_venv_commands(interpreter, "/ortdist/venv")
        )
        fresh = Venv(cmds, str(IN_ROOT_WHEELHOUSE))
        probe = f"probe.py {model_file} data.npz result.json {tolerance}" + (
            f" {','.join(libraries)}" if libraries else ""
        )
        key = installed.install_key(wheel, [interpreter, check_root.name, *sorted(p.name for p in house.glob("*.whl"))])
        kept = installed.kept(venv, key)
        if kept is not None:  # the wheel pip installed there last, but for some files' bytes
            replaced = installed.update(venv, wheel, kept)
            how = f"updated: {len(replaced)} changed file(s) replaced in the venv a passing check left"
            script = fresh.run(probe, "/ortdist/check")
        else:
            remove_tree(venv)
            venv.mkdir(parents=True)
            how = "pip"
            script = (
                f"{fresh.create_and_install(f'/ortdist/wheel/{wheel.name}')} && {fresh.run(probe, '/ortdist/check')}"
            )
        log.info(f"{wheel.name}: installed by {how}")
        # The probe explains failures in result.json; its exit code only confirms them.
        code = ctx.runner.stream(
            Command(("/bin/sh", "-c", script), check_root, tuple(binds)), on_line=log.output, log=out
        )
    result_file = check / "result.json"
    result: dict[str, Any] = json.loads(result_file.read_text()) if result_file.is_file() else {"ok": False}
    problems = (
        verify_check_result(result, [ep.provider for ep in plan.providers], tolerance, libraries)
        if result_file.is_file()
        else [f"the probe exited with code {code} before writing its result (venv, pip install or Python failed)"]
    )
    if code != 0 or problems:
        remove_tree(venv)  # the next check starts from a fresh venv
        raise CheckError(
            "the wheel failed the clean-root check:\n"
            + "\n".join(f"    {p}" for p in problems or ["see log"])
            + ("\n" + result.get("error", "") if result.get("error") else ""),
            where=wheel.name,
            fix=f"full log: {ctx.log_path(f'check{sfx}')}",
        )
    installed.keep(venv, wheel, key)
    result["root"] = check_root.name
    result["installed"] = how
    return result


@dataclass(frozen=True)
class CheckRoots:
    """Where every version's check runs: the clean root; a cross target's, the build root with
    the target's bare Python root bound at /ortdist/target (``target``)."""

    root: Path
    target: Path | None = None


def check_roots(ctx: BuildContext, state: BuildState) -> CheckRoots:
    """The roots every check runs in, made (or verified) once, before the checks run side by side."""
    with ctx.open_log("check-roots") as out:
        if ctx.cross:
            # The target's own CPython, under the emulator, from a root with nothing but that
            # Python: a library the wheel forgot to bundle fails the import, as natively.
            target = ctx.toolchain.ensure_clean_target_root(ctx.cache, state.roots.build, ctx.plan.target.triple, out)
            return CheckRoots(state.roots.build, target)
        return CheckRoots(ctx.toolchain.ensure_clean_root(ctx.cache, out))


def run(ctx: BuildContext, state: BuildState) -> Checks:
    """Every version's wheel checked side by side, each in its own venv of the clean root."""
    plan, wheels = ctx.plan, state.get(Repaired).wheels
    main: dict[str, Any] = {}
    others: dict[str, Any] = {}
    roots = check_roots(ctx, state)
    runs = [python for python in plan.python if python not in plan.python_not_run]
    results, seconds = ctx.each_python(runs, lambda python: check_one(ctx, state, python, wheels[python], roots))
    for python in plan.python:
        if python not in results:
            # Its ELF files were checked by repair against the glibc promise; nothing here runs it.
            log.warning(
                f"{wheels[python].name}: not run (no CPython {python} for {plan.target.arch} is reachable here)"
            )
            others[python] = {"ok": None, "not_run": NOT_RUN.format(python=python, arch=plan.target.arch)}
            continue
        result = results[python]
        if python != plan.python[0]:
            others[python] = {"ok": True, "outputs": result["outputs"], "installed": result["installed"]}
            continue
        main = {
            "ok": True,
            "root": result["root"],
            "python": python,
            "available_providers": result["available_providers"],
            "outputs": result["outputs"],
            "node_providers": result["node_providers"],
            "installed": result["installed"],
        }
    return Checks(main=main, others=others, times=PerPython("check_s", seconds, timed=len(plan.python) > 1))


STEP = StepDef(run, reusable=True)
