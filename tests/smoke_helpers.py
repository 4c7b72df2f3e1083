"""Helpers shared by the smoke-suite tests (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def expected_smoke_environment(wheel_glibc: tuple[int, int], python: str) -> str:
    """Where the smoke suite must run a wheel on this machine, worked out apart from the code under test:
    the host when its glibc and a CPython of the wheel's version fit, else the clean root."""
    text = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"
    major, minor = (int(x) for x in text.split()[-1].split(".")[:2])
    return "host" if (major, minor) >= wheel_glibc and _runs_python(python) else "root"


def _runs_python(python: str) -> bool:
    """A CPython ``python`` with venv that really runs here: a pyenv shim for a version that is not
    selected is on PATH but exits with an error."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == python:
        return True
    found = shutil.which(f"python{python}")
    if found is None:
        return False
    probe = subprocess.run(
        [found, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == python
