"""Helpers shared by the smoke-suite tests (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import os
import shutil
import sys


def expected_smoke_environment(wheel_glibc: tuple[int, int], python: str) -> str:
    """Where the smoke suite must run a wheel on this machine, worked out apart from the code under test:
    the host when its glibc and a CPython of the wheel's version fit, else the clean root."""
    text = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"
    major, minor = (int(x) for x in text.split()[-1].split(".")[:2])
    has_python = f"{sys.version_info.major}.{sys.version_info.minor}" == python or shutil.which(f"python{python}")
    return "host" if (major, minor) >= wheel_glibc and has_python else "root"
