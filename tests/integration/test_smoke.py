"""The smoke suite against PyPI's onnxruntime 1.21.0 wheel for the running Python (host venv, no
root), and against doctored copies of it: the suite must pass the real thing and fail the fakes."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.smoke.models import BUILDERS
from ortdist.smoke.run_suite import smoke_wheel
from ortdist.toolchains import Toolchain, load_toolchain, make_toolchain

from . import scratch_cache

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory, download_official_wheel: Callable[..., Path]) -> Path:
    return download_official_wheel(tmp_path_factory.mktemp("official"))


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return make_toolchain(load_toolchain(PROJECT, "debian-trixie"))


def doctor(src: Path, dest_dir: Path, drop: str = "", add: dict[str, str] | None = None) -> Path:
    """Copy a wheel, dropping members whose name contains ``drop`` and adding ``add``."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.name
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if drop and drop in item.filename:
                continue
            zout.writestr(item, zin.read(item.filename))
        for name, text in (add or {}).items():
            zout.writestr(name, text)
    return dest


def test_official_wheel_passes(official: Path, toolchain: Toolchain, tmp_path: Path) -> None:
    report, verdicts = smoke_wheel(official, tmp_path, scratch_cache(), toolchain)
    assert report["passed"], [v.message for v in verdicts if not v.passed]
    assert report["environment"]["kind"] == "host"
    assert report["claims_from"] == "get_available_providers()"
    assert set(report["claimed"]) == {"CPUExecutionProvider", "AzureExecutionProvider"}  # PyPI's wheel has both
    cpu = {v.name: v for v in verdicts if v.provider == "CPUExecutionProvider"}
    assert set(cpu) == set(BUILDERS)
    assert all(v.share == 1.0 and v.passed for v in cpu.values())
    # Azure runs every model as a user would call it (it takes no nodes without an endpoint, so the
    # CPU does the work); that it proves nothing about placement is reported as a skip.
    azure = {v.name: v for v in verdicts if v.provider == "AzureExecutionProvider"}
    assert set(azure) == {*BUILDERS, "-"}
    assert azure["-"].skipped and azure["-"].message.startswith("skipped: remote-inference EP")
    assert all(v.passed and not v.skipped and v.share == 0.0 for n, v in azure.items() if n != "-")
    node = report["node_tests"]["CPUExecutionProvider"]
    assert node["passed"] > node["failed"] > 0
    junit = (tmp_path / f"{official.stem}.junit.xml").read_text()
    assert 'failures="0"' in junit
    assert json.loads((tmp_path / f"{official.stem}.json").read_text())["passed"] is True


def test_wheel_without_its_native_library_fails(official: Path, toolchain: Toolchain, tmp_path: Path) -> None:
    broken = doctor(official, tmp_path / "broken", drop="onnxruntime_pybind11_state")
    report, verdicts = smoke_wheel(broken, tmp_path / "out", scratch_cache(), toolchain, with_node_tests=False)
    assert not report["passed"]
    (verdict,) = verdicts
    assert verdict.message.startswith("the wheel cannot be imported:")
    assert "onnxruntime_pybind11_state" in verdict.message


def test_wheel_claiming_an_ep_it_lacks_fails(official: Path, toolchain: Toolchain, tmp_path: Path) -> None:
    record = {
        "recipe": "fake",
        "execution_providers": [
            {"name": "cpu", "provider": "CPUExecutionProvider"},
            {"name": "xnnpack", "provider": "XnnpackExecutionProvider"},
        ],
    }
    liar = doctor(official, tmp_path / "liar", add={"onnxruntime/ortdist_build.json": json.dumps(record)})
    report, verdicts = smoke_wheel(liar, tmp_path / "out", scratch_cache(), toolchain, with_node_tests=False)
    assert not report["passed"]
    assert report["claims_from"] == "build record"
    failing = {v.message for v in verdicts if not v.passed}
    assert failing == {"XnnpackExecutionProvider is claimed but not available in this wheel"}
    assert all(v.passed for v in verdicts if v.provider == "CPUExecutionProvider")
