"""Repair a wheel for its platform and read back the tag it got."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import PackageError
from ..paths import IN_ROOT_TOOLS_VENV
from ..wheelnames import required_glibc


def auditwheel_argv(raw_wheel: str, out_dir: str, excludes: Sequence[str], *, strip: bool) -> list[str]:
    """auditwheel repair, letting it pick the most compatible manylinux tag the wheel qualifies for.

    ``excludes`` are vendor runtime libraries (from the EP registry) that must come from the
    user's system or nvidia-* wheels, never bundled.
    """
    # Written uncompressed: record.add_to_dist_info recompresses every member at COMPRESSLEVEL last,
    # and the same members at the same level give the same bytes whatever came before.
    argv = [f"{IN_ROOT_TOOLS_VENV}/bin/auditwheel", "repair", "--zip-compression-level", "0", "--wheel-dir", out_dir]
    if strip:
        argv.append("--strip")
    for lib in excludes:
        argv += ["--exclude", lib]
    return [*argv, raw_wheel]


def single_wheel(directory: Path) -> Path:
    """The one wheel a step (pip wheel, auditwheel repair) wrote into ``directory``."""
    wheels = sorted(directory.glob("*.whl")) if directory.is_dir() else []
    if len(wheels) != 1:
        found = ", ".join(w.name for w in wheels) or ("nothing" if directory.is_dir() else "no such directory")
        raise PackageError(
            f"expected exactly one wheel from the step, found {found}",
            where=str(directory),
            fix="read the step's log in dist/<recipe>/logs/: the tool failed to write its wheel, or an old one "
            "was left behind; rerun with --fresh",
        )
    return wheels[0]


def check_glibc_promise(wheel_name: str, glibc: str, toolchain: str) -> None:
    """A wheel tagged for a newer glibc than its toolchain promises links a newer symbol than the
    toolchain's C library has: something came from outside its sysroot."""
    needed = required_glibc(wheel_name)
    promised = tuple(int(part) for part in glibc.split("."))
    if needed is not None and needed > promised:
        raise PackageError(
            f"auditwheel tagged {wheel_name} for glibc {needed[0]}.{needed[1]}, newer than the {glibc} "
            f"toolchain {toolchain} promises",
            where=wheel_name,
            fix="a library or object in the wheel needs a newer glibc symbol than the toolchain's sysroot has: "
            "`auditwheel show` in logs/repair*.log names the symbol versions; find what linked it "
            "(a dependency built outside the toolchain, or a header from the build root)",
        )


_PT_GNU_STACK = 0x6474E551
_PF_X = 0x1


def executable_stack(elf: bytes) -> bool:
    """Whether an ELF object asks for an executable stack: a PT_GNU_STACK header with PF_X, or
    no such header at all (the kernel's and glibc's default then is an executable stack)."""
    if elf[:4] != b"\x7fELF" or len(elf) < 64:
        return False
    wide, order = elf[4] == 2, "<" if elf[5] == 1 else ">"
    if wide:
        (phoff,), (phentsize, phnum) = (
            struct.unpack_from(f"{order}Q", elf, 32),
            struct.unpack_from(f"{order}HH", elf, 54),
        )
    else:
        (phoff,), (phentsize, phnum) = (
            struct.unpack_from(f"{order}I", elf, 28),
            struct.unpack_from(f"{order}HH", elf, 42),
        )
    for index in range(phnum):
        start = phoff + index * phentsize
        p_type = struct.unpack_from(f"{order}I", elf, start)[0]
        if p_type == _PT_GNU_STACK:
            flags_at = start + 4 if wide else start + 24
            return bool(struct.unpack_from(f"{order}I", elf, flags_at)[0] & _PF_X)
    return True


def check_no_executable_stack(libraries: Iterable[tuple[str, bytes]], where: str) -> None:
    """glibc 2.41+ refuses to dlopen a library that asks for an executable stack ("cannot enable
    executable stack"), and older ones make every thread's stack executable: refuse to ship one."""
    offenders = [name for name, data in libraries if executable_stack(data)]
    if offenders:
        raise PackageError(
            f"{', '.join(offenders)} ask(s) for an executable stack",
            where=where,
            fix="an object or assembly file linked in has no .note.GNU-stack section: link with "
            "-Wl,-z,noexecstack (the toolchain's CMAKE_*_LINKER_FLAGS) or add the note to that source",
        )
