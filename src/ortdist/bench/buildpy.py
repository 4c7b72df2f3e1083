"""ONNX Runtime's own ``tools/ci_build/build.py`` driven with a plan's settings, for the benchmark.

The benchmark compares ortdist's configure/build with build.py "driven with equivalent flags on
the same patched source and sysroot": the same root, the same binds (``/ortdist/source``,
``/ortdist/deps/onnx``, ``/ortdist/shims``, the compiler cache) and the same environment, so only
the driver differs. Everything here is pure: it turns a :class:`BuildPlan` into build.py's argv.

How build.py 1.21.0 assembles CMake's command line (``generate_build_tree``), which is why every
plan define can ride in ``--cmake_extra_defines``::

    cmake <src>/cmake [--compile-no-warning-as-error] <~80 fixed -Donnxruntime_*=...>
          <-D for each --cmake_extra_defines> [-G <generator>] -DCMAKE_BUILD_TYPE=<config>

CMake keeps the last ``-D`` of a name, so our defines override build.py's fixed ones; only
``CMAKE_BUILD_TYPE`` must come from ``--config`` (build.py appends it after ours). Measured on
cpu-linux: with :data:`ORT_DEFAULTS_RESTORED` added, build.py's CMakeCache.txt holds the same
values as ortdist's, build.ninja is byte-identical (see :data:`UNEQUAL` for the tree path), and
``--update`` configures in an empty network namespace with the source mounted read-only.
"""

from __future__ import annotations

from ..paths import IN_ROOT_SOURCE
from ..plan import BuildPlan

BUILDPY = str(IN_ROOT_SOURCE / "tools" / "ci_build" / "build.py")
# build.py runs with the root's /usr/bin/python3: it passes -DPython_EXECUTABLE=sys.executable.
PYTHON = "python3"
PHASES = {"update": "--update", "build": "--build"}
CONFIGS = ("Debug", "MinSizeRel", "Release", "RelWithDebInfo")  # build.py's --config choices

# The flags buildpy_argv passes, and why each is needed.
FLAGS: dict[str, str] = {
    "--build_dir DIR": "required; the tree is DIR/<config> (e.g. /ortdist/build/Release), not DIR",
    "--config C": "the plan's CMAKE_BUILD_TYPE; build.py appends -DCMAKE_BUILD_TYPE=C after our defines",
    "--update / --build": "one phase per call: --update runs CMake only; --build runs "
    "`cmake --build DIR/C --config C -- -jN`. With neither, build.py would update, build AND test",
    "--skip_submodule_sync": "otherwise --update runs `git submodule sync/update --init --recursive`: network, "
    "and the root has no git and the source is a tarball, not a checkout",
    "--build_shared_lib": "onnxruntime_BUILD_SHARED_LIB=ON (also implied by --enable_pybind)",
    "--enable_pybind": "onnxruntime_ENABLE_PYTHON=ON: the pybind module and the Python package in the tree",
    "--skip_tests": "belt and braces: no test phase; it does NOT stop the tests being compiled "
    "(onnxruntime_BUILD_UNIT_TESTS comes from the plan's defines)",
    "--parallel N": "the build phase's -jN (build.py's default is 1 job)",
    "--cmake_generator Ninja": "ortdist's generator; build.py's Linux default is Unix Makefiles",
    "--allow_running_as_root": "build.py refuses uid 0, and commands in the root run as root",
    "--use_xnnpack / --use_dnnl": "per EP, so build.py's own EP logic runs (wheel name, oneDNN runtime defines)",
    "--cmake_extra_defines K=V...": "every plan define but CMAKE_BUILD_TYPE, then ORT_DEFAULTS_RESTORED: "
    "FETCHCONTENT_* offline mode, the onnx source, the sysroot shims, protoc, Python, the compiler "
    "launcher; last, so that build.py's own fixed defines are overridden",
}

# Flags left out on purpose.
NOT_USED: dict[str, str] = {
    "--use_cache": "hardcodes ccache (the plan may use sccache) and adds onnxruntime_BUILD_CACHE=ON, which only "
    "matters for MSVC/CUDA; the plan's CMAKE_<LANG>_COMPILER_LAUNCHER is passed as a define instead",
    "--compile_no_warning_as_error": "ortdist keeps ORT's COMPILE_WARNING_AS_ERROR; without this flag (and "
    "with SYSTEM_COLLECTIONURI unset, as in the root's clean env) build.py adds nothing either",
    "--build_wheel": "runs `setup.py bdist_wheel` in DIR/C, which imports packaging, setuptools and wheel: "
    "the root's python3 has none of them (no download is attempted; it fails on import)",
    "--path_to_protoc_exe": "the same as ONNX_CUSTOM_PROTOC_EXECUTABLE, which the toolchain already defines",
    "--use_binskim_compliant_compile_flags": "would add hardening CMAKE_C/CXX_FLAGS and linker flags "
    "(-D_FORTIFY_SOURCE=2, -fstack-protector-strong, -O3, -Wl,--strip-all, ...) that ortdist does not use",
}

# Build.py's execution-provider switches are registry data: providers.toml `build_py_flag`.

