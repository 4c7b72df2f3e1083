"""The benchmark's real-size models: the same graphs at test size run in PyPI's onnxruntime (and
its QDQ variant is quantized), full size has the parameter counts of ResNet-50 and BERT-base, and
the latency script and the results table report ours against PyPI's at each thread count."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ortdist.bench.results import markdown
from ortdist.smoke import realsize


def parameters(model: onnx.ModelProto) -> int:
    """Float weights, not the graph's scalar constants (1/sqrt(d), GELU's 0.5...)."""
    arrays = (numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    return sum(a.size for a in arrays if a.ndim > 0)


@pytest.mark.parametrize(
    "model",
    [realsize.resnet((1, 1, 1, 1), width=8, image=32, classes=10), realsize.bert(2, 32, 2, 64, 8, 50)],
    ids=["resnet", "bert"],
)
def test_tiny_versions_run_and_quantize(model: realsize.RealModel, tmp_path: Path) -> None:
    import onnxruntime as ort

    onnx.checker.check_model(model.model, full_check=True)
    (y,) = ort.InferenceSession(model.model.SerializeToString()).run(None, model.inputs)
    assert np.isfinite(y).all() and y.std() > 0
    qdq = realsize.quantized(model, tmp_path)
    ops = {n.op_type for n in qdq.model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops and qdq.name == f"{model.name}_qdq"
    (yq,) = ort.InferenceSession(qdq.model.SerializeToString()).run(None, qdq.inputs)
    assert yq.shape == y.shape and np.isfinite(yq).all()


def test_full_size_resnet_has_resnet50s_parameters() -> None:
    """torchvision's resnet50 has 25,557,032 parameters; folding its 53 batch norms into conv biases
    (2 x 26,560 scale/shift values become 26,560 biases; the running stats are not parameters) and
    keeping the fc layer gives the same count."""
    model = realsize.resnet()
    assert parameters(model.model) == 25_557_032 - 26_560
    assert model.inputs["image"].shape == (1, 3, 224, 224)


def test_bert_size_follows_bert_base() -> None:
    """BERT-base's encoder and embeddings, at a small vocabulary so the test stays fast: 12 layers of
    hidden 768 with an FFN of 3072 are 85,054,464 parameters (7,087,872 per layer)."""
    model = realsize.bert(vocab=10)
    embeddings = 10 * 768 + 128 * 768 + 2 * 768
    assert parameters(model.model) == 12 * 7_087_872 + embeddings
    assert {n.op_type for n in model.model.graph.node} >= {"LayerNormalization", "Softmax", "Erf", "Gather"}


def test_latency_script_times_each_model_at_each_thread_count(tmp_path: Path) -> None:
    model = realsize.bert(1, 32, 2, 64, 8, 50)
    (tmp_path / "m").mkdir()
    onnx.save(model.model, str(tmp_path / "m" / "model.onnx"))
    np.savez(tmp_path / "m" / "inputs.npz", **model.inputs)
    case = {"name": "bert_base", "model": "m/model.onnx", "inputs": "m/inputs.npz"}
    (tmp_path / "plan.json").write_text(json.dumps({"threads": [1, 2], "runs": 3, "warmup": 1, "models": [case]}))
    smoke = Path(realsize.__file__).parent
    for script in (smoke.parent / "bench" / "latency.py", smoke / "runner.py", smoke / "proof.py"):
        shutil.copyfile(script, tmp_path / script.name)  # as the bench lays them out
    subprocess.run([sys.executable, "latency.py", "plan.json", "result.json"], cwd=tmp_path, check=True)
    result = json.loads((tmp_path / "result.json").read_text())
    assert set(result["models"]["bert_base"]) == {"1", "2"} and all(
        v > 0 for v in result["models"]["bert_base"].values()
    )
    with np.load(tmp_path / "outputs" / "bert_base.npz") as saved:
        assert saved["arr_0"].shape == (1, 8, 32)


def test_results_table_has_a_row_per_model_and_thread_count() -> None:
    row = {"summary": "s", "max_output_diff": 0.0}
    models = {
        "resnet50": {
            **row,
            "1": {"ours_ms": 60.0, "official_ms": 50.0, "ratio": 1.2, "round_ratios": [1.3, 0.9, 1.1]},
            "2": {"ours_ms": 30.0, "official_ms": 30.0, "ratio": 1.0},
        }
    }
    table = markdown({"models": {"threads": [1, 2], "models": models}})
    assert "| resnet50 median latency, 1 thread(s) (vs PyPI; goal <= 1.00) | 60.00 ms | 50.00 ms | 1.20x" in table
    assert "| resnet50 median latency, 2 thread(s) (vs PyPI; goal <= 1.00) | 30.00 ms | 30.00 ms | 1.00x" in table
    # Each round's own ratio: how far the rounds spread, and in how many ours was the faster.
    assert "1.20x (rounds 0.90-1.30, ours faster in 1 of 3; max output diff 0)" in table
    assert "1.00x (max output diff 0)" in table
