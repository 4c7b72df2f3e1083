"""What the build host itself must have: root, and a few Debian tools (installed on demand)."""

from __future__ import annotations

import os
import shutil

from . import run
from .errors import ToolchainError


def require_host_tools(*tools: str) -> None:
    """Check host prerequisites, installing Debian packages for missing ones when we can."""
    packages = {"debootstrap": "debootstrap", "unshare": "util-linux", "chroot": "coreutils", "patch": "patch"}
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        wanted = sorted({packages.get(t, t) for t in missing})
        run.capture(["apt-get", "update", "-qq"], check=False)
        run.capture(
            ["apt-get", "install", "-y", "-qq", *wanted], error=ToolchainError, what=f"installing host tools {wanted}"
        )
        missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise ToolchainError(
            f"host tool(s) missing: {', '.join(missing)}",
            fix=f"install them (Debian: apt-get install {' '.join(sorted({packages.get(t, t) for t in missing}))})",
        )


def require_root() -> None:
    if os.geteuid() != 0:
        raise ToolchainError(
            "the debian-sysroot toolchain needs root (debootstrap, chroot and bind mounts)",
            fix="run as root, e.g. `sudo nox -s build-cpu-linux`, or inside a rootless container "
            "where you are root (`podman unshare`, `unshare --map-root-user --mount`)",
        )
