from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from ortdist import run, sources
from ortdist.recipe import Recipe, load_recipe

pytest_plugins = ["pytester"]
PROJECT = Path(__file__).resolve().parent.parent
INTEGRATION = "integration"
# A test of a recipe other than the main one is marked recipe_tree("<name>"): each such recipe is a
# full ORT compile (25-60 min cold on 2 cores), and CI's 90 minutes from a cold machine hold the main
# recipe and the checks around it. Such a test runs when the recipe's build tree is cached
# (`nox -s build-<name>` once) or ORTDIST_TEST_RECIPES names the recipe ("all": every recipe, the
# release gate); otherwise it is deselected, and the claims table at the end of the run says that
# recipe's claims were NOT proven by this run.
RECIPE_TREE = "recipe_tree"
MAIN_RECIPE = "cpu-linux"  # its tests (and the tooling's) are never deselected, but on a slow day
MAIN_BUILD = "main_build"  # the main recipe's tests that read its own build
GPU_CLAIM = "GPU (CUDA on a device)"


# CI's rotation. A CI run (CI set, ORTDIST_TEST_RECIPES unset) also builds ONE recipe of this table
# from cold, so successive landings cover each in turn: the commit orders the table, and the first
# uncached entry that what is left of CI's budget holds is built, after everything else. An entry
# holds if its measured cost (below) x this run's pace x MARGIN fits: a run that reached the pick
# later than a cold run on the measuring machine did (COLD_MAIN_S) is on a slower machine, and the
# cost scales with it. Where the budget holds the entry only with fewer wheels, it is built for
# `python` alone (what its tests read: the core's Python and bookworm's 3.11 for the compat root);
# the manifest and the claims table name the Pythons left out. Entries left out say why in the claims
# table. Recipes not here (the oneDNN ones, CUDA: a full cold compile each, 40-60 min) are proven by
# a cached tree or the release gate.
@dataclasses.dataclass(frozen=True)
class RotationEntry:
    """What one rotation recipe's build and tests took, in seconds, on a 2-core machine right after a
    cold cpu-linux build (its compiler cache warm, as in a cold CI run)."""

    every_python_s: int  # wheels for every Python the recipe lists
    core_s: int  # wheels for `python` only (one extra binding instead of four)
    python: tuple[str, ...] = ("3.13", "3.11")


# xnnpack-linux: 1,200 s with every Python (cpu-linux's tree cached), 575 with 3.13 and 3.11 in the cold
# CI run of 2026-11-27 (build 555 s, compile 380). slim-linux: 1,700 s measured with every Python;
# its core_s is that less three of its bindings (not measured alone).
ROTATION = {"slim-linux": RotationEntry(1_700, 1_450), "xnnpack-linux": RotationEntry(1_200, 600)}
CI_BUDGET_S = 90 * 60
CI_RESERVE_S = 5 * 60  # what follows the integration tests: the unit tests under Debian's python3
COLD_MAIN_S = 3_650  # a cold .ci/run on the measuring machine, up to the pick (cpu-linux and its tests)
MARGIN = 1.25
MAIN_MARGIN = 1.15  # the slow-day check's: the pace probe's own spread on the measuring machine (+-11%)


# A slow day. Machines of one kind differ about 2x, and the main recipe's cold build and tests
# (COLD_MAIN_S on the measuring machine) would not fit CI's budget on the slowest. So on a cold
# cache CI first times a fixed single-threaded workload (pace_probe: PROBE_S on the measuring
# machine); where COLD_MAIN_S x that pace x MAIN_MARGIN does not fit what is left, the run proves
# SLOW_DAY_RECIPE from cold instead, first, and the main recipe's build tests (marked main_build)
# read NOT PROVEN in the claims table. slim-linux is a smaller real build of the same kind: the
# same toolchain, root, compiler and glibc 2.17 promise, the same steps (configure, core and four
# extra bindings, wheels for every Python, repair, ELF and clean-root checks, compat roots), a
# third of the compile (a minimal build). ORTDIST_CI_PACE overrides the probe (a rehearsal).
SLOW_DAY_RECIPE = "slim-linux"
PROBE_S = 0.50  # the probe's best of nine on the measuring machine (0.44-0.55 over six tries there)


