"""The models step: the recipe's models converted at its optimization level (the converter is
stubbed with the tests' own onnxruntime), analysed into ops.config, which is published too."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ortdist.pipeline.steps import models
from ortdist.reduce import convert as reduce_convert

from .conftest import MakeEnv


class FakeConverter:
    """Converts in-process with PyPI's onnxruntime (as the clean root would) and records its arguments."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, Any]] = []
        monkeypatch.setattr(reduce_convert, "convert_to_ort_format", self)

    def __call__(self, onnx_models: Sequence[Path], dest: Path, **kwargs: Any) -> list[Path]:
        import onnxruntime as ort

        self.calls.append({"models": [m.name for m in onnx_models], "dest": dest, **kwargs})
        dest.mkdir(parents=True)
        out = []
        for model in onnx_models:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            options.optimized_model_filepath = str(dest / f"{model.stem}.ort")
            options.add_session_config_entry("session.save_model_format", "ORT")
            ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            out.append(dest / f"{model.stem}.ort")
        return out


def test_reference_models_are_converted_then_analysed(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env("slim-linux")
    converter = FakeConverter(monkeypatch)
    place = env.layout.models.host
    place.mkdir(parents=True)
    (place / "stale.config").write_text("from an earlier run")
    out = models.run(env.ctx, env.state)
    (call,) = converter.calls
    assert call["models"] == ["cnn.onnx"] and call["dest"] == place / "ort"
    assert (call["level"], call["target_arch"], call["ort_version"]) == ("extended", "x86_64", "1.21.0")
    assert call["toolchain"] is env.toolchain and call["cache"] == env.ctx.cache
    assert not (place / "stale.config").exists()
    assert out.config == place / "ops.config" and out.types is True
    assert "ai.onnx:Conv" in out.operators and list(out.operators) == sorted(out.operators)
    text = out.config.read_text()
    assert "ai.onnx;" in text and "Conv{" in text  # typed: per-operator type info
    published = env.layout.out.host / "slim-linux.ops.config"
    assert published.read_text() == text
    assert str(place) not in text  # names only: the published file is machine-independent
    kinds = [(a.kind, a.source.name, a.extra) for a in out.artifacts]
    assert kinds == [
        ("ort-model", "cnn.ort", {"optimization_level": "extended"}),
        ("ops-config", "slim-linux.ops.config", {"types": True}),
    ]
    assert out.manifest()["reduced_ops"]["config"] == "slim-linux.ops.config"


def test_a_cross_targets_models_are_converted_for_its_cpu(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env("slim-linux-aarch64")
    converter = FakeConverter(monkeypatch)
    models.run(env.ctx, env.state)
    assert converter.calls[0]["target_arch"] == "aarch64"


def test_a_config_alone_needs_no_conversion(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project: Path
) -> None:
    recipe = tmp_path / "recipes" / "cut.toml"
    recipe.parent.mkdir()
    (recipe.parent / "mine.config").write_text("ai.onnx;13;Add,Relu\n")
    text = (project / "recipes" / "slim-linux.toml").read_text().replace('name = "slim-linux"', 'name = "cut"')
    text = text.replace('models = ["reference:cnn"]', 'config = "mine.config"').replace("types = true", "types = false")
    text = text.replace('minimal_build = "plain"', 'minimal_build = "off"')
    recipe.write_text(text.replace("enabled = true", "enabled = false"))  # a reduced wheel needs a model
    env = make_env(str(recipe))
    converter = FakeConverter(monkeypatch)
    out = models.run(env.ctx, env.state)
    assert converter.calls == []
    assert out.operators == ("ai.onnx:Add", "ai.onnx:Relu")
    assert [a.kind for a in out.artifacts] == ["ops-config"]
    assert "mine.config" in out.config.read_text() and str(tmp_path) not in out.config.read_text()


@pytest.mark.parametrize(
    ("model", "key", "found"),
    [
        ("qdq_cnn", "int8_kernels", "operators ai.onnx:DequantizeLinear"),
        ("fp16_mlp", "fp16_and_nbit_kernels", "operators ai.onnx:"),
    ],
)
def test_a_cut_without_a_kernel_family_refuses_models_that_need_it(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, model: str, key: str, found: str
) -> None:
    """slim-c-linux-aarch64 leaves out MLAS's 8-bit kernels (0014) and the fp16 ones (0008): a model
    with int8/uint8 or float16 values is refused before anything compiles, naming the key."""
    import dataclasses

    from ortdist.errors import BuildError

    env = make_env("slim-c-linux-aarch64")
    recipe = env.plan.recipe
    recipe = dataclasses.replace(recipe, reduce=dataclasses.replace(recipe.reduce, models=(f"reference:{model}",)))
    ctx = dataclasses.replace(env.ctx, plan=dataclasses.replace(env.plan, recipe=recipe))
    FakeConverter(monkeypatch)
    with pytest.raises(BuildError, match=f"the models use {found}.*but {key} = false") as info:
        models.run(ctx, env.state)
    assert key in (info.value.where or "")
    assert not (env.layout.out.host / "slim-c-linux-aarch64.ops.config").exists()  # nothing published
    # The same model in a cut that keeps the kernels is analysed as usual.
    kept = dataclasses.replace(recipe, features=dataclasses.replace(recipe.features, **{key: True}))
    out = models.run(dataclasses.replace(ctx, plan=dataclasses.replace(env.plan, recipe=kept)), env.state)
    assert out.config.is_file()


def test_a_value_type_no_tracked_operator_records_is_still_seen(tmp_path: Path) -> None:
    """Type reduction records types for some operators only (GlobalAveragePool and FusedConv go
    untyped): the cut's refusal also looks at every value's element type."""
    from ortdist.reduce.analyze import OpConfig, analyze
    from ortdist.smoke.models import BUILDERS

    path = tmp_path / "cnn.onnx"
    path.write_bytes(BUILDERS["cnn"]().model)
    assert analyze([path], typed=True).element_types == {"float"}
    assert analyze([path], typed=False).element_types == set()  # untyped analysis reads no types
    merged = OpConfig(element_types={"float"})
    merged.merge(OpConfig(element_types={"uint8_t"}))
    assert merged.element_types == {"float", "uint8_t"}
