"""CPython versions no reachable Debian suite carries (3.10, 3.12), taken from the build host.

pyenv and uv install relocatable CPython builds with their headers under one prefix each; such a
prefix is copied into a python overlay (``usr/`` layout, like an unpacked Debian CPython) so the
binding compiles against its headers and the wheel is checked under its interpreter inside the
roots. Where ortdist looks is fixed and reported, so a missing version is refused with the list.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError
from .spec import ToolchainSpec

_PATCH = re.compile(r'#define PY_VERSION\s+"([^"]+)"')


@dataclass(frozen=True)
class HostPython:
    """One installed CPython: its prefix (bin/, include/, lib/) and its full version."""

    version: str  # "3.10"
    full_version: str  # "3.10.13"
    prefix: Path

    @property
    def executable(self) -> Path:
        return self.prefix / "bin" / f"python{self.version}"


def search_places(version: str, arch: str = "x86_64") -> list[Path]:
    """Directory patterns searched: pyenv's versions, uv's managed Pythons, and the tool cache
    GitHub's setup-python installs into (CI)."""
    home = Path.home()
    pyenv = Path(os.environ.get("PYENV_ROOT") or home / ".pyenv") / "versions"
    uv = Path(os.environ.get("UV_PYTHON_INSTALL_DIR") or home / ".local" / "share" / "uv" / "python")
    tool_cache = Path(os.environ.get("RUNNER_TOOL_CACHE") or "/opt/hostedtoolcache") / "Python"
    machine = {"x86_64": "x64", "aarch64": "arm64"}.get(arch, arch)
    return [
        pyenv / f"{version}.*",
        uv / f"cpython-{version}.*-linux-{arch}-gnu",
        tool_cache / f"{version}.*" / machine,
    ]


def _full_version(prefix: Path, version: str) -> str | None:
    """PY_VERSION from the headers, when the prefix has the interpreter and Python.h for ``version``."""
    headers = prefix / "include" / f"python{version}"
    if not (prefix / "bin" / f"python{version}").is_file() or not (headers / "Python.h").is_file():
        return None
    match = _PATCH.search((headers / "patchlevel.h").read_text(encoding="utf-8", errors="replace"))
    if not match or not match.group(1).startswith(f"{version}."):
        return None
    return match.group(1)


def _expand(pattern: Path) -> list[Path]:
    """Directories matching ``pattern``, whose wildcards may sit in any component but the first."""
    anchor = Path(pattern.anchor)
    return sorted(p for p in anchor.glob(str(pattern.relative_to(anchor))) if p.is_dir())


def _patch_key(full: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", full)[:3])


def find_host_python(version: str, arch: str = "x86_64") -> HostPython:
    """The newest final release of ``version`` found in the search places; else a ToolchainError
    naming each place and how to provide one."""
    found: list[HostPython] = []
    for pattern in search_places(version, arch):
        for prefix in _expand(pattern):
            full = _full_version(prefix, version)
            if full and re.fullmatch(r"\d+\.\d+\.\d+", full):  # no alphas, betas or release candidates
                found.append(HostPython(version, full, prefix.resolve()))
    if not found:
        raise ToolchainError(
            f"no CPython {version} installed on this host (it comes from the host: no Debian suite has it)",
            where=", ".join(str(p) for p in search_places(version, arch)),
            fix=f"install one with headers, e.g. `pyenv install {version}` (a shared or static build) "
            f"or `uv python install {version}`; or drop {version} from the recipe's [wheel] python",
        )
    return max(found, key=lambda p: _patch_key(p.full_version))


def require_host_pythons(recipe: str, python: Sequence[str], spec: ToolchainSpec, arch: str = "x86_64") -> None:
    """Refuse, before any lock, download or root, a build whose host CPythons are not all here; the
    error names each missing version, where it was looked for, and how to build the others."""
    host = [v for v in python if v in spec.extra_python and spec.extra_python[v].source == "host"]
    missing: list[str] = []
    for version in host:
        try:
            find_host_python(version, arch)
        except ToolchainError:
            missing.append(version)
    if not missing:
        return
    others = sorted((v for v in python if v not in missing), key=_patch_key)
    places = "; ".join(f"{v}: {', '.join(str(p) for p in search_places(v, arch))}" for v in missing)
    raise ToolchainError(
        f"no CPython {', '.join(missing)} with headers on this host; recipe {recipe} builds wheels for "
        f"{', '.join(python)}, and {', '.join(missing)} can only come from the host (no Debian suite has "
        "them)",
        where=f"looked in {places}",
        fix=f"build the others: `./nox -s build-{recipe} -- --python {','.join(others)}` (or `ortdist build "
        f"{recipe} --python {','.join(others)}`; the manifest records what was left out); or install "
        + " and ".join(f"`pyenv install {v}` / `uv python install {v}`" for v in missing)
        + " (needs the internet) and rerun",
    )


def copy_prefix(python: HostPython, dest: Path) -> None:
    """``python``'s prefix into ``dest/usr``, without its site-packages, tests and byte code: the
    overlay's venvs get pip from ensurepip, as a Debian CPython's do."""
    stdlib = f"lib/python{python.version}"

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(python.prefix).as_posix()
        skipped = {"__pycache__"} & set(names)
        if rel == stdlib:
            skipped |= {"test", "idlelib", "tkinter", "turtledemo"} & set(names)
        if rel == f"{stdlib}/site-packages":
            skipped |= set(names)
        return skipped

    shutil.copytree(python.prefix, dest / "usr", symlinks=True, ignore=ignore)
