"""Distributed compilation on real engines, end to end on this machine: two distcc workers
(`ortdist worker portable-glibc2.17`, Debian's distccd in cpu-linux's build root seen through an
overlay), each in a network namespace of its own reached over a veth pair, take the compiles of a
small ninja project that runs in that root through ccache and ortdist's distcc environment, as the
build step sets it. The workers' own logs (distccd's COMPILE_OK lines) show the compiles ran there
and distcc's client log agrees; the objects are byte-identical to a local compile. A worker killed
mid-compile costs a local retry, never an object; a worker that answers with another compiler is
caught by the probe the build step runs first, and one that does not answer is left out."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from ortdist import workers
from ortdist.compiler_cache import compiler_cache
from ortdist.paths import IN_ROOT_COMPILER, Cache
from ortdist.toolchains import Bind, load_toolchain, make_toolchain

from . import scratch_cache

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain and network namespaces need root"),
]
PROJECT = Path(__file__).resolve().parents[2]
TOOLCHAIN = "portable-glibc2.17"  # cpu-linux's: its root exists wherever the main recipe was built
COMPILER = f"{IN_ROOT_COMPILER}/bin/x86_64-linux-gnu-g++"
FLAGS = ["-B/opt/ortdist-compiler/newer-binutils/", "-O2", "-std=c++17", "-fPIC"]
FILES = 16  # each ~1-2 s of GCC: long enough to kill a worker while it compiles
SUBNET = "10.213"  # worker N: host side SUBNET.N.1, the worker SUBNET.N.2 (/30)


def source(n: int) -> str:
    return f"""#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
std::map<std::string, std::vector<int>> parse_{n}(const std::string& text) {{
  std::map<std::string, std::vector<int>> out;
  std::regex pair("([a-z]+)=([0-9]+){"x" * (n % 3)}");
  for (std::sregex_iterator it(text.begin(), text.end(), pair), end; it != end; ++it)
    out[(*it)[1]].push_back(std::stoi((*it)[2]) * {n + 1});
  std::ostringstream os;
  os << out.size();
  out[os.str()].push_back({n});
  return out;
}}
"""


@dataclass
class Worker:
    worker: workers.Worker
    process: subprocess.Popen[bytes]
    log: Path
    namespace: str

    def jobs(self) -> tuple[int, int]:
        """(compiles started, compiles finished OK) from distccd's own log."""
        text = self.log.read_text(errors="replace")
        return len(re.findall(r"\] compile from ", text)), len(re.findall(r" COMPILE_OK ", text))

    def kill(self) -> None:
        """Every process in the worker's namespace, at once: a worker machine that dies."""
        found = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True, check=False)
        for pid in found.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        self.process.wait(timeout=10)


def address(worker: Worker) -> str:
    """The worker as distcc's client log names it: 'HOST:PORT'."""
    return f"{worker.worker.host}:{worker.worker.port}"


def logged_ok(pool: list[Worker], expected: dict[str, int]) -> dict[str, int]:
    """Each worker's COMPILE_OK count, read until it is ``expected`` or 10 s have passed: distccd
    writes the line after it has sent the object, so the client can finish first."""
    for _ in range(100):
        found = {address(w): w.jobs()[1] for w in pool}
        if found == expected:
            break
        time.sleep(0.1)
    return found


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """cpu-linux's build root, with distcc unpacked beside it (made here: a worker has no network)."""
    cache = scratch_cache()
    toolchain = make_toolchain(load_toolchain(PROJECT, TOOLCHAIN))
    with open(os.devnull, "w") as log:
        build_root = toolchain.ensure_build_root(cache, log)
        toolchain.ensure_tool_tree(cache, build_root, workers.TREE, log)
    yield build_root


def netns(n: int) -> str:
    """Worker n's network namespace: named for this test run (its pid), so no other run's or the
    host's own namespaces are touched."""
    return f"ortdist-{os.getpid()}-w{n}"


def veth(n: int, end: str) -> str:
    """Worker n's veth end ("h": the host's, "w": the worker's), per run, within 15 characters."""
    return f"od{os.getpid() % 100_000}{end}{n}"


