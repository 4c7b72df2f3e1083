from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

import ci_policy
from ortdist import run, sources
from ortdist.recipe import Recipe, load_recipe

pytest_plugins = ["pytester"]
PROJECT = Path(__file__).resolve().parent.parent
# What the unit tests' clients are configured with (no real registry's address in the tests).
NPM_REGISTRY = "http://npm.mirror.example"
PIP_INDEX = "http://pypi.mirror.example/simple"
INTEGRATION = "integration"
# A test of a recipe other than the main one is marked recipe_tree("<name>"): each such recipe is a
# full ORT compile (25-60 min cold on 2 cores), and CI's 90 minutes from a cold machine hold the main
# recipe and the checks around it. Such a test runs when the recipe's build tree is cached
# (`nox -s build-<name>` once), when ORTDIST_TEST_RECIPES names the recipe ("all": every recipe, the
# release gate), or when CI's rotation picks it; otherwise it is deselected, and the claims table at
# the end of the run says that recipe's claims were NOT proven by this run.
RECIPE_TREE = "recipe_tree"
GPU_CLAIM = "GPU (CUDA on a device)"
# What CI's 90 minutes hold (tests/ci_policy.py, the measured costs in tests/ci_costs.toml): the main
# recipe is proven in every CI run (with fewer wheels on a slow machine, or CI fails saying why), and
# a run with time left builds the rotation's next recipe from cold.
COSTS = ci_policy.load_costs()
MAIN_RECIPE = COSTS.main_recipe
# What the integration tests take on disk beside the builds (a fresh cache behind the mirrors, the
# CUDA tests' index and venv of NVIDIA wheels, smoke environments): a warm CI run's peak was 6.05 GB
# below its start (2026-11-29, `df` every 5 s), and a little over that for safety.
TESTS_DISK_GB = 6.5
# What a cold rotation recipe's own tests take beside its build: they run last, after the tests
# above, so only their smoke environments (0.11-0.34 GB per wheel here) and dist/ copies (0.5 GB).
ROTATION_TESTS_DISK_GB = 1.5
# Where each run's claims go (claims.json and claims.txt): ORTDIST_TEST_RESULTS, else test-results/.
RESULTS = "ORTDIST_TEST_RESULTS"


def pace() -> float:
    """This machine's pace against the measuring one: ORTDIST_CI_PACE (a rehearsal of a slow day on a
    fast machine), else the probe."""
    forced = os.environ.get("ORTDIST_CI_PACE", "").strip()
    return float(forced) if forced else ci_policy.pace_probe(COSTS)


def landing_turn() -> int:
    """The landing number that orders the rotation: ORTDIST_CI_TURN (a rehearsal of another
    landing's order), else the commit count of HEAD's history (tests/ci_policy.py)."""
    forced = os.environ.get("ORTDIST_CI_TURN", "").strip()
    return int(forced) if forced else ci_policy.landing_turn(PROJECT)


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
    turn: int | None = None  # the landing number, where this group is a rotation recipe this run may build
    built_cold: bool = False  # the rotation's cold build of this run
    python: tuple[str, ...] | None = None  # the Pythons its build was given, where CI's time gave fewer
    python_left_out: tuple[str, ...] = ()  # the Pythons the cold build left out for CI's time
    slow_day: str = ""  # the main recipe's, on a slow machine: why it was built with fewer wheels
    left_out: str = ""  # why this rotation recipe was not built (CI's time, or another one was)
    deselected: int = 0  # not run: no cached build tree
    unselected: int = 0  # not run: left out by -k/-m or the paths given
    # The main recipe's test modules this run did not collect (it named other paths): its tests
    # are spread over every module without a recipe_tree mark, and each must run for its claim.
    uncollected: tuple[str, ...] = ()
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def status(self) -> str:
        """One word for the record: failed, not-proven, partly-proven, proven-cold or proven-cached."""
        if self.failed:
            return "failed"
        if self.left_out or self.skipped or not self.passed:
            return "not-proven"
        if self.unselected or self.uncollected:
            return "partly-proven"
        return "proven-cached" if self.cached else "proven-cold"

    def verdict(self) -> str:
        if self.failed:
            return f"FAILED: {self.failed} test(s) failed"
        if self.left_out:
            return f"NOT PROVEN: the rotation for landing {self.turn} left it out: {self.left_out}"
        if self.deselected and not (self.passed or self.skipped):
            return f"NOT PROVEN: {self.deselected} test(s) deselected (no cached build tree)"
        if self.skipped:
            return f"NOT PROVEN: {self.skipped} test(s) skipped"
        if not self.passed:
            return "NOT PROVEN: no test ran"
        how = "from a cached build tree" if self.cached else "from cold (built in this run)"
        if self.turn is not None:
            how += f", the rotation's pick for landing {self.turn}"
        if self.python_left_out:
            how += f", without the wheels for Python {', '.join(self.python_left_out)}"
            how += f" ({self.slow_day})" if self.slow_day else " (CI's time)"
        if self.unselected:
            return f"PARTLY PROVEN {how}: {self.passed} passed, {self.unselected} not selected in this run"
        if self.uncollected:
            return f"PARTLY PROVEN {how}: {self.passed} passed; not run here: {', '.join(self.uncollected)}"
        return f"proven {how}"


