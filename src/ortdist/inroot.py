"""Python inside a root: where another CPython's directory is bound and its layout, and the one way
a fresh venv is made there, filled offline from the wheelhouse and run (check, compat, smoke with
the publish step's install-back, the ORT-format converter)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from .paths import IN_ROOT_PYTHONS


def in_root_python(version: str) -> Path:
    """Where CPython ``version``'s directory is bound inside a root."""
    return IN_ROOT_PYTHONS / version


def python_layout(version: str) -> dict[str, str]:
    """The paths of an unpacked CPython ``version`` as seen inside a root."""
    base = in_root_python(version)
    return {
        "executable": f"{base}/usr/bin/python{version}",
        "include": f"{base}/usr/include/python{version}",
        # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h> from here.
        "multiarch_include": f"{base}/usr/include",
        "numpy_include": f"{base}/site-packages/numpy/_core/include",
    }


@dataclass(frozen=True)
class VenvCommands:
    """Shell fragments that create a venv, run pip in it and run its Python."""

    create: str
    pip: str
    python: str


def venv_commands(python: str, venv: str, emulator: str = "", target: str = "") -> VenvCommands:
    """Native: the usual. Emulated (another CPU, no binfmt handler): every process of the target's
    Python must be started through the emulator, so the venv is made without pip (ensurepip would
    exec the new interpreter directly) and pip runs from the target's own pip wheel. ``python``: a
    program of the target root's /usr/bin, or an absolute path (another CPython for the target)."""
    if not emulator:
        return VenvCommands(f"{python} -m venv {venv}", f"{venv}/bin/python -m pip", f"{venv}/bin/python")
    run = f"{emulator} -L {target}"
    pip_wheel = f"$(ls {target}/usr/share/python-wheels/pip-*.whl | head -n1)/pip"
    interpreter = python if python.startswith("/") else f"{target}/usr/bin/{python}"
    return VenvCommands(
        f"{run} {interpreter} -m venv --without-pip {venv}",
        f"{run} {venv}/bin/python {pip_wheel}",
        f"{run} {venv}/bin/python",
    )


def overlay_venv_commands(python: str, venv: str) -> VenvCommands:
    """A CPython unpacked from another Debian suite: its venv is made without pip (Debian's
    ensurepip looks for wheels of that suite) and pip runs from the root's own pip wheel, which
    supports every CPython ortdist builds for."""
    pip_wheel = "$(ls /usr/share/python-wheels/pip-*.whl | head -n1)/pip"
    return VenvCommands(
        f"{python} -m venv --without-pip {venv}",
        f"{venv}/bin/python {pip_wheel}",
        f"{venv}/bin/python",
    )


@dataclass(frozen=True)
class Venv:
    """A fresh venv's shell lines: made by ``commands.create``, filled from the wheelhouse ``house``
    with no index (every requirement was fetched there first, on the host), then run."""

    commands: VenvCommands
    house: str

    def install(self, *requirements: str) -> str:
        """pip, offline. --no-compile: byte-compiling numpy and sympy is two thirds of an install
        (7 of 9 s a wheel) and proves nothing the import does not."""
        names = " ".join(shlex.quote(r) for r in requirements)
        return f"{self.commands.pip} install --quiet --no-compile --no-index --find-links {self.house} {names}"

    def create_and_install(self, *requirements: str) -> str:
        return f"{self.commands.create} && {self.install(*requirements)}"

    def run(self, script: str, cwd: str) -> str:
        """``script`` (a file and its arguments, already shell words) by the venv's Python in ``cwd``."""
        return f"cd {cwd} && {self.commands.python} {script}"
