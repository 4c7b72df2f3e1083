"""dist/<recipe>/: the artifacts, each appearing whole, and manifest.json written last."""

from __future__ import annotations

import time
from typing import Any

from ... import __version__
from ...manifest import publish
from ..context import BuildContext
from ..state import BuildState, Published
from ..step import StepDef


def manifest(ctx: BuildContext, state: BuildState) -> dict[str, Any]:
    """The manifest's header from the plan, then every step's own section."""
    plan = ctx.plan
    return {
        "schema": 1,
        "ortdist_version": __version__,
        "recipe": plan.recipe.name,
        "recipe_sha256": ctx.recipe_sha256,
        "description": plan.recipe.description,
        "ort_version": plan.version.version,
        "target": plan.target.triple,
        "execution_providers": [ep.name for ep in plan.providers],
        "provider_names": [ep.provider for ep in plan.providers],
        "build_type": plan.recipe.build_type,
        "python": list(plan.python),
        # The recipe's Pythons that --python left out: this dist/ is not the whole release.
        **({"python_not_built": list(plan.python_not_built)} if plan.python_not_built else {}),
        # Built for a machine this host has no interpreter of: checked from their ELF files only.
        **({"python_not_run": list(plan.python_not_run)} if plan.python_not_run else {}),
        # What the CUDA code was compiled for; the recipe's own list where --cuda-architectures replaced it.
        **(
            {
                "cuda_architectures": list(plan.recipe.cuda.architectures),
                **(
                    {"cuda_recipe_architectures": list(plan.cuda_recipe_architectures)}
                    if plan.cuda_recipe_architectures
                    else {}
                ),
            }
            if plan.builds_cuda
            else {}
        ),
        "toolchain": {"name": plan.toolchain.name, "digest": plan.toolchain.digest, "root": state.roots.build.name},
        "cmake_defines": plan.cmake_defines,
        "build_times_s": {**state.timings, "total": round(time.monotonic() - state.started, 1)},
        **({"reused_steps": dict(state.reused)} if state.reused else {}),
        **state.manifest_sections(),
    }


def run(ctx: BuildContext, state: BuildState) -> Published:
    entries = publish(ctx.layout.dist, state.artifacts(), manifest(ctx, state))
    return Published(entries=tuple(entries))


STEP = StepDef(run)
