"""The build step: ninja through the compiler cache in one shell of the build root, its stats
parsed into Compiled, the tree's compile time accumulated, and a failure's first error quoted."""

from __future__ import annotations

import json
import time

import pytest

from ortdist import workers
from ortdist.errors import BuildError
from ortdist.pipeline.runner import Command, Effect, Result
from ortdist.pipeline.steps import build

from .conftest import MakeEnv
from .helpers import StepEnv, host_of

STATS = "/ortdist/work/compiler-cache-stats.txt"
# The root's Python alone: CMake's own driver (the extra versions' graph is test_binding's).
ONE = ("3.13",)


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
    env = ready(make_env("cpu-linux", python=ONE))
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
    env = ready(make_env("cpu-linux", cache_name="sccache", python=ONE))
    stats = {"stats": {"cache_hits": {"counts": {"C/C++": 40}}, "cache_misses": {"counts": {"C/C++": 2, "CUDA": 1}}}}
    env.runner.on("cmake --build", writes_stats(json.dumps(stats)))
    out = build.run(env.ctx, env.state)
    script = env.runner.commands[0].argv[2]
    assert (
        script.index("--show-stats") < script.index("/ortdist/tools/sccache --stop-server") < script.index("exit $rc")
    )
    assert out.compiler_cache == {"name": "sccache", "cache_hit": 40, "cache_miss": 3}


def test_stats_of_an_earlier_run_are_not_reported_again(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=ONE))
    stale = env.layout.work.host / "compiler-cache-stats.txt"
    stale.write_text("cache_miss\t999\n")
    assert build.run(env.ctx, env.state).compiler_cache == {"name": "ccache"}


def test_the_trees_compile_time_adds_up_over_runs(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=ONE))
    ledger = env.layout.build.host / ".ortdist-compile-seconds"
    ledger.write_text("1234.5\n")
    out = build.run(env.ctx, env.state)
    assert 1234.5 <= out.tree_compile_s < 1240
    assert float(ledger.read_text()) == out.tree_compile_s
    assert out.manifest()["build_tree_compile_s"] == out.tree_compile_s


def test_a_stopped_sitting_still_counts_in_the_trees_compile_time(make_env: MakeEnv) -> None:
    """A long (CUDA) compile spans sittings: one stopped by Ctrl-C or SIGTERM is part of what the
    tree cost, so the ledger gains its seconds before the interrupt goes on up."""
    env = ready(make_env("cpu-linux", python=ONE))
    ledger = env.layout.build.host / ".ortdist-compile-seconds"
    ledger.write_text("100.0\n")

    def stopped(cmd: Command) -> Result:
        time.sleep(0.2)  # the sitting's compile, until the signal
        raise KeyboardInterrupt

    env.runner.on("cmake --build", stopped)
    with pytest.raises(KeyboardInterrupt):
        build.run(env.ctx, env.state)
    assert 100.2 <= float(ledger.read_text()) < 105


def test_a_failed_compile_names_the_target_and_its_errors(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=ONE))
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
    env = ready(make_env("cpu-linux", python=ONE))

    def compiles(cmd: Command) -> Result:
        (env.layout.build.host / ".ninja_log").write_text(NINJA_LOG)
        return writes_stats("")(cmd)

    env.runner.on("cmake --build", compiles)
    out = build.run(env.ctx, env.state)
    assert out.manifest()["compile_command_s"] == {"dependencies": 5.5, "onnxruntime": 0.5}


def test_no_ninja_log_reports_no_split(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=ONE))
    env.runner.on("cmake --build", writes_stats(""))
    assert build.run(env.ctx, env.state).manifest()["compile_command_s"] == {}


def test_ninja_saying_it_had_nothing_to_do_is_recorded(make_env: MakeEnv) -> None:
    """The report's threshold-free signal for a build that reused the whole tree."""
    env = ready(make_env("cpu-linux", python=ONE))
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
    env = ready(make_env("cpu-linux", cache_name="sccache", python=ONE))
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
    env = ready(make_env("cpu-linux", python=ONE))
    env.runner.on("cmake --build", writes_stats("cache_miss\t1\n"))
    build.run(env.ctx, env.state)
    assert "--start-server" not in env.runner.commands[0].argv[2]


# --- distcc workers (--workers) --------------------------------------------------------------------

PROBE_DIR = "/ortdist/work/distcc/probe"
CLIENT = "/ortdist/work/distcc/client.log"


def answers(lines: str, logs: dict[int, str] | None = None) -> Effect:
    """The probe: its verdict lines, and distcc's log for each worker where given."""

    def effect(cmd: Command) -> Result:
        assert host_of(cmd, f"{PROBE_DIR}/probe.cc").is_file()  # the probe's source is bound in
        for n, text in (logs or {}).items():
            host_of(cmd, f"{PROBE_DIR}/w{n}.log").write_text(text)
        return Result(0, lines)

    return effect


def compiles_on(log: str) -> Effect:
    def effect(cmd: Command) -> Result:
        host_of(cmd, CLIENT).write_text(log)
        host_of(cmd, STATS).write_text("cache_miss\t3\n")
        return Result(0)

    return effect


