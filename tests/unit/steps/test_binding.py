"""The bindings of the extra CPythons: the main build's own binding commands, retargeted at each
version's headers, joined to CMake's graph before the compile (one ninja run makes the core and
every binding); the binding step collects what that run made."""

from __future__ import annotations

import pytest

from ortdist.errors import BuildError
from ortdist.pipeline.state import Compiled
from ortdist.pipeline.steps import binding, build

from .conftest import MakeEnv
from .helpers import StepEnv, host_of

OBJ = "CMakeFiles/onnxruntime_pybind11_state.dir/ortdist/source/onnxruntime/python"
PY = "-isystem /usr/include/python3.13 -isystem /usr/lib/python3/dist-packages/numpy/_core/include"
COMMANDS = "\n".join(
    [
        f"ccache /usr/bin/c++ {PY} -O3 -o {OBJ}/a.cc.o -c /ortdist/source/onnxruntime/python/a.cc",
        f": && /usr/bin/c++ -shared -o onnxruntime_pybind11_state.so {OBJ}/a.cc.o libonnxruntime_session.a && :",
    ]
)
CMAKE_CACHE = (
    "CMAKE_BUILD_TYPE:STRING=Release\n"
    "_Python_INCLUDE_DIR:INTERNAL=/usr/include/python3.13\n"
    "_Python_NumPy_INCLUDE_DIR:INTERNAL=/usr/lib/python3/dist-packages/numpy/_core/include\n"
)


def ready(env: StepEnv) -> StepEnv:
    env.put_roots()
    env.put_source()
    env.layout.build.host.mkdir(parents=True)
    env.layout.work.host.mkdir(parents=True)  # as configure leaves them
    (env.layout.build.host / "CMakeCache.txt").write_text(CMAKE_CACHE)
    env.runner.on("-t commands onnxruntime_pybind11_state", stdout=COMMANDS)
    return env


def compiled(env: StepEnv, no_work: bool = False) -> None:
    env.state.put(Compiled(tree_compile_s=1.0, compiler_cache={}, ninja_no_work=no_work))


def test_the_extra_pythons_bindings_join_the_cores_ninja_run(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    env.runner.on(
        "ccache --zero-stats", lambda cmd: host_of(cmd, "/ortdist/work/compiler-cache-stats.txt").write_text("")
    )
    build.run(env.ctx, env.state)
    listing, compile_ = env.runner.commands
    assert listing.argv == ("ninja", "-C", "/ortdist/build", "-t", "commands", "onnxruntime_pybind11_state")
    # one ninja run over the top file: no separate run for the bindings after the core
    assert " ninja -C /ortdist/build -f ortdist-pythons.ninja -j 2;" in compile_.argv[2]
    assert "cmake --build" not in compile_.argv[2]
    top = (env.layout.build.host / "ortdist-pythons.ninja").read_text()
    assert "include build.ninja\nsubninja /ortdist/work/binding-3.11/build.ninja\n" in top
    assert "default /ortdist/work/binding-3.11/onnxruntime_pybind11_state.so\n" in top
    assert compile_.root == env.state.roots.build
    overlay = [b for b in compile_.binds if str(b.inside) == "/ortdist/python/3.11"]
    assert [(b.host, b.read_only) for b in overlay] == [(env.state.roots.pythons["3.11"], True)]
    ninja = (env.layout.work.host / "binding-3.11" / "build.ninja").read_text()
    assert "-isystem /ortdist/python/3.11/usr/include/python3.11 -isystem /ortdist/python/3.11/usr/include " in ninja
    assert "/ortdist/python/3.11/site-packages/numpy/_core/include" in ninja
    assert "/usr/include/python3.13" not in ninja
    assert f"build /ortdist/work/binding-3.11/{OBJ}/a.cc.o: run /ortdist/source/onnxruntime/python/a.cc ||" in ninja


def test_the_root_pythons_build_alone_keeps_cmakes_own_driver(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13",)))
    build.run(env.ctx, env.state)
    (compile_,) = env.runner.commands
    assert "cmake --build /ortdist/build --parallel 2;" in compile_.argv[2]
    assert not (env.layout.build.host / "ortdist-pythons.ninja").exists()


def test_a_main_build_without_the_binding_is_refused_before_compiling(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    (env.layout.build.host / "CMakeCache.txt").write_text("CMAKE_BUILD_TYPE:STRING=Release\n")
    with pytest.raises(BuildError, match="_Python_INCLUDE_DIR"):
        build.run(env.ctx, env.state)
    assert env.runner.commands == []


def test_each_version_is_timed_from_the_builds_log(make_env: MakeEnv) -> None:
    """Each version's seconds are its own commands' times in the build tree's .ninja_log, the last
    run of a command counting once; the core's outputs are not counted."""
    env = ready(make_env("cpu-linux", python=("3.13", "3.10", "3.11")))
    compiled(env)
    for version in ("3.10", "3.11"):
        binding.module(env.ctx, version).parent.mkdir(parents=True)
        binding.module(env.ctx, version).write_bytes(b"\x7fELF")
    (env.layout.build.host / ".ninja_log").write_text(
        "# ninja log v6\n"
        "0\t9000\t0\tlibonnxruntime_session.a\t9\n"
        f"0\t4000\t0\t/ortdist/work/binding-3.10/{OBJ}/a.cc.o\t1\n"
        f"100\t3100\t0\t/ortdist/work/binding-3.11/{OBJ}/a.cc.o\t2\n"
        "4000\t4500\t0\t/ortdist/work/binding-3.10/onnxruntime_pybind11_state.so\t3\n"
        f"5000\t7000\t0\t/ortdist/work/binding-3.11/{OBJ}/a.cc.o\t4\n"
    )
    out = binding.run(env.ctx, env.state)
    assert env.runner.commands == []  # nothing left to run: the build step's ninja made them
    assert out.modules == {v: binding.module(env.ctx, v) for v in ("3.10", "3.11")}
    assert out.times.key == "binding_s" and out.times.timed
    assert out.times.seconds == {"3.10": 4.5, "3.11": 2.0}
    groups = binding.compile_groups(env.ctx)
    assert [groups(o) for o in ("_deps/x.o", "x.o", "/ortdist/work/binding-3.10/x.o")] == [
        "dependencies",
        "onnxruntime",
        "python_bindings",
    ]


def test_a_version_the_build_did_not_make_is_named(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.10", "3.11")))
    compiled(env)
    binding.module(env.ctx, "3.10").parent.mkdir(parents=True)
    binding.module(env.ctx, "3.10").write_bytes(b"\x7fELF")
    with pytest.raises(BuildError, match=r"no Python binding for 3\.11"):
        binding.run(env.ctx, env.state)


def test_ninja_saying_it_had_nothing_to_do_is_recorded(make_env: MakeEnv) -> None:
    """From the build's ninja run: the report's threshold-free signal for bindings all up to date."""
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    binding.module(env.ctx, "3.11").parent.mkdir(parents=True)
    binding.module(env.ctx, "3.11").write_bytes(b"\x7fELF")
    compiled(env, no_work=True)
    assert binding.run(env.ctx, env.state).manifest() == {"binding": {"ninja_no_work": True}}
