"""The tests both CUDA recipes share (cuda-linux: CUDA 12, cuda13-linux: CUDA 13), end to end from
the recipe's cached build tree: five onnxruntime-gpu wheels (cp310-cp314) that need nothing newer
than glibc 2.17, carry no CUDA library, depend on NVIDIA's wheels of their CUDA line through the
[cuda,cudnn] extras, and find them once pip installs them from an index. The GPU itself is proven
on a lent machine by `ortdist device-proof` (docs/cuda.md); here the CUDA cases must be reported
"skipped: no GPU" (never passed) while the CPU cases pass.

Each recipe's module imports these and sets the ``line`` fixture (its CudaLine); its pytestmark
(recipe_tree) decides whether they run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

from ortdist import registry
from ortdist.checks import elf, fatbin
from ortdist.recipe import load_recipe
from ortdist.smoke.models import BUILDERS
from ortdist.smoke.run_suite import smoke_wheel
from ortdist.toolchains import Toolchain, load_toolchain, make_toolchain
from ortdist.wheelnames import required_glibc

from . import build_recipe, free_port, local_server, scratch_cache

# What a recipe's module collects with `from .cuda_wheels import *`: the shared fixtures and tests.
__all__ = [
    "built",
    "index_venv",
    "local_index",
    "test_a_wheel_without_its_cuda_runtime_fails_even_without_a_gpu",
    "test_asking_for_cuda_without_a_driver_falls_back_instead_of_aborting",
    "test_every_elf_of_every_artifact_keeps_the_toolchains_promise",
    "test_every_promised_gpu_is_in_the_device_code_and_no_wheel_is_larger_than_pypis",
    "test_five_portable_wheels_with_nothing_from_cuda_grafted",
    "test_smoke_skips_cuda_for_want_of_a_gpu_and_passes_the_cpu",
    "test_the_extras_install_from_an_index_and_the_provider_finds_them",
    "toolchain",
]
PROJECT = Path(__file__).resolve().parents[2]
CUDA = "CUDAExecutionProvider"
PROVIDER_LIBRARY = "libonnxruntime_providers_cuda.so"
PYTHONS = ("310", "311", "312", "313", "314")
GLIBC_LIBRARIES = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "ld-linux-x86-64.so.2"}
# libgcc's unwinder, shared so that one copy unwinds across the libraries (toolchains/cuda13.toml).
SYSTEM_LIBRARIES = {*GLIBC_LIBRARIES, "libgcc_s.so.1"}


@dataclass(frozen=True)
class CudaLine:
    """What differs between the CUDA 12 and CUDA 13 recipes."""

    recipe: str
    toolchain: str
    # What the CUDA provider may need besides glibc: the line's CUDA and cuDNN 9 sonames (from
    # NVIDIA's wheels or the system).
    sonames: frozenset[str]
    requires: tuple[str, ...]  # Requires-Dist lines each wheel must have
    cu12_wheels: bool  # CUDA 12's NVIDIA wheels are named *-cu12; CUDA 13's are not

    @property
    def cudart(self) -> str:
        return next(s for s in self.sonames if s.startswith("libcudart."))


CUDA12 = CudaLine(
    recipe="cuda-linux",
    toolchain="cuda12",
    sonames=frozenset(
        {"libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcufft.so.11", "libcurand.so.10"}
        | {"libcudnn.so.9"}
    ),
    requires=('nvidia-cublas-cu12<13,>=12.4; extra == "cuda"', 'nvidia-cudnn-cu12<10,>=9.7; extra == "cudnn"'),
    cu12_wheels=True,
)
CUDA13 = CudaLine(
    recipe="cuda13-linux",
    toolchain="cuda13",
    sonames=frozenset(
        {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcufft.so.12", "libcurand.so.10"}
        | {"libcudnn.so.9"}
    ),
    requires=('nvidia-cublas<14,>=13.0; extra == "cuda"', 'nvidia-cudnn-cu13<10,>=9.14; extra == "cudnn"'),
    cu12_wheels=False,
)


@pytest.fixture(scope="module")
def built(line: CudaLine, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    dist = tmp_path_factory.mktemp("dist")
    return build_recipe(line.recipe, dist)


def wheels_of(built: tuple[Path, dict[str, Any]]) -> dict[str, Path]:
    out, manifest = built
    paths = [out / str(a["path"]) for a in manifest["artifacts"] if a["kind"] == "wheel"]
    return {re.search(r"-cp(\d+)-", p.name).group(1): p for p in paths}  # type: ignore[union-attr]


def test_every_promised_gpu_is_in_the_device_code_and_no_wheel_is_larger_than_pypis(
    line: CudaLine, built: tuple[Path, dict[str, Any]]
) -> None:
    """Read from each wheel's own CUDA provider: SASS for every architecture the recipe lists and
    its PTX, exactly (nothing the recipe does not promise either); and each wheel is no larger than
    PyPI's onnxruntime-gpu of the same CUDA line (data/pypi_wheels.toml)."""
    architectures = load_recipe(PROJECT / "recipes" / f"{line.recipe}.toml").cuda.architectures
    promised = fatbin.promised(architectures)
    pypi = [w for w in registry.pypi_wheels() if line.recipe in w.recipes]
    assert pypi, f"data/pypi_wheels.toml names no PyPI wheel for {line.recipe}"
    wheels = wheels_of(built)
    assert sorted(wheels) == sorted(PYTHONS)
    for tag, wheel in wheels.items():
        code = fatbin.device_code(elf.wheel_libraries(wheel))
        provider = code.pop(f"onnxruntime/capi/{PROVIDER_LIBRARY}")
        assert not code, f"cp{tag}: device code outside the provider: {sorted(code)}"
        assert sorted(provider["sass"] + provider["ptx"]) == sorted(promised), f"cp{tag}: {provider}"
        same_python = [w.size for w in pypi if f"-cp{tag}-" in w.file]
        limit = same_python[0] if same_python else min(w.size for w in pypi)
        assert wheel.stat().st_size <= limit, f"cp{tag}: {wheel.stat().st_size:,} B > PyPI's {limit:,} B"