def pace_probe() -> float:
    """This machine's pace against the measuring one (>1: slower): a fixed single-threaded
    workload, the best of nine runs (a shared VM's noise only ever slows a run down)."""
    forced = os.environ.get("ORTDIST_CI_PACE", "").strip()
    if forced:
        return float(forced)
    best = float("inf")
    for _ in range(9):
        started = time.perf_counter()
        table: dict[str, int] = {}
        for i in range(400_000):
            table[f"{i * 7919 % 1_000_003:x}"] = i
        sorted(table.items())
        best = min(best, time.perf_counter() - started)
    return best / PROBE_S


def slow_day(elapsed: float) -> str:
    """Why this cold run cannot hold the main recipe ("" where it can), ``elapsed`` seconds in."""
    pace = pace_probe()
    left = CI_BUDGET_S - CI_RESERVE_S - elapsed
    need = COLD_MAIN_S * pace * MAIN_MARGIN
    if need <= left:
        return ""
    return (
        f"a slow machine (pace probe x{pace:.2f}): its cold build and tests need ~{need / 60:.0f} min "
        f"({COLD_MAIN_S / 60:.0f} measured, x{pace:.2f}, x{MAIN_MARGIN:g}), {max(left, 0) / 60:.0f} are left of CI's "
        f"{CI_BUDGET_S // 60}; {SLOW_DAY_RECIPE} was proven from cold in its place"
    )


def ci_commit() -> str:
    """The commit under test: GITHUB_SHA on GitHub Actions, else the checkout's HEAD."""
    sha = os.environ.get("GITHUB_SHA", "")
    if sha:
        return sha
    proc = subprocess.run(["git", "-C", str(PROJECT), "rev-parse", "HEAD"], text=True, capture_output=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def rotation_order(commit: str) -> list[str]:
    """The rotation's recipes in the order ``commit`` (hex) tries them: successive commits start at
    every entry in turn."""
    names = sorted(ROTATION)
    start = int(commit[:12], 16) % len(names)
    return names[start:] + names[:start]


def ci_started() -> float:
    """When CI's clock started: ORTDIST_CI_STARTED (epoch seconds, set by .ci/run), else now."""
    value = os.environ.get("ORTDIST_CI_STARTED", "")
    return float(value) if value.strip() else time.time()


def recipe_tree_is_cached(recipe: str) -> bool:
    """Whether the recipe's build tree holds a built library or WebAssembly module (Cache.default():
    ORTDIST_CACHE or ~/.cache)."""
    from ortdist import web
    from ortdist.paths import Cache

    build = Cache.default().root / "work" / recipe / "build"
    return any(build.glob("libonnxruntime.so*")) or (build / web.FILES[0]).is_file()


def recipe_is_wanted(recipe: str) -> bool:
    wanted = {name.strip() for name in os.environ.get("ORTDIST_TEST_RECIPES", "").split(",")}
    return bool(wanted & {"all", recipe})


def claim_of(item: pytest.Item) -> str:
    """The claim group a test proves: its recipe_tree recipe, else the main recipe (and the tooling)."""
    mark = item.get_closest_marker(RECIPE_TREE)
    return str(mark.args[0]) if mark is not None else MAIN_RECIPE


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--integration",
        action="store_true",
        help="also run the tests marked integration (real builds: root, Debian/PyPI access, ~1 h cold); "
        "`nox -s tests` passes it",
    )


