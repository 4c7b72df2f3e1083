from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.bench.buildpy import (
    BUILDPY,
    FLAGS,
    ORT_DEFAULTS_RESTORED,
    ORTDIST_ONLY_DEFINES,
    buildpy_argv,
    extra_defines,
    tree_dir,
)
from ortdist.compiler_cache import CACHES
from ortdist.patches import read_series
from ortdist.plan import BuildPlan, make_plan
from ortdist.recipe import Recipe, load_recipe
from ortdist.toolchains import load_toolchain


def plan_of(project: Path, recipe: Recipe, cache: str = "ccache") -> BuildPlan:
    series = read_series(project / "patches" / "1.21.0")
    return make_plan(recipe, load_toolchain(project, recipe.toolchain), series, CACHES[cache])


@pytest.fixture
def cpu(project: Path) -> BuildPlan:
    return plan_of(project, load_recipe(project / "recipes" / "cpu-linux.toml"))


def defines_of(argv: list[str]) -> list[str]:
    return argv[argv.index("--cmake_extra_defines") + 1 :]


def test_cpu_linux_update_argv(cpu: BuildPlan) -> None:
    argv = buildpy_argv(cpu, "/ortdist/build", 2, "update")
    assert argv[:2] == ["python3", "/ortdist/source/tools/ci_build/build.py"] == ["python3", BUILDPY]
    head = argv[: argv.index("--cmake_extra_defines")]
    assert head[2:] == [
        "--build_dir",
        "/ortdist/build",
        "--config",
        "Release",
        "--update",
        "--skip_submodule_sync",  # no git/network
        "--skip_tests",
        "--parallel",
        "2",
        "--cmake_generator",
        "Ninja",
        "--allow_running_as_root",
        "--build_shared_lib",
        "--enable_pybind",
    ]
    for absent in ("--build", "--build_wheel", "--use_cache", "--compile_no_warning_as_error", "--test"):
        assert absent not in argv


def test_build_phase_differs_only_in_the_phase_flag(cpu: BuildPlan) -> None:
    update = buildpy_argv(cpu, "/ortdist/build", 4, "update")
    build = buildpy_argv(cpu, "/ortdist/build", 4, "build")
    assert [a for a in update if a != "--update"] == [a for a in build if a != "--build"]
    assert "--update" not in build
    assert build[build.index("--parallel") + 1] == "4"


def test_every_plan_define_but_the_build_type_rides_in_extra_defines(cpu: BuildPlan) -> None:
    defines = defines_of(buildpy_argv(cpu, "/ortdist/build", 2, "update"))
    expected = [f"{k}={v}" for k, v in cpu.cmake_defines.items() if k != "CMAKE_BUILD_TYPE"]
    assert defines[: len(expected)] == expected  # plan order, then the restored ORT defaults
    assert defines[len(expected) :] == [f"{k}={v}" for k, v in ORT_DEFAULTS_RESTORED.items()]
    assert not any(d.startswith("CMAKE_BUILD_TYPE=") for d in defines)  # --config sets it, last
    for needed in (
        "onnxruntime_BUILD_UNIT_TESTS=OFF",
        "FETCHCONTENT_FULLY_DISCONNECTED=ON",
        "FETCHCONTENT_SOURCE_DIR_ONNX=/ortdist/deps/onnx",
        "FETCHCONTENT_SOURCE_DIR_MP11=/ortdist/deps/mp11/libs/mp11",
        "CMAKE_CXX_COMPILER=/opt/ortdist-compiler/bin/x86_64-linux-gnu-g++",
        "CMAKE_FIND_ROOT_PATH=/ortdist/deps/pybind11/pybind11",
        "CMAKE_SHARED_LINKER_FLAGS=-static-libstdc++ -static-libgcc -Wl,-z,noexecstack",
        "ONNX_CUSTOM_PROTOC_EXECUTABLE=/usr/bin/protoc",
        "Python_EXECUTABLE=/usr/bin/python3",
        "CMAKE_CXX_COMPILER_LAUNCHER=ccache",
        "onnxruntime_ENABLE_CPU_FP16_OPS=ON",
    ):
        assert needed in defines
    # argparse would read a word starting with '-' as a flag, one starting with '@' as a file.
    assert not [d for d in defines if d.startswith(("-", "@")) or "=" not in d]
    assert set(ORTDIST_ONLY_DEFINES) <= set(extra_defines(cpu))


