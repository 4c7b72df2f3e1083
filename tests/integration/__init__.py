"""Real builds. ``build_recipe`` is the one way a test runs ``ortdist build``."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ortdist.checks import elf
from ortdist.wheel.repair import wheel_libraries

PROJECT = Path(__file__).resolve().parents[2]


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
    return out, json.loads((out / "manifest.json").read_text())


def shipped_libraries(out: Path, manifest: dict[str, Any]) -> Iterator[tuple[dict[str, Any], list[tuple[str, bytes]]]]:
    """Each wheel and C library archive of ``manifest`` (in ``out``) with its members as the
    ELF checks read them from the file: (artifact entry, [(member name, bytes)])."""
    for art in manifest["artifacts"]:
        if art["kind"] == "wheel":
            yield art, wheel_libraries(out / art["path"])
        elif art["kind"] == "c-library":
            yield art, elf.artifact_libraries(out / art["path"])
