"""The binding step: the main build's own binding commands, retargeted at each extra CPython's
headers, compiled in the build root; the root's own Python needs nothing more."""

from __future__ import annotations

import pytest

from ortdist.errors import BuildError
from ortdist.pipeline.steps import binding

from .conftest import MakeEnv
from .helpers import StepEnv

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
    (env.layout.build.host / "CMakeCache.txt").write_text(CMAKE_CACHE)
    env.runner.on("-t commands onnxruntime_pybind11_state", stdout=COMMANDS)
    return env


def test_only_the_extra_python_gets_a_binding_compiled(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    out = binding.run(env.ctx, env.state)
    listing, compile_ = env.runner.commands
    assert listing.argv == ("ninja", "-C", "/ortdist/build", "-t", "commands", "onnxruntime_pybind11_state")
    assert compile_.argv == ("ninja", "-C", "/ortdist/work/bindings", "-j", "2")
    top = (env.layout.work.host / "bindings" / "build.ninja").read_text()
    assert "subninja /ortdist/work/binding-3.11/build.ninja\n" in top
    assert compile_.root == env.state.roots.build
    overlay = [b for b in compile_.binds if str(b.inside) == "/ortdist/python/3.11"]
    assert [(b.host, b.read_only) for b in overlay] == [(env.state.roots.pythons["3.11"], True)]
    ninja = (env.layout.work.host / "binding-3.11" / "build.ninja").read_text()
    assert "-isystem /ortdist/python/3.11/usr/include/python3.11 -isystem /ortdist/python/3.11/usr/include " in ninja
    assert "/ortdist/python/3.11/site-packages/numpy/_core/include" in ninja
    assert "/usr/include/python3.13" not in ninja
    assert f"build /ortdist/work/binding-3.11/{OBJ}/a.cc.o: run /ortdist/source/onnxruntime/python/a.cc" in ninja
    assert out.modules == {"3.11": env.layout.work.host / "binding-3.11" / "onnxruntime_pybind11_state.so"}
    assert out.times.key == "binding_s" and out.times.timed and set(out.times.seconds) == {"3.11"}


def test_a_failed_binding_compile_names_the_python(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    env.runner.on("ninja -C /ortdist/work/bindings", returncode=1)
    with pytest.raises(BuildError, match=r"compiling the Python binding for 3\.11 failed"):
        binding.run(env.ctx, env.state)


def test_a_main_build_without_the_binding_is_refused(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    (env.layout.build.host / "CMakeCache.txt").write_text("CMAKE_BUILD_TYPE:STRING=Release\n")
    with pytest.raises(BuildError, match="_Python_INCLUDE_DIR"):
        binding.run(env.ctx, env.state)
    assert env.runner.commands == []


def test_every_extra_version_compiles_in_one_ninja_run_timed_from_its_log(make_env: MakeEnv) -> None:
    """One ninja over all versions' files (no idle core between versions); each version's seconds
    are its own commands' times from .ninja_log, the last run of a command counting once."""
    env = ready(make_env("cpu-linux", python=("3.13", "3.10", "3.11")))

    def compile_all(cmd: object) -> None:
        log = env.layout.work.host / "bindings" / ".ninja_log"
        log.write_text(
            "# ninja log v6\n"
            f"0\t4000\t0\t/ortdist/work/binding-3.10/{OBJ}/a.cc.o\t1\n"
            f"100\t3100\t0\t/ortdist/work/binding-3.11/{OBJ}/a.cc.o\t2\n"
            "4000\t4500\t0\t/ortdist/work/binding-3.10/onnxruntime_pybind11_state.so\t3\n"
            f"5000\t7000\t0\t/ortdist/work/binding-3.11/{OBJ}/a.cc.o\t4\n"
        )

    env.runner.on("ninja -C /ortdist/work/bindings", compile_all)
    out = binding.run(env.ctx, env.state)
    assert [c.argv[:3] for c in env.runner.commands][1:] == [("ninja", "-C", "/ortdist/work/bindings")]
    top = (env.layout.work.host / "bindings" / "build.ninja").read_text()
    assert top.count("subninja ") == 2 and "/ortdist/work/binding-3.10/build.ninja" in top
    assert out.times.seconds == {"3.10": 4.5, "3.11": 2.0}


def test_ninja_saying_it_had_nothing_to_do_is_recorded(make_env: MakeEnv) -> None:
    """From the step's log: the report's threshold-free signal for bindings that were all up to date."""
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    env.runner.on("ninja -C /ortdist/work/bindings", stdout="ninja: Entering directory `x'\nninja: no work to do.\n")
    assert binding.run(env.ctx, env.state).manifest() == {"binding": {"ninja_no_work": True}}
    env.runner.on("ninja -C /ortdist/work/bindings", stdout="[1/2] Building CXX object a.cc.o\n")  # the later wins
    assert binding.run(env.ctx, env.state).manifest() == {"binding": {"ninja_no_work": False}}