def elf_facts(path: Path) -> tuple[set[str], set[str]]:
    """(DT_NEEDED, the GLIBC_x.y versions its imported symbols ask for), as readelf prints them."""
    dynamic = subprocess.run(["readelf", "-dW", str(path)], text=True, capture_output=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    versions = subprocess.run(["readelf", "-VW", str(path)], text=True, capture_output=True, check=True).stdout
    return needed, set(re.findall(r"Name: (GLIBC_[0-9.]+)", versions))


def test_five_portable_wheels_with_nothing_from_cuda_grafted(
    line: CudaLine, built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    wheels = wheels_of(built)
    assert sorted(wheels) == sorted(PYTHONS)
    for wheel in wheels.values():
        assert wheel.name.startswith("onnxruntime_gpu-1.21.0-") and "manylinux_2_17_x86_64" in wheel.name
        assert required_glibc(wheel.name) == (2, 17)
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
            meta = Parser().parsestr(zf.read(meta_name).decode())
        assert f"onnxruntime/capi/{PROVIDER_LIBRARY}" in names
        assert not [n for n in names if ".libs/" in n], "nothing may be grafted"
        requires = meta.get_all("Requires-Dist") or []
        assert set(line.requires) <= set(requires), requires
        nvidia = {re.split(r"[<>=!~;\s]", r)[0] for r in requires if r.startswith("nvidia-")}
        assert nvidia and all(n.endswith("-cu12") == line.cu12_wheels for n in nvidia), nvidia  # one CUDA line
    # The ELFs themselves keep the tag's promise, read from the files rather than the wheel's name.
    with zipfile.ZipFile(wheels["312"]) as zf:
        zf.extractall(tmp_path)
    libraries = sorted(p for p in tmp_path.rglob("*.so*") if p.is_file())
    assert {p.name for p in libraries} >= {PROVIDER_LIBRARY, "libonnxruntime_providers_shared.so"}
    for library in libraries:
        needed, glibc = elf_facts(library)
        assert glibc, (library.name, "needs no GLIBC_ version: the reader saw nothing")
        newest = max(tuple(int(x) for x in v[6:].split(".")) for v in glibc)
        assert newest <= (2, 17), (library.name, sorted(glibc))
        allowed = SYSTEM_LIBRARIES | (
            line.sonames | {"libonnxruntime_providers_shared.so"}
            if library.name == PROVIDER_LIBRARY
            else {"libonnxruntime_providers_shared.so"}
        )
        if library.name == "onnxruntime_pybind11_state.so":  # one runtime per wheel: the one beside it
            assert "libonnxruntime.so.1.21.0" in needed, sorted(needed)
            allowed = allowed | {"libonnxruntime.so.1.21.0"}
        assert needed <= allowed | {"libonnxruntime.so.1"}, (library.name, sorted(needed - allowed))
    needed, _ = elf_facts(tmp_path / "onnxruntime" / "capi" / PROVIDER_LIBRARY)
    assert {line.cudart, "libcudnn.so.9"} <= needed and any(n.startswith("libcublas.so.") for n in needed)


def test_every_elf_of_every_artifact_keeps_the_toolchains_promise(
    line: CudaLine, built: tuple[Path, dict[str, Any]]
) -> None:
    """The repair and install steps' ELF check, rerun on what was shipped: glibc 2.17, libgcc_s and
    the CUDA runtime only (read from the files; the test above reads the same with readelf)."""
    from ortdist.checks import elf
    from ortdist.project import plan_for

    out, manifest = built
    plan, _ = plan_for(line.recipe, PROJECT)
    policy = elf.policy("2.17", plan.toolchain.system_libraries, plan.repair_excludes)
    assert plan.toolchain.system_libraries == ("libgcc_s.so.1",)
    for art in manifest["artifacts"]:
        path = out / str(art["path"])
        if art["kind"] not in ("wheel", "c-library"):
            continue
        members = elf.artifact_libraries(path)
        assert sum(1 for _, data in members if elf.is_elf(data)) >= 3, art["path"]
        assert elf.violations(members, policy) == [], art["path"]
        # Without the EP's runtime allowed, the provider's CUDA needs are what is left.
        left = elf.violations(members, elf.policy("2.17", plan.toolchain.system_libraries))
        assert left and all(PROVIDER_LIBRARY in line and "needs libcu" in line for line in left), left


@pytest.fixture(scope="module")
def toolchain(line: CudaLine) -> Toolchain:
    return make_toolchain(load_toolchain(PROJECT, line.toolchain))


def test_smoke_skips_cuda_for_want_of_a_gpu_and_passes_the_cpu(
    built: tuple[Path, dict[str, Any]], toolchain: Toolchain, tmp_path: Path
) -> None:
    """The suite installs the cp313 wheel with its [cuda,cudnn] extras (NVIDIA's wheels of its CUDA
    line): the provider library loads against them, and only the GPU is missing."""
    wheel = wheels_of(built)["313"]
    report, verdicts = smoke_wheel(wheel, tmp_path, scratch_cache(), toolchain, with_node_tests=False)
    assert report["claimed"] == ["CPUExecutionProvider", CUDA]
    assert report["devices"][CUDA]["status"] == "absent", report["devices"]
    cpu = [v for v in verdicts if v.provider == "CPUExecutionProvider"]
    assert cpu and all(v.passed and not v.skipped and v.share == 1.0 for v in cpu)
    cuda = {v.name: v for v in verdicts if v.provider == CUDA}
    assert set(cuda) == set(BUILDERS)
    assert all(v.skipped and v.message.startswith("skipped: no GPU") for v in cuda.values())


def test_a_wheel_without_its_cuda_runtime_fails_even_without_a_gpu(
    built: tuple[Path, dict[str, Any]], toolchain: Toolchain, tmp_path: Path
) -> None:
    """The same wheel with its extras stripped from METADATA installs no nvidia-* wheels: the
    provider library cannot load, and that is a failure, not a skip."""
    wheel = wheels_of(built)["313"]
    doctored = tmp_path / "doctored" / wheel.name
    doctored.parent.mkdir()
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(doctored, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith(".dist-info/METADATA"):
                lines = data.decode().split("\n")
                data = "\n".join(ln for ln in lines if "extra ==" not in ln and "Provides-Extra" not in ln).encode()
            zout.writestr(item, data)
    report, verdicts = smoke_wheel(doctored, tmp_path / "report", scratch_cache(), toolchain, with_node_tests=False)
    assert not report["passed"]
    assert report["devices"][CUDA]["status"] == "load_error"
    cuda = [v for v in verdicts if v.provider == CUDA]
    assert cuda and all(not v.passed and not v.skipped for v in cuda)
    # The first library the provider needs from the nvidia-* wheels is named.
    assert all("could not load: missing library libcublas" in v.message for v in cuda), [v.message for v in cuda]


@pytest.fixture(scope="module")
def local_index(tmp_path_factory: pytest.TempPathFactory, built: tuple[Path, dict[str, Any]]) -> Iterator[str]:
    """pypiserver on 127.0.0.1 with no fallback, holding the wheel for the Python running the tests,
    its requirements and NVIDIA's wheels of its CUDA line, as a private index mirrors them (one per
    module: the CUDA wheels are 1.5-3 GB)."""
    packages = tmp_path_factory.mktemp("index") / "packages"
    packages.mkdir()
    shutil.copy(wheels_of(built)[f"{sys.version_info.major}{sys.version_info.minor}"], packages)
    wheel = next(packages.iterdir())
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(packages)]
    subprocess.run([*download, f"{wheel}[cuda,cudnn]"], check=True)
    port = free_port()
    argv = [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port), "--disable-fallback"]
    url = f"http://127.0.0.1:{port}/simple/"
    try:
        with local_server([*argv, str(packages)], url, packages.parent / "pypiserver.log"):
            yield url
    finally:  # GBs of NVIDIA wheels: gone with the module, not kept to the session's end (or after it)
        shutil.rmtree(packages, ignore_errors=True)


def install_from_index(index: str, venv: Path) -> Path:
    """A fresh venv with `onnxruntime-gpu[cuda,cudnn]` from ``index`` alone: no extra index,
    find-links or constraints of this machine's pip configuration."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    alone = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-cache-dir", "--index-url", index]
    subprocess.run([*pip, "onnxruntime-gpu[cuda,cudnn]==1.21.0"], env=alone, check=True)
    return venv


@pytest.fixture(scope="module")
def index_venv(local_index: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One venv with the wheel and its extras from the index, for the tests that only run in it
    (each install of the CUDA wheels is 3 GB, removed with the module)."""
    venv = tmp_path_factory.mktemp("index-venv") / "venv"
    try:
        yield install_from_index(local_index, venv)
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def test_the_extras_install_from_an_index_and_the_provider_finds_them(line: CudaLine, index_venv: Path) -> None:
    """`pip install onnxruntime-gpu[cuda,cudnn]` from the index alone: every CUDA/cuDNN library the
    provider needs resolves into the venv's nvidia/ tree through its RUNPATH, nothing on
    LD_LIBRARY_PATH, and CUDA is listed."""
    venv = index_venv
    probe = """
import ctypes, json, pathlib, onnxruntime as ort
capi = pathlib.Path(ort.__file__).parent / "capi"
ctypes.CDLL(str(capi / "libonnxruntime_providers_cuda.so"))
maps = pathlib.Path("/proc/self/maps").read_text().split()
loaded = sorted({p for p in maps if "/nvidia/" in p and ".so" in p})
print(json.dumps({"providers": ort.get_available_providers(), "loaded": loaded}))
"""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], text=True, capture_output=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert CUDA in facts["providers"]
    names = {Path(p).name for p in facts["loaded"]}
    assert line.sonames <= names, names
    assert all(str(venv) in p for p in facts["loaded"]), facts["loaded"]


