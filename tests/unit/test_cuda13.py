"""cuda13: CUDA 13.0 from NVIDIA's wheels unpacked as pip would (one nvidia/cu13 tree), the links a
toolkit needs, and the cu13 pip extras that replace the registry's CUDA 12 ones."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from ortdist.errors import RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.project import plan_for
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian import DebianSysroot
from ortdist.toolchains.debian.wheels import install_ep_wheels
from ortdist.toolchains.spec import PinnedWheel
from ortdist.wheel import assemble


def test_the_cuda13_toolchain_is_portable_and_pins_the_13_0_line(project: Path) -> None:
    spec = load_toolchain(project, "cuda13")
    assert spec.extends == "portable-glibc2.17" and spec.glibc == "2.17" and spec.compiler is not None
    wheels = spec.ep_wheels["cuda"]
    toolkit = {d for d, w in wheels.items() if w.into == "cuda"}
    assert {"nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-cuda-cccl"} <= toolkit
    assert all(wheels[d].version.startswith("13.0.") for d in ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt"))
    assert spec.ep_cmake["cuda"]["CMAKE_CUDA_HOST_COMPILER"] == "{compiler}/bin/x86_64-linux-gnu-g++"
    assert spec.ep_links["cuda"]["cuda/nvidia/cu13/lib64"] == "lib"


def test_the_cuda13_wheel_depends_on_cu13_wheels_and_finds_them(project: Path) -> None:
    plan, _ = plan_for("cuda13-linux", project)
    extras = assemble.optional_dependencies(plan)
    assert "nvidia-cublas>=13.0,<14" in extras["cuda"] and extras["cudnn"] == ("nvidia-cudnn-cu13>=9.14,<10",)
    assert not any("cu12" in r for reqs in extras.values() for r in reqs)
    cuda = next(ep for ep in plan.providers if ep.name == "cuda")
    assert (
        assemble.provider_runpath(cuda.pip_library_dirs)
        == "$ORIGIN:$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudnn/lib"
    )
    # the CUDA 12 recipe keeps the registry's
    cuda12, _ = plan_for("cuda-linux", project)
    assert "nvidia-cublas-cu12>=12.4,<13" in assemble.optional_dependencies(cuda12)["cuda"]


def _toolkit_wheel(directory: Path, name: str, files: dict[str, tuple[bytes, int]]) -> Path:
    """A wheel whose members carry Unix modes, as NVIDIA's do (nvcc is 0o755)."""
    path = directory / f"{name}-13.0.0-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, (data, mode) in files.items():
            info = zipfile.ZipInfo(member)
            info.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(info, data)
    return path


@pytest.fixture
def made(tmp_path: Path) -> Path:
    """Where a test writes the toolkit wheels it unpacks."""
    (tmp_path / "made").mkdir()
    return tmp_path / "made"


def _sysroot_with(
    project: Path,
    tmp_path: Path,
    wheels: dict[str, Path],
    links: dict[str, str],
    subdirs: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
) -> tuple[DebianSysroot, Cache]:
    """cuda13's spec over the given wheels, already in the download cache (nothing is fetched)."""
    cache = Cache(tmp_path / "cache")
    pins = {}
    for dist, wheel in wheels.items():
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        house = cache.downloads / "ep-wheels" / f"{dist}-13.0.0-{digest[:12]}"
        house.mkdir(parents=True)
        shutil.copy(wheel, house / wheel.name)
        into = "cuda" if dist != "cudnn" else ""
        pins[dist] = PinnedWheel(version="13.0.0", sha256=digest, into=into, subdir=(subdirs or {}).get(dist, ""))
    spec = dataclasses.replace(
        load_toolchain(project, "cuda13"),
        ep_wheels={"cuda": pins},
        ep_links={"cuda": links},
        ep_files={"cuda": files or {}},
    )
    return DebianSysroot(spec), cache


