"""Plan-only recipes: plans that would run where they claim to.

Nothing builds these recipes here, so their plans are checked by property, per platform, instead of
pinned copies of their argv (which enforced whatever the planner printed, /ortdist paths on macOS
included): a plan for a machine without a root names no in-root path, no in-root dependency tree
and no compiler launcher set up in a root; every plan switches its EPs on; a wheel names the repair
tool of its platform.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from ortdist import registry
from ortdist.compiler_cache import CACHES
from ortdist.errors import RecipeError
from ortdist.paths import IN_ROOT, IN_ROOT_COMPILER, IN_ROOT_EP_WHEELS, IN_ROOT_TOOLS_VENV
from ortdist.plan import BuildPlan, make_plan
from ortdist.project import plan_for
from ortdist.recipe import Recipe
from ortdist.toolchains import load_toolchain

PROJECT_RECIPES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "recipes").glob("*.toml"))
PLAN_ONLY = ["android-arm64", "coreml-macos-arm64", "dml-windows-x64", "ios-arm64", "tensorrt-linux"]
# Built on a runner's own OS (the NDK on Linux, Xcode on macOS, Visual Studio on Windows): no root.
NO_ROOT = ["android-arm64", "coreml-macos-arm64", "dml-windows-x64", "ios-arm64"]
# Where a root mounts ortdist's trees and tools (paths.py): meaningless on a machine without one.
IN_ROOT_PATH = re.compile(
    "|".join(rf"{p}(?![\w.-])" for p in (IN_ROOT, IN_ROOT_TOOLS_VENV, IN_ROOT_EP_WHEELS, IN_ROOT_COMPILER))
)
# The spec, written out rather than read from the registry it checks: ORT's CMake switch per EP.
EP_SWITCHES = {
    "android-arm64": ["onnxruntime_USE_NNAPI_BUILTIN", "onnxruntime_USE_XNNPACK"],
    "coreml-macos-arm64": ["onnxruntime_USE_COREML"],
    "dml-windows-x64": ["onnxruntime_USE_DML"],
    "ios-arm64": ["onnxruntime_USE_COREML"],
    "tensorrt-linux": ["onnxruntime_USE_CUDA", "onnxruntime_USE_TENSORRT"],
}
# The wheel-repair tool of each platform; Android and iOS recipes make static libraries, no wheel.
REPAIR = {
    "android-arm64": "",
    "coreml-macos-arm64": "delocate",
    "dml-windows-x64": "delvewheel",
    "ios-arm64": "",
    "tensorrt-linux": "auditwheel",
}


def plan_of(project: Path, recipe: str, cache: str | None = None) -> BuildPlan:
    return plan_for(recipe, project, cache)[0]


def handed_on(plan: BuildPlan) -> list[str]:
    """Every string the plan gives the machine it runs on: its commands (the defines included) and
    the compiler cache's launcher and environment."""
    cache = plan.compiler_cache
    return [
        *plan.configure_argv(),
        *plan.build_argv(2),
        cache.launcher,
        *(f"{k}={v}" for k, v in cache.env({}).items()),
    ]


def in_root(text: str) -> bool:
    return IN_ROOT_PATH.search(text) is not None


def test_the_plan_only_recipes_and_those_without_a_root(project: Path) -> None:
    assert [r for r in PROJECT_RECIPES if plan_of(project, r).toolchain.plan_only] == PLAN_ONLY
    assert [r for r in PLAN_ONLY if not plan_of(project, r).toolchain.has_root] == NO_ROOT
    # tensorrt-linux is plan-only for want of TensorRT, but builds in the Debian root like cuda-linux.
    assert plan_of(project, "tensorrt-linux").toolchain.kind == "debian-sysroot"


