"""Step reuse: a packaging step whose inputs digest is unchanged takes its recorded outputs; any
change before it (the compile's ninja log, a file it made, the plan, the recipe) runs it again."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from ortdist.manifest import Artifact
from ortdist.pipeline import driver
from ortdist.pipeline.context import BuildContext
from ortdist.pipeline.layout import Roots, StepOutput
from ortdist.pipeline.state import BuildState, Checks, Compiled, PerPython, Repaired, Wheels
from ortdist.pipeline.step import Run, StepDef, reuse

from .conftest import MakeEnv

STEPS = ("toolchain", "source", "configure", "build", "wheel", "repair", "check", "publish")


def repaired(tmp_path: Path) -> Repaired:
    wheel = tmp_path / "onnxruntime-1.21.0-cp313-cp313-manylinux_2_17_x86_64.whl"
    wheel.write_bytes(b"wheel")
    extra = {"python": "3.13", "execution_providers": ["cpu"], "nested": {"list": [1, 2.5, None]}}
    return Repaired(
        wheels={"3.13": wheel},
        times=PerPython("repair_s", {"3.13": 9.3}, timed=False),
        artifacts=(Artifact(wheel, "wheel", tag="cp313-cp313-manylinux_2_17_x86_64", extra=extra),),
    )


def test_every_kind_of_output_decodes_to_an_equal_object(tmp_path: Path) -> None:
    outputs: list[StepOutput] = [
        repaired(tmp_path),
        Roots(build=tmp_path / "root", pythons={"3.11": tmp_path / "py"}, packages={"gcc": "14"}),
        Checks(main={"ok": True, "outputs": [[0.5, 1.0]]}, others={}, times=PerPython("check_s", {}, timed=False)),
        Compiled(tree_compile_s=1.0, compiler_cache={"hits": 3}, command_seconds={"onnx": 2.0}),
    ]
    for output in outputs:
        text = json.dumps(reuse.encode(output))
        assert reuse.decode(json.loads(text)) == output


def test_a_record_is_reused_only_with_the_same_inputs_and_untouched_files(tmp_path: Path) -> None:
    records = reuse.StepRecords(tmp_path / "steps")
    output = repaired(tmp_path)
    records.save("repair", "inputs-1", output, 47.0)
    found = records.reusable("repair", "inputs-1")
    assert found is not None and found.output == output and found.seconds == 47.0
    assert records.reusable("repair", "inputs-2") is None
    wheel = output.wheels["3.13"]
    os.utime(wheel, ns=(1, 1))  # touched
    assert records.reusable("repair", "inputs-1") is None
    records.save("repair", "inputs-1", output, 47.0)
    wheel.unlink()
    assert records.reusable("repair", "inputs-1") is None
    records.path("repair").write_text("{not json", encoding="utf-8")
    assert records.reusable("repair", "inputs-1") is None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Made(StepOutput):
    step: str
    file: Path


# One output type per step, as the real pipeline has (the state keeps one output per type).
MADE = {name: type(f"Made_{name}", (Made,), {}) for name in STEPS}


def counting_steps(ctx: BuildContext, ran: list[str]) -> dict[str, StepDef]:
    """Steps that each write one file of their own; configure and build stand for CMake and ninja
    (their fingerprints are CMakeCache.txt and .ninja_log, written here as the tools would)."""

    def make(name: str) -> Run:
        def step(c: BuildContext, state: BuildState) -> StepOutput:
            ran.append(name)
            build = ctx.layout.build.host
            build.mkdir(parents=True, exist_ok=True)
            if name == "configure" and not (build / "CMakeCache.txt").exists():
                (build / "CMakeCache.txt").write_text("CMAKE_BUILD_TYPE=Release\n")
            if name == "build" and not (build / ".ninja_log").exists():
                (build / ".ninja_log").write_text("# ninja log v6\n1\t2\t0\tlibonnxruntime.so\tabc\n")
            if name == "toolchain":
                (ctx.layout.recipe_work / "root").mkdir(parents=True, exist_ok=True)
                return Roots(build=ctx.layout.recipe_work / "root")
            made = ctx.layout.work.host / f"{name}.out"
            made.parent.mkdir(parents=True, exist_ok=True)
            made.write_text(name)
            output: StepOutput = MADE[name](step=name, file=made)
            return output

        return step

    return {name: dataclasses.replace(driver.STEPS[name], run=make(name)) for name in STEPS}


def outputs_by_step(state: BuildState) -> dict[str, StepOutput]:
    return {getattr(o, "step", "toolchain"): o for o in state.outputs.values()}


def build(make_env: MakeEnv, ran: list[str], **changes: object) -> BuildState:
    """One run of the pipeline's driver over the counting steps; ``ran`` lists what ran."""
    env = make_env("cpu-linux", steps=STEPS, **changes)
    ran.clear()
    return driver.run_steps(env.ctx, BuildState(), counting_steps(env.ctx, ran))


def test_a_no_op_rebuild_runs_only_the_steps_before_packaging(make_env: MakeEnv) -> None:
    ran: list[str] = []
    first = build(make_env, ran)
    assert ran == list(STEPS) and first.reused == {}
    second = build(make_env, ran)
    assert ran == ["toolchain", "source", "configure", "build", "publish"]
    assert set(second.reused) == {"wheel", "repair", "check"}
    assert second.reused["wheel"]["seconds"] == first.timings["wheel"]
    assert outputs_by_step(second)["repair"] == outputs_by_step(first)["repair"]


