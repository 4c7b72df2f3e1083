"""Real builds. ``build_recipe`` is the one way a test runs ``ortdist build``; ``scratch_cache`` is
where everything else a test makes lives (never the user's cache)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ortdist.checks import elf
from ortdist.checks.elf import wheel_libraries
from ortdist.fsutil import allow_removals_under
from ortdist.paths import Cache

PROJECT = Path(__file__).resolve().parents[2]


# What a scratch cache shares from the user's: directories used as they are (roots, unpacked
# sources) linked whole, files (downloads, wheelhouse wheels) hard-linked one by one, so that whatever a
# test adds lands in the scratch cache.
SHARED_WHOLE = ("sysroots", "sources")
SHARED_FILES = ("downloads", "wheelhouse")


def scratch_cache(root: Path | None = None) -> Cache:
    """A cache for what a test makes besides ``ortdist build``'s own work (tools, tool trees, extra
    roots, rebuilt trees): ``root``, else the tests' own one, kept between runs (ORTDIST_TEST_CACHE,
    else ortdist-tests-<digest of the user's cache path> in the temporary directory, where ortdist may
    delete what it made). What the user's cache (Cache.default(), which only ``ortdist build``
    writes, as ``nox -s build-<recipe>`` would) already holds is linked in and used read-only; the
    links are refreshed on every call."""
    user = Cache.default()
    own = f"ortdist-tests-{hashlib.sha256(str(user.root).encode()).hexdigest()[:12]}"
    where = root or Path(os.environ.get("ORTDIST_TEST_CACHE") or Path(tempfile.gettempdir()) / own)
    for name in SHARED_WHOLE:
        for entry in sorted((user.root / name).glob("[!.]*")):
            link = where / name / entry.name
            if link.is_symlink() and not link.exists():
                link.unlink()  # its tree was removed from the user's cache (`ortdist cache --prune`)
            if not link.exists() and not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(entry)
    for name in SHARED_FILES:
        for entry in sorted((user.root / name).rglob("[!.]*")):
            link = where / name / entry.relative_to(user.root / name)
            if link.is_symlink():
                link.unlink()  # an earlier scratch cache's link: dangling inside a root
            if entry.is_file() and not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                try:  # a hard link: a wheelhouse bound into a root sees the file, where a symlink dangles
                    os.link(entry, link)
                except OSError:
                    shutil.copy2(entry, link)
    where.mkdir(parents=True, exist_ok=True)
    # ortdist deletes only below its cache, dist/ and the temp directory: a scratch cache placed
    # elsewhere (ORTDIST_TEST_CACHE=/work/...) is this run's own to clean, like a --dist.
    allow_removals_under(where)
    return Cache(where)


def free_port() -> int:
    """A TCP port nothing on 127.0.0.1 listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_server(argv: Sequence[str], probe: str, log: Path) -> Iterator[None]:
    """A real server (an index, a cache) on 127.0.0.1 for the test's duration: started, waited for
    until ``probe`` answers (its output in ``log`` if it dies or never does), terminated after."""
    with log.open("w") as out:
        server = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT)
        try:
            for _ in range(150):
                try:
                    urllib.request.urlopen(probe, timeout=2).close()
                    break
                except OSError:
                    if server.poll() is not None:
                        raise AssertionError(f"the server exited: {log.read_text()}") from None
                    time.sleep(0.1)
            else:
                raise AssertionError(f"nothing answered on {probe}: {log.read_text()}")
            yield
        finally:
            server.terminate()
            server.wait(timeout=10)


# What this test run built, per recipe: each artifact's sha256 and the build root it was built in
# with that root's Debian package versions (what a build from Debian's moving archive depends on).
# The claims record (tests/conftest.py) carries them.
BUILT: dict[str, dict[str, Any]] = {}


def record_built(recipe: str, manifest: dict[str, Any]) -> None:
    root = str(manifest.get("toolchain", {}).get("root", ""))
    facts = Cache.default().sysroots / root / ".ortdist-root.json"
    installed = json.loads(facts.read_text())["installed"] if root and facts.is_file() else {}
    BUILT[recipe] = {
        "artifacts": {str(a["path"]): str(a["sha256"]) for a in manifest["artifacts"]},
        "root": root,
        "root_packages": installed,
    }


def build_recipe(recipe: str, dist: Path, python: Sequence[str] | None = None) -> tuple[Path, dict[str, Any]]:
    """``ortdist build RECIPE --dist DIST [--python ...]`` from the project root: (dist/<recipe>, its
    manifest). ``python``: wheels for these only (CI's time, the ``ci_python`` fixture); None: all."""
    selection = ["--python", ",".join(python)] if python else []
    proc = subprocess.run(
        [sys.executable, "-m", "ortdist", "build", recipe, "--dist", str(dist), *selection],
        cwd=PROJECT,
        text=True,
        capture_output=True,
        check=False,
    )
    print(proc.stderr[-4000:], file=sys.stderr)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-5000:]
    out = dist / recipe
    manifest = json.loads((out / "manifest.json").read_text())
    record_built(recipe, manifest)
    return out, manifest


def shipped_libraries(out: Path, manifest: dict[str, Any]) -> Iterator[tuple[dict[str, Any], list[tuple[str, bytes]]]]:
    """Each wheel and C library archive of ``manifest`` (in ``out``) with its members as the
    ELF checks read them from the file: (artifact entry, [(member name, bytes)])."""
    for art in manifest["artifacts"]:
        if art["kind"] == "wheel":
            yield art, wheel_libraries(out / art["path"])
        elif art["kind"] == "c-library":
            yield art, elf.artifact_libraries(out / art["path"])
