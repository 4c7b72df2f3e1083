from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ortdist.errors import PackageError
from ortdist.patches import read_series
from ortdist.plan import BuildPlan, make_plan
from ortdist.recipe import load_recipe
from ortdist.toolchains import load_toolchain
from ortdist.wheel import assemble
from ortdist.wheel.repair import auditwheel_argv, check_glibc_promise
from ortdist.wheelnames import required_glibc, wheel_tag


@pytest.fixture
def plan(project: Path) -> BuildPlan:
    recipe = load_recipe(project / "recipes" / "cpu-linux.toml")
    return make_plan(
        recipe,
        load_toolchain(project, "debian-trixie"),
        read_series(project / "patches" / "1.21.0", {"cpu", *recipe.execution_providers}),
    )


def test_wheel_tag() -> None:
    assert wheel_tag("onnxruntime-1.21.0-cp313-cp313-manylinux_2_39_x86_64.whl") == "cp313-cp313-manylinux_2_39_x86_64"
    assert wheel_tag("onnxruntime_gpu-1.21.0-1-cp313-cp313-linux_x86_64.whl") == "cp313-cp313-linux_x86_64"
    with pytest.raises(ValueError, match="not a wheel file name"):
        wheel_tag("onnxruntime.tar.gz")


def test_auditwheel_excludes_vendor_libraries() -> None:
    argv = auditwheel_argv("/w/raw.whl", "/w/out", ("libcudart.so.*", "libcudnn*.so.*"), strip=True)
    assert argv[1:7] == ["repair", "--zip-compression-level", "0", "--wheel-dir", "/w/out", "--strip"]
    assert argv[7:11] == ["--exclude", "libcudart.so.*", "--exclude", "libcudnn*.so.*"]
    assert argv[-1] == "/w/raw.whl"
    assert "--strip" not in auditwheel_argv("/w/raw.whl", "/w/out", (), strip=False)


@pytest.mark.parametrize(
    ("name", "glibc"),
    [
        ("onnxruntime-1.21.0-cp313-cp313-manylinux_2_39_x86_64.whl", (2, 39)),
        # auditwheel's compressed tag set: the oldest of them is what the wheel asks for.
        ("onnxruntime-1.21.0-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", (2, 17)),
        ("onnxruntime-1.21.0-cp313-cp313-manylinux_2_28_x86_64.manylinux_2_27_x86_64.whl", (2, 27)),
        ("onnxruntime-1.21.0-cp313-cp313-manylinux_2_5_x86_64.manylinux1_x86_64.whl", (2, 5)),
        # The legacy aliases alone: PEP 600's table.
        ("onnxruntime-1.21.0-cp313-cp313-manylinux2014_aarch64.whl", (2, 17)),
        ("onnxruntime-1.21.0-cp313-cp313-manylinux2010_x86_64.whl", (2, 12)),
        ("onnxruntime-1.21.0-cp313-cp313-manylinux1_x86_64.whl", (2, 5)),
        # Two-digit minors compare as numbers, not strings.
        ("onnxruntime-1.21.0-cp313-cp313-manylinux_2_9_x86_64.manylinux_2_10_x86_64.whl", (2, 9)),
        # No manylinux promise at all.
        ("onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl", None),
        ("onnxruntime-1.21.0-cp313-cp313-musllinux_1_2_x86_64.whl", None),
        ("onnxruntime-1.21.0-cp313-cp313-macosx_14_0_arm64.whl", None),
        ("onnxruntime-1.21.0-cp313-cp313-win_amd64.whl", None),
    ],
)
def test_required_glibc_reads_the_platform_tag(name: str, glibc: tuple[int, int] | None) -> None:
    assert required_glibc(name) == glibc


def test_the_glibc_promise_allows_the_toolchains_glibc_and_older() -> None:
    """A wheel may need the toolchain's glibc or less; one minor more is refused, compared as numbers."""
    check_glibc_promise("x-1-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "2.17", "portable")
    check_glibc_promise("x-1-cp313-cp313-manylinux_2_5_x86_64.manylinux1_x86_64.whl", "2.17", "portable")
    check_glibc_promise("x-1-cp313-cp313-manylinux_2_39_x86_64.whl", "2.41", "debian-trixie")
    check_glibc_promise("x-1-cp313-cp313-linux_x86_64.whl", "2.17", "portable")  # no promise made
    check_glibc_promise("x-1-cp313-cp313-manylinux_2_9_x86_64.whl", "2.17", "portable")  # 9 < 17, not "9" > "17"
    with pytest.raises(PackageError, match=r"for glibc 2\.18, newer than the 2\.17 toolchain portable promises"):
        check_glibc_promise("x-1-cp313-cp313-manylinux_2_18_x86_64.whl", "2.17", "portable")
    with pytest.raises(PackageError, match=r"glibc 2\.42, newer than the 2\.41 toolchain debian-trixie") as info:
        check_glibc_promise("x-1-cp313-cp313-manylinux_2_42_x86_64.whl", "2.41", "debian-trixie")
    assert info.value.where == "x-1-cp313-cp313-manylinux_2_42_x86_64.whl"


def test_generated_pyproject(plan: BuildPlan) -> None:
    data = tomllib.loads(assemble.pyproject_text(plan, "/ortdist/work/stage/onnxruntime"))
    assert data["build-system"]["build-backend"] == "scikit_build_core.build"
    assert data["project"]["name"] == "onnxruntime"
    assert data["project"]["version"] == "1.21.0"
    assert "numpy>=1.21.6" in data["project"]["dependencies"]
    assert data["tool"]["scikit-build"]["cmake"]["define"]["ORTDIST_PACKAGE_DIR"] == "/ortdist/work/stage/onnxruntime"


def test_build_record_claims_the_plans_eps(plan: BuildPlan) -> None:
    record = assemble.build_record(plan, "r" * 64, "s" * 64)
    assert record["execution_providers"] == [{"name": "cpu", "provider": "CPUExecutionProvider"}]
    assert record["recipe"] == "cpu-linux" and record["ort_version"] == "1.21.0"
    assert record["patches"][0]["name"].startswith("0001-")


def test_stage_package_adds_package_info_and_record(plan: BuildPlan, tmp_path: Path) -> None:
    built = tmp_path / "build" / "onnxruntime"
    (built / "capi").mkdir(parents=True)
    (built / "__init__.py").write_text("")
    (built / "capi" / "onnxruntime_pybind11_state.so").write_bytes(b"\x7fELF")
    record = assemble.build_record(plan, "r" * 64, "s" * 64)
    target = assemble.stage_package(built, tmp_path / "stage", plan, record)
    assert (target / "capi" / "onnxruntime_pybind11_state.so").read_bytes() == b"\x7fELF"
    info = (target / "capi" / "build_and_package_info.py").read_text()
    assert "package_name = 'onnxruntime'" in info and "__version__ = '1.21.0'" in info
    assert json.loads((target / assemble.RECORD_NAME).read_text()) == record


def test_stage_package_refuses_a_missing_layout(plan: BuildPlan, tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="did not lay out the Python package"):
        assemble.stage_package(tmp_path / "nothing", tmp_path / "stage", plan, {})