def strict_skips() -> bool:
    """Under CI (``CI`` set, as GitHub Actions and .ci/run do) an integration test may not skip."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


@dataclasses.dataclass
class Claim:
    """What this run did for one claim group: how its tree started, and its tests' outcomes."""

    cached: bool
    rotation: str = ""  # the commit, where this group is a rotation recipe this run may build from cold
    built_cold: bool = False  # the rotation's cold build of this run
    python_left_out: tuple[str, ...] = ()  # the Pythons the cold build left out for CI's time
    left_out: str = ""  # why this rotation recipe was not built (CI's time, or another one was)
    slow_day: str = ""  # the main recipe's, on a slow day: why its build tests were left out
    stand_in: bool = False  # the slow-day recipe, proven from cold in the main recipe's place
    deselected: int = 0  # not run: no cached build tree
    unselected: int = 0  # not run: left out by -k/-m or the paths given
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def verdict(self) -> str:
        if self.failed:
            return f"FAILED: {self.failed} test(s) failed"
        if self.left_out:
            return f"NOT PROVEN: the rotation for {self.rotation[:12]} left it out: {self.left_out}"
        if self.slow_day:
            return f"NOT PROVEN: {self.deselected} build test(s) left out on {self.slow_day} ({self.passed} passed)"
        if self.deselected and not (self.passed or self.skipped):
            return f"NOT PROVEN: {self.deselected} test(s) deselected (no cached build tree)"
        if self.skipped:
            return f"NOT PROVEN: {self.skipped} test(s) skipped"
        if not self.passed:
            return "NOT PROVEN: no test ran"
        how = "from a cached build tree" if self.cached else "from cold (built in this run)"
        if self.rotation:
            how += f", the rotation's pick for {self.rotation[:12]}"
        if self.stand_in:
            how += f", in {MAIN_RECIPE}'s place on a slow machine"
        if self.python_left_out:
            how += f", without the wheels for Python {', '.join(self.python_left_out)} (CI's time)"
        if self.unselected:
            return f"PARTLY PROVEN {how}: {self.passed} passed, {self.unselected} not selected in this run"
        return f"proven {how}"


_CLAIMS = pytest.StashKey[dict[str, Claim]]()
_STARTED = pytest.StashKey[float]()
_GROUP_OF = pytest.StashKey[dict[str, str]]()
_COMMIT = pytest.StashKey[str]()  # the commit that orders the rotation ("": no rotation)


@pytest.hookimpl(tryfirst=True)  # before -k/-m: every test of a group is seen, so a partial run says so
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Plain ``pytest`` runs the unit tests only; integration tests when asked (--integration or -m),
    those of an uncached recipe deselected unless ORTDIST_TEST_RECIPES names it."""
    asked = config.getoption("--integration") or INTEGRATION in (config.getoption("markexpr") or "")
    if not asked:
        deselected = [item for item in items if item.get_closest_marker(INTEGRATION)]
    else:
        claims: dict[str, Claim] = {}
        groups: dict[str, str] = {}
        deselected = []
        ci_default = strict_skips() and not os.environ.get("ORTDIST_TEST_RECIPES")
        slow = slow_day(time.time() - ci_started()) if ci_default and not recipe_tree_is_cached(MAIN_RECIPE) else ""
        commit = ci_commit() if ci_default and not slow else ""  # a slow day leaves no time for the rotation
        order = rotation_order(commit) if commit else []
        for item in items:
            if not item.get_closest_marker(INTEGRATION):
                continue
            group = claim_of(item)
            if group not in claims:
                cached = recipe_tree_is_cached(group)
                claims[group] = Claim(
                    cached=cached,
                    rotation=commit if group in order and not cached else "",
                    slow_day=slow if group == MAIN_RECIPE else "",
                    stand_in=bool(slow) and group == SLOW_DAY_RECIPE,
                )
            claim = claims[group]
            if claim.slow_day and item.get_closest_marker(MAIN_BUILD):
                left_out = True
            elif group == MAIN_RECIPE or claim.cached or claim.rotation or claim.stand_in:
                left_out = False
            else:
                left_out = not recipe_is_wanted(group)
            if left_out:
                deselected.append(item)
                claim.deselected += 1
            else:
                groups[item.nodeid] = group
        config.stash[_CLAIMS] = claims
        config.stash[_GROUP_OF] = groups
        config.stash[_STARTED] = ci_started()
        config.stash[_COMMIT] = commit
        # The slow-day recipe first (it makes the root the tooling's tests use); the uncached
        # rotation recipes last, in the commit's order: whether CI's budget still holds a build is
        # known only then.
        rank = {group: n + 1 for n, group in enumerate(order) if group in claims and claims[group].rotation}
        if slow:
            rank[SLOW_DAY_RECIPE] = -1
        items.sort(key=lambda item: rank.get(groups.get(item.nodeid, ""), 0))
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        chosen = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in chosen]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Says the rotation's order and which of its recipes may be built from cold; the tests a group
    kept but the selection (-k, -m) dropped make that group only partly proven."""
    groups = session.config.stash.get(_GROUP_OF, None)
    if groups is None:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    claims = session.config.stash[_CLAIMS]
    commit = session.config.stash[_COMMIT]
    if commit and reporter is not None:
        order = rotation_order(commit)
        cold = [group for group in order if group in claims and claims[group].rotation]
        reporter.write_line(
            f"ortdist: the rotation for commit {commit[:12]}: {', '.join(order)}; "
            + (
                f"uncached, built from cold last, the first CI's time left holds: {', '.join(cold)}"
                if cold
                else "none to build from cold"
            )
        )
    running = {item.nodeid for item in session.items}
    for nodeid, group in list(groups.items()):
        if nodeid not in running:
            session.config.stash[_CLAIMS][group].unselected += 1
            del groups[nodeid]


