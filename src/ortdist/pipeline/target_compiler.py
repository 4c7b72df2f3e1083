"""The target's compilers as the build ran them, for what compiles or links outside CMake: the
static archive's LTO object, the C smoke program, the size step's runtime-archive lookup.

A GCC toolchain's compiler is its (cross-prefixed) name. A clang cross toolchain
(portable-glibc2.17-aarch64) names the target with CMAKE_<LANG>_COMPILER_TARGET, and clang needs
that target, the sysroot, --gcc-toolchain and its linker (lld) on every call: read from the same
CMake defines the build got, so the steps outside CMake compile exactly as the build did."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TargetCompiler:
    c: tuple[str, ...]
    cxx: tuple[str, ...]
    link: tuple[str, ...]  # the toolchain's own linker flags (clang: -fuse-ld=lld, static C++ runtime)
    clang: bool  # a clang driver told the target: LTO IR is LLVM's, linked by lld

    def shell(self, language: str) -> str:
        """The compiler as one shell word list: ``c`` or ``cxx``."""
        return shlex.join(self.c if language == "c" else self.cxx)

    def lto_object(self, archives: Sequence[str], output: str, optimize: str) -> list[str]:
        """Compile LTO IR to machine code in one relocatable object: a static archive of the
        compiler's IR would be tied to that exact compiler and is ~10x larger (148 MB for the CPU
        kernels alone). GCC: one LTO partition (GCC 14's balanced partitioning aborts on ORT's
        archives with -r). clang: lld runs the LTO of a relocatable link itself, and always gives
        every function and object its own section."""
        if self.clang:
            lto = ["-flto", *(flag for flag in self.link if flag.startswith("-fuse-ld=")), optimize]
        else:
            lto = ["-flto=auto", "-flto-partition=one", optimize, "-ffunction-sections", "-fdata-sections"]
        return [
            *self.cxx,
            "-r",
            "-nostdlib",
            *lto,
            "-o",
            output,
            "-Wl,--whole-archive",
            *archives,
            "-Wl,--no-whole-archive",
        ]


def target_compiler(defines: Mapping[str, str], prefix: str, sysroot: str) -> TargetCompiler:
    """``defines``: the plan's CMake defines; ``prefix``: the toolchain's tool prefix for the target
    ('' when native); ``sysroot``: the target root inside the build root ('' when there is none),
    which a GCC cross compiler is pointed at (a clang one has its own CMAKE_SYSROOT)."""
    target = defines.get("CMAKE_CXX_COMPILER_TARGET", "")
    if not (target and defines.get("CMAKE_CXX_COMPILER")):
        own = (f"--sysroot={sysroot}",) if sysroot else ()
        return TargetCompiler(c=(f"{prefix}gcc", *own), cxx=(f"{prefix}g++", *own), link=(), clang=False)
    root = (f"--sysroot={defines['CMAKE_SYSROOT']}",) if defines.get("CMAKE_SYSROOT") else ()

    def driver(language: str) -> tuple[str, ...]:
        compiler = defines.get(f"CMAKE_{language}_COMPILER") or defines["CMAKE_CXX_COMPILER"]
        lang_target = defines.get(f"CMAKE_{language}_COMPILER_TARGET") or target
        return (compiler, f"--target={lang_target}", *root, *shlex.split(defines.get(f"CMAKE_{language}_FLAGS", "")))

    return TargetCompiler(
        c=driver("C"),
        cxx=driver("CXX"),
        link=tuple(shlex.split(defines.get("CMAKE_EXE_LINKER_FLAGS", ""))),
        clang=True,
    )
