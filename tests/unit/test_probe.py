"""The clean-root probe, run for real against PyPI's 1.21.0 wheel (the tests' control)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ortdist
from ortdist.checks.clean_root import verify_check_result
from ortdist.checks.model import write_check_files
from ortdist.smoke.proof import node_placement, share_on

PACKAGE = Path(ortdist.__file__).parent


def run_probe(directory: Path, *extra: str) -> tuple[int, dict[str, object]]:
    shutil.copyfile(PACKAGE / "checks" / "probe.py", directory / "probe.py")
    shutil.copyfile(PACKAGE / "smoke" / "proof.py", directory / "proof.py")
    proc = subprocess.run(
        [sys.executable, "probe.py", "model.onnx", "data.npz", "result.json", *extra],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, json.loads((directory / "result.json").read_text())


def test_probe_passes_the_official_wheel(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    write_check_files(tmp_path)
    code, result = run_probe(tmp_path)
    assert code == 0, result
    assert verify_check_result(result, ["CPUExecutionProvider"]) == []
    assert set(result["node_providers"].values()) == {"CPUExecutionProvider"}  # type: ignore[union-attr]


def test_probe_fails_on_a_perturbed_expectation(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    write_check_files(tmp_path)
    with np.load(tmp_path / "data.npz") as data:
        arrays = {k: data[k] for k in data.files}
    arrays["out_probs"] = arrays["out_probs"] + np.float32(0.01)
    with (tmp_path / "data.npz").open("wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    code, result = run_probe(tmp_path)
    assert code == 1
    problems = verify_check_result(result, ["CPUExecutionProvider"])
    assert problems == ["output 'probs': max abs error 0.01 > 1e-5 vs onnx.reference"]


def test_probe_loads_the_provider_libraries_it_is_given(tmp_path: Path) -> None:
    """A library ORT only loads for a session on its EP is loaded by the probe itself: one that
    cannot be loaded fails the wheel, named with the loader's reason, however well the CPU ran."""
    pytest.importorskip("onnxruntime")
    write_check_files(tmp_path)
    shared, gone = "libonnxruntime_providers_shared.so", "libonnxruntime_providers_gone.so"
    code, result = run_probe(tmp_path, "1e-5", shared)
    assert code == 0 and result["provider_libraries"] == {shared: ""}
    assert verify_check_result(result, ["CPUExecutionProvider"], libraries=[shared]) == []
    code, result = run_probe(tmp_path, "1e-5", f"{shared},{gone}")
    assert code == 1 and result["ok"] is False
    loaded = result["provider_libraries"]
    assert isinstance(loaded, dict) and loaded[shared] == ""
    assert f"{gone}: cannot open shared object file" in loaded[gone]
    (problem,) = verify_check_result(result, ["CPUExecutionProvider"], libraries=[shared, gone])
    assert problem.startswith(f"{gone} cannot be loaded: ") and problem.endswith(loaded[gone])


def test_node_placement_from_profile_events() -> None:
    events = [
        {"cat": "Session", "name": "model_loading_uri", "args": {}},
        {"cat": "Node", "name": "conv1_kernel_time", "args": {"provider": "XnnpackExecutionProvider"}},
        {"cat": "Node", "name": "conv1_fence_before", "args": {}},
        {"cat": "Node", "name": "fc_kernel_time", "args": {"provider": "CPUExecutionProvider"}},
    ]
    placement = node_placement(events)
    assert placement == {"conv1": "XnnpackExecutionProvider", "fc": "CPUExecutionProvider"}
    assert share_on(placement, "XnnpackExecutionProvider") == 0.5
    assert share_on({}, "CPUExecutionProvider") == 0.0


def test_runner_fails_a_case_whose_expected_outputs_match_nothing(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from ortdist.smoke.models import reference_models

    model = reference_models(["cnn"])[0]
    (tmp_path / "m.onnx").write_bytes(model.model)
    with (tmp_path / "d.npz").open("wb") as fh:
        np.savez(fh, in_input=model.inputs["input"], out_not_an_output=model.expected["logits"])
    case = {
        "suite": "model",
        "name": "cnn",
        "model": str(tmp_path / "m.onnx"),
        "data": str(tmp_path / "d.npz"),
        "atol": 1e-4,
        "rtol": 1e-4,
        "provider": "CPUExecutionProvider",
        "must_take": "all",
    }
    (tmp_path / "plan.json").write_text(json.dumps({"cases": [case]}))
    shutil.copyfile(PACKAGE / "smoke" / "runner.py", tmp_path / "runner.py")
    shutil.copyfile(PACKAGE / "smoke" / "proof.py", tmp_path / "proof.py")
    subprocess.run([sys.executable, "runner.py", "plan.json", "result.json"], cwd=tmp_path, check=True)
    (result,) = json.loads((tmp_path / "result.json").read_text())["cases"]
    assert result["status"] == "error"
    assert "expected outputs ['not_an_output'] do not match the model's outputs ['logits']" in result["error"]
