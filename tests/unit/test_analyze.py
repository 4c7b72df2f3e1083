"""ortdist analyze: operators, opsets and types from ONNX and ORT-format models, config round trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ortdist.errors import DataError, ModelError
from ortdist.reduce.analyze import analyze, parse_config, parse_type_tracking, type_tracking
from ortdist.reduce.ortformat import read_ort_model
from ortdist.registry import load_data
from ortdist.smoke.models import BUILDERS
from reduce_helpers import config_lines, to_ort


def write_reference(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(BUILDERS[name]().model)
    return path


def test_onnx_model_ops_use_the_imported_opset(tmp_path: Path) -> None:
    config = analyze([write_reference(tmp_path, "cnn")], typed=False)
    assert config_lines(config.render()) == [
        "ai.onnx;17;BatchNormalization,Conv,Flatten,Gemm,GlobalAveragePool,MaxPool,Relu"
    ]


def test_subgraph_operators_are_included(tmp_path: Path) -> None:
    config = analyze([write_reference(tmp_path, "control_flow")], typed=False)
    ops = {op for _, op in config.op_names()}
    import onnx

    top_level = {n.op_type for n in onnx.load_from_string(BUILDERS["control_flow"]().model).graph.node}
    assert {"If", "Loop"} <= top_level
    assert ops > top_level, "the If/Loop bodies' operators must be in the config"


def test_typed_onnx_analysis_records_the_tracked_inputs(tmp_path: Path) -> None:
    config = analyze([write_reference(tmp_path, "cnn")], typed=True)
    (line,) = config_lines(config.render())
    assert 'Conv{"inputs": {"0": ["float"]}}' in line
    assert ",Flatten," in line  # not a type-tracked operator: no JSON


def test_ort_format_reflects_the_optimizers(tmp_path: Path) -> None:
    onnx_model = write_reference(tmp_path, "cnn")
    optimized = analyze([to_ort(tmp_path, onnx_model, "extended")], typed=True)
    plain = analyze([to_ort(tmp_path, onnx_model, "disabled")], typed=True)
    optimized_ops, plain_ops = optimized.op_names(), plain.op_names()
    # Conv+BatchNormalization+Relu is fused into com.microsoft FusedConv at the extended level.
    assert ("com.microsoft", "FusedConv") in optimized_ops
    assert ("ai.onnx", "BatchNormalization") not in optimized_ops
    assert ("ai.onnx", "BatchNormalization") in plain_ops
    assert ("com.microsoft", "FusedConv") not in plain_ops
    # ORT-format models carry each kernel's since_version, not the model opset.
    assert 11 in optimized.ops["ai.onnx"]  # Conv-11
    assert optimized.types["ai.onnx:Conv"].inputs == {0: {"float"}}


def test_ort_reader_sees_the_graph_and_types(tmp_path: Path) -> None:
    model = read_ort_model(to_ort(tmp_path, write_reference(tmp_path, "qdq_cnn")).read_bytes(), "qdq")
    assert model.opsets["ai.onnx"] == 21
    ops = {n.op_type for n in model.graph.nodes}
    assert "QLinearConv" in ops  # the QDQ node unit became a QLinearConv
    qconv = next(n for n in model.graph.nodes if n.op_type == "QLinearConv")
    assert model.graph.value_types[qconv.inputs[0]] in ("uint8_t", "int8_t")


def test_merging_models_keeps_every_type(tmp_path: Path) -> None:
    cnn = to_ort(tmp_path, write_reference(tmp_path, "cnn"))
    qdq = to_ort(tmp_path, write_reference(tmp_path, "qdq_cnn"))
    fp16 = to_ort(tmp_path, write_reference(tmp_path, "fp16_mlp"))
    merged = analyze([cnn, qdq, fp16], typed=True)
    singles = [analyze([m], typed=True) for m in (cnn, qdq, fp16)]
    for single in singles:
        assert single.op_names() <= merged.op_names()
        for key, use in single.types.items():
            for index, types in use.inputs.items():
                assert types <= merged.types[key].inputs[index]
    # Round trip through the file format: nothing lost, nothing added.
    reparsed = parse_config(merged.render(), "merged.config")
    assert config_lines(reparsed.render()) == config_lines(merged.render())


def test_the_float16_operators_of_a_model_are_named(tmp_path: Path) -> None:
    """What a build without MLAS's fp16 kernels refuses: the ops its config records float16 for."""
    cnn = analyze([to_ort(tmp_path, write_reference(tmp_path, "cnn"))], typed=True)
    assert cnn.ops_using("MLFloat16") == [] and "ai.onnx:Conv" in cnn.ops_using("float")
    fp16 = analyze([to_ort(tmp_path, write_reference(tmp_path, "fp16_mlp"))], typed=True)
    assert fp16.ops_using("MLFloat16") and all(key.count(":") == 1 for key in fp16.ops_using("MLFloat16"))


def test_configs_merge_with_models(tmp_path: Path) -> None:
    extra = tmp_path / "extra.config"
    extra.write_text('ai.onnx;13;Cast{"inputs": {"0": ["float"]}, "outputs": {"0": ["int64_t"]}},Shape\n')
    merged = analyze([to_ort(tmp_path, write_reference(tmp_path, "cnn")), extra], typed=True)
    assert ("ai.onnx", "Shape") in merged.op_names()
    assert merged.types["ai.onnx:Cast"].outputs == {0: {"int64_t"}}
    text = merged.render()
    assert 'Cast{"inputs": {"0": ["float"]}, "outputs": {"0": ["int64_t"]}}' in text