# What build.py's fixed defines change from ORT's CMake option() defaults (CMakeCache.txt diff
# against ortdist's cpu-linux tree), set back so both trees configure and compile alike.
ORT_DEFAULTS_RESTORED: dict[str, str] = {
    # build.py: ON only with --enable_training. ORT's default ON adds -DENABLE_CPU_FP16_TRAINING_OPS
    # to every ORT compile line: no effect on inference code, but different command lines (and
    # compiler-cache keys) than ortdist's.
    "onnxruntime_ENABLE_CPU_FP16_OPS": "ON",
    # build.py: ON. Only affects test targets, which are not built.
    "onnxruntime_GENERATE_TEST_REPORTS": "OFF",
    # build.py: ON. Only read by the TensorRT EP.
    "onnxruntime_USE_TENSORRT_BUILTIN_PARSER": "OFF",
    # build.py: ON. Only read for WebAssembly builds.
    "onnxruntime_ENABLE_WEBASSEMBLY_EXCEPTION_CATCHING": "OFF",
    "onnxruntime_ENABLE_WEBASSEMBLY_EXCEPTION_THROWING": "OFF",
}

# Defines the plan sets that no build.py flag can express: they reach CMake only through
# --cmake_extra_defines (along with every toolchain [cmake] / [ep_cmake] define).
ORTDIST_ONLY_DEFINES: dict[str, str] = {
    "onnxruntime_BUILD_UNIT_TESTS": "build.py has no switch; --skip_tests only skips running them, and ORT's "
    "default ON would compile the tests and make FetchContent look for GoogleTest (not in the sysroot)",
    "CMAKE_C_COMPILER_LAUNCHER": "see --use_cache",
    "CMAKE_CXX_COMPILER_LAUNCHER": "see --use_cache",
    "CMAKE_INSTALL_PREFIX": "build.py never installs; passed so the two caches match",
    "PYTHON_EXECUTABLE": "build.py sets only Python_EXECUTABLE",
}

# What stays unequal whatever the flags, for the benchmark report.
UNEQUAL: tuple[str, ...] = (
    "tree location: build.py configures <build_dir>/<config>, ortdist /ortdist/build, and compile lines differ "
    "in that path (so the two do not share compiler-cache hits) - unless the harness makes <build_dir>/<config> "
    "a symlink to /ortdist/build: CMake takes the resolved path, and build.ninja and CMakeFiles/rules.ninja "
    "then came out byte-identical to ortdist's (cpu-linux and dnnl-linux, measured)",
    "phases: build.py has no install step (ortdist runs `cmake --install --strip`) and no usable wheel step "
    "in the sysroot (see NOT_USED['--build_wheel']); its tree holds the same Python package layout "
    "(<tree>/onnxruntime), so ortdist's wheel/repair steps can package it",
    "output: build.py logs every CMake/ninja line; ortdist shows a progress bar and writes logs",
)


def tree_dir(plan: BuildPlan, build_dir: str) -> str:
    """Where build.py puts the CMake tree: one directory per --config under --build_dir."""
    return f"{build_dir.rstrip('/')}/{_config(plan)}"


def _config(plan: BuildPlan) -> str:
    return plan.cmake_defines.get("CMAKE_BUILD_TYPE", plan.recipe.build_type)


def extra_defines(plan: BuildPlan) -> dict[str, str]:
    """What --cmake_extra_defines carries: the plan's defines, then ORT's defaults build.py changes."""
    defines = {k: v for k, v in plan.cmake_defines.items() if k != "CMAKE_BUILD_TYPE"}
    for key, value in ORT_DEFAULTS_RESTORED.items():
        defines.setdefault(key, value)
    return defines


def buildpy_argv(plan: BuildPlan, build_dir: str, jobs: int, phase: str) -> list[str]:
    """build.py's argv for one phase ("update" or "build"), to run inside the build root.

    The script is named by its in-root path, so the working directory does not matter; it needs
    the same binds and environment (compiler cache) as ortdist's configure, the source may be
    read-only, and ``build_dir`` must be writable.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")  # build.py reads 0 as "all CPUs"
    config = _config(plan)
    if config not in CONFIGS:
        raise ValueError(f"build.py has no --config {config!r}; it takes {', '.join(CONFIGS)}")
    if plan.toolchain.kind != "debian-sysroot":
        raise ValueError(f"build.py comparison runs in a debian-sysroot root, not {plan.toolchain.kind!r}")
    unknown = [ep.name for ep in plan.providers if ep.name != "cpu" and not ep.build_py_flag]
    if unknown:
        raise ValueError(f"no build.py switch mapped for execution provider(s) {', '.join(unknown)}")

    argv = [
        PYTHON,
        BUILDPY,
        "--build_dir",
        build_dir,
        "--config",
        config,
        PHASES[phase],
        "--skip_submodule_sync",
        "--skip_tests",
        "--parallel",
        str(jobs),
        "--cmake_generator",
        "Ninja",
        "--allow_running_as_root",
    ]
    if plan.builds_shared_library:
        argv.append("--build_shared_lib")
    if plan.builds_wheel:
        argv.append("--enable_pybind")
    argv += [ep.build_py_flag for ep in plan.providers if ep.build_py_flag]
    # Last: nargs="+" takes every following word.
    argv += ["--cmake_extra_defines", *(f"{k}={v}" for k, v in extra_defines(plan).items())]
    return argv
