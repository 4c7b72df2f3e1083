"""What CI's 90 minutes hold: the pace probe, the main recipe's plan on a cold cache, and the rotation.

Pure decisions over the measured costs in ci_costs.toml (the clock and the commit are passed in), so
tests/unit/test_ci_policy.py checks every threshold without a build; tests/conftest.py applies them.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path

COSTS = Path(__file__).resolve().with_name("ci_costs.toml")


@dataclasses.dataclass(frozen=True)
class Cost:
    """One recipe's cold build and tests in CI, in seconds on the measuring machine: with every Python
    the recipe lists, and with ``python`` alone (() for a recipe without Python wheels)."""

    every_python_s: int
    core_s: int
    python: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Costs:
    """ci_costs.toml, typed."""

    total_s: int
    reserve_s: int
    margin: float
    main_margin: float
    probe_s: float
    over_read: float
    main_recipe: str
    main: Cost
    rotation: Mapping[str, Cost]
    gate_only: Mapping[str, str]


def _cost(table: Mapping[str, object]) -> Cost:
    every, core, python = table["every_python_s"], table["core_s"], table["python"]
    assert isinstance(every, int) and isinstance(core, int) and isinstance(python, list), table
    return Cost(every, core, tuple(str(v) for v in python))


def load_costs(path: Path = COSTS) -> Costs:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    budget, main = data["budget"], data["main"]
    return Costs(
        total_s=int(budget["total_s"]),
        reserve_s=int(budget["reserve_s"]),
        margin=float(budget["margin"]),
        main_margin=float(budget["main_margin"]),
        probe_s=float(data["probe"]["measuring_s"]),
        over_read=float(data["probe"]["over_read"]),
        main_recipe=str(main["recipe"]),
        main=_cost(main),
        rotation={name: _cost(table) for name, table in sorted(data["rotation"].items())},
        gate_only={str(k): str(v) for k, v in data["gate_only"].items()},
    )


def probe_workload() -> None:
    """A fixed single-threaded workload (dicts, string formatting, a sort): about half a second on
    the measuring machine."""
    table: dict[str, int] = {}
    for i in range(400_000):
        table[f"{i * 7919 % 1_000_003:x}"] = i
    sorted(table.items())


def pace_probe(
    costs: Costs, clock: Callable[[], float] = time.perf_counter, workload: Callable[[], None] = probe_workload
) -> float:
    """This machine's compile pace against the measuring one (>1: slower), as far as the probe can
    tell: the best of nine runs of the workload (a shared VM's noise only ever slows a run down)
    over the measuring machine's best, less what the probe is known to over-read."""
    best = float("inf")
    for _ in range(9):
        started = clock()
        workload()
        best = min(best, clock() - started)
    return best / costs.probe_s / costs.over_read


@dataclasses.dataclass(frozen=True)
class MainPlan:
    """How a cold CI run builds the main recipe: for every Python (``python`` None), for the core's
    Python and 3.11 alone (``python``), or not at all (``refused`` says why: CI fails)."""

    pace: float
    python: tuple[str, ...] | None = None
    refused: str = ""
    why: str = ""  # where it builds fewer wheels: why


def main_plan(costs: Costs, pace: float, elapsed: float) -> MainPlan:
    """The main recipe's plan on a cold cache, ``elapsed`` seconds into CI's budget at ``pace``."""
    left = costs.total_s - costs.reserve_s - elapsed
    every = costs.main.every_python_s * pace * costs.main_margin
    core = costs.main.core_s * pace * costs.main_margin
    if every <= left:
        return MainPlan(pace)
    python = ", ".join(costs.main.python)
    minutes = f"{max(left, 0) / 60:.0f} min are left of CI's {costs.total_s // 60}"
    if core <= left:
        why = (
            f"a slow machine (pace probe x{pace:.2f}): every wheel needs ~{every / 60:.0f} min "
            f"({costs.main.every_python_s / 60:.0f} measured, x{pace:.2f}, x{costs.main_margin:g}), {minutes}; "
            f"built with Python {python} alone (~{core / 60:.0f} min)"
        )
        return MainPlan(pace, costs.main.python, why=why)
    refused = (
        f"a slow machine (pace probe x{pace:.2f}): {costs.main_recipe}'s cold build and tests need ~{core / 60:.0f} "
        f"min even with Python {python} alone ({costs.main.core_s / 60:.0f} measured, x{pace:.2f}, "
        f"x{costs.main_margin:g}) and {minutes}: this run cannot prove {costs.main_recipe}, so CI fails rather "
        f"than pass without it. Fix: run CI on a faster machine, or on one whose cache holds {costs.main_recipe}'s "
        f"build (`./nox -s build-{costs.main_recipe}` once)"
    )
    return MainPlan(pace, refused=refused)


@dataclasses.dataclass(frozen=True)
class Pick:
    """The rotation's decision for one recipe: build it (``python`` None: every wheel), or ``left_out``."""

    build: bool
    python: tuple[str, ...] | None = None
    left_out: str = ""


def rotation_pick(costs: Costs, recipe: str, elapsed: float) -> Pick:
    """Whether what is left of CI's budget, ``elapsed`` seconds in, holds the rotation recipe's cold
    build and tests: this run's pace is how much later than the measuring machine's cold run it
    reached this point (at least 1), with every Python, with its ``python`` alone, or not at all."""
    entry = costs.rotation[recipe]
    left = costs.total_s - costs.reserve_s - elapsed
    pace = max(1.0, elapsed / costs.main.every_python_s)
    if entry.every_python_s * pace * costs.margin <= left:
        return Pick(True)
    if entry.core_s * pace * costs.margin <= left:
        return Pick(True, entry.python)
    need = entry.core_s * pace * costs.margin
    alone = f" with Python {', '.join(entry.python)} alone" if entry.python else ""
    return Pick(
        False,
        left_out=f"{max(left, 0) / 60:.0f} min left of CI's {costs.total_s // 60}, its build and tests need "
        f"~{need / 60:.0f}{alone} ({entry.core_s / 60:.0f} measured, x{pace:.1f} for this run's pace, "
        f"x{costs.margin:g})",
    )


def rotation_order(costs: Costs, turn: int) -> list[str]:
    """The rotation's recipes in the order landing number ``turn`` tries them: each landing starts
    at the next recipe (sorted by name), so N landings in a row start at each of N recipes once."""
    names = sorted(costs.rotation)
    start = turn % len(names)
    return names[start:] + names[:start]


def landing_turn(project: Path, run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> int:
    """The landing number that orders the rotation: how many commits HEAD's history holds (one more
    per landing). A shallow clone's count says nothing, so there it is the UTC day number."""

    def git(*args: str) -> str:
        proc = run(["git", "-C", str(project), *args], text=True, capture_output=True, check=False)
        return str(proc.stdout).strip() if proc.returncode == 0 else ""

    count = git("rev-list", "--count", "HEAD")
    if count.isdigit() and git("rev-parse", "--is-shallow-repository") == "false":
        return int(count)
    return int(time.time() // 86_400)