def test_a_debian_trixie_plans_find_package_defines_ride_along(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    """build.py gets the root's -dev packages the same way ortdist's own configure does."""
    defines = extra_defines(plan_of(project, recipe_from("")))
    assert defines["FETCHCONTENT_TRY_FIND_PACKAGE_MODE"] == "ALWAYS"
    assert defines["FETCHCONTENT_SOURCE_DIR_ONNX"] == "/ortdist/deps/onnx"
    assert defines["re2_DIR"] == "/ortdist/shims/re2"
    assert defines["Protobuf_DIR"] == "/ortdist/shims/protobuf"
    assert "FETCHCONTENT_SOURCE_DIR_RE2" not in defines


def test_plan_values_win_over_restored_defaults(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from('[cmake_defines]\nonnxruntime_ENABLE_CPU_FP16_OPS = "OFF"\n')
    defines = extra_defines(plan_of(project, recipe))
    assert defines["onnxruntime_ENABLE_CPU_FP16_OPS"] == "OFF"


def test_compiler_launcher_follows_the_plan(project: Path) -> None:
    plan = plan_of(project, load_recipe(project / "recipes" / "cpu-linux.toml"), cache="sccache")
    defines = defines_of(buildpy_argv(plan, "/ortdist/build", 2, "build"))
    assert "CMAKE_C_COMPILER_LAUNCHER=/ortdist/tools/sccache" in defines
    assert "--use_cache" not in buildpy_argv(plan, "/ortdist/build", 2, "build")


def test_ep_flags(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    plan = plan_of(project, recipe_from('execution_providers = ["xnnpack", "dnnl"]\n'))
    argv = buildpy_argv(plan, "/ortdist/build", 2, "update")
    head = argv[: argv.index("--cmake_extra_defines")]
    assert head[-2:] == ["--use_dnnl", "--use_xnnpack"]  # registry order
    assert "googlexnnpack_DIR=/ortdist/shims/xnnpack" in defines_of(argv)
    assert "onnxruntime_USE_DNNL=ON" in defines_of(argv)


def test_build_type_and_tree(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    plan = plan_of(project, recipe_from('build_type = "RelWithDebInfo"\n'))
    argv = buildpy_argv(plan, "/ortdist/bench/", 1, "update")
    assert argv[argv.index("--config") + 1] == "RelWithDebInfo"
    assert tree_dir(plan, "/ortdist/bench/") == "/ortdist/bench/RelWithDebInfo"


@pytest.mark.parametrize(
    ("jobs", "phase", "message"),
    [(2, "test", "phase must be one of"), (0, "build", "jobs must be at least 1"), (2, "", "phase")],
)
def test_bad_arguments(cpu: BuildPlan, jobs: int, phase: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        buildpy_argv(cpu, "/ortdist/build", jobs, phase)


def test_only_the_debian_sysroot(cpu: BuildPlan) -> None:
    other = dataclasses.replace(cpu, toolchain=dataclasses.replace(cpu.toolchain, kind="macos-xcode"))
    with pytest.raises(ValueError, match="debian-sysroot"):
        buildpy_argv(other, "/ortdist/build", 2, "update")


def test_unmapped_ep_is_refused(cpu: BuildPlan) -> None:
    from ortdist import registry

    unmapped = dataclasses.replace(registry.providers()["cuda"], build_py_flag="")
    with pytest.raises(ValueError, match="cuda"):
        buildpy_argv(dataclasses.replace(cpu, providers=(*cpu.providers, unmapped)), "/ortdist/build", 2, "update")


def test_flags_are_documented() -> None:
    for flag in ("--skip_submodule_sync", "--allow_running_as_root", "--cmake_extra_defines K=V..."):
        assert flag in FLAGS