@pytest.fixture
def namespaces() -> Iterator[list[int]]:
    """Network namespaces netns(1..3), each joined to this one by a veth pair."""
    made = []
    try:
        for n in (1, 2, 3):
            name = netns(n)
            ip("netns", "add", name)
            made.append(n)
            ip("link", "add", veth(n, "h"), "type", "veth", "peer", "name", veth(n, "w"), "netns", name)
            ip("addr", "add", f"{SUBNET}.{n}.1/30", "dev", veth(n, "h"))
            ip("link", "set", veth(n, "h"), "up")
            ip("-n", name, "addr", "add", f"{SUBNET}.{n}.2/30", "dev", veth(n, "w"))
            ip("-n", name, "link", "set", veth(n, "w"), "up")
            ip("-n", name, "link", "set", "lo", "up")
        yield made
    finally:
        for n in made:
            # The pair goes with either end; a namespace is torn down only once nothing runs in it.
            subprocess.run(["ip", "link", "del", veth(n, "h")], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", netns(n)], capture_output=True, check=False)


def start_worker(n: int, state: Path, argv: list[str] | None = None) -> Worker:
    """``ortdist worker`` (or ``argv``) in namespace netns(n), waited for until distccd listens."""
    log = state.with_suffix(".log")
    listen = f"{SUBNET}.{n}.2"
    command = argv or [
        *(sys.executable, "-m", "ortdist", "worker", TOOLCHAIN),
        *("--listen", listen, "--allow", f"{SUBNET}.{n}.1/32", "--jobs", "2", "--state", str(state)),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["ip", "netns", "exec", netns(n), *command],
            cwd=PROJECT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "ORTDIST_CACHE": str(scratch_cache().root)},  # the tool tree `root` made there
        )
    for _ in range(300):
        if f"listening on {listen}:" in log.read_text(errors="replace"):
            return Worker(workers.Worker(listen, workers.DEFAULT_PORT, 2), process, log, netns(n))
        if process.poll() is not None:
            raise AssertionError(f"worker {n} exited: {log.read_text(errors='replace')}")
        time.sleep(0.1)
    raise AssertionError(f"worker {n} never listened: {log.read_text(errors='replace')}")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """FILES sources and a build.ninja compiling each through ccache, as the build's launcher does."""
    tree = tmp_path / "project"
    (tree / "src").mkdir(parents=True)
    rules = [
        "rule cxx",
        f"  command = ccache {shlex.join([COMPILER, *FLAGS])} -c $in -o $out",
    ]
    for n in range(FILES):
        (tree / "src" / f"f{n}.cc").write_text(source(n))
        rules.append(f"build obj/f{n}.o: cxx src/f{n}.cc")
    (tree / "build.ninja").write_text("\n".join(rules) + "\n")
    return tree


def compile_in_root(
    root: Path, tree: Path, run_dir: Path, used: list[workers.Worker], jobs: int
) -> subprocess.Popen[str]:
    """ninja over ``tree`` in the build root with an empty ccache (every compile a miss), sending
    the misses to ``used`` with the build step's environment (none: all local); objects and
    distcc's state land in ``run_dir``."""
    cache = scratch_cache()
    toolchain = make_toolchain(load_toolchain(PROJECT, TOOLCHAIN))
    ccache = compiler_cache("ccache")
    (run_dir / "ccache").mkdir(parents=True)
    (run_dir / "distcc").mkdir()
    binds = [
        Bind(tree, Path("/t")),
        Bind(run_dir, Path("/r")),
        Bind(run_dir / "ccache", ccache.in_root_dir),
        Bind(tool_tree(cache), workers.IN_ROOT_DISTCC, read_only=True),
    ]
    env = {**ccache.env({}), **(workers.client_env(used, PurePosixPath("/r/distcc"), {}) if used else {})}
    script = f"cd /t && ninja -j {jobs} >/r/ninja.txt 2>&1; rc=$?; cp -r obj /r/obj; exit $rc"
    argv = toolchain.wrap(root, ["/bin/sh", "-c", f"rm -rf /t/obj; {script}"], binds=binds, env=env)
    return subprocess.Popen(argv, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def tool_tree(cache: Cache) -> Path:
    # The finished tree, not a temp sibling an interrupted run left (.<name>.tmp-*, cleaned by the next build).
    (found,) = [p for p in cache.sysroots.glob(f"[!.]*-{workers.ENGINE}-*") if p.is_dir() and TOOLCHAIN + "-" in p.name]
    return found


def objects(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "obj").glob("*.o"))}


def finish(proc: subprocess.Popen[str], run_dir: Path) -> None:
    out, _ = proc.communicate(timeout=600)
    ninja = (run_dir / "ninja.txt").read_text(errors="replace") if (run_dir / "ninja.txt").is_file() else ""
    assert proc.returncode == 0, out + ninja


