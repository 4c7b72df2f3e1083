"""The configure step: CMake in the build root only when the command changed, a fresh tree when
the source or toolchain did, and reduced builds' kernel registrations rewritten first."""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath

import pytest

from ortdist.errors import BuildError
from ortdist.pipeline.runner import Command, Result
from ortdist.pipeline.steps import configure

from .conftest import MakeEnv
from .helpers import StepEnv, host_of


def ready(env: StepEnv) -> StepEnv:
    env.put_roots()
    env.put_source()
    return env


def writes_build_ninja(cmd: Command) -> None:
    """What CMake leaves behind: the build tree's build.ninja."""
    (host_of(cmd, "/ortdist/build") / "build.ninja").write_text("rule cc\n")


def test_configure_runs_the_plans_cmake_in_the_build_root(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    build = env.layout.build.host
    build.mkdir(parents=True)
    (build / ".ortdist-tree").write_text(env.plan.tree_identity() + "\n")
    (build / "CMakeCache.txt").write_text("stale cache of another configure")
    out = configure.run(env.ctx, env.state)
    (cmd,) = env.runner.commands
    assert list(cmd.argv) == env.plan.configure_argv()
    assert cmd.root == env.state.roots.build
    assert {str(b.inside) for b in cmd.binds} >= {
        "/ortdist/source",
        "/ortdist/build",
        "/ortdist/work",
        "/ortdist/ccache",
    }
    assert cmd.env is not None and cmd.env["CCACHE_DIR"] == "/ortdist/ccache"
    assert cmd.env["SOURCE_DATE_EPOCH"] == "1700000000"
    assert out.reconfigured is True
    assert not (build / "CMakeCache.txt").exists()  # CMake starts from the new command's defines
    assert (build / ".ortdist-configure").read_text() == env.plan.configure_digest() + "\n"
    assert (build / ".cmake" / "api" / "v1" / "query" / "codemodel-v2").is_file()  # the bundler's link graph


def test_an_unchanged_configure_is_skipped_and_a_changed_one_reruns(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("cmake -G Ninja", writes_build_ninja)
    assert configure.run(env.ctx, env.state).manifest() == {"configure": {"reconfigured": True}}
    skipped = configure.run(env.ctx, env.state)
    assert skipped.reconfigured is False
    assert skipped.manifest() == {"configure": {"reconfigured": False}}  # the report's "no-op" signal
    assert len(env.runner.commands) == 1
    defines = {**env.plan.cmake_defines, "onnxruntime_ENABLE_LTO": "ON"}
    changed = dataclasses.replace(env.ctx, plan=dataclasses.replace(env.plan, cmake_defines=defines))
    assert configure.run(changed, env.state).reconfigured is True
    assert "-Donnxruntime_ENABLE_LTO=ON" in env.runner.commands[-1].argv
    # A stamp without build.ninja (an interrupted generate) is not trusted either.
    (env.layout.build.host / "build.ninja").unlink()
    env.runner.effects.clear()
    assert configure.run(changed, env.state).reconfigured is True


def test_a_changed_tree_identity_wipes_the_build_tree(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    build = env.layout.build.host
    (build / "obj").mkdir(parents=True)
    (build / "obj" / "kernel.o").write_text("compiled from another source")
    (build / ".ortdist-tree").write_text("another source\n")
    configure.run(env.ctx, env.state)
    assert not (build / "obj").exists()
    assert (build / ".ortdist-tree").read_text() == env.plan.tree_identity() + "\n"
    # The same identity keeps the tree (ninja resumes where it stopped).
    (build / "obj").mkdir()
    configure.run(env.ctx, env.state)
    assert (build / "obj").is_dir()


def test_a_failed_configure_quotes_cmakes_errors(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    output = "\n".join(
        [
            *(f"-- Looking for thing {i}" for i in range(40)),
            "CMake Error at cmake/deps.cmake:12 (find_package):",
            '  Could not find a package configuration file provided by "re2"',
            "-- Configuring incomplete",
        ]
    )
    env.runner.on("cmake -G Ninja", stdout=output, returncode=1)
    with pytest.raises(BuildError) as info:
        configure.run(env.ctx, env.state)
    message = str(info.value)
    assert "CMake configure failed:\n    CMake Error at cmake/deps.cmake:12 (find_package):" in message
    assert 'provided by "re2"' in message and "Looking for thing" not in message
    assert str(env.ctx.log_path("configure")) in message
    assert not (env.layout.build.host / ".ortdist-configure").exists()  # the next run configures again


def test_a_reduced_build_rewrites_kernel_registrations_before_configuring(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"))
    generated = "op_reduction.generated/onnxruntime/core/providers/cpu/cpu_execution_provider.cc"

    def reduce(cmd: Command) -> Result:
        out = host_of(cmd, PurePosixPath(cmd.argv[cmd.argv.index("--cmake_build_dir") + 1])) / generated
        out.parent.mkdir(parents=True)
        out.write_text("// reduced\n")
        return Result(0)

    env.runner.on("reduce_op_kernels.py", reduce)
    configure.run(env.ctx, env.state)
    reduce_cmd, cmake_cmd = env.runner.commands
    assert list(reduce_cmd.argv) == [
        "python3",
        "/ortdist/source/tools/ci_build/reduce_op_kernels.py",
        "--cmake_build_dir",
        "/ortdist/work/op-reduction",
        "--enable_type_reduction",  # a plain minimal build: no --is_extended_minimal_build_or_higher
        "/ortdist/work/models/ops.config",
    ]
    assert reduce_cmd.root == env.state.roots.build
    assert cmake_cmd.argv[0] == "cmake"
    assert (env.layout.build.host / generated).read_text() == "// reduced\n"


def test_a_reduction_that_writes_nothing_fails(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"))
    with pytest.raises(BuildError, match=r"wrote no op_reduction\.generated"):
        configure.run(env.ctx, env.state)
    assert not any("cmake -G" in t for t in env.runner.texts())


def test_a_common_page_size_build_gets_the_linkers_script_rewritten_before_cmake(make_env: MakeEnv) -> None:
    from ..test_relro import VERBOSE

    env = ready(make_env("slim-c-linux-aarch64"))
    env.runner.on("ld --verbose -shared -z relro", stdout=VERBOSE)
    env.runner.on(
        "reduce_op_kernels.py",
        lambda cmd: (
            (host_of(cmd, "/ortdist/work") / "op-reduction" / "op_reduction.generated").mkdir(parents=True) or Result(0)
        ),
    )
    configure.run(env.ctx, env.state)
    ld = env.only("--verbose")
    assert ld.argv[0] == "aarch64-linux-gnu-ld" and ld.root == env.state.roots.build
    texts = env.runner.texts()
    assert texts.index(ld.text) < next(i for i, t in enumerate(texts) if "cmake -G Ninja" in t)
    script = env.layout.build.host / "ortdist-relro.ld"
    assert "DATA_SEGMENT_ALIGN (CONSTANT (COMMONPAGESIZE), CONSTANT (COMMONPAGESIZE))" in script.read_text()
    # The script the flags name, in the build tree as CMake's link line sees it.
    assert f"-Wl,-T,{PurePosixPath('/ortdist/build') / script.name}" in " ".join(env.plan.configure_argv())
    before = script.stat().st_mtime_ns
    configure.run(env.ctx, env.state)
    assert script.stat().st_mtime_ns == before  # same bytes: not rewritten (no relink)


def test_a_full_build_runs_no_linker_for_a_script(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    configure.run(env.ctx, env.state)
    assert not env.matching("--verbose")
    assert not (env.layout.build.host / "ortdist-relro.ld").exists()
