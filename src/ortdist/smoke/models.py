"""Reference models, generated deterministically with onnx helpers (nothing is downloaded).

Each model comes with seeded inputs and expected outputs. Expected outputs come from ONNX's
reference evaluator, except where noted: the control-flow model's are computed with numpy from
the semantics the graph encodes, because onnx 1.17's evaluator is unreliable on If/Loop.

Larger than ortdist's other modules on purpose: it is the reference-model catalogue, one builder
per model and nothing else, read as one list (BUILDERS) by the smoke suite, the slim recipes, the
compat checks and the device proof.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .suite import Tolerance

OPSET = 17  # LayerNormalization needs 17; ORT 1.21 runs 7..22
IR_VERSION = 10  # opset 21 (the QDQ model) needs IR 10; ORT 1.21 reads up to IR 10


@dataclass(frozen=True)
class ReferenceModel:
    name: str
    summary: str
    model: bytes
    inputs: dict[str, np.ndarray[Any, Any]]
    expected: dict[str, np.ndarray[Any, Any]]
    expected_from: str  # "onnx.reference" or "numpy"

    @property
    def op_types(self) -> list[str]:

        return sorted(set(self.nodes.values()))

    @property
    def nodes(self) -> dict[str, str]:
        """Node name -> op type, If/Loop bodies included: what a compiling EP's fused nodes are
        checked against, and what the share of nodes on an EP counts."""
        import onnx

        def walk(graph: Any) -> Iterator[Any]:
            for node in graph.node:
                yield node
                for attr in node.attribute:
                    if attr.type == onnx.AttributeProto.GRAPH:
                        yield from walk(attr.g)

        return {n.name: n.op_type for n in walk(onnx.load_from_string(self.model).graph)}


def save_case(directory: Path, model: bytes, inputs: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """The on-disk layout the in-environment scripts read: model.onnx + data.npz with in_*/out_* arrays."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.onnx").write_bytes(model)
    arrays = {f"in_{k}": v for k, v in inputs.items()} | {f"out_{k}": v for k, v in expected.items()}
    with (directory / "data.npz").open("wb") as fh:
        np.savez(fh, **arrays)


def _rng(name: str) -> np.random.Generator:
    """One stable seed per model, independent of generation order."""
    return np.random.default_rng(sum(name.encode()) * 7919)


def _finish(name: str, summary: str, graph: Any, inputs: dict[str, Any], opset: int = OPSET) -> ReferenceModel:
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION, producer_name="ortdist"
    )
    onnx.checker.check_model(model, full_check=True)
    names = [o.name for o in graph.output]
    outputs = ReferenceEvaluator(model).run(names, inputs)
    assert isinstance(outputs, list)  # run() returns a list when output names are given
    return ReferenceModel(
        name=name,
        summary=summary,
        model=model.SerializeToString(),
        inputs=inputs,
        expected=dict(zip(names, outputs, strict=True)),
        expected_from="onnx.reference",
    )


def _init(name: str, array: np.ndarray[Any, Any]) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name)


