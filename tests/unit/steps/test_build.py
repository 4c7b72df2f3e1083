"""The build step: ninja through the compiler cache in one shell of the build root, its stats
parsed into Compiled, the tree's compile time accumulated, and a failure's first error quoted."""

from __future__ import annotations

import json

import pytest

from ortdist.errors import BuildError
from ortdist.pipeline.runner import Command, Effect, Result
from ortdist.pipeline.steps import build

from .conftest import MakeEnv
from .helpers import StepEnv, host_of

STATS = "/ortdist/work/compiler-cache-stats.txt"


def ready(env: StepEnv) -> StepEnv:
    env.put_roots()
    env.put_source()
    env.layout.build.host.mkdir(parents=True)
    env.layout.work.host.mkdir(parents=True)  # as configure leaves them
    return env


def writes_stats(text: str, returncode: int = 0, stdout: str = "") -> Effect:
    def effect(cmd: Command) -> Result:
        host_of(cmd, STATS).write_text(text)
        return Result(returncode, stdout)

    return effect


def test_ccache_stats_are_parsed_into_compiled(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on(
        "cmake --build", writes_stats("direct_cache_hit\t7\npreprocessed_cache_hit\t2\ncache_miss\t3\nx\t1\n")
    )
    out = build.run(env.ctx, env.state)
    (cmd,) = env.runner.commands
    assert cmd.argv[:2] == ("/bin/sh", "-c") and cmd.root == env.state.roots.build
    assert cmd.argv[2] == (
        "ccache --zero-stats >/dev/null 2>&1; cmake --build /ortdist/build --parallel 2; rc=$?; "
        f"ccache --print-stats > {STATS} 2>&1; exit $rc"
    )
    assert out.compiler_cache == {"name": "ccache", "direct_cache_hit": 7, "preprocessed_cache_hit": 2, "cache_miss": 3}
    assert out.manifest()["compiler_cache"]["cache_miss"] == 3


def test_sccache_is_stopped_in_the_same_shell(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", cache_name="sccache"))
    stats = {"stats": {"cache_hits": {"counts": {"C/C++": 40}}, "cache_misses": {"counts": {"C/C++": 2, "CUDA": 1}}}}
    env.runner.on("cmake --build", writes_stats(json.dumps(stats)))
    out = build.run(env.ctx, env.state)
    script = env.runner.commands[0].argv[2]
    assert (
        script.index("--show-stats") < script.index("/ortdist/tools/sccache --stop-server") < script.index("exit $rc")
    )
    assert out.compiler_cache == {"name": "sccache", "cache_hit": 40, "cache_miss": 3}


def test_stats_of_an_earlier_run_are_not_reported_again(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    stale = env.layout.work.host / "compiler-cache-stats.txt"
    stale.write_text("cache_miss\t999\n")
    assert build.run(env.ctx, env.state).compiler_cache == {"name": "ccache"}


def test_the_trees_compile_time_adds_up_over_runs(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    ledger = env.layout.build.host / ".ortdist-compile-seconds"
    ledger.write_text("1234.5\n")
    out = build.run(env.ctx, env.state)
    assert 1234.5 <= out.tree_compile_s < 1240
    assert float(ledger.read_text()) == out.tree_compile_s
    assert out.manifest()["build_tree_compile_s"] == out.tree_compile_s


def test_a_failed_compile_names_the_target_and_its_errors(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    output = "\n".join(
        [
            "[1/900] Building CXX object a.o",
            "FAILED: CMakeFiles/onnxruntime_mlas.dir/sgemm.cpp.o",
            "ccache /usr/bin/c++ -O2 -c sgemm.cpp",
            "sgemm.cpp:12:3: error: 'foo' was not declared in this scope",
            "ninja: build stopped: subcommand failed.",
        ]
    )
    env.runner.on("cmake --build", writes_stats("cache_miss\t1\n", returncode=1, stdout=output))
    with pytest.raises(BuildError) as info:
        build.run(env.ctx, env.state)
    message = str(info.value)
    assert "the build failed (exit 1)" in message
    assert "failed target: CMakeFiles/onnxruntime_mlas.dir/sgemm.cpp.o" in message
    assert "command: ccache /usr/bin/c++ -O2 -c sgemm.cpp" in message
    assert "error: 'foo' was not declared" in message
    assert (env.layout.build.host / ".ortdist-compile-seconds").is_file()  # the time spent still counts
    assert "FAILED: CMakeFiles" in env.ctx.log_path("build").read_text()


NINJA_LOG = (
    "# ninja log v5\n"
    "0\t4000\t0\t_deps/abseil_cpp-build/absl/base/CMakeFiles/x.dir/a.cc.o\t1\n"
    "0\t9000\t0\tCMakeFiles/onnxruntime_framework.dir/b.cc.o\t2\n"
    "4000\t5500\t0\t_deps/re2-build/CMakeFiles/re2.dir/re2.cc.o\t3\n"
    "100\t600\t0\tCMakeFiles/onnxruntime_framework.dir/b.cc.o\t4\n"  # rebuilt: its last run counts
)


def test_the_compile_is_split_into_dependencies_and_ort(make_env: MakeEnv) -> None:
    """What ORT compiles under _deps/ (the dependencies from source) is reported apart from ORT itself."""
    env = ready(make_env("cpu-linux"))

    def compiles(cmd: Command) -> Result:
        (env.layout.build.host / ".ninja_log").write_text(NINJA_LOG)
        return writes_stats("")(cmd)

    env.runner.on("cmake --build", compiles)
    out = build.run(env.ctx, env.state)
    assert out.manifest()["compile_command_s"] == {"dependencies": 5.5, "onnxruntime": 0.5}


def test_no_ninja_log_reports_no_split(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("cmake --build", writes_stats(""))
    assert build.run(env.ctx, env.state).manifest()["compile_command_s"] == {}


def test_ninja_saying_it_had_nothing_to_do_is_recorded(make_env: MakeEnv) -> None:
    """The report's threshold-free signal for a build that reused the whole tree."""
    env = ready(make_env("cpu-linux"))
    idle = "[0/2] Re-checking globbed directories...\nninja: no work to do.\n"
    env.runner.on("cmake --build", writes_stats("cache_miss\t0\n", stdout=idle))
    assert build.run(env.ctx, env.state).manifest()["build"] == {"ninja_no_work": True}
    env.runner.effects.clear()
    env.runner.on("cmake --build", writes_stats("cache_miss\t1\n", stdout="[1/1] Linking CXX shared library x.so\n"))
    assert build.run(env.ctx, env.state).manifest()["build"] == {"ninja_no_work": False}


SCCACHE_UNREACHABLE = """sccache: Starting the server...
sccache: error: Server startup failed: cache storage failed to read: Unexpected (temporary) at read => send http request

Context:
   url: http://127.0.0.1:1/.sccache_check
   service: webdav

Backtrace:
   0: <unknown>
  14: __libc_start_call_main
             at ./csu/../sysdeps/nptl/libc_start_call_main.h:58:16
"""


def test_a_compiler_cache_that_cannot_reach_its_backend_stops_the_build_with_its_words(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sccache's server checks its storage at start and then fails every compile: the build shell
    starts it first, and a refusal is a named error, not a ninja failure deep in the log."""
    monkeypatch.setenv("SCCACHE_WEBDAV_ENDPOINT", "http://127.0.0.1:1")
    env = ready(make_env("cpu-linux", cache_name="sccache"))
    start_file = "/ortdist/work/compiler-cache-start.txt"

    def refuses(cmd: Command) -> Result:
        host_of(cmd, start_file).write_text(SCCACHE_UNREACHABLE)
        return Result(build.CACHE_START_FAILED, "")

    env.runner.on("cmake --build", refuses)
    with pytest.raises(BuildError) as info:
        build.run(env.ctx, env.state)
    script = env.runner.commands[0].argv[2]
    assert script.startswith(f"/ortdist/tools/sccache --start-server > {start_file} 2>&1 || exit 97; ")
    message = str(info.value)
    assert "the compiler cache sccache did not start, so nothing was compiled" in message
    assert "url: http://127.0.0.1:1/.sccache_check" in message and "__libc_start" not in message
    assert "SCCACHE_WEBDAV_ENDPOINT" in message and "--compiler-cache ccache" in message


def test_ccache_has_no_server_to_start(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("cmake --build", writes_stats("cache_miss\t1\n"))
    build.run(env.ctx, env.state)
    assert "--start-server" not in env.runner.commands[0].argv[2]
