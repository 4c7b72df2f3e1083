"""Distributed compilation: distcc workers compile what the compiler cache cannot serve.

ccache runs each compile it misses through distcc (``CCACHE_PREFIX``). distcc preprocesses on the
build machine and sends the preprocessed file to a worker, whose distccd runs the same compiler, at
the same path, in the same toolchain root (``ortdist worker``); links, ccache's hits and whatever a
worker cannot take stay local. distcc is Debian's own package from the build root's suite, unpacked
beside the root (never into it) with the libraries the root lacks, and started through the root's
dynamic loader with that library directory, so nothing it runs inherits a library path.

Before the compile, each worker compiles a probe through distcc alone (no fallback) and its object
is compared with the local compiler's: a worker that does not answer is left out (logged: its
compiles run locally), one that answers with another compiler, or none, stops the build, because a
silently different object is the one outcome a distributed build must never have.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import run
from .elffile import interpreter
from .errors import RecipeError
from .log import log
from .paths import IN_ROOT, Cache, in_root
from .toolchains import Bind, Toolchain, ToolTree

ENGINE = "distcc"
PACKAGES = ("distcc",)  # Debian's; the libraries it needs that a root lacks come with it
DEFAULT_PORT = 3632
DEFAULT_SLOTS = 2
IN_ROOT_DISTCC = IN_ROOT / "distcc"  # the unpacked packages, bound read-only
CLIENT = IN_ROOT_DISTCC / "bin" / "distcc"  # wrappers through the root's loader (``wrappers``)
DAEMON = IN_ROOT_DISTCC / "bin" / "distccd"
IN_ROOT_WORKER = IN_ROOT / "worker"  # a worker's settings (its allowed compilers), read-only
# distccd refuses a compiler whose full path is not listed (DISTCC_CMDLIST); this many trailing
# path words are compared, i.e. the whole path: a client naming /usr/bin/g++ never gets another g++.
CMDLIST_WORDS = 64
# Host variables handed to distcc unchanged (DISTCC_IO_TIMEOUT, DISTCC_BACKOFF_PERIOD, ...); the
# ones ortdist sets are not.
PASSTHROUGH = "DISTCC_"
WHERE = "--workers / ORTDIST_WORKERS"
CLIENT_LOG = "client.log"  # distcc's own log, in the build's distcc state directory
_HOST = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)(?::(?P<port>\d+))?(?:/(?P<slots>\d+))?")


@dataclass(frozen=True)
class Worker:
    """One distccd: where it listens and how many compiles it takes at once."""

    host: str
    port: int = DEFAULT_PORT
    slots: int = DEFAULT_SLOTS

    @property
    def spec(self) -> str:
        """distcc's host specification (DISTCC_HOSTS)."""
        return f"{self.host}:{self.port}/{self.slots}"


def parse_workers(text: str, where: str = WHERE) -> tuple[Worker, ...]:
    """``HOST[:PORT][/SLOTS]`` items, separated by spaces or commas ("" gives none)."""
    workers: list[Worker] = []
    for item in text.replace(",", " ").split():
        match = _HOST.fullmatch(item)
        if not match or match["host"] == "localhost":
            why = "compiles that no worker takes run here anyway" if match else "not HOST[:PORT][/SLOTS]"
            raise RecipeError(
                f"bad worker {item!r}: {why}",
                where=where,
                fix="name each worker as HOST[:PORT][/SLOTS], e.g. 10.0.0.2/8 build-2:3632/16 "
                "(port 3632 and 2 slots by default), each running `ortdist worker TOOLCHAIN`",
            )
        port = int(match["port"] or DEFAULT_PORT)
        slots = int(match["slots"] or DEFAULT_SLOTS)
        if not (0 < port < 65536 and slots > 0):
            raise RecipeError(
                f"bad worker {item!r}: port 1-65535 and at least one slot",
                where=where,
                fix="e.g. 10.0.0.2:3632/8",
            )
        workers.append(Worker(match["host"], port, slots))
    if len({(w.host, w.port) for w in workers}) != len(workers):
        raise RecipeError(f"a worker is named twice in {text!r}", where=where, fix="name each HOST:PORT once")
    return tuple(workers)


def client_env(workers: Sequence[Worker], state: PurePosixPath, host_env: Mapping[str, str]) -> dict[str, str]:
    """The build root's environment that sends ccache's misses to ``workers``: distcc keeps its
    locks and its log (CLIENT_LOG) under ``state``, a writable directory of the build."""
    passed = {k: v for k, v in host_env.items() if k.startswith(PASSTHROUGH) and v}
    return {
        **passed,
        "CCACHE_PREFIX": str(CLIENT),
        "DISTCC_HOSTS": " ".join(w.spec for w in workers),
        "DISTCC_DIR": str(state),
        "DISTCC_LOG": str(state / CLIENT_LOG),
        "DISTCC_FALLBACK": "1",  # a worker that fails or dies: the compile runs here
    }


