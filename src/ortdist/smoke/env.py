"""Where a wheel is smoke-tested: a fresh venv on the host when its CPython and glibc fit the wheel's
tags, else a fresh venv in the toolchain's clean root (a bare Python; no build dependencies, so a
library the wheel forgot to bundle shows up as an import error)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .. import run, wheelhouse
from ..errors import CheckError
from ..fsutil import remove_tree
from ..inroot import Venv, in_root_python, overlay_venv_commands, python_layout, venv_commands
from ..paths import IN_ROOT, IN_ROOT_TARGET, IN_ROOT_WHEELHOUSE, Cache
from ..toolchains import Bind, Toolchain
from .wheelinfo import WheelInfo

IN_ROOT_SMOKE = IN_ROOT / "smoke"


def host_glibc() -> tuple[int, int]:
    text = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"
    major, minor = text.split()[-1].split(".")[:2]
    return int(major), int(minor)


def host_python(version: str) -> str | None:
    """A working host CPython ``version`` with venv support (a shim that only names one is not enough)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = shutil.which(f"python{version}")
    if found is None:
        return None
    probe = run.capture([found, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"], check=False)
    return found if probe.returncode == 0 and probe.stdout.strip() == version else None


@dataclass(frozen=True)
class IndexInstall:
    """Install the wheel's project by name and version from a package index instead of from the
    file (its requirements still come from the local wheelhouse), recording what pip fetched."""

    index_url: str
    requirement: str  # "onnxruntime==1.21.0"


INSTALL_REPORT = "install-report.json"  # pip install --report: where the installed file came from


@dataclass(frozen=True)
class Choice:
    kind: str  # "host", "root", or "emulated" (another CPU's wheel, under the toolchain's emulator)
    python: str  # interpreter to create the venv with
    reason: str
    triple: str = ""  # emulated: the cross target of the toolchain whose sysroot and emulator run it


def choose(
    info: WheelInfo,
    toolchain_python: tuple[str, ...],
    toolchain_glibc: tuple[int, int],
    glibc: tuple[int, int],
    python: str | None,
    emulated: dict[str, str] | None = None,
    emulated_python: tuple[str, ...] | None = None,
    prefer_root: bool = False,
) -> Choice:
    """Pure: the host when it can run the wheel, else the clean root, else (a wheel for another
    CPU) the toolchain's emulator with its target sysroot's Python, else a clear refusal.
    ``emulated`` maps an arch the toolchain can emulate to its cross triple; ``emulated_python``
    is what its emulator runs (default: ``toolchain_python``): the target root's, and the overlays
    only of a toolchain whose other CPythons are its target's. ``prefer_root``: the clean root even
    when the host could run it (a wheel installed from an index is judged on a system with nothing
    but its Python)."""
    if info.arch != HOST_ARCH:
        triple = (emulated or {}).get(info.arch)
        pythons = toolchain_python if emulated_python is None else emulated_python
        if triple is None or info.python not in pythons:
            raise CheckError(
                f"{info.path.name} is for {info.arch}; nothing here runs CPython {info.python} for it",
                where=str(info.path),
                fix=f"smoke-test it on an {info.arch} machine, or with a toolchain that cross-builds (and emulates) it",
            )
        return Choice("emulated", f"python{info.python}", f"{info.arch} under the emulator of {triple}", triple)
    fits_root = info.python in toolchain_python and (info.glibc is None or toolchain_glibc >= info.glibc)
    if prefer_root and fits_root:
        return Choice("root", f"python{info.python}", "clean root (asked for: nothing but the Python)")
    if python and info.glibc is not None and glibc >= info.glibc:
        return Choice("host", python, f"host CPython {info.python} and glibc {glibc[0]}.{glibc[1]} fit the tag")
    if fits_root:
        why = "no host CPython " + info.python if not python else f"host glibc {glibc[0]}.{glibc[1]} is too old"
        return Choice("root", f"python{info.python}", f"clean root ({why})")
    need = f"glibc >= {info.glibc[0]}.{info.glibc[1]}" if info.glibc else "the glibc it was built with"
    raise CheckError(
        f"nothing here can run {info.path.name}: it needs CPython {info.python} with {need}",
        where=str(info.path),
        fix="smoke-test it on a machine with that Python, or build for this one",
    )


HOST_ARCH = os.uname().machine


MAX_CRASHES = 25  # beyond this the wheel is broken, not a kernel or two
# What a case result carries over from its plan; the same tuple as in runner.py, which runs
# standalone in the wheel's environment and cannot be imported from here.
CASE_KEYS = ("suite", "name", "provider", "must_take", "expect_error", "refused_ops")


def install_script(venv: Venv, wheel: str, info: WheelInfo, source: IndexInstall | None, here: str) -> str:
    """The wheel file with its requirements from the wheelhouse; or, from an index, the
    requirements first (wheelhouse only), then the project alone by name, from the index only,
    uncached, with pip's report of the file it installed."""
    if source is None:
        return venv.install(wheel)
    from_index = (
        f"{venv.commands.pip} install --quiet --no-compile --no-cache-dir --no-deps "
        f"--index-url {shlex.quote(source.index_url)} "
        f"--report {here}/{INSTALL_REPORT} {shlex.quote(source.requirement)}"
    )
    requirements = info.all_requirements
    return f"{venv.install(*requirements)} && {from_index}" if requirements else from_index


def installed_file(report: dict[str, Any], project: str) -> tuple[str, str | None]:
    """(url, sha256) of ``project`` in a pip install report (pip >= 22.2)."""
    for item in report.get("install", []):
        if str(item.get("metadata", {}).get("name", "")).lower().replace("_", "-") == project:
            info = item.get("download_info", {})
            hashes = info.get("archive_info", {}).get("hashes", {})
            return str(info.get("url", "")), hashes.get("sha256")
    raise CheckError(f"pip's install report does not list {project}", fix="see the smoke log")


def run_in_env(
    choice: Choice,
    info: WheelInfo,
    workdir: Path,
    cache: Cache,
    toolchain: Toolchain,
    log: TextIO,
    source: IndexInstall | None = None,
    script: str = "runner.py plan.json result.json",
) -> int:
    """Fresh venv, install the wheel (+ its requirements from a local wheelhouse), run the runner
    (or another ``script`` in ``workdir``, e.g. the benchmark's latency.py).

    A case that crashes the interpreter (a native kernel raising SIGFPE, say) is recorded as a
    failed case and the runner restarts after it, so one bad kernel cannot hide every other result.
    """
    house = cache.wheelhouse(info.python, info.arch)
    wheelhouse.fill(
        house,
        info.python,
        list(info.all_requirements),
        info.arch,
        error=CheckError,
        what=f"downloading the requirements of {info.path.name}",
    )
    venv = workdir / "venv"
    remove_tree(venv)
    if choice.kind == "host":
        here, wheel_dir, house_seen = workdir, info.path.parent, house
        env = {**os.environ, "PYTHONNOUSERSITE": "1"}

        def shell(script: str) -> int:
            log.write(f"+ {script}\n")
            log.flush()
            return run.returncode(["/bin/sh", "-c", script], log=log, env=env)
    else:
        overlay: Path | None = None
        with (cache.root / "smoke-root.log").open("w", encoding="utf-8") as root_log:
            if choice.kind == "emulated":
                root = toolchain.ensure_build_root(cache, root_log)
                target = toolchain.ensure_clean_target_root(cache, root, choice.triple, root_log)
                if info.python in toolchain.spec.extra_python:  # the target's (emulated_python says so)
                    overlay = toolchain.ensure_python_overlay(cache, root, info.python, root_log)
            else:
                if info.python in toolchain.spec.extra_python:
                    build_root = toolchain.ensure_build_root(cache, root_log)
                    overlay = toolchain.ensure_python_overlay(cache, build_root, info.python, root_log)
                root = toolchain.ensure_clean_root(cache, root_log)
        venv.mkdir(parents=True)
        here, wheel_dir, house_seen = IN_ROOT_SMOKE, IN_ROOT / "wheel", IN_ROOT_WHEELHOUSE
        binds = [
            Bind(info.path.parent.resolve(), wheel_dir, read_only=True),
            Bind(house, IN_ROOT_WHEELHOUSE, read_only=True),
            Bind(workdir, IN_ROOT_SMOKE),
        ]
        if choice.kind == "emulated":
            binds.append(Bind(target, IN_ROOT_TARGET, read_only=True))
        if overlay is not None:
            binds.append(Bind(overlay, in_root_python(info.python), read_only=True))

        def shell(script: str) -> int:
            return run.stream(
                toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds), on_line=lambda _l: None, log=log
            )

    emulator = toolchain.spec.cross_targets[choice.triple].emulator if choice.kind == "emulated" else ""
    if choice.kind == "emulated" and info.python in toolchain.spec.extra_python:
        executable = python_layout(info.python)["executable"]
        venv_cmds = venv_commands(executable, f"{here}/venv", emulator, str(IN_ROOT_TARGET))
    elif choice.kind == "root" and info.python in toolchain.spec.extra_python:
        venv_cmds = overlay_venv_commands(python_layout(info.python)["executable"], f"{here}/venv")
    else:
        venv_cmds = venv_commands(choice.python, f"{here}/venv", emulator, str(IN_ROOT_TARGET))
    fresh = Venv(venv_cmds, str(house_seen))
    install = install_script(fresh, f"{wheel_dir}/{info.install_spec}", info, source, str(here))
    code = shell(f"{venv_cmds.create} && {install}")
    if code != 0:
        return code
    return run_until_settled(lambda: shell(fresh.run(script, str(here))), workdir)


def run_until_settled(start: Callable[[], int], workdir: Path) -> int:
    """The smoke runner (``start`` runs it once, returning its exit code) until it ends on its own
    (0: passed, 1: a failure it reported); a case that kills the interpreter is recorded as failed
    in ``workdir`` and the runner restarts after it, up to MAX_CRASHES times."""
    code = 0
    for _ in range(MAX_CRASHES + 1):
        code = start()
        if code in (0, 1) or not record_crash(workdir, code):
            return code
    return code


def crash_signal(code: int) -> str:
    """A shell reports death by signal N as 128+N; subprocess as -N."""
    number = -code if code < 0 else code - 128
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"exit status {code}"


def record_crash(workdir: Path, code: int) -> bool:
    """Append the case the runner died in to its progress file as failed. False: not in a case."""
    running = workdir / "running.txt"
    if not running.is_file():
        return False
    text = running.read_text().strip()
    running.unlink()
    if not text.isdigit():  # killed between creating the file and writing the index
        return False
    index = int(text)
    case = json.loads((workdir / "plan.json").read_text())["cases"][index]
    crashed = {k: case[k] for k in CASE_KEYS if k in case} | {
        "status": "error",
        "error": f"crashed: the interpreter died with {crash_signal(code)} in this case",
    }
    with (workdir / "progress.jsonl").open("a", encoding="utf-8") as progress:
        progress.write(json.dumps({"index": index, "case": crashed}) + "\n")
    return True