def cnn() -> ReferenceModel:
    """MobileNet-like: Conv+BN+Relu, depthwise Conv, pointwise Conv, pools, Gemm."""
    from onnx import TensorProto, helper

    rng = _rng("cnn")
    f32 = np.float32
    inits = [
        _init("w1", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(f32)),
        _init("b1", rng.standard_normal(8).astype(f32) * 0.1),
        _init("bn_scale", rng.uniform(0.5, 1.5, 8).astype(f32)),
        _init("bn_bias", rng.standard_normal(8).astype(f32) * 0.1),
        _init("bn_mean", rng.standard_normal(8).astype(f32) * 0.1),
        _init("bn_var", rng.uniform(0.5, 1.5, 8).astype(f32)),
        _init("w_dw", (rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(f32)),
        _init("w_pw", (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(f32)),
        _init("w_fc", (rng.standard_normal((16, 10)) * 0.3).astype(f32)),
        _init("b_fc", rng.standard_normal(10).astype(f32) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn1"], name="bn1"),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w_dw"], ["dw"], pads=[1, 1, 1, 1], group=8, name="conv_dw"),
        helper.make_node("Relu", ["dw"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w_pw"], ["pw"], name="conv_pw"),
        helper.make_node("MaxPool", ["pw"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="maxpool"),
        helper.make_node("GlobalAveragePool", ["mp"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "w_fc", "b_fc"], ["logits"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    x = rng.standard_normal((1, 3, 32, 32)).astype(f32)
    return _finish("cnn", cnn.__doc__ or "", graph, {"input": x})


def transformer() -> ReferenceModel:
    """One encoder block: LayerNorm, 4-head self-attention from MatMul/Reshape/Transpose/Softmax, Erf-Gelu MLP."""
    from onnx import TensorProto, helper

    rng = _rng("transformer")
    f32 = np.float32
    seq, hidden, heads = 8, 32, 4
    head = hidden // heads

    def weight(name: str, shape: tuple[int, ...]) -> Any:
        return _init(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(f32))

    inits = [
        weight("wq", (hidden, hidden)),
        weight("wk", (hidden, hidden)),
        weight("wv", (hidden, hidden)),
        weight("wo", (hidden, hidden)),
        weight("w_up", (hidden, 4 * hidden)),
        weight("w_down", (4 * hidden, hidden)),
        _init("ln1_g", rng.uniform(0.8, 1.2, hidden).astype(f32)),
        _init("ln1_b", np.zeros(hidden, f32)),
        _init("ln2_g", rng.uniform(0.8, 1.2, hidden).astype(f32)),
        _init("ln2_b", np.zeros(hidden, f32)),
        _init("split_heads", np.array([1, seq, heads, head], np.int64)),
        _init("merge_heads", np.array([1, seq, hidden], np.int64)),
        _init("scale", np.array(1.0 / np.sqrt(head), f32)),
        _init("half", np.array(0.5, f32)),
        _init("one", np.array(1.0, f32)),
        _init("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), f32)),
    ]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["ln1"], axis=-1, epsilon=1e-5, name="ln1"),
        n("MatMul", ["ln1", "wq"], ["q"], name="q_proj"),
        n("MatMul", ["ln1", "wk"], ["k"], name="k_proj"),
        n("MatMul", ["ln1", "wv"], ["v"], name="v_proj"),
        n("Reshape", ["q", "split_heads"], ["q4"], name="q_split"),
        n("Reshape", ["k", "split_heads"], ["k4"], name="k_split"),
        n("Reshape", ["v", "split_heads"], ["v4"], name="v_split"),
        n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3], name="q_heads"),
        n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1], name="k_heads_t"),
        n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3], name="v_heads"),
        n("MatMul", ["qh", "kt"], ["scores"], name="qk"),
        n("Mul", ["scores", "scale"], ["scaled"], name="scale"),
        n("Softmax", ["scaled"], ["attn"], axis=-1, name="softmax"),
        n("MatMul", ["attn", "vh"], ["ctx"], name="attn_v"),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="merge_t"),
        n("Reshape", ["ctx_t", "merge_heads"], ["ctx2"], name="merge"),
        n("MatMul", ["ctx2", "wo"], ["attn_out"], name="o_proj"),
        n("Add", ["x", "attn_out"], ["res1"], name="residual1"),
        n("LayerNormalization", ["res1", "ln2_g", "ln2_b"], ["ln2"], axis=-1, epsilon=1e-5, name="ln2"),
        n("MatMul", ["ln2", "w_up"], ["up"], name="mlp_up"),
        # Gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))), spelled with opset-17 ops
        n("Mul", ["up", "inv_sqrt2"], ["up_s"], name="gelu_scale"),
        n("Erf", ["up_s"], ["erf"], name="gelu_erf"),
        n("Add", ["erf", "one"], ["erf1"], name="gelu_add"),
        n("Mul", ["up", "erf1"], ["g1"], name="gelu_mul"),
        n("Mul", ["g1", "half"], ["gelu"], name="gelu_half"),
        n("MatMul", ["gelu", "w_down"], ["down"], name="mlp_down"),
        n("Add", ["res1", "down"], ["y"], name="residual2"),
    ]
    graph = helper.make_graph(
        nodes,
        "transformer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])],
        initializer=inits,
    )
    x = rng.standard_normal((1, seq, hidden)).astype(f32)
    return _finish("transformer", transformer.__doc__ or "", graph, {"x": x})


