"""Where a wheel is smoke-tested: a fresh venv on the host when its CPython and glibc fit the wheel's
tags, else a fresh venv in the toolchain's clean root (a bare Python; no build dependencies, so a
library the wheel forgot to bundle shows up as an import error)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .. import run
from ..errors import CheckError
from ..fsutil import remove_tree
from ..paths import IN_ROOT, IN_ROOT_WHEELHOUSE, Cache
from ..toolchains import Bind, Toolchain
from ..toolchains.debian_sysroot import pip_download_argv
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
    probe = subprocess.run(
        [found, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found if probe.returncode == 0 and probe.stdout.strip() == version else None


@dataclass(frozen=True)
class Choice:
    kind: str  # "host" or "root"
    python: str  # interpreter to create the venv with
    reason: str


def choose(
    info: WheelInfo,
    toolchain_python: tuple[str, ...],
    toolchain_glibc: tuple[int, int],
    glibc: tuple[int, int],
    python: str | None,
) -> Choice:
    """Pure: the host when it can run the wheel, else the clean root, else a clear refusal."""
    if python and info.glibc is not None and glibc >= info.glibc:
        return Choice("host", python, f"host CPython {info.python} and glibc {glibc[0]}.{glibc[1]} fit the tag")
    if info.python in toolchain_python and (info.glibc is None or toolchain_glibc >= info.glibc):
        why = "no host CPython " + info.python if not python else f"host glibc {glibc[0]}.{glibc[1]} is too old"
        return Choice("root", f"python{info.python}", f"clean root ({why})")
    need = f"glibc >= {info.glibc[0]}.{info.glibc[1]}" if info.glibc else "the glibc it was built with"
    raise CheckError(
        f"nothing here can run {info.path.name}: it needs CPython {info.python} with {need}",
        where=str(info.path),
        fix="smoke-test it on a machine with that Python, or build for this one",
    )


def run_in_env(choice: Choice, info: WheelInfo, workdir: Path, cache: Cache, toolchain: Toolchain, log: TextIO) -> int:
    """Fresh venv, install the wheel (+ its requirements from a local wheelhouse), run the runner."""
    house = cache.wheelhouse(info.python)
    run.capture(
        pip_download_argv(house, info.python, list(info.requires)),
        error=CheckError,
        what=f"downloading the requirements of {info.path.name}",
    )
    venv = workdir / "venv"
    remove_tree(venv)
    if choice.kind == "host":
        env = {"PYTHONNOUSERSITE": "1"}
        script = (
            f"{choice.python} -m venv {venv} && "
            f"{venv}/bin/pip install --quiet --no-index --find-links {house} {info.path} && "
            f"cd {workdir} && {venv}/bin/python runner.py plan.json result.json"
        )
        log.write(f"+ {script}\n")
        log.flush()
        return subprocess.run(
            ["/bin/sh", "-c", script], stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}, check=False
        ).returncode
    with (cache.root / "smoke-root.log").open("w", encoding="utf-8") as root_log:
        root = toolchain.ensure_clean_root(cache, root_log)
    venv.mkdir(parents=True)
    binds = [
        Bind(info.path.parent.resolve(), IN_ROOT / "wheel", read_only=True),
        Bind(house, IN_ROOT_WHEELHOUSE, read_only=True),
        Bind(workdir, IN_ROOT_SMOKE),
    ]
    script = (
        f"{choice.python} -m venv {IN_ROOT_SMOKE}/venv && "
        f"{IN_ROOT_SMOKE}/venv/bin/pip install --quiet --no-index --find-links {IN_ROOT_WHEELHOUSE} "
        f"{IN_ROOT}/wheel/{info.path.name} && "
        f"cd {IN_ROOT_SMOKE} && {IN_ROOT_SMOKE}/venv/bin/python runner.py plan.json result.json"
    )
    return run.stream(toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds), on_line=lambda _l: None, log=log)