def test_untyped_config_is_refused_in_a_typed_merge(tmp_path: Path) -> None:
    extra = tmp_path / "extra.config"
    extra.write_text("ai.onnx;13;Shape\n")
    with pytest.raises(ModelError, match="no type information"):
        analyze([extra], typed=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ai.onnx;Conv\n", "expected 'domain;opset"),
        ("ai.onnx;x;Conv\n", "is not a number"),
        ('ai.onnx;13;Conv{"inputs": {"0": ["float"]}\n', "unbalanced"),
        ("ai.onnx;13;Conv{nope}\n", "invalid type information"),
        ("ai.onnx;13;Co nv\n", "not an operator name"),
    ],
)
def test_bad_config_lines_say_where(text: str, message: str) -> None:
    with pytest.raises(ModelError, match=message) as info:
        parse_config(text, "ops.config")
    assert info.value.where == "ops.config:1"


def test_bad_model_files_are_refused(tmp_path: Path) -> None:
    truncated = tmp_path / "broken.ort"
    good = to_ort(tmp_path, write_reference(tmp_path, "cnn")).read_bytes()
    truncated.write_bytes(good[: len(good) // 3])
    with pytest.raises(ModelError):
        analyze([truncated], typed=True)
    not_ort = tmp_path / "text.ort"
    not_ort.write_bytes(b"hello world, not a flatbuffer")
    with pytest.raises(ModelError, match="ORTM"):
        analyze([not_ort], typed=False)
    other = tmp_path / "model.pb"
    other.write_bytes(b"x")
    with pytest.raises(ModelError, match="unknown file type"):
        analyze([other], typed=False)
    with pytest.raises(ModelError, match="no such file"):
        analyze([tmp_path / "missing.onnx"], typed=False)


def test_type_tracking_table_matches_ort_semantics() -> None:
    table = type_tracking()
    assert table["ai.onnx:Cast"].inputs == (0,) and table["ai.onnx:Cast"].outputs == (0,)
    assert table["ai.onnx:Where"].inputs == (1,)
    assert table["ai.onnx:QuantizeLinear"].outputs == (0,) and not table["ai.onnx:QuantizeLinear"].inputs
    assert table["ai.onnx:OneHot"].triple
    assert table["com.microsoft:QLinearConv"].inputs == (0,)
    assert "ai.onnx:Flatten" not in table


def test_onehot_records_type_triples(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("OneHot", ["indices", "depth", "values"], ["y"])],
        "onehot",
        [
            helper.make_tensor_value_info("indices", TensorProto.INT64, [3]),
            helper.make_tensor_value_info("depth", TensorProto.INT32, []),
            helper.make_tensor_value_info("values", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, None])],
    )
    path = tmp_path / "onehot.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]).SerializeToString())
    (line,) = config_lines(analyze([path], typed=True).render())
    assert json.loads(line.split("OneHot", 1)[1]) == {"custom": [["int64_t", "float", "int32_t"]]}


@pytest.mark.parametrize(
    ("mutate", "key", "message"),
    [
        (lambda d: d["track"]["ai.onnx:Cast"].update(input=[0]), 'track."ai.onnx:Cast".input', "did you mean"),
        (lambda d: d["track"]["ai.onnx:Cast"].update(inputs=["0"]), 'track."ai.onnx:Cast".inputs[0]', "whole number"),
        (lambda d: d["track"].update({"ai.onnx:Abs": {"inputs": [1]}}), 'track."ai.onnx:Abs"', "listed twice"),
        (lambda d: d["track"].update({"Abs": {"inputs": [1]}}), "track.Abs", "is not 'domain:op'"),
        (lambda d: d["track"].update({"ai.onnx:X": {}}), 'track."ai.onnx:X"', "must track an input"),
    ],
)
def test_bad_type_tracking_is_refused(mutate: Any, key: str, message: str) -> None:
    data = copy.deepcopy(load_data("type_tracking.toml"))
    mutate(data)
    with pytest.raises(DataError) as info:
        parse_type_tracking(data)
    assert message in str(info.value)
    assert info.value.where == f"ortdist/data/type_tracking.toml key '{key}'"


def test_the_ort_format_conversion_is_reproducible(tmp_path: Path) -> None:
    """The published .ort files are artifacts: the same model converts to the same bytes every time
    (ORT orders by heap address, so this fails with address randomisation on)."""
    from ortdist.reduce.convert import convert_on_host

    onnx_model = write_reference(tmp_path, "cnn")
    first, second = (
        convert_on_host([onnx_model], tmp_path / run, level="extended", target_arch="x86_64")[0].read_bytes()
        for run in ("one", "two")
    )
    assert first == second


def test_the_recipes_reference_model_names_are_the_smoke_catalogues() -> None:
    from ortdist.recipe.model import REFERENCE_MODELS
    from ortdist.smoke.models import BUILDERS

    assert tuple(BUILDERS) == REFERENCE_MODELS
