"""Real builds. ``build_recipe`` is the one way a test runs ``ortdist build``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ortdist.checks import elf
from ortdist.wheel.repair import wheel_libraries

PROJECT = Path(__file__).resolve().parents[2]


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
