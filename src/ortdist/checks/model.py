"""The clean-root check's model: small, deterministic, and touching the patched Min/Max kernels.

Expected outputs come from ONNX's reference evaluator, not from ORT, so the check cannot pass
by agreeing with itself. The Max/Min inputs carry NaNs: ONNX says NaN in -> NaN out, which is
exactly the behaviour our Eigen 3.4.0 patch must keep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

Arrays = dict[str, "np.ndarray[Any, Any]"]


def build_model() -> tuple[bytes, Arrays, Arrays]:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(20250322)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    c = rng.standard_normal((2, 8)).astype(np.float32)
    c[0, 1] = np.nan
    c[1, 5] = np.nan
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["lin"]),
        helper.make_node("Relu", ["lin"], ["act"]),
        helper.make_node("Softmax", ["act"], ["probs"], axis=-1),
        helper.make_node("Max", ["x", "c"], ["max"]),
        helper.make_node("Min", ["x", "c"], ["min"]),
    ]
    graph = helper.make_graph(
        nodes,
        "ortdist_check",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, d])
            for n, d in (("probs", 4), ("max", 8), ("min", 8))
        ],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(c, "c")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    x[1, 2] = np.nan
    inputs = {"x": x}
    names = ["probs", "max", "min"]
    outputs = ReferenceEvaluator(model).run(names, inputs)
    expected = dict(zip(names, outputs, strict=True))
    if not np.isnan(expected["max"][0, 1]) or not np.isnan(expected["min"][1, 2]):
        raise AssertionError("reference evaluator did not propagate NaN; the check would prove nothing")
    return model.SerializeToString(), inputs, expected


def write_check_files(directory: Path) -> None:
    from ..smoke.models import save_case

    save_case(directory, *build_model())
