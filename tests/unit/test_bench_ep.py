"""The bench's EP part (bench/ep.py): which EPs it measures, which CPython it picks, its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ortdist.bench import PARTS, ep
from ortdist.bench.results import ep_rows, markdown

PINNED = {
    "onnxruntime_openvino-1.21.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    "onnxruntime_openvino-1.21.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    "onnxruntime_openvino-1.21.0-cp313-cp313-manylinux_2_28_x86_64.whl",
}


def test_only_eps_without_a_device_are_measured_on_this_cpu() -> None:
    assert ep.cpu_eps(["CPUExecutionProvider", "OpenVINOExecutionProvider"]) == ["OpenVINOExecutionProvider"]
    assert ep.cpu_eps(["CPUExecutionProvider", "CUDAExecutionProvider"]) == []  # the device proof's
    assert ep.cpu_eps(["CPUExecutionProvider"]) == []
    assert "ep" in PARTS


def test_the_python_is_one_pypi_has_the_package_for_and_the_host_runs() -> None:
    def host(python: str) -> str | None:
        return "/usr/bin/python" if python in ("3.11", "3.13", "3.14") else None

    order = ["3.13", "3.10", "3.11", "3.12", "3.14"]
    assert ep.choose_python(order, PINNED, "onnxruntime_openvino", "1.21.0", host) == "3.13"
    # 3.10 and 3.14 have no PyPI package, 3.12 no host CPython: 3.11.
    assert ep.choose_python(["3.14", "3.10", "3.12", "3.11"], PINNED, "onnxruntime_openvino", "1.21.0", host) == "3.11"
    assert ep.choose_python(["3.14", "3.12"], PINNED, "onnxruntime_openvino", "1.21.0", host) is None
    assert ep.choose_python(["3.13"], PINNED, "onnxruntime_dnnl", "1.21.0", host) is None


def test_the_table_takes_each_runners_median_and_compares_outputs(tmp_path: Path) -> None:
    for who, value in (("ours-ep", 1.0), ("ours-cpu", 1.0), ("pypi-ep", 1.5)):
        (tmp_path / "latency" / who / "outputs").mkdir(parents=True)
        np.savez(tmp_path / "latency" / who / "outputs" / "resnet50.npz", np.full(3, value, np.float32))
    medians = {
        "ours-ep": {"resnet50": {"1": [10.0, 12.0, 11.0], "2": [6.0, 6.0, 7.0]}},
        "ours-cpu": {"resnet50": {"1": [20.0, 22.0, 21.0], "2": [12.0, 12.0, 12.0]}},
        "pypi-ep": {"resnet50": {"1": [11.0, 11.0, 11.0], "2": [6.0, 6.0, 6.0]}},
    }
    sessions = {w: {"resnet50": ["OpenVINOExecutionProvider", "CPUExecutionProvider"]} for w in ep.WHO}
    errors: dict[str, dict[str, str]] = {w: {} for w in ep.WHO}
    models = {"resnet50": (tmp_path / "m.onnx", tmp_path / "i.npz", "ResNet-50")}
    row = ep.table(tmp_path, models, medians, sessions, errors)["resnet50"]
    assert row["1"] == {
        "ours-ep_ms": 11.0,
        "ours-cpu_ms": 21.0,
        "pypi-ep_ms": 11.0,
        "ep_vs_cpu": 11 / 21,
        "ours_vs_pypi": 1.0,
    }
    assert row["max_diff_vs_ours-cpu"] == 0.0 and row["max_diff_vs_pypi-ep"] == 0.5
    result = {"recipe": "openvino-linux", "provider": "OpenVINOExecutionProvider", "python": "3.13", "rounds": 3}
    result |= {"runs": 10, "wheels": {"pypi": "p.whl"}, "bytes": {"ours": 40, "pypi": 64}, "models": {"resnet50": row}}
    text = "\n".join(ep_rows(result))
    assert "| resnet50 | 1 | 11.0 | 21.0 | 11.0 | 0.52x | 1.00x | OpenVINO+CPU, OpenVINO+CPU | 0, 0.5 |" in text
    assert "ours 40 B, PyPI's 64 B (0.62x)" in text
    assert "## OpenVINO EP: openvino-linux" in markdown({"ep": result})


def test_a_model_the_ep_fails_reads_failed_with_its_error(tmp_path: Path) -> None:
    medians: dict[str, Any] = {"ours-ep": {}, "ours-cpu": {"bert": {"1": [5.0], "2": [3.0]}}, "pypi-ep": {}}
    sessions: dict[str, dict[str, list[str]]] = {w: {} for w in ep.WHO}
    errors = {"ours-ep": {"bert": "RuntimeException: no"}, "ours-cpu": {}, "pypi-ep": {"bert": "Fail: x"}}
    row = ep.table(tmp_path, {"bert": (tmp_path, tmp_path, "BERT")}, medians, sessions, errors)["bert"]
    assert row["1"] == {"ours-cpu_ms": 5.0} and row["errors"] == {
        "ours-ep": "RuntimeException: no",
        "pypi-ep": "Fail: x",
    }
    result = {"recipe": "r", "provider": "OpenVINOExecutionProvider", "python": "3.13", "rounds": 1, "runs": 1}
    result |= {"wheels": {"pypi": "p.whl"}, "bytes": {"ours": 1, "pypi": 1}, "models": {"bert": row}}
    text = "\n".join(ep_rows(result))
    assert "| bert | 1 | failed | 5.0 | failed | - | - |" in text and "ours-ep failed: RuntimeException: no" in text


def test_every_part_after_the_builds_has_its_measure_method() -> None:
    """run_bench calls measure_<part> for each part after build and rebuild (seen missing for ep)."""
    from ortdist.bench.run import Bench

    assert [p for p in PARTS[2:] if not callable(getattr(Bench, f"measure_{p}", None))] == []


def test_an_eps_own_thread_option_is_registry_data() -> None:
    """OpenVINO ignores intra_op_num_threads: its own option (providers.toml) sets the bench's threads."""
    from ortdist.registry import providers

    table = providers()
    assert table["openvino"].threads_option == "num_of_threads"
    assert [name for name, ep in table.items() if ep.threads_option] == ["openvino"]