# --- no root: nothing of one ----------------------------------------------------------------------


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("recipe", NO_ROOT)
def test_without_a_root_the_plan_names_no_in_root_path(project: Path, recipe: str, cache: str) -> None:
    plan = plan_of(project, recipe, cache)
    found = [s for s in handed_on(plan) if in_root(s)]
    assert found == [], f"{recipe} builds on {plan.toolchain.needs}: no root there, yet its plan names {found}"
    assert not in_root(json.dumps(plan.summary()))  # nor does `ortdist plan` show one


@pytest.mark.parametrize("recipe", NO_ROOT)
def test_without_a_root_cmake_trees_are_relative_to_the_work_directory(project: Path, recipe: str) -> None:
    """The runner has no /ortdist: the source, build and install trees are named relative to the
    recipe's work directory, which the commands run in (CMake makes such paths absolute)."""
    plan = plan_of(project, recipe)
    argv = plan.configure_argv()
    trees = {
        "-S": argv[argv.index("-S") + 1],
        "-B": argv[argv.index("-B") + 1],
        "CMAKE_INSTALL_PREFIX": plan.cmake_defines["CMAKE_INSTALL_PREFIX"],
        "cmake --build": plan.build_argv(2)[2],
    }
    absolute = {k: v for k, v in trees.items() if PurePosixPath(v).is_absolute()}
    assert absolute == {}, f"{recipe}: absolute paths of the root's layout on a machine without one"
    assert trees["-B"] == trees["cmake --build"]


@pytest.mark.parametrize("recipe", NO_ROOT)
def test_without_a_root_cmake_gets_no_in_root_dependency_tree(project: Path, recipe: str) -> None:
    """The version's dependency sources (ONNX) are unpacked into a root; without one, ORT's CMake
    fetches them itself, pinned by its cmake/deps.txt."""
    plan = plan_of(project, recipe)
    handed = {k: v for k, v in plan.cmake_defines.items() if k.startswith("FETCHCONTENT_SOURCE_DIR_")}
    assert handed == {}


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("recipe", NO_ROOT)
def test_without_a_root_there_is_no_compiler_launcher(project: Path, recipe: str, cache: str) -> None:
    """ortdist's compiler caches live at in-root paths (their directory, sccache's binary); a machine
    without a root gets none, whichever the command line or $ORTDIST_COMPILER_CACHE asks for."""
    plan = plan_of(project, recipe, cache)
    launchers = {k: v for k, v in plan.cmake_defines.items() if k.endswith("_COMPILER_LAUNCHER")}
    assert launchers == {}
    assert plan.compiler_cache.env({"CCACHE_MAXSIZE": "1G", "SCCACHE_BUCKET": "b"}) == {}
    assert plan.summary()["compiler_cache"] == "none"


# --- every plan-only recipe -----------------------------------------------------------------------


@pytest.mark.parametrize("recipe", PLAN_ONLY)
def test_every_ep_of_the_recipe_is_switched_on(project: Path, recipe: str) -> None:
    plan = plan_of(project, recipe)
    argv = plan.configure_argv()
    switches = sorted(a[2:].removesuffix("=ON") for a in argv if a.startswith("-D") and a.endswith("=ON"))
    assert [s for s in switches if s in {sw for sws in EP_SWITCHES.values() for sw in sws}] == EP_SWITCHES[recipe]
    for ep in plan.providers:  # and each EP's whole registry switch, as the registry states it
        assert [f"-D{k}={v}" for k, v in ep.cmake.items() if f"-D{k}={v}" not in argv] == [], ep.name


@pytest.mark.parametrize("recipe", PLAN_ONLY)
def test_a_wheel_names_the_repair_tool_of_its_platform(project: Path, recipe: str) -> None:
    plan = plan_of(project, recipe)
    assert plan.wheel_repair == REPAIR[recipe]
    assert plan.summary()["wheel_repair"] == (REPAIR[recipe] or None)
    assert plan.builds_wheel == bool(REPAIR[recipe])
    assert ("repair" in plan.steps) == bool(REPAIR[recipe])