def compiled_where(log: str) -> dict[str, int]:
    """From distcc's own client log: how many compiles finished on each worker ('HOST:PORT') and
    here ('local': a compile no worker took, or one a failing worker handed back)."""
    counts: Counter[str] = Counter()
    for match in re.finditer(r"\] compile \S+ on (\S+) completed ok$", log, re.MULTILINE):
        where = match[1].rsplit("/", 1)[0]
        counts["local" if where == "localhost" else where] += 1
    return dict(counts)


def retried(log: str) -> int:
    """Compiles a worker failed (it refused, did not answer or died mid-compile) that distcc then
    ran again, on another worker or here: the distcc processes that logged an error."""
    return len(set(re.findall(r"^distcc\[(\d+)\] (?:\(\w+\) )?ERROR: ", log, re.MULTILINE)))


# --- the probe -----------------------------------------------------------------------------------

PROBE_SOURCE = """// ortdist's worker probe: templates, inlining and a static table, so another compiler shows.
#include <map>
#include <string>
#include <vector>
static const double kScale[] = {0.5, 1.25, 2.0};
std::map<std::string, std::vector<double>> probe(int n) {
  std::map<std::string, std::vector<double>> out;
  for (int i = 0; i < n; ++i) out["x" + std::to_string(i % 7)].push_back(kScale[i % 3] * i);
  return out;
}
"""
PROBE_RESULT = re.compile(r"^worker (?P<index>\d+) rc=(?P<rc>\d+) same=(?P<same>[01])$", re.MULTILINE)


@dataclass(frozen=True)
class ProbeResult:
    worker: Worker
    status: str  # "ok", "unreachable", "failed" (answered, did not compile), "differs" (another object)
    detail: str  # distcc's words where it was not "ok"

    @property
    def usable(self) -> bool:
        return self.status == "ok"


def probe_compiler(defines: Mapping[str, str]) -> list[str]:
    """The build's C++ compiler with its flags, as CMake runs it (ccache hands distcc this path)."""
    compiler = defines.get("CMAKE_CXX_COMPILER") or "/usr/bin/c++"
    target = defines.get("CMAKE_CXX_COMPILER_TARGET")
    sysroot = defines.get("CMAKE_SYSROOT")
    return [
        compiler,
        *([f"--target={target}"] if target else []),
        *([f"--sysroot={sysroot}"] if sysroot else []),
        *shlex.split(defines.get("CMAKE_CXX_FLAGS", "")),
    ]


def probe_script(workers: Sequence[Worker], compiler: Sequence[str], work: PurePosixPath) -> str:
    """One shell, in the build root: ``work``/probe.cc compiled locally, then through each worker
    alone (distcc without fallback, a state directory of its own so no earlier back-off applies);
    one ``worker N rc=R same=0|1`` line each. ``compiler``: the build's C++ compiler and flags."""
    cc = shlex.join(compiler)
    q = shlex.quote
    lines = [f"cd {q(str(work))}", f"{cc} -O2 -c probe.cc -o local.o || exit 1"]
    for n, worker in enumerate(workers):
        env = f"DISTCC_HOSTS={q(worker.spec)} DISTCC_FALLBACK=0 DISTCC_DIR={q(str(work / f'w{n}'))}"
        lines += [
            f"mkdir -p w{n}",
            f"{env} DISTCC_LOG={q(str(work / f'w{n}.log'))} {CLIENT} {cc} -O2 -c probe.cc -o w{n}.o; rc=$?",
            f"if cmp -s local.o w{n}.o; then same=1; else same=0; fi",
            f'echo "worker {n} rc=$rc same=$same"',
        ]
    return "\n".join(lines)


def read_probe(workers: Sequence[Worker], output: str, logs: Mapping[int, str]) -> list[ProbeResult]:
    """Each worker's outcome from the probe's lines and its distcc log (by worker index)."""
    found = {int(m["index"]): (int(m["rc"]), m["same"] == "1") for m in PROBE_RESULT.finditer(output)}
    results = []
    for n, worker in enumerate(workers):
        rc, same = found.get(n, (-1, False))
        log = logs.get(n, "")
        said = [line.split("] ", 1)[-1] for line in log.splitlines() if "ERROR" in line or "Warning" in line]
        detail = "; ".join(dict.fromkeys(said))[:400]
        if rc == 0 and same:
            results.append(ProbeResult(worker, "ok", ""))
        elif rc == 0:
            results.append(ProbeResult(worker, "differs", "its object differs from this machine's compiler's"))
        elif re.search(r"connect to \S+ failed|failed to connect|timeout|Connection refused|No route", log):
            results.append(ProbeResult(worker, "unreachable", detail or f"distcc exit {rc}"))
        else:
            results.append(ProbeResult(worker, "failed", detail or f"distcc exit {rc}"))
    return results