# The provider library first: its RUNPATH finds cudart in the venv's nvidia-* wheels, and cudart's
# soname then names that copy (no CUDA on this machine's loader path).
CUDA_SESSION = """
import ctypes, json, pathlib, sys, onnxruntime as ort
ctypes.CDLL(str(pathlib.Path(ort.__file__).parent / "capi" / "libonnxruntime_providers_cuda.so"))
count = ctypes.c_int(0)
ctypes.CDLL(sys.argv[2]).cudaGetDeviceCount(ctypes.byref(count))
session = ort.InferenceSession(sys.argv[1], providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
print(json.dumps({"devices": count.value, "providers": session.get_providers()}))
"""


def test_asking_for_cuda_without_a_driver_falls_back_instead_of_aborting(
    line: CudaLine, index_venv: Path, tmp_path: Path
) -> None:
    """The CUDA EP that cannot start (no driver here: cudaSetDevice says 35) throws into the binding,
    and ORT falls back to the CPU EP. With each library's own static unwinder this aborted the
    process (SIGABRT in the binding's _Unwind_SetGR); one shared libgcc_s unwinds across them."""
    venv = index_venv
    from onnx import TensorProto, helper, save

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(tmp_path / "relu.onnx")
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", CUDA_SESSION, str(tmp_path / "relu.onnx"), line.cudart],
        text=True,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    expected = ["CUDAExecutionProvider", "CPUExecutionProvider"] if facts["devices"] else ["CPUExecutionProvider"]
    assert facts["providers"] == expected, facts
