from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from ortdist import run, sources
from ortdist.recipe import Recipe, load_recipe

pytest_plugins = ["pytester"]
PROJECT = Path(__file__).resolve().parent.parent
INTEGRATION = "integration"
# Tests of the cuda-linux build run once its tree is cached: compiling the CUDA kernels took 43 min
# cold on two cores, more than a cold CI run has left after cpu-linux. Without the tree they are
# deselected, and the run's summary says so.
CUDA_TREE = "cuda_tree"
CUDA_PROVIDER = Path("cuda-linux") / "build" / "libonnxruntime_providers_cuda.so"


def cuda_tree_is_cached() -> bool:
    from ortdist.paths import Cache

    return (Cache.default().root / "work" / CUDA_PROVIDER).is_file() or os.environ.get("ORTDIST_CUDA_TESTS") == "1"


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


# The EP and slim recipes' builds are each a full ORT compile (25-30 min cold on 2 cores): CI's
# 90-minute budget from a cold machine holds the main recipe (cpu-linux) and the checks around it,
# not five more. A test marked recipe_tree("<name>") runs once that recipe's build tree is cached
# (`nox -s build-<name>` once) or when ORTDIST_TEST_RECIPES names it ("all" for every recipe);
# otherwise it is deselected and the run's summary says so.
RECIPE_TREE = "recipe_tree"


def recipe_tree_is_cached(recipe: str) -> bool:
    from ortdist.paths import Cache

    wanted = {name.strip() for name in os.environ.get("ORTDIST_TEST_RECIPES", "").split(",")}
    build = Cache.default().root / "work" / recipe / "build"
    return bool(wanted & {"all", recipe}) or any(build.glob("libonnxruntime.so*"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Plain ``pytest`` runs the unit tests only; integration tests when asked (--integration or -m)."""
    asked = config.getoption("--integration") or INTEGRATION in (config.getoption("markexpr") or "")
    marker = INTEGRATION if not asked else CUDA_TREE if not cuda_tree_is_cached() else ""
    deselected = [item for item in items if marker and item.get_closest_marker(marker)]
    notes: list[str] = []
    if marker == CUDA_TREE and deselected:
        notes.append(
            f"deselected {len(deselected)} cuda-linux tests: no cached build tree (43 min to compile cold on "
            "2 cores); run `nox -s build-cuda-linux` once, or set ORTDIST_CUDA_TESTS=1 to build it here"
        )
    if asked:
        uncached: dict[str, int] = {}
        for item in items:
            mark = item.get_closest_marker(RECIPE_TREE)
            if mark is not None and item not in deselected and not recipe_tree_is_cached(mark.args[0]):
                deselected.append(item)
                uncached[mark.args[0]] = uncached.get(mark.args[0], 0) + 1
        notes += [
            f"deselected {count} {recipe} tests: no cached build tree (a full ORT compile, beyond CI's budget "
            f"from cold); run `nox -s build-{recipe}` once, or set ORTDIST_TEST_RECIPES={recipe} (or all)"
            for recipe, count in sorted(uncached.items())
        ]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]
        config.stash[_NOTES] = notes


_NOTES = pytest.StashKey[list[str]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    for note in config.stash.get(_NOTES, []):
        terminalreporter.write_line(f"ortdist: {note}", yellow=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A skipped integration test under CI is a failure that says why it skipped: CI expected the build."""
    report = yield
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


def _download_official_wheel(dest: Path, python: str | None = None) -> Path:
    """PyPI's onnxruntime 1.21.0 wheel (the control) for ``python`` (default: the running one)."""
    if not pypi_reachable():
        pytest.skip("offline: pypi.org:443 is unreachable, and the test needs PyPI's onnxruntime wheel")
    target = ["--python-version", python, "--platform", "manylinux_2_28_x86_64"] if python else []
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