def control_flow() -> ReferenceModel:
    """If (branch on a bool input) feeding a Loop that updates a carried tensor a given number of times."""
    from onnx import TensorProto, helper

    rng = _rng("control_flow")
    f32 = np.float32
    n = helper.make_node
    vi = helper.make_tensor_value_info
    then_graph = helper.make_graph(
        [n("Relu", ["x"], ["then_out"], name="then_relu")], "then", [], [vi("then_out", TensorProto.FLOAT, [4])]
    )
    else_graph = helper.make_graph(
        [n("Neg", ["x"], ["else_out"], name="else_neg")], "else", [], [vi("else_out", TensorProto.FLOAT, [4])]
    )
    body = helper.make_graph(
        [
            n("Mul", ["acc_in", "two"], ["doubled"], name="body_mul"),
            n("Add", ["doubled", "one"], ["acc_out"], name="body_add"),
            n("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", TensorProto.FLOAT, [4])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [4])],
    )
    graph = helper.make_graph(
        [
            n("If", ["flag"], ["branch"], then_branch=then_graph, else_branch=else_graph, name="if"),
            n("Loop", ["trips", "keep_going", "branch"], ["y"], body=body, name="loop"),
        ],
        "control_flow",
        [vi("x", TensorProto.FLOAT, [4]), vi("flag", TensorProto.BOOL, []), vi("trips", TensorProto.INT64, [])],
        [vi("y", TensorProto.FLOAT, [4])],
        initializer=[
            _init("keep_going", np.array(True)),
            _init("two", np.array(2.0, f32)),
            _init("one", np.array(1.0, f32)),
        ],
    )
    import onnx

    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="ortdist"
    )
    onnx.checker.check_model(model, full_check=True)
    x = rng.standard_normal(4).astype(f32)
    inputs = {"x": x, "flag": np.array(False), "trips": np.array(3, np.int64)}
    acc = np.maximum(x, 0) if inputs["flag"] else -x
    for _ in range(int(inputs["trips"])):
        acc = acc * f32(2) + f32(1)
    return ReferenceModel(
        name="control_flow",
        summary=control_flow.__doc__ or "",
        model=model.SerializeToString(),
        inputs=inputs,
        expected={"y": acc.astype(f32)},
        expected_from="numpy",
    )


def qdq_cnn() -> ReferenceModel:
    """int8 QDQ CNN: Quantize/Dequantize around Conv and Relu, int8 weights; ORT fuses it into QLinearConv."""
    from onnx import TensorProto, helper

    rng = _rng("qdq_cnn")
    f32 = np.float32
    w = rng.integers(-64, 64, (8, 3, 3, 3)).astype(np.int8)
    w2 = rng.integers(-64, 64, (8, 8, 1, 1)).astype(np.int8)
    n = helper.make_node
    inits = [
        _init("x_scale", np.array(0.02, f32)),
        _init("x_zp", np.array(0, np.int8)),
        _init("w", w),
        _init("w_scale", np.array(0.01, f32)),
        _init("w_zp", np.array(0, np.int8)),
        _init("w2", w2),
        _init("w2_scale", np.array(0.01, f32)),
        _init("a_scale", np.array(0.05, f32)),
        _init("a_zp", np.array(0, np.int8)),
    ]
    nodes = [
        n("QuantizeLinear", ["input", "x_scale", "x_zp"], ["xq"], name="q_in"),
        n("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xdq"], name="dq_in"),
        n("DequantizeLinear", ["w", "w_scale", "w_zp"], ["wdq"], name="dq_w"),
        n("Conv", ["xdq", "wdq"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        n("QuantizeLinear", ["c1", "a_scale", "a_zp"], ["c1q"], name="q_c1"),
        n("DequantizeLinear", ["c1q", "a_scale", "a_zp"], ["c1dq"], name="dq_c1"),
        n("Relu", ["c1dq"], ["r1"], name="relu1"),
        n("QuantizeLinear", ["r1", "a_scale", "a_zp"], ["r1q"], name="q_r1"),
        n("DequantizeLinear", ["r1q", "a_scale", "a_zp"], ["r1dq"], name="dq_r1"),
        n("DequantizeLinear", ["w2", "w2_scale", "w_zp"], ["w2dq"], name="dq_w2"),
        n("Conv", ["r1dq", "w2dq"], ["c2"], name="conv2"),
        n("QuantizeLinear", ["c2", "a_scale", "a_zp"], ["c2q"], name="q_c2"),
        n("DequantizeLinear", ["c2q", "a_scale", "a_zp"], ["output"], name="dq_out"),
    ]
    graph = helper.make_graph(
        nodes,
        "qdq_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 16, 16])],
        initializer=inits,
    )
    x = rng.uniform(-1, 1, (1, 3, 16, 16)).astype(f32)
    # opset 21: onnx 1.17's reference evaluator implements Quantize/DequantizeLinear from 19 on only.
    return _finish("qdq_cnn", qdq_cnn.__doc__ or "", graph, {"input": x}, opset=21)


def fp16_mlp() -> ReferenceModel:
    """fp16 variant: MatMul/Add/Relu/Softmax on float16 tensors end to end."""
    from onnx import TensorProto, helper

    rng = _rng("fp16_mlp")
    f16 = np.float16
    n = helper.make_node
    inits = [
        _init("w1", (rng.standard_normal((16, 32)) * 0.25).astype(f16)),
        _init("b1", np.zeros(32, f16)),
        _init("w2", (rng.standard_normal((32, 8)) * 0.25).astype(f16)),
    ]
    nodes = [
        n("MatMul", ["x", "w1"], ["h"], name="fc1"),
        n("Add", ["h", "b1"], ["hb"], name="bias1"),
        n("Relu", ["hb"], ["r"], name="relu"),
        n("MatMul", ["r", "w2"], ["logits"], name="fc2"),
        n("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "fp16_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT16, [4, 8])],
        initializer=inits,
    )
    x = rng.standard_normal((4, 16)).astype(f16)
    return _finish("fp16_mlp", fp16_mlp.__doc__ or "", graph, {"x": x})


