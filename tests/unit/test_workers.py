"""Distributed compilation's pure side: worker lists, distcc's environment, its logs read back,
the probe's verdicts, a worker's allowed compilers and the wrappers of the unpacked tree."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

import pytest

from ortdist import workers
from ortdist.checks.elf import interpreter
from ortdist.errors import RecipeError
from ortdist.project import plan_for
from ortdist.workers import Worker

# From a real run (tests/integration/test_distributed_compile.py), trimmed.
CLIENT_LOG = """\
distcc[16768] compile from f0.cc to f0.o
distcc[16768] exec on 10.213.1.2:3632/2: /opt/ortdist-compiler/bin/x86_64-linux-gnu-g++ -O2 -c -o obj/f0.o src/f0.cc
distcc[16768] cpp src/f0.cc on localhost completed ok
distcc[16768] (dcc_pump_readwrite) ERROR: failed to write: Broken pipe
distcc[16768] (dcc_r_result_header) ERROR: server provided no answer. Is the server configured to allow access
distcc[16768] exec on 10.213.2.2:3632/2: /opt/ortdist-compiler/bin/x86_64-linux-gnu-g++ -O2 -c -o obj/f0.o src/f0.cc
distcc[16768] compile src/f0.cc on 10.213.2.2:3632/2 completed ok
distcc[16780] ERROR: nonblocking connect to 10.213.1.2:3632 failed: Connection refused
distcc[16780] compile src/f4.cc on 10.213.2.2:3632/2 completed ok
distcc[16790] compile src/f5.cc on 10.213.1.2:3632/2 completed ok
distcc[16791] failed to distribute src/f6.cc to 10.213.1.2:3632/2, running locally instead
distcc[16791] compile src/f6.cc on localhost completed ok
"""


def test_workers_parse_with_distccs_defaults() -> None:
    assert workers.parse_workers("10.0.0.2, build-2:4000/8\tbuild-3/1") == (
        Worker("10.0.0.2", 3632, 2),
        Worker("build-2", 4000, 8),
        Worker("build-3", 3632, 1),
    )
    assert workers.parse_workers("") == ()
    assert Worker("build-2", 4000, 8).spec == "build-2:4000/8"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("user@host", "not HOST[:PORT][/SLOTS]"),
        ("host:99999", "port 1-65535"),
        ("host/0", "at least one slot"),
        ("localhost/4", "run here anyway"),
        ("a a:3632/4", "named twice"),
    ],
)
def test_a_bad_worker_list_is_refused_with_how_to_write_one(text: str, said: str) -> None:
    with pytest.raises(RecipeError) as caught:
        workers.parse_workers(text)
    assert said in str(caught.value) and caught.value.where == workers.WHERE


def test_the_client_environment_sends_ccache_misses_through_distcc_with_fallback() -> None:
    host = {"DISTCC_IO_TIMEOUT": "60", "DISTCC_HOSTS": "elsewhere", "PATH": "/x"}
    env = workers.client_env([Worker("a"), Worker("b", 4000, 4)], PurePosixPath("/ortdist/work/distcc"), host)
    assert env == {
        "DISTCC_IO_TIMEOUT": "60",  # the user's own distcc settings pass
        "CCACHE_PREFIX": "/ortdist/distcc/bin/distcc",
        "DISTCC_HOSTS": "a:3632/2 b:4000/4",  # ... but never over the probed workers
        "DISTCC_DIR": "/ortdist/work/distcc",
        "DISTCC_LOG": "/ortdist/work/distcc/client.log",
        "DISTCC_FALLBACK": "1",
    }


def test_distccs_log_says_where_each_compile_finished_and_which_were_retried() -> None:
    assert workers.compiled_where(CLIENT_LOG) == {"10.213.2.2:3632": 2, "10.213.1.2:3632": 1, "local": 1}
    assert workers.retried(CLIENT_LOG) == 2  # 16768 (worker died mid-compile), 16780 (refused)
    assert workers.compiled_where("") == {} and workers.retried("") == 0


def test_the_probe_compiles_locally_then_through_each_worker_alone_without_fallback() -> None:
    script = workers.probe_script([Worker("a"), Worker("b")], ["/c/g++", "-B/x/"], PurePosixPath("/p"))
    lines = script.splitlines()
    assert lines[:2] == ["cd /p", "/c/g++ -B/x/ -O2 -c probe.cc -o local.o || exit 1"]
    through = [line for line in lines if "/ortdist/distcc/bin/distcc" in line]
    assert len(through) == 2
    assert "DISTCC_HOSTS=a:3632/2 DISTCC_FALLBACK=0 DISTCC_DIR=/p/w0" in through[0]
    assert "DISTCC_HOSTS=b:3632/2 DISTCC_FALLBACK=0 DISTCC_DIR=/p/w1" in through[1]


def test_the_probe_verdicts() -> None:
    asked = [Worker("a"), Worker("b"), Worker("c"), Worker("d")]
    output = "worker 0 rc=0 same=1\nworker 1 rc=0 same=0\nworker 2 rc=116 same=0\nworker 3 rc=110 same=0\n"
    logs = {
        2: "distcc[1] ERROR: nonblocking connect to c:3632 failed: Connection refused\n",
        3: "distcc[2] (dcc_r_result_header) ERROR: server provided no answer.\n",
    }
    results = workers.read_probe(asked, output, logs)
    assert [r.status for r in results] == ["ok", "differs", "unreachable", "failed"]
    assert [r.usable for r in results] == [True, False, False, False]
    assert "Connection refused" in results[2].detail and "no answer" in results[3].detail
    # No line for a worker at all (the probe stopped before it): not usable, never "ok".
    assert workers.read_probe(asked[:1], "", {})[0].status == "failed"


def test_the_probe_compiler_is_the_builds_own() -> None:
    defines = {"CMAKE_CXX_COMPILER": "/opt/c/g++", "CMAKE_CXX_FLAGS": "-B/opt/c/newer-binutils/ -idirafter /x"}
    assert workers.probe_compiler(defines) == ["/opt/c/g++", "-B/opt/c/newer-binutils/", "-idirafter", "/x"]
    clang = {"CMAKE_CXX_COMPILER": "/usr/bin/clang++", "CMAKE_CXX_COMPILER_TARGET": "t", "CMAKE_SYSROOT": "/s"}
    assert workers.probe_compiler(clang) == ["/usr/bin/clang++", "--target=t", "--sysroot=/s"]
    assert workers.probe_compiler({}) == ["/usr/bin/c++"]


def test_a_worker_serves_exactly_its_toolchains_compilers() -> None:
    own = {"CMAKE_CXX_COMPILER": "/opt/c/g++", "CMAKE_C_COMPILER": "/opt/c/gcc", "CMAKE_C_FLAGS": "-O2"}
    assert workers.allowed_compilers(own) == ("/opt/c/g++", "/opt/c/gcc")
    cross = [{"CMAKE_C_COMPILER": "/usr/bin/aarch64-linux-gnu-gcc"}]
    assert workers.allowed_compilers({}, cross) == (
        "/usr/bin/cc",
        "/usr/bin/c++",
        "/usr/bin/gcc",
        "/usr/bin/g++",
        "/usr/bin/aarch64-linux-gnu-gcc",
    )


def test_the_unpacked_tree_gets_wrappers_through_the_roots_loader(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "usr" / "bin").mkdir(parents=True)
    (tree / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    (tree / "usr" / "lib" / "x86_64-linux-gnu" / "libpopt.so.0").write_bytes(b"")
    shutil.copy("/bin/true", tree / "usr" / "bin" / "distcc")  # an ELF with this machine's loader
    workers.finish_tree(tree)
    loader = interpreter(Path("/bin/true").read_bytes())
    assert loader.startswith("/lib")
    text = (tree / "bin" / "distccd").read_text()
    assert text == (
        f"#!/bin/sh\nexec {loader} --library-path /ortdist/distcc/usr/lib/x86_64-linux-gnu "
        '/ortdist/distcc/usr/bin/distccd "$@"\n'
    )
    assert (tree / "bin" / "distcc").stat().st_mode & 0o111


def test_interpreter_refuses_what_is_not_elf() -> None:
    with pytest.raises(ValueError, match="not an ELF"):
        interpreter(b"#!/bin/sh\n" + b"\0" * 64)


def test_workers_change_where_compiles_run_not_the_plans_digest(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORTDIST_WORKERS", raising=False)
    local, _ = plan_for("slim-linux", project)
    assert local.workers == ()
    remote, _ = plan_for("slim-linux", project, workers="10.0.0.2/4")
    assert remote.workers == (Worker("10.0.0.2", 3632, 4),)
    assert remote.digest() == local.digest() and remote.summary() == local.summary()
    monkeypatch.setenv("ORTDIST_WORKERS", "10.0.0.3")
    assert plan_for("slim-linux", project)[0].workers == (Worker("10.0.0.3"),)
    monkeypatch.setenv("ORTDIST_WORKERS", "")  # a CI variable nobody set
    assert plan_for("slim-linux", project)[0].workers == ()


def test_workers_need_ccache(project: Path) -> None:
    with pytest.raises(RecipeError) as caught:
        plan_for("slim-linux", project, "sccache", workers="10.0.0.2")
    assert "--compiler-cache ccache" in caught.value.fix
