"""Reduced builds: the recipe's models converted to ORT format at the runtime's optimization
level, and the operator config derived from them (plus the recipe's own config)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ...errors import BuildError
from ...fsutil import remove_tree
from ...manifest import Artifact
from ...recipe.model import KERNEL_CUTS
from ...reduce import analyze, convert
from ...smoke.models import BUILDERS
from ..context import BuildContext
from ..state import BuildState, Models
from ..step import StepDef


def run(ctx: BuildContext, state: BuildState) -> Models:
    recipe, place = ctx.plan.recipe, ctx.layout.models
    remove_tree(place.host)
    place.host.mkdir(parents=True)
    inputs: list[Path] = []
    artifacts: list[Artifact] = []
    if recipe.reduce.models:
        onnx_models = convert.gather_models(
            recipe.reduce.models, ctx.recipe_path.parent, place.host / "onnx", lambda name: BUILDERS[name]().model
        )
        with ctx.open_log("models") as log:
            converted = convert.convert_to_ort_format(
                onnx_models,
                place.host / "ort",
                level=recipe.reduce.optimization_level,
                target_arch=ctx.plan.target.arch,
                ort_version=ctx.plan.version.version,
                cache=ctx.cache,
                toolchain=ctx.toolchain,
                log=log,
            )
        inputs += converted
        artifacts += [
            Artifact(path, "ort-model", extra={"optimization_level": recipe.reduce.optimization_level})
            for path in converted
        ]
    if recipe.reduce.config:
        inputs.append((ctx.recipe_path.parent / recipe.reduce.config).resolve())
    config = analyze.analyze(inputs, typed=recipe.reduce.types)
    config.sources = [p.name for p in inputs]  # names only: the published file is machine-independent
    for cut in KERNEL_CUTS:
        used = sorted({op for t in cut.types for op in config.ops_using(t)})
        values = sorted(t for t in cut.types if t in config.element_types)
        if (used or values) and not getattr(recipe.features, cut.key):
            found = f"operators {', '.join(used)}" if used else f"{', '.join(values)} values"
            raise BuildError(
                f"the models use {found}, but {cut.key} = false leaves {cut.kernels} out",
                where=f"recipe {recipe.name} [features] key '{cut.key}'",
                fix=f"keep the kernels (drop the key), or reduce for models without {', '.join(cut.types)} values",
            )
    op_config = place.host / "ops.config"
    op_config.write_text(config.render(), encoding="utf-8")
    published = ctx.layout.out.host / f"{recipe.name}.ops.config"
    published.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(op_config, published)
    artifacts.append(Artifact(published, "ops-config", extra={"types": recipe.reduce.types}))
    return Models(
        config=op_config,
        operators=tuple(sorted(f"{d}:{op}" for d, op in config.op_names())),
        types=recipe.reduce.types,
        artifacts=tuple(artifacts),
    )


STEP = StepDef(run)