_CLAIMS = pytest.StashKey[dict[str, Claim]]()
_STARTED = pytest.StashKey[float]()
_GROUP_OF = pytest.StashKey[dict[str, str]]()
_TURN = pytest.StashKey[int | None]()  # the landing number that orders the rotation (None: no rotation)


def main_recipe_modules(collected: set[Path]) -> set[Path]:
    """The integration test modules beside the collected ones that prove the main recipe (and the
    tooling): those without a recipe_tree mark."""
    found = set()
    for directory in {path.parent for path in collected}:
        for path in directory.glob("test_*.py"):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "mark.integration" in text and "recipe_tree" not in text:
                found.add(path)
    return found


def listed_python(recipe: str) -> tuple[str, ...]:
    from ortdist.paths import project_root

    return load_recipe(project_root() / "recipes" / f"{recipe}.toml").wheel.python


@pytest.hookimpl(tryfirst=True)  # before -k/-m: every test of a group is seen, so a partial run says so
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Plain ``pytest`` runs the unit tests only; integration tests when asked (--integration or -m),
    those of an uncached recipe deselected unless ORTDIST_TEST_RECIPES names it or the rotation picks it.
    Under CI on a cold cache the main recipe's plan is weighed first: a machine too slow to prove it
    in CI's time ends the run here, failed, saying why."""
    asked = config.getoption("--integration") or INTEGRATION in (config.getoption("markexpr") or "")
    if not asked:
        deselected = [item for item in items if item.get_closest_marker(INTEGRATION)]
    else:
        claims: dict[str, Claim] = {}
        groups: dict[str, str] = {}
        deselected = []
        ci_default = strict_skips() and not os.environ.get("ORTDIST_TEST_RECIPES")
        cold_main = ci_default and not recipe_tree_is_cached(MAIN_RECIPE)
        plan = ci_policy.main_plan(COSTS, pace(), time.time() - ci_started()) if cold_main else None
        if plan is not None and plan.refused:
            pytest.exit(f"ortdist: {plan.refused}", returncode=pytest.ExitCode.TESTS_FAILED)
        short = disk_short(MAIN_RECIPE, TESTS_DISK_GB)
        if short:
            pytest.exit(f"ortdist: {short}", returncode=pytest.ExitCode.TESTS_FAILED)
        # A slow day's fewer wheels leave no time for the rotation.
        turn = landing_turn() if ci_default and not (plan and plan.python) else None
        order = ci_policy.rotation_order(COSTS, turn) if turn is not None else []
        for item in items:
            if not item.get_closest_marker(INTEGRATION):
                continue
            group = claim_of(item)
            if group not in claims:
                cached = recipe_tree_is_cached(group)
                claims[group] = Claim(cached=cached, turn=turn if group in order and not cached else None)
                if group == MAIN_RECIPE and plan is not None and plan.python:
                    claim = claims[group]
                    claim.python, claim.slow_day = plan.python, plan.why
                    claim.python_left_out = tuple(v for v in listed_python(group) if v not in plan.python)
            claim = claims[group]
            if group == MAIN_RECIPE or claim.cached or claim.turn is not None or recipe_is_wanted(group):
                groups[item.nodeid] = group
            else:
                deselected.append(item)
                claim.deselected += 1
        if MAIN_RECIPE in claims:
            ran = {item.path for item in items if item.get_closest_marker(INTEGRATION)}
            claims[MAIN_RECIPE].uncollected = tuple(sorted(p.name for p in main_recipe_modules(ran) - ran))
        config.stash[_CLAIMS] = claims
        config.stash[_GROUP_OF] = groups
        config.stash[_STARTED] = ci_started()
        config.stash[_TURN] = turn
        # The uncached rotation recipes last, in the landing's order: whether CI's budget still
        # holds a build is known only then.
        rank = {group: n + 1 for n, group in enumerate(order) if group in claims and claims[group].turn is not None}
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
    turn = session.config.stash[_TURN]
    main = claims.get(MAIN_RECIPE)
    if main is not None and main.slow_day and reporter is not None:
        reporter.write_line(f"ortdist: {MAIN_RECIPE} on {main.slow_day}; no rotation in this run")
    if turn is not None and reporter is not None:
        order = ci_policy.rotation_order(COSTS, turn)
        cold = [group for group in order if group in claims and claims[group].turn is not None]
        reporter.write_line(
            f"ortdist: the rotation for landing {turn}: {', '.join(order)}; "
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
    of CI's budget holds it at this run's pace (with every Python, else with its entry's `python`);
    otherwise left out (said in the claims table, not a failure)."""
    config = item.config
    group = config.stash.get(_GROUP_OF, {}).get(item.nodeid)
    if group is None:
        return
    claims = config.stash[_CLAIMS]
    claim = claims[group]
    if claim.turn is None:
        return
    if not (claim.built_cold or claim.left_out):
        built = [g for g, c in claims.items() if c.built_cold]
        if built:
            claim.left_out = f"one cold build per run, and {built[0]} came first in this landing's order"
        elif no_room := disk_short(group, ROTATION_TESTS_DISK_GB):
            claim.left_out = no_room
        else:
            pick = ci_policy.rotation_pick(COSTS, group, time.time() - config.stash[_STARTED])
            claim.built_cold, claim.left_out, claim.python = pick.build, pick.left_out, pick.python
            if pick.python is not None:
                claim.python_left_out = tuple(v for v in listed_python(group) if v not in pick.python)
    if claim.left_out:
        pytest.skip(f"rotation: {claim.left_out}")


def disk_short(recipe: str, tests_gb: float) -> str:
    """Why the disk cannot hold ``recipe``'s build (what of it is not cached yet: ortdist's own
    check, data/disk.toml) and ``tests_gb`` for the tests still to run, or "": said before the
    first test, not after twenty minutes of tests failing one by one with "No space left on device"."""
    from ortdist import diskspace
    from ortdist.paths import Cache
    from ortdist.project import plan_for

    if not (PROJECT / "recipes" / f"{recipe}.toml").is_file():
        return ""  # a project without it (the rules' own tests): nothing of it to build
    cache = Cache.default()
    wanted = diskspace.need(plan_for(recipe, PROJECT)[0], cache, diskspace.facts())
    for where in (tempfile.gettempdir(), cache.root):
        free = diskspace.free_bytes(Path(where))
        if free < wanted.total + tests_gb * diskspace.GB:
            break
    else:
        return ""
    return (
        f"{recipe}'s build needs about {wanted.total / diskspace.GB:.1f} GB on the cache's disk ({wanted.said()}) "
        f"and the tests {tests_gb:g} GB; {where} has {free / diskspace.GB:.1f} GB free ({diskspace.PRUNE})"
    )


@pytest.fixture(scope="session")
def ci_python(request: pytest.FixtureRequest) -> Callable[[str], tuple[str, ...] | None]:
    """The Pythons a recipe's wheels are built for in this run: None (every one the recipe lists)
    unless CI's time gave its cold build fewer (the main recipe on a slow machine, a rotation pick)."""

    def pythons(recipe: str) -> tuple[str, ...] | None:
        claim = request.config.stash.get(_CLAIMS, {}).get(recipe)
        return claim.python if claim is not None and claim.python_left_out else None

    return pythons


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_ClaimRecorder(config), "ortdist-claims")


