"""recipes/cuda-linux.toml end to end, from the cached build tree: the onnxruntime-gpu wheel's
packaging (CUDA provider as its own library, no CUDA/cuDNN bundled, the nvidia-* extras, the
RUNPATH into their wheels) and the smoke suite on it. On a machine without a GPU every CUDA case
must be reported "skipped: no GPU" (never passed) while the CPU cases pass; with a GPU every
CUDA case must pass. A wheel whose CUDA runtime is missing must fail, GPU or not.

Compiling the CUDA kernels took 43 minutes cold on two cores, so this module runs once the
recipe's build tree is in the cache (`nox -s build-cuda-linux` once, or ORTDIST_TEST_RECIPES=cuda-linux
to build it in the test run); from then on a run re-checks the packaging and the suite in minutes.
"""

from __future__ import annotations

import os
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

from ortdist.paths import Cache
from ortdist.smoke.models import BUILDERS
from ortdist.smoke.run_suite import smoke_wheel
from ortdist.smoke.suite import expectations
from ortdist.toolchains import Toolchain, load_toolchain, make_toolchain

from . import build_recipe

PROJECT = Path(__file__).resolve().parents[2]
CUDA = "CUDAExecutionProvider"
PROVIDER_LIBRARY = "libonnxruntime_providers_cuda.so"

# Without a cached build tree (or ORTDIST_TEST_RECIPES naming it) tests/conftest.py deselects this module.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.recipe_tree("cuda-linux"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]
VENDOR_LIBRARIES = ("libcudart", "libcublas", "libcudnn", "libcufft", "libcurand", "libnvrtc", "libcuda.")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    dist = tmp_path_factory.mktemp("dist")
    out, manifest = build_recipe("cuda-linux", dist)
    (entry,) = [a for a in manifest["artifacts"] if a["kind"] == "wheel"]
    return out / str(entry["path"]), manifest


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return make_toolchain(load_toolchain(PROJECT, "debian-trixie"))


def test_the_wheel_is_packaged_like_onnxruntime_gpu(built: tuple[Path, dict[str, Any]]) -> None:
    wheel, manifest = built
    assert wheel.name.startswith("onnxruntime_gpu-1.21.0-cp313-cp313-manylinux_")
    assert manifest["build_times_s"]["build"] > 0  # this run's build time
    # ...and what compiling the tree the artifacts came from took, over every run since it was made
    assert manifest["build_tree_compile_s"] > 0
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(zf.read(meta_name).decode())
    # The CUDA provider is its own library beside the bridge it loads through.
    assert f"onnxruntime/capi/{PROVIDER_LIBRARY}" in names
    assert "onnxruntime/capi/libonnxruntime_providers_shared.so" in names
    # ...and no CUDA/cuDNN library is bundled anywhere in the wheel.
    bundled = [n for n in names if any(v in n.rsplit("/", 1)[-1] for v in VENDOR_LIBRARIES)]
    assert bundled == []
    assert meta["Name"] == "onnxruntime-gpu"
    assert set(meta.get_all("Provides-Extra") or []) == {"cuda", "cudnn"}
    requires = meta.get_all("Requires-Dist") or []
    assert any(r.startswith("nvidia-cudnn-cu12") and 'extra == "cudnn"' in r for r in requires)
    assert any(r.startswith("nvidia-cublas-cu12") and 'extra == "cuda"' in r for r in requires)
    assert not any(r.startswith("nvidia-") and "extra ==" not in r for r in requires)


def test_smoke_proves_cuda_or_skips_it_for_want_of_a_gpu(
    built: tuple[Path, dict[str, Any]], toolchain: Toolchain, tmp_path: Path
) -> None:
    wheel, _ = built
    # A GPU runner sets ORTDIST_REQUIRE_DEVICE=1: there a missing or broken GPU fails instead of skipping.
    require = os.environ.get("ORTDIST_REQUIRE_DEVICE") == "1"
    report, verdicts = smoke_wheel(
        wheel, tmp_path, Cache.default(), toolchain, with_node_tests=False, require_devices=require
    )
    assert report["claimed"] == ["CPUExecutionProvider", CUDA]
    cpu = [v for v in verdicts if v.provider == "CPUExecutionProvider"]
    assert cpu and all(v.passed and not v.skipped and v.share == 1.0 for v in cpu)
    cuda = {v.name: v for v in verdicts if v.provider == CUDA}
    assert set(cuda) == set(BUILDERS)
    device = report["devices"][CUDA]
    if require:
        assert device["status"] == "present", device
    if device["status"] == "absent":
        # The provider library and the CUDA runtime from the nvidia-* wheels loaded; only the GPU is missing.
        assert all(v.skipped and v.message.startswith("skipped: no GPU") for v in cuda.values())
        junit = (tmp_path / f"{wheel.stem}.junit.xml").read_text()
        assert 'failures="0"' in junit and f'skipped="{len(BUILDERS)}"' in junit
    else:
        assert device["status"] == "present", device
        assert all(v.passed and not v.skipped for v in cuda.values()), [v.message for v in cuda.values()]
        placed = expectations()[CUDA].placement_models
        assert all(cuda[name].share == 1.0 for name in placed), {n: cuda[n].share for n in placed}
    assert report["passed"]


def test_a_wheel_without_its_cuda_runtime_fails_even_without_a_gpu(
    built: tuple[Path, dict[str, Any]], toolchain: Toolchain, tmp_path: Path
) -> None:
    """The same wheel with its extras stripped from METADATA installs no nvidia-* wheels: the
    provider library cannot load, and that is a failure, not a skip."""
    wheel, _ = built
    doctored = tmp_path / "doctored" / wheel.name
    doctored.parent.mkdir()
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(doctored, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith(".dist-info/METADATA"):
                lines = data.decode().split("\n")
                data = "\n".join(ln for ln in lines if "extra ==" not in ln and "Provides-Extra" not in ln).encode()
            zout.writestr(item, data)
    report, verdicts = smoke_wheel(doctored, tmp_path / "report", Cache.default(), toolchain, with_node_tests=False)
    assert not report["passed"]
    assert report["devices"][CUDA]["status"] == "load_error"
    cuda = [v for v in verdicts if v.provider == CUDA]
    assert cuda and all(not v.passed and not v.skipped for v in cuda)
    # The first library the provider needs from the nvidia-* wheels is named.
    assert all("could not load: missing library libcublas" in v.message for v in cuda), [v.message for v in cuda]
