"""Real-size models for the latency benchmark, generated like the reference models (seeded random
weights, onnx helpers, nothing downloaded): a ResNet-50-class CNN and a BERT-base-class encoder,
and their int8 QDQ variants made by ORT's own ``quantize_static``, as a user would make them.

The reference models run in microseconds, so their latency ratios measure per-call overhead. These
take milliseconds to hundreds of milliseconds on one core: the kernels (convolutions, GEMMs, the
attention and layer-norm fusions, int8 GEMMs) dominate.

The sizes are parameters, so the unit tests build the same graphs tiny. Full size:

- resnet50: the torchvision ResNet-50 topology at batch 1, 224x224 (bottlenecks 3-4-6-3). The batch
  norms are folded into the convolutions' biases, as ORT does when it loads an exported model.
  Weights are He-scaled, and each block's last convolution is scaled down (as zero-init-residual
  training does), so 50 layers of random weights keep their activations finite. 25.5 M parameters.
- bert_base: 12 layers, hidden 768, 12 heads, FFN 3072, sequence 128, batch 1, vocabulary 30522,
  with the MatMul/Softmax/LayerNormalization/Erf-GELU pattern ORT fuses into Attention and Gelu.
  109 M parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17
IR_VERSION = 8


@dataclass(frozen=True)
class RealModel:
    name: str
    summary: str
    model: Any  # onnx.ModelProto
    inputs: dict[str, np.ndarray[Any, Any]]


class _Graph:
    """Nodes and initializers, with fresh names."""

    def __init__(self, seed: int) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, prefix: str, array: np.ndarray[Any, Any]) -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def weights(self, shape: tuple[int, ...], fan_in: int, gain: float = 1.0) -> np.ndarray[Any, Any]:
        return (self.rng.standard_normal(shape) * gain * math.sqrt(2.0 / fan_in)).astype(np.float32)


def _model(g: _Graph, name: str, inputs: list[Any], outputs: list[Any]) -> Any:
    from onnx import helper

    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.initializers)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="ortdist-bench"
    )


def resnet(blocks: tuple[int, ...] = (3, 4, 6, 3), width: int = 64, image: int = 224, classes: int = 1000) -> RealModel:
    """ResNet-v1.5 bottleneck network (the stride on the 3x3), batch norms folded into biases."""
    from onnx import TensorProto, helper

    g = _Graph(seed=50)

    def conv(x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True, gain: float = 1.0) -> str:
        w = g.const("w", g.weights((cout, cin, k, k), cin * k * k, gain))
        b = g.const("b", np.zeros(cout, np.float32))
        pad = k // 2
        y = g.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        return g.op("Relu", [y]) if relu else y

    x = conv("image", 3, width, 7, 2)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, count in enumerate(blocks):
        mid = width * 2**stage
        cout = mid * 4
        for i in range(count):
            stride = 2 if i == 0 and stage > 0 else 1
            y = conv(x, cin, mid, 1)
            y = conv(y, mid, mid, 3, stride)
            y = conv(y, mid, cout, 1, relu=False, gain=0.2)
            shortcut = conv(x, cin, cout, 1, stride, relu=False) if i == 0 else x
            x = g.op("Relu", [g.op("Add", [y, shortcut])])
            cin = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    w = g.const("fc_w", g.weights((cin, classes), cin, 0.5))
    b = g.const("fc_b", np.zeros(classes, np.float32))
    logits = g.op("Add", [g.op("MatMul", [x, w]), b])
    model = _model(
        g,
        "resnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, image, image])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, classes])],
    )
    image_data = np.random.default_rng(1).standard_normal((1, 3, image, image)).astype(np.float32)
    summary = f"ResNet bottleneck {'-'.join(map(str, blocks))}, width {width}, {image}x{image}, batch 1"
    return RealModel("resnet50", summary, model, {"image": image_data})


def bert(
    layers: int = 12, hidden: int = 768, heads: int = 12, ffn: int = 3072, seq: int = 128, vocab: int = 30522
) -> RealModel:
    """A BERT encoder (post-LayerNorm) from token ids, with the attention written out as exporters do."""
    from onnx import TensorProto, helper

    g = _Graph(seed=110)
    head = hidden // heads

    def layer_norm(x: str) -> str:
        scale = g.const("ln_scale", np.ones(hidden, np.float32))
        bias = g.const("ln_bias", np.zeros(hidden, np.float32))
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-12)

    def dense(x: str, cin: int, cout: int) -> str:
        w = g.const("w", g.weights((cin, cout), cin, 0.5))
        b = g.const("b", np.zeros(cout, np.float32))
        return g.op("Add", [g.op("MatMul", [x, w]), b])

    def split_heads(x: str) -> str:
        shape = g.const("shape", np.array([1, seq, heads, head], np.int64))
        return g.op("Transpose", [g.op("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    table = g.const("word_embeddings", (g.rng.standard_normal((vocab, hidden)) * 0.02).astype(np.float32))
    positions = g.const("position_embeddings", (g.rng.standard_normal((1, seq, hidden)) * 0.02).astype(np.float32))
    x = layer_norm(g.op("Add", [g.op("Gather", [table, "input_ids"], axis=0), positions]))
    for _ in range(layers):
        q, k, v = (split_heads(dense(x, hidden, hidden)) for _ in range(3))
        scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = g.op("Div", [scores, g.const("sqrt_d", np.array(math.sqrt(head), np.float32))])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        merged = g.op(
            "Reshape",
            [g.op("Transpose", [context], perm=[0, 2, 1, 3]), g.const("shape", np.array([1, seq, hidden], np.int64))],
        )
        x = layer_norm(g.op("Add", [dense(merged, hidden, hidden), x]))
        up = dense(x, hidden, ffn)
        erf = g.op("Erf", [g.op("Div", [up, g.const("sqrt2", np.array(math.sqrt(2.0), np.float32))])])
        gelu = g.op(
            "Mul",
            [g.op("Mul", [up, g.op("Add", [erf, g.const("one", np.array(1.0, np.float32))])]),
             g.const("half", np.array(0.5, np.float32))],
        )  # fmt: skip
        x = layer_norm(g.op("Add", [dense(gelu, ffn, hidden), x]))
    model = _model(
        g,
        "bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, hidden])],
    )
    ids = np.random.default_rng(2).integers(0, vocab, (1, seq), dtype=np.int64)
    summary = f"BERT encoder, {layers} layers, hidden {hidden}, {heads} heads, FFN {ffn}, sequence {seq}, batch 1"
    return RealModel("bert_base", summary, model, {"input_ids": ids})


def quantized(float_model: RealModel, workdir: Path, samples: int = 4) -> RealModel:
    """The int8 QDQ variant by onnxruntime.quantization.quantize_static (MinMax calibration on
    ``samples`` inputs like the model's own; uint8 activations, int8 weights, per tensor)."""
    try:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    except ImportError as exc:  # the bench session installs it; a bare `ortdist bench` may not have it
        from ..errors import BuildError

        raise BuildError(
            "the QDQ models are made with onnxruntime.quantization, which is not installed here",
            fix="run the benchmark as `nox -s bench` (it installs PyPI's onnxruntime 1.21.0)",
        ) from exc
    import onnx

    rng = np.random.default_rng(3)

    def sample(name: str, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        drawn: np.ndarray[Any, Any]
        if array.dtype == np.int64:
            drawn = rng.integers(0, int(array.max()) + 1, array.shape, dtype=np.int64)
        else:
            drawn = rng.standard_normal(array.shape).astype(array.dtype)
        return drawn

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = [{k: sample(k, v) for k, v in float_model.inputs.items()} for _ in range(samples)]

        def get_next(self) -> dict[str, np.ndarray[Any, Any]] | None:
            return self.left.pop() if self.left else None

    workdir.mkdir(parents=True, exist_ok=True)
    source, target = workdir / f"{float_model.name}.onnx", workdir / f"{float_model.name}_qdq.onnx"
    onnx.save(float_model.model, str(source))
    quantize_static(
        str(source),
        str(target),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=False,
    )
    return RealModel(
        f"{float_model.name}_qdq",
        f"{float_model.summary}; int8 QDQ (quantize_static, MinMax, {samples} samples)",
        onnx.load(str(target)),
        float_model.inputs,
    )


def half(float_model: RealModel) -> RealModel:
    """The float16 variant, as a GPU deployment converts it: every float32 weight, graph input and
    output becomes float16 (shape and index tensors stay int64), so every kernel runs in half
    precision and no Cast is left in the graph."""
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(float_model.model)
    graph = model.graph
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name)
            )
    for value in (*graph.input, *graph.output, *graph.value_info):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16
    inputs = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in float_model.inputs.items()}
    return RealModel(f"{float_model.name}_fp16", f"{float_model.summary}; float16", model, inputs)


BUILDERS: dict[str, Callable[[], RealModel]] = {"resnet50": resnet, "bert_base": bert}


def on_disk(base: Path) -> dict[str, tuple[Path, Path, str]]:
    """Every model and its QDQ variant under ``base`` (made once per generator version):
    name -> (model.onnx, inputs.npz, summary)."""
    import onnx

    from ..fsutil import remove_tree

    made: dict[str, tuple[Path, Path, str]] = {}
    for name, builder in BUILDERS.items():
        names = (name, f"{name}_qdq")
        if not all((base / n / "model.onnx").is_file() for n in names):
            float_model = builder()
            for variant in (float_model, quantized(float_model, base / "quantize")):
                directory = base / variant.name
                directory.mkdir(parents=True, exist_ok=True)
                with (directory / "inputs.npz").open("wb") as fh:
                    arrays: dict[str, Any] = dict(variant.inputs)
                    np.savez(fh, **arrays)
                (directory / "summary.txt").write_text(variant.summary, encoding="utf-8")
                onnx.save(variant.model, str(directory / "model.onnx"))
            remove_tree(base / "quantize")
        for n in names:
            made[n] = (base / n / "model.onnx", base / n / "inputs.npz", (base / n / "summary.txt").read_text())
    return made