@pytest.mark.usefixtures("no_subprocess")
def test_toolkit_wheels_share_one_tree_with_their_modes_and_links(project: Path, tmp_path: Path, made: Path) -> None:
    wheels = {
        "nvcc": _toolkit_wheel(made, "nvcc", {"nvidia/cu13/bin/nvcc": (b"#!nvcc", 0o755)}),
        "runtime": _toolkit_wheel(
            made,
            "runtime",
            {"nvidia/cu13/lib/libcudart.so.13": (b"ELF", 0o644), "nvidia/cu13/include/x.h": (b"", 0o644)},
        ),
        "cudnn": _toolkit_wheel(made, "cudnn", {"nvidia/cudnn/lib/libcudnn.so.9": (b"ELF", 0o644)}),
    }
    links = {"cuda/nvidia/cu13/lib/libcudart.so": "libcudart.so.13", "cuda/nvidia/cu13/lib64": "lib"}
    sysroot, cache = _sysroot_with(project, tmp_path, wheels, links)
    root = tmp_path / "root"
    install_ep_wheels(sysroot.spec, cache, root, io.StringIO())
    tree = root / "opt" / "ortdist-wheels"
    assert sorted(p.name for p in tree.iterdir()) == ["cuda", "cudnn"]
    nvcc = tree / "cuda" / "nvidia" / "cu13" / "bin" / "nvcc"
    assert nvcc.stat().st_mode & 0o111  # zipfile alone drops the x bit, and CMake finds no nvcc
    assert not (tree / "cuda" / "nvidia" / "cu13" / "include" / "x.h").stat().st_mode & 0o111
    assert (tree / "cuda" / "nvidia" / "cu13" / "lib" / "libcudart.so").resolve().read_bytes() == b"ELF"
    assert (tree / "cuda" / "nvidia" / "cu13" / "lib64" / "libcudart.so.13").is_file()


@pytest.mark.usefixtures("no_subprocess")
def test_a_link_to_nothing_is_refused_with_its_name(project: Path, tmp_path: Path, made: Path) -> None:
    wheels = {"nvcc": _toolkit_wheel(made, "nvcc", {"nvidia/cu13/bin/nvcc": (b"#!nvcc", 0o755)})}
    sysroot, cache = _sysroot_with(project, tmp_path, wheels, {"cuda/nvidia/cu13/lib/libnvrtc.so": "libnvrtc.so.13"})
    with pytest.raises(ToolchainError, match=r"libnvrtc.so -> libnvrtc.so.13: no libnvrtc.so.13 beside it"):
        install_ep_wheels(sysroot.spec, cache, tmp_path / "root", io.StringIO())


@pytest.mark.usefixtures("no_subprocess")
def test_wheels_merge_from_their_subdirs_and_links_reach_the_roots_programs(
    project: Path, tmp_path: Path, made: Path
) -> None:
    """cuda12's layout: each wheel's nvidia/<component>/ becomes one toolkit tree, Debian's nvcc is
    linked in by its path in the root, and the tree's nvcc.profile is written beside it."""
    init = (b"", 0o644)
    wheels = {
        "runtime": _toolkit_wheel(
            made,
            "runtime",
            {
                "nvidia/__init__.py": init,
                "nvidia/cuda_runtime/include/cuda_runtime.h": (b"rt", 0o644),
                "nvidia/cuda_runtime/lib/__init__.py": init,
                "nvidia/cuda_runtime/lib/libcudart.so.12": (b"ELF", 0o644),
                "runtime-12.4.dist-info/METADATA": (b"m", 0o644),
            },
        ),
        "cublas": _toolkit_wheel(
            made,
            "cublas",
            {"nvidia/cublas/include/cublas_v2.h": (b"bl", 0o644), "nvidia/cublas/lib/__init__.py": init},
        ),
        "nvcc": _toolkit_wheel(made, "nvcc", {"nvidia/cuda_nvcc/bin/ptxas": (b"ELF", 0o755)}),
    }
    subdirs = {"runtime": "nvidia/cuda_runtime", "cublas": "nvidia/cublas", "nvcc": "nvidia/cuda_nvcc/"}
    links = {"cuda/bin/nvcc": "/usr/lib/nvidia-cuda-toolkit/bin/nvcc", "cuda/lib/libcudart.so": "libcudart.so.12"}
    profile = "TOP = $(_HERE_)/..\n"
    sysroot, cache = _sysroot_with(project, tmp_path, wheels, links, subdirs, {"cuda/bin/nvcc.profile": profile})
    root = tmp_path / "root"
    (root / "usr/lib/nvidia-cuda-toolkit/bin").mkdir(parents=True)
    (root / "usr/lib/nvidia-cuda-toolkit/bin/nvcc").write_bytes(b"ELF")
    install_ep_wheels(sysroot.spec, cache, root, io.StringIO())
    cuda = root / "opt" / "ortdist-wheels" / "cuda"
    assert sorted(p.name for p in cuda.iterdir()) == ["bin", "include", "lib"]  # no nvidia/, no dist-info
    assert sorted(p.name for p in (cuda / "include").iterdir()) == ["cublas_v2.h", "cuda_runtime.h"]
    assert (cuda / "bin" / "ptxas").stat().st_mode & 0o111
    assert (cuda / "lib" / "libcudart.so").resolve().read_bytes() == b"ELF"
    # A path in the root: it resolves where the build runs (inside the root), not on this host.
    assert (cuda / "bin" / "nvcc").readlink() == Path("/usr/lib/nvidia-cuda-toolkit/bin/nvcc")
    assert (cuda / "bin" / "nvcc.profile").read_text() == profile