class _ClaimRecorder:
    """Counts each integration test's outcome into its claim group (one per pytest run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        group = self.config.stash.get(_GROUP_OF, {}).get(report.nodeid)
        if group is None:
            return
        claim = self.config.stash[_CLAIMS][group]
        if report.failed:
            claim.failed += 1
        elif report.skipped:
            claim.skipped += 1
        elif report.when == "call":
            claim.passed += 1


def pytest_runtest_setup(item: pytest.Item) -> None:
    """An uncached rotation recipe, before its first test: built if no other one was and what is left
    of CI's budget holds it at this run's pace (with every Python, else with the entry's `python`);
    otherwise left out (said in the claims table, not a failure)."""
    config = item.config
    group = config.stash.get(_GROUP_OF, {}).get(item.nodeid)
    if group is None:
        return
    claims = config.stash[_CLAIMS]
    claim = claims[group]
    if not claim.rotation:
        return
    if not (claim.built_cold or claim.left_out):
        built = [g for g, c in claims.items() if c.built_cold]
        if built:
            claim.left_out = f"one cold build per run, and {built[0]} came first in this commit's order"
        else:
            decide_rotation(group, claim, time.time() - config.stash[_STARTED])
    if claim.left_out:
        pytest.skip(f"rotation: {claim.left_out}")


def decide_rotation(group: str, claim: Claim, elapsed: float) -> None:
    """Whether CI's budget holds the rotation recipe ``group`` ``elapsed`` seconds into the run: with
    every Python, with its entry's only, or not at all (``claim.left_out`` says why)."""
    entry = ROTATION[group]
    left = CI_BUDGET_S - CI_RESERVE_S - elapsed
    pace = max(1.0, elapsed / COLD_MAIN_S)
    if entry.every_python_s * pace * MARGIN <= left:
        claim.built_cold = True
    elif entry.core_s * pace * MARGIN <= left:
        claim.built_cold = True
        from ortdist.paths import project_root

        listed = load_recipe(project_root() / "recipes" / f"{group}.toml").wheel.python
        claim.python_left_out = tuple(v for v in listed if v not in entry.python)
    else:
        need = entry.core_s * pace * MARGIN
        claim.left_out = (
            f"{max(left, 0) / 60:.0f} min left of CI's {CI_BUDGET_S // 60}, its build and tests need "
            f"~{need / 60:.0f} with Python {', '.join(entry.python)} alone ({entry.core_s / 60:.0f} measured, "
            f"x{pace:.1f} for this run's pace, x{MARGIN:g})"
        )


@pytest.fixture(scope="session")
def ci_python(request: pytest.FixtureRequest) -> Callable[[str], tuple[str, ...] | None]:
    """The Pythons a recipe's wheels are built for in this run: None (every one the recipe lists)
    unless the rotation builds it from cold with fewer for CI's time."""

    def pythons(recipe: str) -> tuple[str, ...] | None:
        claim = request.config.stash.get(_CLAIMS, {}).get(recipe)
        return ROTATION[recipe].python if claim is not None and claim.python_left_out else None

    return pythons


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_ClaimRecorder(config), "ortdist-claims")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The claims table: every claim group, and whether this run proved it, from cold or from a
    cached tree, or not at all. A green run with NOT PROVEN rows proved less than the README says."""
    claims = config.stash.get(_CLAIMS, None)
    if claims is None:
        return
    rows = [(group, claims[group].verdict()) for group in sorted(claims, key=lambda g: (g != MAIN_RECIPE, g))]
    rows.append((GPU_CLAIM, "NOT PROVEN here: no GPU in this run (`ortdist device-proof` on a lent GPU, docs/cuda.md)"))
    width = max(len(group) for group, _ in rows)
    write = terminalreporter.write_line
    write("")
    write("ortdist: what this run proved (ORTDIST_TEST_RECIPES=all, with a GPU proof, is the release gate)", bold=True)
    for group, verdict in rows:
        write(
            f"  {group:<{width}}  {verdict}",
            red=verdict.startswith("FAILED"),
            yellow=verdict.startswith(("NOT", "PARTLY")),
        )
    unproven = [group for group, claim in claims.items() if claim.deselected and not claim.passed]
    if unproven:
        write(
            f"ortdist: to prove {', '.join(sorted(unproven))}: `nox -s build-<recipe>` once, or "
            f"ORTDIST_TEST_RECIPES={','.join(sorted(unproven))} (or all) to build them in the test run",
            yellow=True,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A skipped integration test under CI is a failure that says why it skipped: CI expected the build."""
    report = yield
    group = item.config.stash.get(_GROUP_OF, {}).get(item.nodeid)
    if group is not None and item.config.stash[_CLAIMS][group].left_out:
        return report  # a rotation recipe left out: the claims table says why
    if report.skipped and item.get_closest_marker(INTEGRATION) and strict_skips():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} would have skipped under CI: {reason}\n"
            "CI must run every integration test: give the runner what it lacks (root, network, caches), "
            "or unset CI to allow skips on a developer machine"
        )
    return report