def test_a_recompile_repackages_everything_after_it(make_env: MakeEnv) -> None:
    ran: list[str] = []
    env = make_env("cpu-linux", steps=STEPS)
    build(make_env, ran)
    with (env.ctx.layout.build.host / ".ninja_log").open("a") as log:
        log.write("3\t4\t0\tlibonnxruntime.so\tdef\n")  # ninja relinked the library
    build(make_env, ran)
    assert ran == list(STEPS)


def test_a_changed_output_file_reruns_that_step_and_the_ones_after(make_env: MakeEnv) -> None:
    ran: list[str] = []
    env = make_env("cpu-linux", steps=STEPS)
    build(make_env, ran)
    (env.ctx.layout.work.host / "repair.out").write_text("edited by hand")
    build(make_env, ran)
    assert ran == ["toolchain", "source", "configure", "build", "repair", "check", "publish"]


def test_another_plan_or_recipe_repackages(make_env: MakeEnv) -> None:
    ran: list[str] = []
    build(make_env, ran)
    build(make_env, ran, strip=False)
    assert "wheel" in ran and "check" in ran
    build(make_env, ran, strip=False)
    assert "wheel" not in ran


def test_a_failed_step_leaves_no_record_to_reuse(make_env: MakeEnv) -> None:
    ran: list[str] = []
    env = make_env("cpu-linux", steps=STEPS)
    build(make_env, ran)
    steps = counting_steps(env.ctx, ran)

    def broken(ctx: BuildContext, state: BuildState) -> StepOutput:
        raise RuntimeError("repair broke halfway")

    steps["repair"] = dataclasses.replace(steps["repair"], run=broken)
    (env.ctx.layout.build.host / ".ninja_log").write_text("rebuilt\n")
    with pytest.raises(RuntimeError):
        driver.run_steps(env.ctx, BuildState(), steps)
    assert not reuse.StepRecords(env.ctx.layout.recipe_work / "steps").path("repair").exists()


def test_wheels_output_round_trips(tmp_path: Path) -> None:
    raw = tmp_path / "raw.whl"
    raw.write_bytes(b"x")
    out = Wheels(raw={"3.13": raw}, times=PerPython("wheel_s", {"3.13": 4.9}, timed=True))
    assert reuse.decode(json.loads(json.dumps(reuse.encode(out)))) == out


def test_no_reuse_runs_every_step_and_records_afresh(make_env: MakeEnv) -> None:
    ran: list[str] = []
    build(make_env, ran)
    env = make_env("cpu-linux", steps=STEPS)
    ctx = dataclasses.replace(env.ctx, reuse=False)
    state = driver.run_steps(ctx, BuildState(), counting_steps(ctx, ran := []))
    assert ran == list(STEPS) and state.reused == {}
    build(make_env, ran)
    assert "wheel" not in ran  # the forced run's records serve the next one


def test_cmakes_glob_check_that_ninja_runs_every_time_does_not_count_as_a_rebuild(make_env: MakeEnv) -> None:
    """CMake's CONFIGURE_DEPENDS check (cmake.verify_globs) gets a new .ninja_log line on every
    ninja run, also when nothing is rebuilt; a recompacted log is the same builds too."""
    from ortdist import ninjalog

    ran: list[str] = []
    env = make_env("cpu-linux", steps=STEPS)
    build(make_env, ran)
    log_file = env.ctx.layout.build.host / ".ninja_log"
    before = ninjalog.built_state(log_file.read_text())
    with log_file.open("a") as log:
        log.write("20\t50\t1795646493383723693\tCMakeFiles/cmake.verify_globs\t24f891ce62f823e8\n")
    assert ninjalog.built_state(log_file.read_text()) == before
    build(make_env, ran)
    assert "wheel" not in ran
    with log_file.open("a") as log:  # the same output built again: a newer mtime
        log.write("5\t9\t1795646493383723693\tlibonnxruntime.so\tabc\n")
    build(make_env, ran)
    assert "wheel" in ran


def test_a_step_keyed_by_what_it_checks_is_reused_across_a_recompile_until_that_changes(make_env: MakeEnv) -> None:
    """The compat step says what its proof depends on (the artefacts' interface to an older system):
    a recompile that leaves that as it was reuses the proof, the steps around it run again; a
    change to that interface, or to ortdist's plan, runs it again."""
    ran: list[str] = []
    env = make_env("cpu-linux", steps=STEPS)
    interface = {"digest": "needs libc GLIBC_2.17, imports expf"}

    def steps() -> dict[str, StepDef]:
        real = counting_steps(env.ctx, ran)
        return {**real, "repair": dataclasses.replace(real["repair"], inputs=lambda c, s: interface["digest"])}

    def run() -> BuildState:
        ran.clear()
        return driver.run_steps(env.ctx, BuildState(), steps())

    run()
    with (env.ctx.layout.build.host / ".ninja_log").open("a") as log:
        log.write("3\t4\t0\tlibonnxruntime.so\tdef\n")  # a recompile
    second = run()
    # the steps after it still chain on everything before them: the check runs the new wheel
    assert ran == ["toolchain", "source", "configure", "build", "wheel", "check", "publish"]
    assert set(second.reused) == {"repair"}
    interface["digest"] = "needs libc GLIBC_2.17, imports expf, logf"  # the code calls one more function
    run()
    assert "repair" in ran
    other = dataclasses.replace(env.ctx, plan=dataclasses.replace(env.plan, python=("3.13", "3.11")))
    ran.clear()
    driver.run_steps(other, BuildState(), steps())
    assert "repair" in ran  # another plan: ortdist's own inputs still key it