def switched_on(plan: BuildPlan) -> list[str]:
    """The EP switches (any EP's, from the registry) the configure command turns on."""
    switches = {key for ep in registry.providers().values() for key in ep.cmake}
    return sorted(k for k, v in plan.cmake_defines.items() if k in switches and v == "ON")


@pytest.mark.parametrize(
    ("line", "where"),
    [
        # after [ep_cmake.tensorrt], the file's last table: switches off an EP the recipe lists
        ('onnxruntime_USE_CUDA = "OFF"', "ep_cmake.tensorrt.onnxruntime_USE_CUDA"),
        # a top-level dotted key, before any table: switches on an EP the recipe does not list
        ('cmake.onnxruntime_USE_DNNL = "ON"', "cmake.onnxruntime_USE_DNNL"),
    ],
)
def test_a_toolchain_cannot_switch_eps(
    project: Path, tmp_path: Path, recipe_from: Callable[..., Recipe], line: str, where: str
) -> None:
    """EP switches come from the recipe's execution_providers alone: a toolchain's [cmake] or
    [ep_cmake] define would build another set of EPs than the plan lists (and the wheel names)."""
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    path = tmp_path / "toolchains" / "cuda12-tensorrt.toml"
    text = path.read_text()
    path.write_text(f"{line}\n{text}" if line.startswith("cmake.") else f"{text}{line}\n")
    recipe = recipe_from(
        'toolchain = "cuda12-tensorrt"\nexecution_providers = ["tensorrt"]\n[cuda]\narchitectures = ["90"]\n'
    )
    with pytest.raises(RecipeError, match="EP switch") as err:
        make_plan(recipe, load_toolchain(tmp_path, "cuda12-tensorrt"), ())
    assert err.value.where == f"{path} key '{where}'"
    assert "execution_providers" in str(err.value.fix)


# --- the facts behind it ----------------------------------------------------------------------------


def test_in_root_paths_are_recognised_as_such() -> None:
    named = ["/ortdist", "CCACHE_BASEDIR=/ortdist", "/ortdist/build", "-Dx=/opt/ortdist-wheels/a", "/opt/ortdist-tools"]
    named += ["-B/opt/ortdist-compiler/newer-binutils/", "/opt/ortdist-compiler"]
    assert [s for s in named if not in_root(s)] == []
    assert [s for s in ["source/cmake", "build", "/ortdistro", "/opt/ortdist-toolsets", "ccache"] if in_root(s)] == []
    assert not in_root("/opt/ortdist-compilers")


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('ORTDIST_X_DIR = "{shims}/x"', "cmake.ORTDIST_X_DIR"),
        ('ORTDIST_X = "/ortdist/work/x"', "cmake.ORTDIST_X"),
        ('CMAKE_CXX_COMPILER = "{compiler}/bin/g++"', "cmake.CMAKE_CXX_COMPILER"),
        ('CMAKE_FIND_ROOT_PATH = "{deps}/pybind11"', "cmake.CMAKE_FIND_ROOT_PATH"),
    ],
)
def test_a_toolchain_without_a_root_cannot_name_a_path_inside_one(
    project: Path, tmp_path: Path, recipe_from: Callable[..., Recipe], line: str, key: str
) -> None:
    (tmp_path / "toolchains").mkdir()
    path = tmp_path / "toolchains" / "macos-xcode.toml"
    path.write_text(f"{(project / 'toolchains' / 'macos-xcode.toml').read_text()}{line}\n")  # [cmake] is last
    recipe = recipe_from('target = "arm64-apple-darwin"\ntoolchain = "macos-xcode"\n[wheel]\npython = ["3.13"]\n')
    with pytest.raises(RecipeError, match="is a path inside a root, but xcode builds run on the runner") as err:
        make_plan(recipe, load_toolchain(tmp_path, "macos-xcode"), ())
    assert err.value.where == f"toolchains/macos-xcode.toml key '{key}'"
