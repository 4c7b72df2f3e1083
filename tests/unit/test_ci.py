"""ci/ generated from recipes/ (``ortdist matrix``), and the plan-only recipes it puts on macOS and Windows."""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import ci, registry
from ortdist.cli import main
from ortdist.errors import DataError, RecipeError, ToolchainError
from ortdist.patches import read_series
from ortdist.paths import Cache
from ortdist.plan import BuildPlan, make_plan
from ortdist.project import plan_for
from ortdist.recipe import Recipe
from ortdist.toolchains import load_toolchain, make_toolchain
from ortdist.toolchains.spec import ToolchainSpec

RECIPES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "recipes").glob("*.toml"))
PLAN_ONLY = {"coreml-macos-arm64", "dml-windows-x64", "android-arm64", "ios-arm64", "tensorrt-linux"}
NO_WHEEL = {"android-arm64", "ios-arm64", "slim-c-linux-aarch64", "slim-wasm"}  # C libraries for apps; the web module


def all_plans(project: Path) -> list[BuildPlan]:
    return [plan_for(name, project)[0] for name in RECIPES]


def tool(name: str) -> str | None:
    """A console script of the environment running the tests (a nox venv or the dev venv), else PATH."""
    return shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


# --- the plan-only recipes ---------------------------------------------------------------------------


def test_coreml_macos_plan(project: Path) -> None:
    """What the recipe asks for; what makes its plan run on a Mac is checked by property, with the
    other plan-only recipes', in test_plan_only.py."""
    plan = plan_for("coreml-macos-arm64", project)[0]
    assert [ep.name for ep in plan.providers] == ["cpu", "coreml"]
    assert plan.wheel_repair == "delocate"
    assert plan.target.wheel_platform == "macosx_11_0_arm64"
    assert plan.distribution == "onnxruntime"  # CoreML has no suffix: PyPI's macOS wheel carries it too
    assert plan.python == ("3.11", "3.12", "3.13")
    assert plan.toolchain.plan_only and plan.summary()["plan_only"] is True
    assert plan.summary()["wheel_repair"] == "delocate"
    # The deployment target matches the wheel tag, which delocate checks bundled libraries against.
    assert plan.cmake_defines["CMAKE_OSX_DEPLOYMENT_TARGET"] == "11.0"


def test_dml_windows_plan(project: Path) -> None:
    plan = plan_for("dml-windows-x64", project)[0]
    assert [ep.name for ep in plan.providers] == ["cpu", "dml"]
    assert plan.wheel_repair == "delvewheel"
    assert plan.distribution == "onnxruntime-directml"
    assert plan.repair_excludes == ("DirectML.dll", "d3d12.dll", "dxgi.dll")
    assert plan.toolchain.plan_only
    # The dynamic CRT, as PyPI's Windows wheels use.
    assert plan.cmake_defines["CMAKE_MSVC_RUNTIME_LIBRARY"] == "MultiThreaded$<$<CONFIG:Debug>:Debug>DLL"