def _branch(prefix: str, nodes: list[Any], output: str, shape: list[int]) -> Any:
    """A subgraph with no inputs of its own: it reads the main graph's tensors by name (outer scope)."""
    from onnx import TensorProto, helper

    for node in nodes:
        node.name = f"{prefix}_{node.name}"
    return helper.make_graph(nodes, prefix, [], [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)])


_POOL_NAMES = {"MaxPool": "maxpool", "AveragePool": "avgpool"}


def if_conv() -> ReferenceModel:
    """Conv, pooling and Gemm/MatMul inside both branches of If (condition given at run time), their
    weights initializers of the main graph; two If nodes on flag and not-flag run both branches."""
    from onnx import TensorProto, helper

    rng = _rng("if_conv")
    f32 = np.float32
    n = helper.make_node
    inits = [
        _init("w_conv", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(f32)),
        _init("b_conv", (rng.standard_normal(8) * 0.1).astype(f32)),
        _init("w_fc", (rng.standard_normal((8, 10)) * 0.3).astype(f32)),
        _init("b_fc", (rng.standard_normal(10) * 0.1).astype(f32)),
        _init("w_mm", (rng.standard_normal((8, 10)) * 0.3).astype(f32)),
    ]

    def conv_branch(prefix: str, out: str, conv: dict[str, Any], pool: str, head: tuple[str, list[str]]) -> Any:
        """Conv+Relu, ``pool``, global pooling, then ``head`` (op, weights) into ``out``."""
        head_op, weights = head
        return _branch(
            prefix,
            [
                n("Conv", ["x", "w_conv", "b_conv"], [f"{prefix}_c"], pads=[1, 1, 1, 1], name="conv", **conv),
                n("Relu", [f"{prefix}_c"], [f"{prefix}_r"], name="relu"),
                n(pool, [f"{prefix}_r"], [f"{prefix}_p"], kernel_shape=[2, 2], strides=[2, 2], name=_POOL_NAMES[pool]),
                n("GlobalAveragePool", [f"{prefix}_p"], [f"{prefix}_g"], name="gap"),
                n("Flatten", [f"{prefix}_g"], [f"{prefix}_f"], name="flatten"),
                n(head_op, [f"{prefix}_f", *weights], [out], name=head_op.lower()),
            ],
            out,
            [1, 10],
        )

    def conv_gemm(prefix: str, out: str) -> Any:
        return conv_branch(prefix, out, {}, "MaxPool", ("Gemm", ["w_fc", "b_fc"]))

    def conv_matmul(prefix: str, out: str) -> Any:
        return conv_branch(prefix, out, {"strides": [2, 2]}, "AveragePool", ("MatMul", ["w_mm"]))

    nodes = [
        n(
            "If",
            ["flag"],
            ["y"],
            then_branch=conv_gemm("a_then", "a_out"),
            else_branch=conv_matmul("a_else", "a_out2"),
            name="if_flag",
        ),
        n("Not", ["flag"], ["not_flag"], name="not_flag"),
        n(
            "If",
            ["not_flag"],
            ["y_other"],
            then_branch=conv_gemm("b_then", "b_out"),
            else_branch=conv_matmul("b_else", "b_out2"),
            name="if_not_flag",
        ),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "if_conv",
        [vi("x", TensorProto.FLOAT, [1, 3, 16, 16]), vi("flag", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, [1, 10]), vi("y_other", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    x = rng.standard_normal((1, 3, 16, 16)).astype(f32)
    return _finish("if_conv", if_conv.__doc__ or "", graph, {"x": x, "flag": np.array(True)})


def loop_conv() -> ReferenceModel:
    """A Loop (trip count given at run time) whose body runs Conv, MaxPool and Gemm on weights that are
    initializers of the main graph, carrying a feature map and a sum of each iteration's logits.

    (Sums, not scan outputs: onnx 1.17's evaluator concatenates scan outputs where ONNX stacks them.)"""
    from onnx import TensorProto, helper

    rng = _rng("loop_conv")
    f32 = np.float32
    n = helper.make_node
    vi = helper.make_tensor_value_info
    inits = [
        _init("keep_going", np.array(True)),
        _init("logits0", np.zeros((1, 10), f32)),
        _init("w_loop", (rng.standard_normal((4, 4, 3, 3)) / 6.0).astype(f32)),
        _init("b_loop", (rng.standard_normal(4) * 0.1).astype(f32)),
        _init("w_fc", (rng.standard_normal((256, 10)) / 16.0).astype(f32)),
        _init("b_fc", (rng.standard_normal(10) * 0.1).astype(f32)),
    ]
    body = helper.make_graph(
        [
            n("Conv", ["h_in", "w_loop", "b_loop"], ["c"], pads=[1, 1, 1, 1], name="body_conv"),
            n("Relu", ["c"], ["r"], name="body_relu"),
            n("MaxPool", ["r"], ["h_out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="body_maxpool"),
            n("Flatten", ["h_out"], ["f"], name="body_flatten"),
            n("Gemm", ["f", "w_fc", "b_fc"], ["logits"], name="body_gemm"),
            n("Add", ["sum_in", "logits"], ["sum_out"], name="body_sum"),
            n("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
        ],
        "body",
        [
            vi("i", TensorProto.INT64, []),
            vi("cond_in", TensorProto.BOOL, []),
            vi("h_in", TensorProto.FLOAT, [1, 4, 8, 8]),
            vi("sum_in", TensorProto.FLOAT, [1, 10]),
        ],
        [
            vi("cond_out", TensorProto.BOOL, []),
            vi("h_out", TensorProto.FLOAT, [1, 4, 8, 8]),
            vi("sum_out", TensorProto.FLOAT, [1, 10]),
        ],
    )
    graph = helper.make_graph(
        [n("Loop", ["trips", "keep_going", "x", "logits0"], ["h", "logits"], body=body, name="loop")],
        "loop_conv",
        [vi("x", TensorProto.FLOAT, [1, 4, 8, 8]), vi("trips", TensorProto.INT64, [])],
        [vi("h", TensorProto.FLOAT, [1, 4, 8, 8]), vi("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    x = rng.standard_normal((1, 4, 8, 8)).astype(f32)
    return _finish("loop_conv", loop_conv.__doc__ or "", graph, {"x": x, "trips": np.array(3, np.int64)})


def qdq_control_flow() -> ReferenceModel:
    """int8 QDQ Conv inside an If branch (run-time condition) and a Loop body (run-time trip count),
    the int8 weights initializers of the main graph."""
    from onnx import TensorProto, helper

    rng = _rng("qdq_control_flow")
    f32 = np.float32
    n = helper.make_node
    vi = helper.make_tensor_value_info
    inits = [
        _init("keep_going", np.array(True)),
        _init("x_scale", np.array(0.02, f32)),
        _init("zp", np.array(0, np.int8)),
        _init("w", rng.integers(-64, 64, (8, 3, 3, 3)).astype(np.int8)),
        _init("w_scale", np.array(0.01, f32)),
        _init("w2", rng.integers(-48, 48, (8, 8, 1, 1)).astype(np.int8)),
        _init("a_scale", np.array(0.05, f32)),
    ]

    def qdq_conv(prefix: str, x: str, weight: str, out: str, **attrs: Any) -> list[Any]:
        p = prefix
        return [
            n("QuantizeLinear", [x, "x_scale" if weight == "w" else "a_scale", "zp"], [f"{p}_xq"], name=f"{p}_q_in"),
            n(
                "DequantizeLinear",
                [f"{p}_xq", "x_scale" if weight == "w" else "a_scale", "zp"],
                [f"{p}_xdq"],
                name=f"{p}_dq_in",
            ),
            n("DequantizeLinear", [weight, "w_scale", "zp"], [f"{p}_wdq"], name=f"{p}_dq_w"),
            n("Conv", [f"{p}_xdq", f"{p}_wdq"], [f"{p}_c"], name=f"{p}_conv", **attrs),
            n("QuantizeLinear", [f"{p}_c", "a_scale", "zp"], [f"{p}_cq"], name=f"{p}_q_out"),
            n("DequantizeLinear", [f"{p}_cq", "a_scale", "zp"], [out], name=f"{p}_dq_out"),
        ]

    then_branch = helper.make_graph(
        qdq_conv("then", "x", "w", "then_out", pads=[1, 1, 1, 1]),
        "then",
        [],
        [vi("then_out", TensorProto.FLOAT, [1, 8, 16, 16])],
    )
    else_branch = helper.make_graph(
        [
            *qdq_conv("else", "x", "w", "else_dq", pads=[1, 1, 1, 1]),
            n("Neg", ["else_dq"], ["else_out"], name="else_neg"),
        ],
        "else",
        [],
        [vi("else_out", TensorProto.FLOAT, [1, 8, 16, 16])],
    )
    body = helper.make_graph(
        [*qdq_conv("body", "h_in", "w2", "h_out"), n("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body",
        [
            vi("i", TensorProto.INT64, []),
            vi("cond_in", TensorProto.BOOL, []),
            vi("h_in", TensorProto.FLOAT, [1, 8, 16, 16]),
        ],
        [vi("cond_out", TensorProto.BOOL, []), vi("h_out", TensorProto.FLOAT, [1, 8, 16, 16])],
    )
    graph = helper.make_graph(
        [
            n("If", ["flag"], ["branch"], then_branch=then_branch, else_branch=else_branch, name="if"),
            n("Loop", ["trips", "keep_going", "branch"], ["output"], body=body, name="loop"),
        ],
        "qdq_control_flow",
        [
            vi("x", TensorProto.FLOAT, [1, 3, 16, 16]),
            vi("flag", TensorProto.BOOL, []),
            vi("trips", TensorProto.INT64, []),
        ],
        [vi("output", TensorProto.FLOAT, [1, 8, 16, 16])],
        initializer=inits,
    )
    x = rng.uniform(-1, 1, (1, 3, 16, 16)).astype(f32)
    inputs = {"x": x, "flag": np.array(True), "trips": np.array(2, np.int64)}
    return _finish("qdq_control_flow", qdq_control_flow.__doc__ or "", graph, inputs, opset=21)


BUILDERS: dict[str, Callable[[], ReferenceModel]] = {
    "cnn": cnn,
    "transformer": transformer,
    "control_flow": control_flow,
    "qdq_cnn": qdq_cnn,
    "fp16_mlp": fp16_mlp,
    "if_conv": if_conv,
    "loop_conv": loop_conv,
    "qdq_control_flow": qdq_control_flow,
}


def reference_models(names: list[str] | None = None) -> list[ReferenceModel]:
    return [BUILDERS[name]() for name in (names or list(BUILDERS))]


@functools.cache
def tolerances() -> dict[str, Tolerance]:
    """Reference model -> its tolerance ([models] of data/smoke.toml); every model needs one."""
    from ..errors import DataError
    from .suite import smoke_facts

    out = dict(smoke_facts().models)
    missing = set(BUILDERS) - set(out)
    if missing:
        raise DataError(
            f"no tolerance for reference model(s) {sorted(missing)}",
            where="ortdist/data/smoke.toml",
            fix=f"add [models.{sorted(missing)[0]}] with atol and rtol",
        )
    return out
