"""RELRO ended on the common page with GNU ld 2.39 and newer.

Since binutils 2.39 GNU ld ends RELRO on the *largest* page (DATA_SEGMENT_ALIGN's first operand,
64 KiB on arm64) whatever ``-z common-page-size`` says, and because a segment's file offset must
match its address modulo that page, the file is padded by up to 64 KiB before the data segment
(53,944 B in slim-c-linux-aarch64). The linker's own default script, with that one expression
changed, keeps the segments 64 KiB-congruent (the library still maps on 16 and 64 KiB-page kernels)
and ends RELRO on the common page, as GNU ld did before 2.39. lld never pads the file: a clang
toolchain needs no script.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from .errors import BuildError

SCRIPT_NAME = "ortdist-relro.ld"
# `ld --verbose` prints its default script between two lines of 50 '='.
_RULE = "=" * 50
DEFAULT_ALIGN = "DATA_SEGMENT_ALIGN (CONSTANT (MAXPAGESIZE), CONSTANT (COMMONPAGESIZE))"
# The address keeps the file offset's remainder modulo the largest page; RELRO then ends on the
# common page (DATA_SEGMENT_ALIGN aligns RELRO's end to its first operand).
COMMON_PAGE_ALIGN = (
    "ALIGN (CONSTANT (MAXPAGESIZE)) + (. & (CONSTANT (MAXPAGESIZE) - 1));\n"
    "  . = DATA_SEGMENT_ALIGN (CONSTANT (COMMONPAGESIZE), CONSTANT (COMMONPAGESIZE))"
)


def script_path(build: PurePosixPath) -> PurePosixPath:
    """Where the configure step writes the script: in the build tree, beside what links with it."""
    return build / SCRIPT_NAME


def link_flag(build: PurePosixPath) -> str:
    return f"-Wl,-T,{script_path(build)}"


def verbose_argv(ld: str) -> list[str]:
    """The linker's default script for a shared library with RELRO."""
    return [ld, "--verbose", "-shared", "-z", "relro"]


def common_page_script(verbose: str, linker: str) -> str:
    """``ld --verbose`` output -> the default script with RELRO ended on the common page."""
    parts = verbose.split(_RULE)
    script = parts[1].strip("\n") if len(parts) == 3 else ""
    if script.count(DEFAULT_ALIGN) != 1:
        raise BuildError(
            f"{linker} --verbose printed no default linker script with one {DEFAULT_ALIGN}",
            where="recipe [features] key 'common_page_size'",
            fix="use a GNU ld whose script aligns the data segment that way (binutils 2.26 or newer), "
            "or set common_page_size = 0",
        )
    return script.replace(DEFAULT_ALIGN, COMMON_PAGE_ALIGN) + "\n"