def probe(root: Path, tmp: Path, asked: list[workers.Worker]) -> list[workers.ProbeResult]:
    """The build step's probe (workers.probe_script / read_probe) against ``asked``."""
    cache = scratch_cache()
    toolchain = make_toolchain(load_toolchain(PROJECT, TOOLCHAIN))
    (tmp / "probe").mkdir(parents=True)
    (tmp / "probe" / "probe.cc").write_text(workers.PROBE_SOURCE)
    script = workers.probe_script(asked, [COMPILER, *FLAGS], PurePosixPath("/p"))
    binds = [Bind(tmp / "probe", Path("/p")), Bind(tool_tree(cache), workers.IN_ROOT_DISTCC, read_only=True)]
    proc = subprocess.run(toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = {n: (tmp / "probe" / f"w{n}.log").read_text(errors="replace") for n in range(len(asked))}
    return workers.read_probe(asked, proc.stdout, logs)


def local_then_workers(root: Path, project: Path, tmp_path: Path) -> tuple[Path, list[Worker]]:
    """The project compiled locally (the bytes to match), then two workers started."""
    local = tmp_path / "local"
    finish(compile_in_root(root, project, local, [], 2), local)
    return local, [start_worker(n, tmp_path / f"w{n}") for n in (1, 2)]


def test_two_workers_compile_a_project_byte_identical_to_a_local_compile(
    root: Path, namespaces: list[int], project: Path, tmp_path: Path
) -> None:
    local, pool = local_then_workers(root, project, tmp_path)
    try:
        assert [r.status for r in probe(root, tmp_path / "p", [w.worker for w in pool])] == ["ok", "ok"]
        remote = tmp_path / "remote"
        finish(compile_in_root(root, project, remote, [w.worker for w in pool], 6), remote)
        where = workers.compiled_where((remote / "distcc" / "client.log").read_text())
        finished = logged_ok(pool, {k: v + 1 for k, v in where.items() if k != "local"})
    finally:
        for w in pool:
            w.kill()
    assert objects(remote) == objects(local) and len(objects(local)) == FILES
    # Each worker's own log and the client's agree; both took compiles (the probe's one each besides).
    assert {k: v for k, v in where.items() if k != "local"} == {k: v - 1 for k, v in finished.items()}
    assert all(v > 1 for v in finished.values()), finished
    assert sum(where.values()) == FILES


def test_a_worker_killed_mid_compile_costs_a_local_retry_never_an_object(
    root: Path, namespaces: list[int], project: Path, tmp_path: Path
) -> None:
    local, pool = local_then_workers(root, project, tmp_path)
    victim = pool[0]
    try:
        remote = tmp_path / "remote"
        proc = compile_in_root(root, project, remote, [w.worker for w in pool], 6)
        for _ in range(2400):  # kill it once it has compiled one file, while it compiles another
            started, done = victim.jobs()
            if (done >= 1 and started > done) or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the compile ended before the worker could be killed"
        victim.kill()
        finish(proc, remote)
    finally:
        for w in pool:
            w.kill()
    assert objects(remote) == objects(local)
    log = (remote / "distcc" / "client.log").read_text()
    # The compiles the dead worker held failed in distcc's log and ran again elsewhere.
    assert workers.retried(log) >= 1, log[-3000:]
    where = workers.compiled_where(log)
    assert sum(where.values()) == FILES, where
    # distccd logs COMPILE_OK after it has sent the object: a worker killed between the two has
    # handed the client one compile more than its own log shows, never one it did not start.
    started, done = victim.jobs()
    assert 1 <= done <= where.get(address(victim), 0) <= started, (where, started, done)


def test_the_probe_leaves_out_a_silent_worker_and_catches_one_with_another_compiler(
    root: Path, namespaces: list[int], tmp_path: Path
) -> None:
    good = start_worker(1, tmp_path / "w1")
    # A misconfigured fleet's worker: same root, but its distccd maps the build's g++ by name to
    # trixie's GCC 14 (DISTCC_CMDLIST matching the last path word only): it compiles, differently.
    conf = tmp_path / "rogue"
    conf.mkdir()
    (conf / "cmdlist").write_text("/usr/bin/x86_64-linux-gnu-g++\n")
    cache = scratch_cache()
    toolchain = make_toolchain(load_toolchain(PROJECT, TOOLCHAIN))
    daemon = shlex.join(workers.daemon_argv(f"{SUBNET}.2.2", [f"{SUBNET}.2.1/32"], workers.DEFAULT_PORT, 2))
    rogue_argv = toolchain.wrap(
        root,
        ["/bin/sh", "-c", f"mkdir -p /usr/lib/distcc && exec {daemon}"],
        binds=[
            Bind(tool_tree(cache), workers.IN_ROOT_DISTCC, read_only=True),
            Bind(conf, workers.IN_ROOT_WORKER, read_only=True),
        ],
        env={"DISTCC_CMDLIST": f"{workers.IN_ROOT_WORKER}/cmdlist", "DISTCC_CMDLIST_NUMWORDS": "1"},
        writable=tmp_path / "rogue-overlay",
    )
    rogue = start_worker(2, tmp_path / "w2", list(rogue_argv))
    silent = workers.Worker(f"{SUBNET}.3.2")  # a namespace where nothing listens
    try:
        results = probe(root, tmp_path / "p", [good.worker, rogue.worker, silent])
    finally:
        good.kill()
        rogue.kill()
    assert [r.status for r in results] == ["ok", "differs", "unreachable"], results
    assert "Connection refused" in results[2].detail