# --- the tools tree and the worker ---------------------------------------------------------------


TREE_LAYOUT = "distcc-wrappers-1"  # bumped when ``finish_tree`` adds something else


def finish_tree(tree: Path) -> None:
    """bin/distcc and bin/distccd in the unpacked tree (``wrappers``), through the loader its
    distcc names (the root's: the packages are the root's suite and architecture)."""
    loader = interpreter((tree / "usr" / "bin" / "distcc").read_bytes())
    (tree / "bin").mkdir(exist_ok=True)
    for name, text in wrappers(tree, loader).items():
        (tree / "bin" / name).write_text(text, encoding="utf-8")
        (tree / "bin" / name).chmod(0o755)


def wrappers(tree: Path, loader: str) -> dict[str, str]:
    """Scripts for bin/distcc and bin/distccd in the unpacked ``tree``: Debian's binaries started by
    the root's ``loader`` with the tree's library directory (found here, where the packages put it)."""
    libs = sorted({p.parent for p in tree.glob("usr/lib/*/lib*.so*")})
    path = ":".join(str(IN_ROOT_DISTCC / p.relative_to(tree)) for p in libs)
    return {
        name: f'#!/bin/sh\nexec {loader} --library-path {path} {IN_ROOT_DISTCC}/usr/bin/{name} "$@"\n'
        for name in ("distcc", "distccd")
    }


TREE = ToolTree(name=ENGINE, packages=PACKAGES, finish=finish_tree, layout=TREE_LAYOUT)


def allowed_compilers(own: Mapping[str, str], cross: Sequence[Mapping[str, str]] = ()) -> tuple[str, ...]:
    """The compilers a worker for a toolchain serves: the CMAKE_<LANG>_COMPILER defines of its own
    CMake table (as seen in the root), else the root's cc/c++ that CMake then picks, plus those of
    each cross target's table."""

    def named(table: Mapping[str, str]) -> list[str]:
        return [table[k] for k in sorted(table) if re.fullmatch(r"CMAKE_(C|CXX)_COMPILER", k) and table[k]]

    host = named(own) or ["/usr/bin/cc", "/usr/bin/c++", "/usr/bin/gcc", "/usr/bin/g++"]
    return tuple(dict.fromkeys([*host, *(c for table in cross for c in named(table))]))


def daemon_argv(listen: str, allow: Sequence[str], port: int, jobs: int) -> list[str]:
    """distccd in the foreground, logging to its stderr (one COMPILE_OK line per job it ran)."""
    return [
        str(DAEMON),
        "--no-detach",
        "--daemon",
        "--listen",
        listen,
        *(word for net in allow for word in ("--allow", net)),
        "--port",
        str(port),
        "--jobs",
        str(jobs),
        "--log-stderr",
        "--log-level",
        "info",
    ]


def serve(
    toolchain: Toolchain, cache: Cache, state: Path, listen: str, allow: Sequence[str], port: int, jobs: int
) -> int:
    """``ortdist worker``: distccd in ``toolchain``'s build root seen through an overlay (the root
    is never written; its writes land in ``state``), serving the toolchain's own compilers until
    stopped; its log on stdout. The exit code is distccd's."""
    spec = toolchain.spec
    state.mkdir(parents=True, exist_ok=True)
    with (state / "toolchain.log").open("w", encoding="utf-8") as out:
        root = toolchain.ensure_build_root(cache, out)
        tree = toolchain.ensure_tool_tree(cache, root, TREE, out)
    conf = state / "conf"
    conf.mkdir(exist_ok=True)
    cross = [spec.cross_facts(triple, "cmake") for triple in spec.cross_targets]
    allowed = allowed_compilers(
        {k: in_root(v) for k, v in spec.cmake.items()}, [{k: in_root(v) for k, v in t.items()} for t in cross]
    )
    (conf / "cmdlist").write_text("".join(f"{c}\n" for c in allowed), encoding="utf-8")
    env = {"DISTCC_CMDLIST": f"{IN_ROOT_WORKER}/cmdlist", "DISTCC_CMDLIST_NUMWORDS": str(CMDLIST_WORDS)}
    binds = [Bind(tree, IN_ROOT_DISTCC, read_only=True), Bind(conf, IN_ROOT_WORKER, read_only=True)]
    # distccd starts only where its masquerade directory exists (it lists nothing: DISTCC_CMDLIST does)
    command = f"mkdir -p /usr/lib/distcc && exec {shlex.join(daemon_argv(listen, allow, port, jobs))}"
    argv = toolchain.wrap(root, ["/bin/sh", "-c", command], binds=binds, env=env, writable=state / "overlay")
    log.info(f"worker for {spec.name} on {listen}:{port}, compilers: {', '.join(allowed)}; state: {state}")
    return run.returncode(argv, log=sys.stdout)
