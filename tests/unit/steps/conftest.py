from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ortdist.paths import Cache
from ortdist.pipeline.context import BuildContext
from ortdist.pipeline.layout import Layout
from ortdist.pipeline.runner import RecordingRunner
from ortdist.pipeline.state import BuildState
from ortdist.project import plan_for

from .helpers import FakeToolchain, StepEnv

MakeEnv = Callable[..., StepEnv]


@pytest.fixture
def make_env(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MakeEnv:
    """``make_env("cpu-linux", **plan_changes)``: a context for that real recipe over a fake
    toolchain, a cache and dist under tmp_path, and a RecordingRunner; the state starts empty."""
    for name in ("ORTDIST_COMPILER_CACHE_DIR", "ORTDIST_COMPILER_CACHE", "CCACHE_MAXSIZE", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)

    def make(recipe: str, cache_name: str | None = None, **plan_changes: Any) -> StepEnv:
        plan, path = plan_for(recipe, project, cache_name)
        if plan_changes:
            plan = dataclasses.replace(plan, **plan_changes)
        cache = Cache(tmp_path / "cache")
        runner = RecordingRunner()
        toolchain = FakeToolchain(plan.toolchain, tmp_path / "roots")
        ctx = BuildContext(
            plan=plan,
            toolchain=toolchain,
            cache=cache,
            layout=Layout.for_plan(plan, cache, tmp_path / "dist" / plan.recipe.name),
            recipe_path=path,
            jobs=2,
            runner=runner,
        )
        return StepEnv(ctx, BuildState(), runner, toolchain)

    return make
