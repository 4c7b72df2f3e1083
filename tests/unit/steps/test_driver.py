"""The driver: the plan's steps in order with timings, the cache lock, stale temps and --fresh;
a build interrupted at a step resumes there."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
import threading
from pathlib import Path
from typing import TextIO

import pytest

from ortdist import sources
from ortdist.errors import BuildError
from ortdist.log import log
from ortdist.paths import Cache
from ortdist.pipeline import driver
from ortdist.pipeline.context import BuildContext
from ortdist.pipeline.layout import StepOutput
from ortdist.pipeline.runner import Command, RecordingRunner, Result
from ortdist.pipeline.state import BuildState, Compiled, Configured
from ortdist.pipeline.step import Run, StepDef

from .conftest import MakeEnv
from .helpers import FakeToolchain, host_of
from .test_source import FakeSources


@dataclasses.dataclass(frozen=True, kw_only=True)
class Marker(StepOutput):
    """A distinct output type per step, so the state keeps each one."""

    step: str
    seen: tuple[str, ...]


def recording_steps(plan_steps: tuple[str, ...], ran: list[str]) -> dict[str, StepDef]:
    """The real steps' descriptors, each running a recorder instead of its work."""

    def make(name: str) -> Run:
        kind = type(f"Out_{name}", (Marker,), {})

        def step(ctx: BuildContext, state: BuildState) -> StepOutput:
            ran.append(name)
            out: StepOutput = kind(step=name, seen=tuple(state.timings))  # what had finished before this step
            return out

        return step

    # a recorder depends on what ran before it: no step's own account of its inputs
    return {name: dataclasses.replace(driver.STEPS[name], run=make(name), inputs=None) for name in plan_steps}


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
    assert all(isinstance(t, float) and t < 5 for t in state.timings.values())  # each step timed on its own
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

    steps["source"] = StepDef(broken)
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


# --- one build per cache at a time -------------------------------------------------------------------
def test_a_second_lock_on_the_same_cache_waits_for_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README: one build runs at a time; a second ortdist waits instead of halving both."""
    cache = Cache(tmp_path / "cache")
    entered = threading.Event()

    def second() -> None:
        with driver.build_lock(cache, "the second build"):
            entered.set()

    with driver.build_lock(cache, "the first build"):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not entered.wait(0.5), "the second lock was taken while the first was held"
    assert entered.wait(10)
    waiter.join(10)
    err = capsys.readouterr().err
    # The issue: a command that must wait for the lock says for what, and for whom.
    waiting = f"waiting for the cache lock ({cache.root}) held by pid {os.getpid()} (the first build since "
    assert re.search(re.escape(waiting) + r"\d\d:\d\d: .*\); the second build starts then\n", err), err
    assert (cache.root / "build.lock").read_text() == "", "the holder's record is cleared on release"


def test_the_lock_file_names_its_holder_while_held(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    with driver.build_lock(cache, "building cpu-linux"):
        text = driver.lock_holder(cache.root / "build.lock")
        assert text.startswith(f"pid {os.getpid()} (building cpu-linux since ")
        assert shlex.join(sys.argv) in text
    assert driver.lock_holder(cache.root / "build.lock") == "another ortdist"


def test_a_lock_on_another_cache_does_not_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with driver.build_lock(Cache(tmp_path / "one"), "a build"):
        entered = threading.Event()

        def other() -> None:
            with driver.build_lock(Cache(tmp_path / "two"), "another build"):
                entered.set()

        thread = threading.Thread(target=other)
        thread.start()
        assert entered.wait(10)
        thread.join(10)
    assert "another build holds the cache lock" not in capsys.readouterr().err


@dataclasses.dataclass
class GatedToolchain(FakeToolchain):
    """A build root that takes until ``gate`` opens; ``events`` records when each build got there."""

    name: str = ""
    events: list[str] = dataclasses.field(default_factory=list)
    gate: threading.Event = dataclasses.field(default_factory=threading.Event)
    started: threading.Event = dataclasses.field(default_factory=threading.Event)

    def ensure_build_root(self, cache: Cache, log: TextIO) -> Path:
        self.events.append(f"{self.name} starts")
        self.started.set()
        assert self.gate.wait(10)
        self.events.append(f"{self.name} ends")
        return super().ensure_build_root(cache, log)


def test_two_builds_on_one_cache_run_one_after_the_other(make_env: MakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole build, steps included, runs under the lock: the second build's first step waits
    until the first build is done."""
    events: list[str] = []
    builds = []
    for recipe in ("cpu-linux", "xnnpack-linux"):
        env = make_env(recipe, steps=("toolchain",))
        gated = GatedToolchain(env.plan.toolchain, env.toolchain.base, name=recipe, events=events)
        builds.append((dataclasses.replace(env.ctx, toolchain=gated), gated))
    (first_ctx, first), (second_ctx, second) = builds
    assert first_ctx.cache == second_ctx.cache
    second.gate.set()  # the second build's root is instant: only the lock can hold it back
    threads = [threading.Thread(target=driver.build, args=(ctx,)) for ctx, _ in builds]
    threads[0].start()
    assert first.started.wait(10)
    threads[1].start()
    assert not second.started.wait(0.5), f"the second build started while the first ran: {events}"
    first.gate.set()
    for thread in threads:
        thread.join(10)
    assert events == ["cpu-linux starts", "cpu-linux ends", "xnnpack-linux starts", "xnnpack-linux ends"]
    assert "(building cpu-linux since " in (err := capsys.readouterr().err)
    assert "; building xnnpack-linux starts then" in err


