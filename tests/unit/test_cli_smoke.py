"""``ortdist smoke`` as the README promises it: a foreign (PyPI) wheel given alongside ours is the
baseline, the exit code says whether every wheel passed, ``--require-device`` (or
ORTDIST_REQUIRE_DEVICE=1) turns a missing GPU from a skip into a failure, and the suite holds the
cache's build lock. The suite itself is faked (no venv, no root): these test the command."""

from __future__ import annotations

import fcntl
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pytest

from ortdist.cli import main
from ortdist.paths import Cache
from ortdist.smoke import env, run_suite
from ortdist.smoke.env import Choice, IndexInstall
from ortdist.smoke.suite import ModelFiles, Verdict
from ortdist.smoke.wheelinfo import WheelInfo
from ortdist.toolchains import Toolchain

from .steps.helpers import make_wheel

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
OURS = "onnxruntime-1.21.0-cp313-cp313-manylinux_2_39_x86_64.whl"
PYPI = "onnxruntime-1.21.0-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"


@pytest.fixture
def smoke_project(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout (the real toolchains) and a cache under tmp_path, so reports land there."""
    root = tmp_path / "project"
    shutil.copytree(project / "toolchains", root / "toolchains")
    (root / "recipes").mkdir()
    monkeypatch.setenv("ORTDIST_PROJECT", str(root))
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ORTDIST_REQUIRE_DEVICE", raising=False)
    return root


def ours(directory: Path, recipe: str = "cpu-linux", providers: tuple[str, ...] = (CPU,)) -> Path:
    record = {"recipe": recipe, "execution_providers": [{"provider": p} for p in providers]}
    return make_wheel(directory / "ours", OURS, {"onnxruntime/ortdist_build.json": json.dumps(record).encode()})


def pypi(directory: Path, name: str = "pypi") -> Path:
    return make_wheel(directory / name, PYPI, {"onnxruntime/__init__.py": b""})


def lock_is_held(cache: Cache) -> bool:
    cache.root.mkdir(parents=True, exist_ok=True)
    with (cache.root / "build.lock").open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


@dataclass
class FakeSuite:
    """Stands in for smoke_wheel: records each call and answers with a report per wheel directory."""

    fails: set[str] = field(default_factory=set)  # wheel directories whose wheel fails
    calls: list[dict[str, Any]] = field(default_factory=list)

    def outcomes(self, wheel: Path) -> dict[str, dict[str, bool]]:
        """Node-test outcomes that differ per wheel, so a baseline can be traced to its wheel."""
        return {CPU: {f"test_from_{wheel.parent.name}": True, "test_add": wheel.parent.name != "ours"}}

    def __call__(
        self,
        wheel: Path,
        out_dir: Path,
        cache: Cache,
        toolchain: Toolchain,
        baseline: dict[str, dict[str, bool]] | None = None,
        *,
        latency: dict[str, int] | None = None,
        require_devices: bool = False,
    ) -> tuple[dict[str, Any], list[Verdict]]:
        self.calls.append(
            {
                "wheel": wheel.parent.name,
                "out_dir": out_dir,
                "baseline": baseline,
                "require_devices": require_devices,
                "lock_held": lock_is_held(cache),
            }
        )
        passed = wheel.parent.name not in self.fails
        node = self.outcomes(wheel)
        report = {
            "passed": passed,
            "seconds": 1.0,
            "environment": {"kind": "host"},
            "node_test_outcomes": node,
            "node_tests": {
                p: {"passed": sum(o.values()), "failed": sum(not x for x in o.values())} for p, o in node.items()
            },
        }
        verdict = Verdict("model", "cnn", CPU, passed, False, "ok" if passed else "outputs differ", 1.0, 0.0, 0.0)
        return report, [verdict]


@pytest.fixture
def suite(monkeypatch: pytest.MonkeyPatch) -> FakeSuite:
    fake = FakeSuite()
    monkeypatch.setattr(run_suite, "smoke_wheel", fake)
    return fake


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-first", "pypi-first"])
def test_a_foreign_wheel_is_the_baseline_for_ours(
    smoke_project: Path, tmp_path: Path, suite: FakeSuite, ours_first: bool
) -> None:
    """The PyPI wheel runs first, whatever the order given, with no baseline of its own; its
    node-test outcomes are ours' baseline. Reports: ours under dist/<recipe>/smoke, foreign under dist/smoke."""
    wheels = [ours(tmp_path), pypi(tmp_path)]
    assert main(["smoke", *map(str, wheels if ours_first else wheels[::-1])]) == 0
    foreign, mine = suite.calls
    assert (foreign["wheel"], mine["wheel"]) == ("pypi", "ours")
    assert foreign["baseline"] is None
    assert mine["baseline"] == suite.outcomes(wheels[1])
    assert foreign["out_dir"] == smoke_project / "dist" / "smoke"
    assert mine["out_dir"] == smoke_project / "dist" / "cpu-linux" / "smoke"


def test_only_the_first_foreign_wheel_is_the_baseline(tmp_path: Path, smoke_project: Path, suite: FakeSuite) -> None:
    first, second = pypi(tmp_path, "pypi-a"), pypi(tmp_path, "pypi-b")
    assert main(["smoke", str(ours(tmp_path)), str(first), str(second)]) == 0
    assert [(c["wheel"], c["baseline"]) for c in suite.calls] == [
        ("pypi-a", None),
        ("pypi-b", None),
        ("ours", suite.outcomes(first)),
    ]


def test_without_a_foreign_wheel_ours_has_no_baseline(tmp_path: Path, smoke_project: Path, suite: FakeSuite) -> None:
    assert main(["smoke", str(ours(tmp_path))]) == 0
    assert [c["baseline"] for c in suite.calls] == [None]


@pytest.mark.parametrize(
    ("failing", "code"),
    [(set(), 0), ({"ours"}, 1), ({"pypi"}, 1), ({"ours", "pypi"}, 1)],
    ids=["none", "ours", "pypi", "both"],
)
def test_the_exit_code_is_1_when_any_wheel_fails(
    tmp_path: Path,
    smoke_project: Path,
    suite: FakeSuite,
    capsys: pytest.CaptureFixture[str],
    failing: set[str],
    code: int,
) -> None:
    suite.fails = failing
    assert main(["smoke", str(ours(tmp_path)), str(pypi(tmp_path))]) == code
    out = capsys.readouterr().out
    assert len(suite.calls) == 2  # a failing wheel does not stop the others
    for name in ("pypi", "ours"):
        assert f"{OURS if name == 'ours' else PYPI}: {'FAIL' if name in failing else 'PASS'} in 1.0 s" in out
    assert out.count("FAIL: outputs differ") == len(failing)  # the table, one row per verdict


@pytest.mark.parametrize(
    ("argv", "environ", "required"),
    [([], None, False), (["--require-device"], None, True), ([], "1", True), ([], "0", False)],
    ids=["default", "flag", "env", "env-off"],
)
def test_require_device_reaches_the_suite(
    tmp_path: Path,
    smoke_project: Path,
    suite: FakeSuite,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    environ: str | None,
    required: bool,
) -> None:
    if environ is not None:
        monkeypatch.setenv("ORTDIST_REQUIRE_DEVICE", environ)
    assert main(["smoke", *argv, str(ours(tmp_path))]) == 0
    assert [c["require_devices"] for c in suite.calls] == [required]


def test_the_suite_runs_under_the_cache_lock(tmp_path: Path, smoke_project: Path, suite: FakeSuite) -> None:
    """It shares the clean root and wheelhouse with builds: never while one runs."""
    assert main(["smoke", str(ours(tmp_path)), str(pypi(tmp_path))]) == 0
    assert [c["lock_held"] for c in suite.calls] == [True, True]
    assert not lock_is_held(Cache(tmp_path / "cache"))  # and lets it go


# --- --require-device through the real suite: a GPU wheel on a machine without a GPU ----------------
NO_GPU = "no GPU (cudaGetDeviceCount: 35, CUDA driver version is insufficient for CUDA runtime version)"


def no_gpu_runner(
    choice: Choice,
    info: WheelInfo,
    workdir: Path,
    cache: Cache,
    toolchain: Toolchain,
    log: TextIO,
    source: IndexInstall | None = None,
) -> int:
    """The runner in its venv on a machine without a GPU: every CPU case passes on the CPU, and
    cudart reports no device for every CUDA case."""
    plan = json.loads((workdir / "plan.json").read_text())
    assert CUDA in plan["devices"]  # the suite asked the runner to probe for the GPU
    cases = [
        {**c, "status": "ok", "outputs_ok": True, "max_abs_err": 0.0, "placement": dict.fromkeys(c["nodes"], CPU)}
        if c["provider"] == CPU
        else {**c, "status": "no_device", "reason": NO_GPU}
        for c in plan["cases"]
    ]
    result = {"version": "1.21.0", "available_providers": [CUDA, CPU], "cases": cases}
    (workdir / "result.json").write_text(json.dumps(result))
    return 0


@pytest.mark.parametrize("required", [False, True], ids=["skip", "require-device"])
def test_a_missing_gpu_is_skipped_or_with_require_device_fails(
    tmp_path: Path,
    smoke_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    required: bool,
) -> None:
    """README: without a GPU every CUDA case is SKIP (never passed); CI's GPU jobs pass
    --require-device, where a missing GPU fails the run (exit 1)."""

    def no_node_tests(cache: Cache, workdir: Path, visible: Path) -> tuple[list[ModelFiles], int]:
        return [], 0  # ONNX's node tests: not what this is about, and slow to convert

    monkeypatch.setattr(run_suite, "_node_files", no_node_tests)
    monkeypatch.setattr(env, "run_in_env", no_gpu_runner)
    wheel = ours(tmp_path, "cuda-linux", (CPU, CUDA))
    code = main(["smoke", *(["--require-device"] if required else []), str(wheel)])
    out = capsys.readouterr().out
    report = json.loads((smoke_project / "dist" / "cuda-linux" / "smoke" / f"{wheel.stem}.json").read_text())
    cuda = [m for m in report["models"] if m["provider"] == CUDA]
    cpu = [m for m in report["models"] if m["provider"] == CPU]
    assert cuda and cpu and all(m["passed"] and not m["skipped"] for m in cpu)
    assert report["passed"] is (not required)
    assert code == (1 if required else 0)
    if required:
        assert all(not m["passed"] and not m["skipped"] for m in cuda)
        assert out.count(f"FAIL: {NO_GPU}, on a machine that must have one (--require-device)") == len(cuda)
    else:
        assert all(m["skipped"] for m in cuda)
        assert out.count(f"SKIP: {NO_GPU}") == len(cuda) and "FAIL" not in out
