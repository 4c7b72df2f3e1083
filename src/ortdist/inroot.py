"""Fixed paths of Python inside a root: where another CPython's directory is bound, and its layout."""

from __future__ import annotations

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