# --- resuming an interrupted build ------------------------------------------------------------------
def test_a_build_that_failed_at_a_step_resumes_at_that_step(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """README: rerunning an interrupted build resumes it. The compile fails half-way; the rerun
    (a new process: new runner, same cache) reuses the patched source and the configured tree,
    runs neither the unpack, the patches nor CMake's configure again, and compiles on the same
    tree, keeping what the first run compiled."""
    env = make_env("cpu-linux", python=("3.13",), steps=("toolchain", "source", "configure", "build"))
    fake = FakeSources(monkeypatch, env.ctx.cache.downloads)

    def unpack(archive: Path, dest: Path) -> None:
        fake.unpack(archive, dest)
        (dest / "VERSION_NUMBER").write_text("1.21.0\n")  # the source's timestamp for SOURCE_DATE_EPOCH

    monkeypatch.setattr(sources, "unpack", unpack)

    def configure(cmd: Command) -> None:
        (host_of(cmd, "/ortdist/build") / "build.ninja").write_text("rule cc\n")

    def compile_half(cmd: Command) -> Result:
        obj = host_of(cmd, "/ortdist/build") / "obj"
        obj.mkdir()
        (obj / "a.o").write_text("compiled in the first run")
        return Result(1, "[1/2] Building CXX object a.o\nFAILED: obj/b.o\nb.cc:1: error: interrupted\n")

    env.runner.on("cmake -G Ninja", configure)
    env.runner.on("cmake --build", compile_half)
    with pytest.raises(BuildError, match="the build failed"):
        driver.build(env.ctx)
    # The ORT tree and each dependency's; one series.
    assert [len(fake.unpacked), len(fake.patched)] == [1 + len(env.plan.deps), 1]
    assert len(env.matching("cmake -G Ninja")) == 1

    fake.unpacked.clear()
    fake.patched.clear()
    rerun = RecordingRunner()

    def compile_rest(cmd: Command) -> Result:
        obj = host_of(cmd, "/ortdist/build") / "obj"
        assert (obj / "a.o").read_text() == "compiled in the first run"
        (obj / "b.o").write_text("compiled on resume")
        return Result(0, "[2/2] Building CXX object b.o\n")

    rerun.on("cmake --build", compile_rest)
    state = driver.build(
        dataclasses.replace(env.ctx, runner=rerun, toolchain=FakeToolchain(env.plan.toolchain, env.toolchain.base))
    )
    assert fake.unpacked == [] and fake.patched == []
    (only,) = rerun.commands  # the compile, and nothing before it
    assert only.text == env.only("cmake --build").text
    assert state.get(Configured).reconfigured is False
    assert state.find(Compiled) is not None
    assert list(state.timings) == ["toolchain", "source", "configure", "build", "total"]
    assert (env.layout.build.host / "obj" / "b.o").is_file()


def test_what_each_step_is_comes_from_its_module() -> None:
    """One descriptor per step module: the table, reuse and the fingerprints read it, nothing else."""
    import importlib

    for name, step in driver.STEPS.items():
        module = importlib.import_module(f"ortdist.pipeline.steps.{name}")
        assert module.STEP is step, name
    packaging = {"install", "bundle", "c_smoke", "wheel", "repair", "check", "compat", "size"}
    packaging |= {"web_package", "web_smoke"}
    assert {name for name, step in driver.STEPS.items() if step.reusable} == packaging
    assert {name for name, step in driver.STEPS.items() if step.fingerprint} == {"configure", "build", "binding"}
