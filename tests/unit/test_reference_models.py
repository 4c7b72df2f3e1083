from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ortdist.smoke import models
from ortdist.smoke.models import reference_models, tolerances
from ortdist.smoke.proof import compare
from ortdist.smoke.suite import Tolerance


@pytest.fixture(scope="module")
def generated() -> list[models.ReferenceModel]:
    return reference_models()


def test_models_cover_what_the_suite_needs(generated: list[models.ReferenceModel]) -> None:
    ops = {m.name: set(m.op_types) for m in generated}
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "Gemm"} <= ops["cnn"]
    assert {"MatMul", "Softmax", "LayerNormalization", "Erf", "Reshape", "Transpose"} <= ops["transformer"]
    assert {"If", "Loop"} <= ops["control_flow"]
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops["qdq_cnn"]
    fp16 = next(m for m in generated if m.name == "fp16_mlp")
    assert fp16.inputs["x"].dtype == np.float16 and fp16.expected["probs"].dtype == np.float16
    import onnx

    depthwise = [n for n in onnx.load_from_string(generated[0].model).graph.node if n.name == "conv_dw"]
    assert depthwise and any(a.name == "group" and a.i == 8 for a in depthwise[0].attribute)


def _subgraph_nodes(model: models.ReferenceModel) -> list[tuple[str, Any]]:
    """(op type of the control-flow node, node) for every node inside an If/Loop body."""
    import onnx

    found = []
    for node in onnx.load_from_string(model.model).graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found += [(node.op_type, inner) for inner in attr.g.node]
    return found


def test_control_flow_models_put_ep_operators_inside_bodies_with_outer_scope_weights(
    generated: list[models.ReferenceModel],
) -> None:
    """What XNNPACK tripped on: EP-eligible ops in If/Loop bodies whose weights live in the main graph,
    with conditions and trip counts given at run time (so nothing folds the control flow away)."""
    import onnx

    by = {m.name: m for m in generated}
    placed: dict[str, set[str]] = {}
    for name in ("if_conv", "loop_conv", "qdq_control_flow"):
        graph = onnx.load_from_string(by[name].model).graph
        main_inits = {i.name for i in graph.initializer}
        assert not {"flag", "trips"} & main_inits
        assert {"flag", "trips"} & {i.name for i in graph.input}
        for parent, node in _subgraph_nodes(by[name]):
            placed.setdefault(parent, set()).add(node.op_type)
            if node.op_type in ("Conv", "Gemm", "MatMul"):
                assert node.input[1] in main_inits or node.input[1].endswith("_wdq"), (name, node.name)
            if node.op_type == "DequantizeLinear" and node.name.endswith("_dq_w"):
                assert node.input[0] in main_inits, (name, node.name)
    assert {"Conv", "Gemm", "MatMul", "MaxPool", "AveragePool"} <= placed["If"]
    assert {"Conv", "Gemm", "MaxPool", "QuantizeLinear", "DequantizeLinear"} <= placed["Loop"]
    assert by["if_conv"].inputs["flag"].dtype == np.bool_ and by["loop_conv"].inputs["trips"] > 1


def test_nodes_inside_bodies_are_listed(generated: list[models.ReferenceModel]) -> None:
    loop = next(m for m in generated if m.name == "loop_conv")
    assert loop.nodes["loop"] == "Loop" and loop.nodes["body_conv"] == "Conv"
    assert "Conv" in loop.op_types


def test_generation_is_deterministic(generated: list[models.ReferenceModel]) -> None:
    again = reference_models()
    for a, b in zip(generated, again, strict=True):
        assert a.model == b.model
        for k in a.inputs:
            assert np.array_equal(a.inputs[k], b.inputs[k])
        for k in a.expected:
            assert np.array_equal(a.expected[k], b.expected[k])


def test_every_model_has_a_tolerance() -> None:
    assert set(tolerances()) == set(models.BUILDERS)


def test_official_wheel_matches_the_references_within_tolerance(generated: list[models.ReferenceModel]) -> None:
    """The control: PyPI's onnxruntime 1.21.0 CPU EP must agree with every reference."""
    ort = pytest.importorskip("onnxruntime")
    assert ort.__version__ == "1.21.0"
    tol = tolerances()
    for m in generated:
        session = ort.InferenceSession(m.model, providers=["CPUExecutionProvider"])
        outputs = session.run(list(m.expected), m.inputs)
        for (name, want), got in zip(m.expected.items(), outputs, strict=True):
            result = compare(got, want, tol[m.name].atol, tol[m.name].rtol)
            assert result.ok, f"{m.name}.{name}: max abs err {result.max_abs_err} at {result.worst_index}"


def test_a_perturbed_expectation_fails(generated: list[models.ReferenceModel]) -> None:
    cnn = generated[0]
    want = cnn.expected["logits"].copy()
    perturbed = want.copy()
    perturbed[0, 3] += 0.01
    tol = tolerances()["cnn"]
    result = compare(want, perturbed, tol.atol, tol.rtol)
    assert not result.ok
    assert result.worst_index == (0, 3)
    assert result.max_abs_err == pytest.approx(0.01, rel=1e-3)


def test_compare_requires_same_shape_and_nan_positions() -> None:
    tol = Tolerance(atol=1.0, rtol=0.0)
    assert not compare(np.zeros(3), np.zeros(4), tol.atol, tol.rtol).ok
    assert not compare(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), tol.atol, tol.rtol).ok
    assert compare(np.array([np.nan, 1.0]), np.array([np.nan, 1.5]), tol.atol, tol.rtol).ok
    assert not compare(np.array([1, 2]), np.array([1, 3]), 10.0, 0.0).ok  # integers must be equal
