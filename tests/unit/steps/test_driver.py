"""The driver: the plan's steps in order with timings, the cache lock, stale temps and --fresh."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ortdist.errors import BuildError
from ortdist.log import log
from ortdist.pipeline import driver
from ortdist.pipeline.context import BuildContext
from ortdist.pipeline.layout import StepOutput
from ortdist.pipeline.state import BuildState

from .conftest import MakeEnv


@dataclasses.dataclass(frozen=True, kw_only=True)
class Marker(StepOutput):
    """A distinct output type per step, so the state keeps each one."""

    step: str
    seen: tuple[str, ...]


def recording_steps(plan_steps: tuple[str, ...], ran: list[str]) -> dict[str, driver.Step]:
    def make(name: str) -> driver.Step:
        kind = type(f"Out_{name}", (Marker,), {})

        def step(ctx: BuildContext, state: BuildState) -> StepOutput:
            ran.append(name)
            out: StepOutput = kind(step=name, seen=tuple(state.timings))  # what had finished before this step
            return out

        return step

    return {name: make(name) for name in plan_steps}


def test_every_planned_step_exists_and_the_table_orders_them(project: Path) -> None:
    """A recipe can only name steps the pipeline has, in the table's order."""
    from ortdist.project import plan_for

    order = list(driver.STEPS)
    for recipe in sorted((project / "recipes").glob("*.toml")):
        plan, _ = plan_for(recipe.stem, project)
        assert set(plan.steps) <= set(order), recipe.stem
        assert list(plan.steps) == sorted(plan.steps, key=order.index), recipe.stem


def test_the_plans_steps_run_in_order_each_timed(make_env: MakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = make_env("slim-linux")
    ran: list[str] = []
    state = driver.run_steps(env.ctx, env.state, recording_steps(env.plan.steps, ran))
    assert ran == list(env.plan.steps)
    assert ran[:4] == ["toolchain", "source", "models", "configure"] and ran[-1] == "publish"
    assert list(state.timings) == list(env.plan.steps)
    assert all(t >= 0 for t in state.timings.values())
    # Each step saw every earlier step finished and timed, and its output is in the state.
    outputs = list(state.outputs.values())
    assert [o.step for o in outputs] == ran
    assert [o.seen for o in outputs] == [tuple(ran[:i]) for i in range(len(ran))]
    err = capsys.readouterr().err
    assert "ortdist: == bundle ==" in err and "ortdist: bundle done in" in err


def test_steps_fold_into_groups_on_ci(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log, "ci_groups", True)
    env = make_env("cpu-linux", steps=("toolchain", "source"))
    driver.run_steps(env.ctx, env.state, recording_steps(env.plan.steps, []))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "::group::toolchain" and lines[1] == "::endgroup::"
    assert "::group::source" in lines


def test_an_unknown_step_is_refused_before_anything_runs(make_env: MakeEnv) -> None:
    """A plan naming a step the pipeline lacks is a bug: say so before a half-hour compile, not after."""
    env = make_env("cpu-linux", steps=("toolchain", "source", "compile"))
    ran: list[str] = []
    with pytest.raises(BuildError, match="step 'compile'"):
        driver.run_steps(env.ctx, env.state, recording_steps(("toolchain", "source"), ran))
    assert ran == []


def test_a_failing_step_stops_the_build(make_env: MakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    env = make_env("cpu-linux", steps=("toolchain", "source", "configure"))
    ran: list[str] = []
    steps = recording_steps(env.plan.steps, ran)

    def broken(ctx: BuildContext, state: BuildState) -> StepOutput:
        raise BuildError("no source")

    steps["source"] = broken
    with pytest.raises(BuildError, match="no source"):
        driver.run_steps(env.ctx, env.state, steps)
    assert ran == ["toolchain"]
    assert "source" not in env.state.timings
    assert "ortdist: source failed after" in capsys.readouterr().err


def test_build_sweeps_stale_temps_and_fresh_discards_the_work_tree(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux", steps=())
    ctx = dataclasses.replace(env.ctx, fresh=True)
    cache, layout = ctx.cache, ctx.layout
    stale = [
        cache.sources / ".onnxruntime-1.21.0.tmp-123",
        cache.sysroots / ".debian-trixie.old-9",
        layout.dist / ".wheel.tmp-7",
    ]
    kept = [cache.sources / "onnxruntime-1.21.0-abc", cache.sysroots / ".keep", layout.dist / "old.tmp-1"]
    for path in (*stale, *kept):
        path.mkdir(parents=True)
    part = cache.sources / ".onnx.tar.gz.x.part"
    part.write_text("half")
    (layout.build.host / "obj").mkdir(parents=True)
    (layout.build.host / "obj" / "a.o").write_text("o")
    state = driver.build(ctx)
    assert not any(p.exists() for p in (*stale, part))
    assert all(p.is_dir() for p in kept)
    assert not layout.recipe_work.exists()  # --fresh: the build tree and work tree go
    assert (cache.root / "build.lock").is_file()
    assert layout.logs.is_dir()
    assert set(state.timings) == {"total"}


def test_without_fresh_the_build_tree_is_kept(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux", steps=())
    (env.layout.build.host).mkdir(parents=True)
    (env.layout.build.host / "build.ninja").write_text("")
    driver.build(env.ctx)
    assert (env.layout.build.host / "build.ninja").is_file()