def test_linux_plans_repair_with_auditwheel_and_no_wheel_means_no_repair(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    assert plan_for("cpu-linux", project)[0].wheel_repair == "auditwheel"
    assert not plan_for("cpu-linux", project)[0].toolchain.plan_only
    no_wheel = make_plan(
        recipe_from("[wheel]\nenabled = false\n"),
        load_toolchain(project, "debian-trixie"),
        read_series(project / "patches" / "1.21.0"),
    )
    assert no_wheel.wheel_repair == "" and no_wheel.summary()["wheel_repair"] is None


@pytest.mark.parametrize(
    ("toolchain", "needs"),
    [("macos-xcode", "needs macOS with Xcode"), ("msvc", "needs Windows with Visual Studio")],
)
def test_a_plan_only_toolchain_refuses_to_run(project: Path, tmp_path: Path, toolchain: str, needs: str) -> None:
    tc = make_toolchain(load_toolchain(project, toolchain))
    cache = Cache(tmp_path / "cache")
    with pytest.raises(ToolchainError, match=needs) as err:
        tc.ensure_build_root(cache, sys.stderr)
    assert err.value.exit_code == 6 and "ortdist plan" in str(err.value.fix)
    with pytest.raises(ToolchainError, match=needs):
        tc.ensure_clean_root(cache, sys.stderr)
    with pytest.raises(ToolchainError, match=needs):
        tc.wrap(tmp_path, ["cmake", "--version"])
    assert not (tmp_path / "cache").exists()


def test_plan_only_toolchains_need_no_sysroot_keys_but_say_what_they_need(project: Path, tmp_path: Path) -> None:
    xcode = load_toolchain(project, "macos-xcode")
    assert (xcode.kind, xcode.suite, xcode.packages, xcode.platform_eps) == ("xcode", "", (), ("coreml",))
    assert xcode.provides("coreml") and not xcode.provides("dml")
    (tmp_path / "toolchains").mkdir()
    text = (project / "toolchains" / "msvc.toml").read_text().replace("needs =", "# needs =")
    (tmp_path / "toolchains" / "msvc.toml").write_text(text)
    with pytest.raises(RecipeError, match="must say what a machine needs"):
        load_toolchain(tmp_path, "msvc")
    # A toolchain ortdist runs still needs its sysroot facts.
    trixie = (project / "toolchains" / "debian-trixie.toml").read_text().replace('suite = "trixie"', "")
    (tmp_path / "toolchains" / "debian-trixie.toml").write_text(trixie)
    with pytest.raises(RecipeError, match=r"missing required key\(s\) \['suite'\]") as err:
        load_toolchain(tmp_path, "debian-trixie")
    assert err.value.where == str(tmp_path / "toolchains" / "debian-trixie.toml")
    assert "not plan_only" in str(err.value.fix)


def test_an_ep_the_platform_lacks_is_refused_with_what_it_has(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    recipe = recipe_from(
        'target = "arm64-apple-darwin"\ntoolchain = "macos-xcode"\nexecution_providers = ["xnnpack"]\n'
    )
    with pytest.raises(RecipeError, match="no libraries for execution provider") as err:
        make_plan(recipe, load_toolchain(project, "macos-xcode"), ())
    assert "macos-xcode provides: cpu, coreml" in str(err.value.fix)


# --- generation ------------------------------------------------------------------------------------


def test_generation_is_deterministic(project: Path) -> None:
    plans = all_plans(project)
    first = ci.generate(plans)
    assert ci.generate(list(reversed(plans))) == first
    assert sorted(first) == [
        "cibuildwheel/coreml-macos-arm64.toml",
        "cibuildwheel/dml-windows-x64.toml",
        "workflows/ortdist.yml",
    ]
    assert all(text.startswith(ci.HEADER + "\n") for text in first.values())


def test_every_recipe_has_a_job_on_the_runner_with_what_it_needs(project: Path) -> None:
    facts = ci.runner_facts()
    rows = {plan.recipe.name: ci.matrix_entry(plan, facts) for plan in all_plans(project)}
    assert sorted(rows) == RECIPES
    expected_runner = {
        "arm64-apple-darwin": ("macos-14",),
        "arm64-apple-ios": ("macos-14",),
        "x86_64-pc-windows-msvc": ("windows-2022",),
    }
    gpu_runner = ("self-hosted", "linux", "x64", "gpu")  # the smoke suite needs the GPU
    gpu = {"cuda-linux": gpu_runner, "cuda13-linux": gpu_runner, "tensorrt-linux": gpu_runner}
    for name, row in rows.items():
        # aarch64 Linux is cross-built (and emulated) on the x86_64 runner; Android on Ubuntu's NDK
        assert row["runner"] == gpu.get(name, expected_runner.get(str(row["target"]), ("ubuntu-24.04",))), name
        assert row["build"] is (name not in PLAN_ONLY)
        assert row["smoke"] is (name not in PLAN_ONLY | NO_WHEEL), name
    assert rows["android-arm64"]["nox"] == 'ANDROID_NDK_HOME="$ANDROID_NDK_LATEST_HOME" python -m nox'

    # the recipes that build cp310-cp314
    five = (
        "cpu-linux",
        "cpu-linux-aarch64",  # the host's 3.10 and 3.12 headers, retargeted
        "cuda-linux",
        "cuda13-linux",
        "dnnl-linux",
        "openvino-linux",
        "slim-linux",
        "xnnpack-dnnl-linux",
        "xnnpack-linux",
    )
    for name in five:
        assert rows[name]["nox"] == 'sudo -E "$pythonLocation/bin/python" -m nox'
        # setup-python installs the CPythons they take from the host (no Debian suite has them), nox's last
        assert rows[name]["pythons"] == "3.10\n3.12\n3.13"
    assert {row["pythons"] for name, row in rows.items() if name not in five} == {"3.13"}
    assert rows["coreml-macos-arm64"]["nox"] == "python -m nox"
    # the three wheel platforms are all in the matrix
    platforms = {plan.target.wheel_platform for plan in all_plans(project)}
    assert {"linux_x86_64", "macosx_11_0_arm64", "win_amd64"} <= platforms
    workflow = ci.generate(all_plans(project))[ci.WORKFLOW]
    for name in RECIPES:
        assert f'- recipe: "{name}"' in workflow


def test_gpu_android_and_arm_recipes_get_their_runners(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    facts = ci.runner_facts()
    trixie = load_toolchain(project, "debian-trixie")
    everything = dataclasses.replace(
        trixie,
        targets=("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "aarch64-linux-android"),
        ep_packages={"cuda": ("cuda-toolkit",), "nnapi": ()},
        cross_targets={},  # a toolchain that builds every target natively, on that target's runner
    )

    def row(body: str, toolchain: ToolchainSpec = everything) -> dict[str, object]:
        return dict(ci.matrix_entry(make_plan(recipe_from(body), toolchain, ()), facts))

    assert row('execution_providers = ["cuda"]\n')["runner"] == ("self-hosted", "linux", "x64", "gpu")
    arm_gpu = row('target = "aarch64-unknown-linux-gnu"\nexecution_providers = ["cuda"]\n')
    assert arm_gpu["runner"] == ("self-hosted", "linux", "arm64", "gpu")
    assert row('target = "aarch64-unknown-linux-gnu"\n')["runner"] == ("ubuntu-24.04-arm",)
    # debian-trixie cross-builds arm64 Linux: on its x86_64 host, emulating the target for tests
    cross = row('target = "aarch64-unknown-linux-gnu"\n', trixie)
    assert cross["runner"] == ("ubuntu-24.04",) and cross["smoke"]
    with pytest.raises(RecipeError, match="cross-builds only the CPU EP"):
        row('target = "aarch64-unknown-linux-gnu"\nexecution_providers = ["cuda"]\n', trixie)
    android = row('target = "aarch64-linux-android"\nexecution_providers = ["nnapi"]\n[wheel]\nenabled = false\n')
    assert android["runner"] == ("ubuntu-24.04",) and android["build"] and not android["smoke"]
    assert "NDK" in facts.targets["aarch64-linux-android"].note


def test_runner_facts_cover_every_target_and_only_real_ep_targets() -> None:
    data = registry.load_data("runners.toml")
    targets, eps = registry.targets(), registry.providers()
    missing = copy.deepcopy(data)
    del missing["targets"]["wasm32-unknown-emscripten"]
    with pytest.raises(DataError, match=r"targets without a runner: \['wasm32-unknown-emscripten'\]"):
        ci.parse_runner_facts(missing, targets, eps)
    stray = copy.deepcopy(data)
    stray["providers"]["cuda"]["arm64-apple-darwin"] = data["targets"]["arm64-apple-darwin"]
    with pytest.raises(DataError, match="cuda does not exist for"):
        ci.parse_runner_facts(stray, targets, eps)
    typo = copy.deepcopy(data)
    typo["targets"]["arm64-apple-darwin"]["runs-on"] = ["macos-14"]
    with pytest.raises(DataError, match="unknown key 'runs-on'") as err:
        ci.parse_runner_facts(typo, targets, eps)
    assert err.value.where == "ortdist/data/runners.toml key 'targets.arm64-apple-darwin.runs-on'"
    assert err.value.fix == "did you mean 'runs_on'?"
    empty = copy.deepcopy(data)
    empty["providers"]["cuda"]["x86_64-unknown-linux-gnu"]["runs_on"] = []
    with pytest.raises(DataError, match="non-empty list of runner labels") as err:
        ci.parse_runner_facts(empty, targets, eps)
    assert err.value.where == "ortdist/data/runners.toml key 'providers.cuda.x86_64-unknown-linux-gnu.runs_on'"
    no_repair = copy.deepcopy(data)
    del no_repair["repair"]["delocate"]
    with pytest.raises(DataError, match=r"needs \[repair.delocate\]"):
        ci.parse_runner_facts(no_repair, targets, eps)
    kind = copy.deepcopy(data)
    kind["toolchain_kinds"]["xcodes"] = kind["toolchain_kinds"].pop("xcode")
    with pytest.raises(DataError, match="unknown toolchain kind 'xcodes'") as err:
        ci.parse_runner_facts(kind, targets, eps)
    assert err.value.where == "ortdist/data/runners.toml key 'toolchain_kinds.xcodes'"
    wrong = copy.deepcopy(data)
    wrong["workflow"]["timeout_minutes"] = "180"
    with pytest.raises(DataError, match="must be a whole number") as err:
        ci.parse_runner_facts(wrong, targets, eps)
    assert err.value.where == "ortdist/data/runners.toml key 'workflow.timeout_minutes'"


def test_cibuildwheel_only_where_it_fits(project: Path) -> None:
    files = ci.generate(all_plans(project))
    coreml = tomllib.loads(files["cibuildwheel/coreml-macos-arm64.toml"])["tool"]["cibuildwheel"]
    assert coreml["build"] == ["cp311-macosx_arm64", "cp312-macosx_arm64", "cp313-macosx_arm64"]
    assert coreml["macos"]["repair-wheel-command"].startswith("delocate-wheel --require-archs {delocate_archs} -w")
    assert coreml["macos"]["environment"] == {"MACOSX_DEPLOYMENT_TARGET": "11.0"}
    dml = tomllib.loads(files["cibuildwheel/dml-windows-x64.toml"])["tool"]["cibuildwheel"]
    assert dml["windows"]["repair-wheel-command"] == (
        'delvewheel repair --no-dll "DirectML.dll;d3d12.dll;dxgi.dll" -w {dest_dir} {wheel}'
    )
    assert not [f for f in files if "linux" in f]  # the debian sysroot builds outside cibuildwheel


def test_cibuildwheel_accepts_the_generated_configs(project: Path, tmp_path: Path) -> None:
    cibuildwheel = tool("cibuildwheel")
    if cibuildwheel is None:
        pytest.skip("cibuildwheel is not installed (nox -s tests installs it)")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "probe"\nversion = "0"\n')
    checked = []
    for plan in all_plans(project):
        config = project / "ci" / "cibuildwheel" / f"{plan.recipe.name}.toml"
        if not config.is_file():
            continue
        checked.append(plan.recipe.name)
        cibw = ci.runner_facts().targets[plan.target.triple].cibuildwheel
        assert cibw is not None
        out = subprocess.run(
            [cibuildwheel, "--print-build-identifiers", "--platform", cibw.platform, "--config-file", str(config), "."],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [f"cp{v.replace('.', '')}-{cibw.identifier}" for v in plan.python]
    assert checked == ["coreml-macos-arm64", "dml-windows-x64"]  # nothing skipped by accident


# --- ci/ in the repository ----------------------------------------------------------------------------


def test_committed_ci_matches_the_recipes(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ci.drift(project / "ci", ci.generate(all_plans(project))) == [], "ci/ drifted: run `ortdist matrix`"
    monkeypatch.chdir(project)
    assert main(["matrix", "--check"]) == 0


def test_matrix_check_fails_on_drift_and_matrix_repairs_it(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in ("recipes", "toolchains", "patches", "ci"):
        shutil.copytree(project / folder, tmp_path / folder)
    monkeypatch.setenv("ORTDIST_PROJECT", str(tmp_path))
    workflow = tmp_path / "ci" / ci.WORKFLOW
    workflow.write_text(workflow.read_text().replace("macos-14", "macos-13"))
    stale = tmp_path / "ci" / "cibuildwheel" / "gone.toml"
    stale.write_text(ci.HEADER + "\n")
    (tmp_path / "recipes" / "dml-windows-x64.toml").unlink()
    assert main(["matrix", "--check"]) == 1
    err = capsys.readouterr().err
    for rel in ("cibuildwheel/dml-windows-x64.toml", "cibuildwheel/gone.toml", ci.WORKFLOW):
        assert f"ci/{rel}" in err
    assert "run `ortdist matrix`" in err
    assert main(["matrix"]) == 0
    assert not stale.exists() and not (tmp_path / "ci" / "cibuildwheel" / "dml-windows-x64.toml").exists()
    assert (tmp_path / "ci" / "README.md").is_file()  # hand-written files are left alone
    assert main(["matrix", "--check"]) == 0


def test_the_workflow_passes_actionlint(project: Path, tmp_path: Path) -> None:
    actionlint = tool("actionlint")
    if actionlint is None:
        pytest.skip("actionlint is not installed (nox -s tests installs it)")
    workflow = project / "ci" / ci.WORKFLOW
    result = subprocess.run([actionlint, str(workflow)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # and it is really linting: a typo in a matrix property is caught
    broken = tmp_path / "broken.yml"
    broken.write_text(workflow.read_text().replace("matrix.recipe }}/*.whl", "matrix.recpe }}/*.whl"))
    result = subprocess.run([actionlint, str(broken)], capture_output=True, text=True)
    assert result.returncode != 0 and 'property "recpe" is not defined' in result.stdout