def with_workers(make_env: MakeEnv, hosts: str) -> StepEnv:
    return ready(make_env("slim-linux", python=ONE, workers=workers.parse_workers(hosts)))


def test_workers_that_probe_alike_take_the_misses_with_their_slots_added_to_the_jobs(make_env: MakeEnv) -> None:
    env = with_workers(make_env, "10.0.0.2/4 10.0.0.3/2")
    env.runner.on("probe.cc", answers("worker 0 rc=0 same=1\nworker 1 rc=0 same=1\n"))
    env.runner.on(
        "cmake --build",
        compiles_on(
            "distcc[1] compile a.cc on 10.0.0.2:3632/4 completed ok\n"
            "distcc[2] compile b.cc on 10.0.0.3:3632/2 completed ok\n"
            "distcc[3] compile c.cc on localhost completed ok\n"
        ),
    )
    out = build.run(env.ctx, env.state)
    probe, compile_ = env.runner.commands
    assert probe.argv[:2] == ("/bin/sh", "-c") and "DISTCC_FALLBACK=0" in probe.argv[2]
    assert "--parallel 8" in compile_.argv[2]  # 2 local + 4 + 2
    assert compile_.env is not None
    assert compile_.env["CCACHE_PREFIX"] == "/ortdist/distcc/bin/distcc"
    assert compile_.env["DISTCC_HOSTS"] == "10.0.0.2:3632/4 10.0.0.3:3632/2"
    assert out.workers == {
        "engine": "distcc",
        "asked": ["10.0.0.2:3632/4", "10.0.0.3:3632/2"],
        "used": ["10.0.0.2:3632/4", "10.0.0.3:3632/2"],
        "left_out": {},
        "compiles": {"10.0.0.2:3632": 1, "10.0.0.3:3632": 1, "local": 1},
        "retried": 0,
    }
    assert out.manifest()["workers"]["compiles"]["local"] == 1
    assert out.compiler_cache == {"name": "ccache", "cache_miss": 3}  # ccache's own statistics still read


def test_a_worker_that_does_not_answer_is_left_out_with_a_warning(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = with_workers(make_env, "10.0.0.2/4 10.0.0.3/2")
    refused = "distcc[9] ERROR: nonblocking connect to 10.0.0.2:3632 failed: Connection refused\n"
    env.runner.on("probe.cc", answers("worker 0 rc=116 same=0\nworker 1 rc=0 same=1\n", {0: refused}))
    env.runner.on("cmake --build", compiles_on(""))
    out = build.run(env.ctx, env.state)
    compile_ = env.runner.commands[1]
    assert "--parallel 4" in compile_.argv[2] and compile_.env is not None
    assert compile_.env["DISTCC_HOSTS"] == "10.0.0.3:3632/2"
    assert out.workers["used"] == ["10.0.0.3:3632/2"]
    assert "Connection refused" in out.workers["left_out"]["10.0.0.2:3632/4"]
    assert "worker 10.0.0.2:3632/4 did not answer" in capsys.readouterr().err


def test_no_worker_answering_compiles_locally_without_distcc(make_env: MakeEnv) -> None:
    env = with_workers(make_env, "10.0.0.2")
    env.runner.on("probe.cc", answers("worker 0 rc=116 same=0\n", {0: "distcc[9] ERROR: connect to x failed\n"}))
    env.runner.on("cmake --build", writes_stats("cache_miss\t3\n"))
    out = build.run(env.ctx, env.state)
    compile_ = env.runner.commands[1]
    assert "--parallel 2" in compile_.argv[2] and compile_.env is not None and "CCACHE_PREFIX" not in compile_.env
    assert out.workers["used"] == [] and "compiles" not in out.workers


@pytest.mark.parametrize(
    ("verdict", "said"),
    [("rc=0 same=0", "compiled the probe differently"), ("rc=110 same=0", "answered but could not compile the probe")],
)
def test_a_worker_with_another_compiler_stops_the_build_before_anything_compiles(
    make_env: MakeEnv, verdict: str, said: str
) -> None:
    env = with_workers(make_env, "10.0.0.2 10.0.0.3")
    env.runner.on("probe.cc", answers(f"worker 0 rc=0 same=1\nworker 1 {verdict}\n"))
    with pytest.raises(BuildError) as caught:
        build.run(env.ctx, env.state)
    assert f"10.0.0.3:3632/2 {said}" in str(caught.value)
    assert "ortdist worker portable-glibc2.17" in (caught.value.fix or "")
    assert not any("cmake --build" in text for text in env.runner.texts())


def test_without_workers_there_is_no_probe_and_no_distcc(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux", python=ONE))
    env.runner.on("cmake --build", writes_stats("cache_miss\t3\n"))
    out = build.run(env.ctx, env.state)
    (compile_,) = env.runner.commands
    assert compile_.env is not None and not any(k.startswith(("DISTCC", "CCACHE_PREFIX")) for k in compile_.env)
    assert out.workers == {} and "workers" not in out.manifest()