@pytest.mark.usefixtures("no_subprocess")
def test_wheels_that_would_overwrite_each_others_files_are_refused(project: Path, tmp_path: Path, made: Path) -> None:
    wheels = {
        "a": _toolkit_wheel(made, "a", {"nvidia/a/include/x.h": (b"one", 0o644)}),
        "b": _toolkit_wheel(made, "b", {"nvidia/b/include/x.h": (b"two", 0o644)}),
    }
    sysroot, cache = _sysroot_with(project, tmp_path, wheels, {}, {"a": "nvidia/a", "b": "nvidia/b"})
    with pytest.raises(ToolchainError, match=r"nvidia/b/include/x.h would overwrite a different include/x.h"):
        install_ep_wheels(sysroot.spec, cache, tmp_path / "root", io.StringIO())


@pytest.mark.usefixtures("no_subprocess")
@pytest.mark.parametrize(
    ("subdir", "link", "message"),
    [
        (
            "nvidia/cuda_nvcc",
            {"cuda/bin/fatbinary": "/usr/bin/fatbinary"},
            r"-> /usr/bin/fatbinary: no /usr/bin/fatbinary in the root",
        ),
        ("nvidia/cuda_nvc", {}, r"has nothing under 'nvidia/cuda_nvc'"),
    ],
)
def test_a_missing_program_or_subdir_is_refused_with_its_name(
    project: Path, tmp_path: Path, made: Path, subdir: str, link: dict[str, str], message: str
) -> None:
    wheels = {"nvcc": _toolkit_wheel(made, "nvcc", {"nvidia/cuda_nvcc/bin/ptxas": (b"ELF", 0o755)})}
    sysroot, cache = _sysroot_with(project, tmp_path, wheels, link, {"nvcc": subdir})
    with pytest.raises(ToolchainError, match=message):
        install_ep_wheels(sysroot.spec, cache, tmp_path / "root", io.StringIO())


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[ep_links.cuda]\n"../escape" = "x"\n', "'../escape': a path must be relative, under"),
        ('[ep_links.cuda]\n"cuda/lib/libx.so" = "../libx.so.1"\n', "target is a name beside it or an absolute"),
        ('[ep_links.cuda]\n"cuda/lib/libx.so" = "/usr/../etc/x"\n', "target is a name beside it or an absolute"),
        ('[ep_files.rocm]\n"a" = "b"\n', r"\[ep_files.rocm\] names an EP this toolchain has no \[ep_wheels\] for"),
        ('[ep_links.rocm]\n"a" = "b"\n', r"\[ep_links.rocm\] names an EP this toolchain has no \[ep_wheels\] for"),
        (
            "[ep_pip.rocm]\nextras = {}\nlibrary_dirs = []\n",
            r"\[ep_pip.rocm\] names an EP this toolchain has no \[ep_packages\] or \[ep_wheels\] entry for",
        ),
        ("[ep_pip.cuda]\nextras = {}\nlibrary_dir = []\n", "did you mean 'library_dirs'"),
    ],
)
def test_bad_link_and_pip_tables_are_refused(project: Path, tmp_path: Path, table: str, message: str) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    (tmp_path / "toolchains" / "cuda13-child.toml").write_text('extends = "cuda13"\n' + table)
    with pytest.raises(RecipeError, match=message):
        load_toolchain(tmp_path, "cuda13-child")


def test_keep_going_lets_ninja_run_past_failures(project: Path) -> None:
    plan, _ = plan_for("cuda13-linux", project)
    assert plan.build_argv(2) == ["cmake", "--build", str(plan.trees.build), "--parallel", "2"]
    assert plan.build_argv(2, keep_going=True)[-3:] == ["--", "-k", "0"]
