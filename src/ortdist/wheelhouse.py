"""pip downloads on the host: a wheelhouse filled offline first, then online; pinned single wheels.

pip inside a root fails the TLS check here, so every wheel a root needs is fetched on the host.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import run
from .errors import OrtdistError, ToolchainError
from .fsutil import atomic_file, remove_tree, sha256_file


def wheelhouse_argvs(
    dest: Path, python: str, requirements: Sequence[str], arch: str = "x86_64"
) -> tuple[list[str], list[str]]:
    """(offline, online) pip downloads into the wheelhouse ``dest``: run the first, and the second only
    if it fails. What the wheelhouse already holds needs no network, so a warm rebuild works offline."""
    asking = pip_download_argv(dest, python, [], arch)
    return [*asking, "--no-index", "--find-links", str(dest), *requirements], [*asking, *requirements]


def fill(
    house: Path,
    python: str,
    requirements: Sequence[str],
    arch: str = "x86_64",
    *,
    capture: Callable[..., Any] = run.capture,
    error: type[OrtdistError] = ToolchainError,
    what: str = "downloading wheels",
) -> None:
    """``house`` holds ``requirements`` for CPython ``python`` on ``arch``: from what it has (no
    network), else from PyPI. ``capture`` runs an argv (run.capture, or a step's runner over it).
    A fill that succeeded is remembered with the wheels it found: while they are all there, the
    same fill asks pip nothing (every wheel's check fills its house: a pip run of about 1 s)."""
    marker = house / ".filled" / hashlib.sha256(json.dumps([python, arch, sorted(requirements)]).encode()).hexdigest()
    try:
        if all((house / name).is_file() for name in json.loads(marker.read_text(encoding="utf-8"))):
            return
    except (OSError, ValueError):
        pass
    offline, online = wheelhouse_argvs(house, python, requirements, arch)
    if capture(offline, check=False).returncode != 0:
        capture(online, error=error, what=what)
    with atomic_file(marker, "w") as out:
        out.write(json.dumps(sorted(p.name for p in house.glob("*.whl"))))


def pip_download_argv(dest: Path, python: str, requirements: Sequence[str], arch: str = "x86_64") -> list[str]:
    """pip download for CPython ``python`` on ``arch`` Linux, binary wheels only."""
    tag = python.replace(".", "")
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--dest",
        str(dest),
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--abi",
        f"cp{tag}",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]
    for plat in (
        f"manylinux_2_28_{arch}",
        f"manylinux_2_27_{arch}",
        f"manylinux_2_17_{arch}",
        f"manylinux2014_{arch}",
        "any",
    ):
        argv += ["--platform", plat]
    return [*argv, *requirements]


def pinned_wheel(dest: Path, dist: str, version: str, sha256: str, python: str, fix: str, arch: str = "x86_64") -> Path:
    """``dist==version`` from PyPI into ``dest`` (once), checked by pip (--require-hashes) and again
    here; ``fix`` says where the pin lives when the download does not match it. ``arch``: the Linux
    machine the wheel is for (a cross compiler's sysroot wheel is the target's)."""
    dest.mkdir(parents=True, exist_ok=True)
    requirement = dest / "requirement.txt"
    requirement.write_text(f"{dist}=={version} --hash=sha256:{sha256}\n", encoding="utf-8")
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        run.capture(
            [*pip_download_argv(dest, python, [], arch), "--no-deps", "--require-hashes", "-r", str(requirement)],
            error=ToolchainError,
            what=f"downloading {dist}=={version} from PyPI (sha256 pinned)",
        )
        wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1 or sha256_file(wheels[0]) != sha256:
        remove_tree(dest)
        raise ToolchainError(
            f"{dist}=={version}: the download does not match the pinned sha256 {sha256[:12]}…", fix=fix
        )
    return wheels[0]
