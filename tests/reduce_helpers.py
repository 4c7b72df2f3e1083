"""Helpers shared by the reduced-build tests (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest


def to_ort(tmp_path: Path, onnx_model: Path, level: str = "extended") -> Path:
    """Convert with PyPI's onnxruntime 1.21.0 (the tests' control wheel), as the build does."""
    ort = pytest.importorskip("onnxruntime", reason="the control wheel: nox -s tests and nox -s unit install it")

    levels = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    }
    out = tmp_path / f"{onnx_model.stem}.{level}.ort"
    options = ort.SessionOptions()
    options.graph_optimization_level = levels[level]
    options.optimized_model_filepath = str(out)
    options.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(str(onnx_model), options, providers=["CPUExecutionProvider"])
    return out


def config_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]