@pytest.fixture(autouse=True)
def _no_ortdist_environment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Unit tests see none of the caller's ORTDIST_* settings (a runner's ORTDIST_COMPILER_CACHE=sccache, say)."""
    if not request.node.get_closest_marker(INTEGRATION):
        for name in [n for n in os.environ if n.startswith("ORTDIST_")]:
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def project() -> Path:
    return PROJECT


@pytest.fixture
def no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running a command or downloading anything fails the test (a refusal must come first)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a command or download was attempted: {args[:1]}")

    for name in ("call", "capture", "stream"):
        monkeypatch.setattr(run, name, refuse)
    monkeypatch.setattr(sources, "fetch", refuse)


@pytest.fixture
def write_recipe(tmp_path: Path) -> Callable[..., Path]:
    """Write a recipe file named after its ``name`` (default 'r') with the given TOML body."""

    def write(body: str, name: str = "r") -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(f'name = "{name}"\ndescription = "test recipe"\n{body}', encoding="utf-8")
        return path

    return write


@pytest.fixture
def recipe_from(write_recipe: Callable[..., Path]) -> Callable[..., Recipe]:
    def load(body: str = "", name: str = "r") -> Recipe:
        return load_recipe(write_recipe(body, name))

    return load


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError:
        return False
    return True


def _download_official_wheel(dest: Path, python: str | None = None, arch: str = "x86_64") -> Path:
    """PyPI's onnxruntime 1.21.0 wheel (the control) for ``python`` (default: the running one) on ``arch``."""
    if not pypi_reachable():
        pytest.skip("offline: pypi.org:443 is unreachable, and the test needs PyPI's onnxruntime wheel")
    target = ["--python-version", python, "--platform", f"manylinux_2_28_{arch}"] if python else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            *target,
            "onnxruntime==1.21.0",
            "-d",
            str(dest),
        ],
        check=True,
    )
    (wheel,) = dest.glob("onnxruntime-1.21.0-*.whl")
    return wheel


@pytest.fixture(scope="session")
def download_official_wheel() -> Callable[..., Path]:
    return _download_official_wheel
