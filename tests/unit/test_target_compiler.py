"""The target's compilers for what compiles outside CMake, read from the plan's CMake defines."""

from __future__ import annotations

from pathlib import Path

from ortdist.pipeline.target_compiler import target_compiler
from ortdist.project import plan_for


def test_a_gcc_cross_toolchain_is_its_prefixed_gcc_pointed_at_the_target_root(project: Path) -> None:
    plan = plan_for("slim-linux-aarch64", project)[0]  # debian-trixie: aarch64-linux-gnu-gcc 14
    compiler = target_compiler(plan.cmake_defines, "aarch64-linux-gnu-", "/ortdist/target")
    assert not compiler.clang and compiler.link == ()
    assert compiler.c == ("aarch64-linux-gnu-gcc", "--sysroot=/ortdist/target")
    assert compiler.shell("cxx") == "aarch64-linux-gnu-g++ --sysroot=/ortdist/target"
    lto = compiler.lto_object(["a.a", "b.a"], "out.o", "-Os")
    assert lto[:3] == ["aarch64-linux-gnu-g++", "--sysroot=/ortdist/target", "-r"]
    assert "-flto-partition=one" in lto and "-ffunction-sections" in lto
    assert lto[-4:] == ["-Wl,--whole-archive", "a.a", "b.a", "-Wl,--no-whole-archive"]


def test_a_native_gcc_toolchain_is_plain_gcc() -> None:
    compiler = target_compiler({"CMAKE_CXX_COMPILER": "/opt/c/bin/x86_64-linux-gnu-g++"}, "", "")
    assert compiler.c == ("gcc",) and compiler.cxx == ("g++",) and not compiler.clang


def test_a_clang_cross_toolchain_names_target_sysroot_gcc_toolchain_and_lld_every_time(project: Path) -> None:
    plan = plan_for("cpu-linux-aarch64", project)[0]  # portable-glibc2.17-aarch64: clang + ppbt's sysroot
    compiler = target_compiler(plan.cmake_defines, "aarch64-linux-gnu-", "/ortdist/target")
    assert compiler.clang
    sysroot = f"--sysroot={plan.cmake_defines['CMAKE_SYSROOT']}"
    assert compiler.c[:3] == ("/usr/bin/clang", "--target=aarch64-linux-gnu", sysroot)
    assert compiler.cxx[:3] == ("/usr/bin/clang++", "--target=aarch64-linux-gnu", sysroot)
    assert any(word.startswith("--gcc-toolchain=") for word in compiler.cxx)
    assert "/ortdist/target" not in compiler.shell("c")  # ppbt's glibc 2.17 sysroot, not Debian's arm64 root
    assert "-fuse-ld=lld" in compiler.link and "-static-libstdc++" in compiler.link
    lto = compiler.lto_object(["own.a"], "out.o", "-Oz")
    assert {"-r", "-nostdlib", "-flto", "-fuse-ld=lld", "-Oz"} <= set(lto)
    assert not [word for word in lto if word.startswith("-flto-partition")]  # GCC's, not clang's
