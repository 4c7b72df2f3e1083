"""CI's time policy (tests/ci_policy.py): the real pace probe, the main recipe's plan on a cold
cache, the rotation's order and picks, and the cost table covering every buildable recipe."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import ci_policy

COSTS = ci_policy.load_costs()


def fake_clock(durations: list[float]) -> tuple[Iterator[float], list[int]]:
    """A clock whose i-th workload takes durations[i] seconds, and a counter of workload runs."""
    ticks: list[float] = [0.0]
    for seconds in durations:
        ticks += [ticks[-1], ticks[-1] + seconds]
    return iter(ticks[1:]), [0]


@pytest.mark.parametrize(("runs", "ratio"), [([0.5] * 9, 1.0), ([1.4, 3.0, *[1.0] * 7], 2.0), ([0.3] * 9, 0.6)])
def test_the_probe_is_its_workloads_best_time_over_the_measuring_machines(runs: list[float], ratio: float) -> None:
    """The real probe body over a fake clock: a probe that always answered slow or fast fails here."""
    clock, calls = fake_clock(runs)

    def workload() -> None:
        calls[0] += 1

    pace = ci_policy.pace_probe(COSTS, clock=lambda: next(clock), workload=workload)
    assert pace == pytest.approx(ratio / COSTS.over_read)
    assert calls == [9]


def test_the_real_probe_reads_this_machine_within_the_kinds_spread() -> None:
    """Machines of this kind differ ~2.7x; a loaded one reads slower, never 10x or 0.1x the measuring one."""
    assert 0.1 < ci_policy.pace_probe(COSTS) < 5


def test_the_probe_does_not_refuse_a_machine_it_over_reads() -> None:
    """The highest reading of a machine that compiles no slower than the measuring one (x1.65 over
    the measuring machine's 0.50 s) keeps every wheel; twice that builds fewer; three times, refused."""
    for ratio, python, refused in ((1.65, None, False), (2.0, ("3.13", "3.11"), False), (3.0, None, True)):
        ticks, _ = fake_clock([COSTS.probe_s * ratio] * 9)
        pace = ci_policy.pace_probe(COSTS, clock=ticks.__next__, workload=lambda: None)
        plan = ci_policy.main_plan(COSTS, pace, 60)
        assert (plan.python, bool(plan.refused)) == (python, refused), ratio


@pytest.mark.parametrize(
    ("pace", "elapsed", "python", "refused"),
    [
        (1.0, 60, None, False),  # the measuring machine: every wheel (70 of 84 min)
        (1.2, 60, None, False),  # 84 of 84
        (1.25, 60, ("3.13", "3.11"), False),  # every wheel 87 > 84; the core's and 3.11: 80
        (1.3, 60, ("3.13", "3.11"), False),  # 83
        (1.35, 60, None, True),  # 86: CI fails, saying why
        (2.0, 60, None, True),
        (1.0, 1200, ("3.13", "3.11"), False),  # 20 min gone (a slow download, say): 65 left, 64 needed
        (1.0, 1500, None, True),
    ],
)
def test_the_main_recipe_is_built_with_every_wheel_fewer_or_ci_fails(
    pace: float, elapsed: float, python: tuple[str, ...] | None, refused: bool
) -> None:
    plan = ci_policy.main_plan(COSTS, pace, elapsed)
    assert (plan.python, bool(plan.refused)) == (python, refused)
    assert bool(plan.why) == (python is not None)
    if refused:
        assert "CI fails rather than pass without it" in plan.refused and "./nox -s build-cpu-linux" in plan.refused


def test_a_slow_days_reasons_name_the_figures() -> None:
    fewer = ci_policy.main_plan(COSTS, 1.25, 0)
    assert fewer.why == (
        "a slow machine (pace probe x1.25): every wheel needs ~87 min (61 measured, x1.25, x1.15), 85 min are "
        "left of CI's 90; built with Python 3.13, 3.11 alone (~80 min)"
    )
    refused = ci_policy.main_plan(COSTS, 2.0, 0).refused
    assert refused.startswith(
        "a slow machine (pace probe x2.00): cpu-linux's cold build and tests need ~128 min even with Python 3.13, "
        "3.11 alone (56 measured, x2.00, x1.15) and 85 min are left of CI's 90"
    )


def test_each_landing_starts_the_rotation_at_the_next_recipe() -> None:
    names = sorted(COSTS.rotation)
    turns = range(2 * len(names))
    assert [ci_policy.rotation_order(COSTS, turn)[0] for turn in turns] == names + names
    assert all(sorted(ci_policy.rotation_order(COSTS, turn)) == names for turn in turns)


def test_the_landing_number_is_the_commit_count_else_the_day(tmp_path: Path) -> None:
    def git(shallow: str) -> object:
        def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
            out = {"rev-list": "1234", "rev-parse": shallow}[argv[3]]
            return subprocess.CompletedProcess(argv, 0, out + "\n", "")

        return run

    assert ci_policy.landing_turn(tmp_path, run=git("false")) == 1234  # type: ignore[arg-type]
    import time

    assert ci_policy.landing_turn(tmp_path, run=git("true")) == int(time.time() // 86_400)  # type: ignore[arg-type]
    project = Path(__file__).resolve().parents[2]
    count = subprocess.run(["git", "-C", str(project), "rev-list", "--count", "HEAD"], text=True, capture_output=True)
    assert ci_policy.landing_turn(project) in (int(count.stdout or 0), int(time.time() // 86_400))


def test_every_buildable_recipe_is_the_main_one_in_the_rotation_or_gate_only(project: Path) -> None:
    """docs/ci.md's promise: each recipe is proven by CI in turn or, named with why, by the gate."""
    from ortdist.recipe import load_recipe
    from ortdist.toolchains import load_toolchain

    buildable = set()
    for path in sorted((project / "recipes").glob("*.toml")):
        recipe = load_recipe(path)
        if not load_toolchain(project, recipe.toolchain).plan_only:
            buildable.add(recipe.name)
    groups = [{COSTS.main_recipe}, set(COSTS.rotation), set(COSTS.gate_only)]
    assert set.union(*groups) == buildable
    assert sum(map(len, groups)) == len(buildable)  # each in one place
    for name, cost in COSTS.rotation.items():
        # could fit after a cached cpu-linux (~1,100 s in), with its fewer wheels at least
        assert cost.core_s * COSTS.margin <= COSTS.total_s - COSTS.reserve_s - 1_100, name
        assert cost.core_s <= cost.every_python_s, name
