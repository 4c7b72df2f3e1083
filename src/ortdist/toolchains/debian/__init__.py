"""The ``debian-sysroot`` backend: debootstrapped Debian roots entered with unshare + chroot.

sysroot.py holds the Toolchain implementation; names.py what each root is made from and its name;
apt.py, verify.py, wheels.py and overlays.py the pieces a root is made and checked with. Nothing
outside toolchains/ imports this package: callers use the Toolchain protocol.
"""

from __future__ import annotations

from .sysroot import STAMP, DebianSysroot, RootRecipe

__all__ = ["STAMP", "DebianSysroot", "RootRecipe"]