def claims_record(claims: dict[str, Claim], rows: list[tuple[str, str]]) -> dict[str, object]:
    """This run's claims, for the results: when, where, on which commit, and per claim group its
    status, verdict and the digest of the plan it proved (recipe, toolchain, patches, pins)."""
    import platform

    from integration import BUILT
    from ortdist.paths import project_root
    from ortdist.project import plan_for

    proc = subprocess.run(["git", "-C", str(PROJECT), "rev-parse", "HEAD"], text=True, capture_output=True, check=False)
    groups: dict[str, object] = {}
    for group, verdict in rows:
        claim = claims.get(group)
        entry: dict[str, object] = {"verdict": verdict, "status": claim.status() if claim else "not-proven"}
        if claim is not None:
            entry["plan_digest"] = plan_for(group, project_root())[0].digest()
            entry.update(passed=claim.passed, failed=claim.failed, skipped=claim.skipped)
            entry["python_left_out"] = list(claim.python_left_out)
            entry.update(BUILT.get(group, {}))  # artifacts' sha256, build root and its package versions
        groups[group] = entry
    return {
        "commit": proc.stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "processor": platform.processor()},
        "test_recipes": os.environ.get("ORTDIST_TEST_RECIPES", ""),
        "ci": strict_skips(),
        "claims": groups,
    }


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The claims table: every claim group, and whether this run proved it, from cold or from a
    cached tree, or not at all, printed and written to the results (claims.txt, claims.json). A
    green run with NOT PROVEN rows proved less than the README says."""
    import json

    claims = config.stash.get(_CLAIMS, None)
    if claims is None:
        return
    rows = [(group, claims[group].verdict()) for group in sorted(claims, key=lambda g: (g != MAIN_RECIPE, g))]
    rows.append((GPU_CLAIM, "NOT PROVEN here: no GPU in this run (`ortdist device-proof` on a lent GPU, docs/cuda.md)"))
    width = max(len(group) for group, _ in rows)
    write = terminalreporter.write_line
    title = "ortdist: what this run proved (ORTDIST_TEST_RECIPES=all, with a GPU proof, is the release gate)"
    write("")
    write(title, bold=True)
    lines = [f"  {group:<{width}}  {verdict}" for group, verdict in rows]
    for line in lines:
        write(line, red="  FAILED" in line, yellow=" NOT PROVEN" in line or " PARTLY" in line)
    unproven = [group for group, claim in claims.items() if claim.deselected and not claim.passed]
    if unproven:
        write(
            f"ortdist: to prove {', '.join(sorted(unproven))}: `nox -s build-<recipe>` once, or "
            f"ORTDIST_TEST_RECIPES={','.join(sorted(unproven))} (or all) to build them in the test run",
            yellow=True,
        )
    results = Path(os.environ.get(RESULTS) or PROJECT / "test-results")
    results.mkdir(parents=True, exist_ok=True)
    (results / "claims.txt").write_text("\n".join([title, *lines]) + "\n", encoding="utf-8")
    record = json.dumps(claims_record(claims, rows), indent=2, sort_keys=True) + "\n"
    (results / "claims.json").write_text(record, encoding="utf-8")
    write(f"ortdist: the claims are in {results / 'claims.json'}")


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


class UnitTestHost:
    """ortdist.mirrors.Host for unit tests: pip and npm configured with registries of the tests' own,
    no apt sources (the toolchain's mirror serves)."""

    def pip(self, *args: str) -> str:
        return f"--index-url <url>  Base URL (default {PIP_INDEX})." if "--help" in args else ""

    def npm_registry(self) -> str | None:
        return NPM_REGISTRY + "/"

    def apt_sources(self) -> dict[str, str]:
        return {}


@pytest.fixture(autouse=True)
def _no_ortdist_environment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Unit tests see none of the caller's ORTDIST_* settings (a runner's ORTDIST_COMPILER_CACHE=sccache, say)."""
    if not request.node.get_closest_marker(INTEGRATION):
        for name in [n for n in os.environ if n.startswith("ORTDIST_")]:
            monkeypatch.delenv(name)
        # Nor the host's package clients: the unit tests' own stand-in answers for pip, npm and apt
        # (tests/unit/test_mirrors.py asks the real ones through run.capture).
        from ortdist import mirrors

        mirrors.clear()
        monkeypatch.setattr(mirrors, "HOST", UnitTestHost())
        yield
        mirrors.clear()  # what the stand-in answered is not the host's
        return
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
    """Whether pip's index (as this host configures it, ortdist.mirrors) answers."""
    from ortdist import mirrors

    url = urllib.parse.urlsplit(mirrors.pip_index().index.url)
    if url.scheme == "file":
        return Path(url.path).is_dir()
    try:
        socket.create_connection(
            (url.hostname or "", url.port or (443 if url.scheme == "https" else 80)), timeout=10
        ).close()
    except OSError:
        return False
    return True


def _download_official_wheel(
    dest: Path, python: str | None = None, arch: str = "x86_64", distribution: str = "onnxruntime"
) -> Path:
    """PyPI's ``distribution`` 1.21.0 wheel (the control: onnxruntime, or an EP's package such as
    onnxruntime-openvino) for ``python`` (default: the running one) on ``arch``."""
    if not pypi_reachable():
        pytest.skip("offline: pip's index is unreachable, and the test needs PyPI's onnxruntime wheel")
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
            f"{distribution}==1.21.0",
            "-d",
            str(dest),
        ],
        check=True,
    )
    (wheel,) = dest.glob(f"{distribution.replace('-', '_')}-1.21.0-*.whl")
    return wheel


@pytest.fixture(scope="session")
def download_official_wheel() -> Callable[..., Path]:
    return _download_official_wheel
