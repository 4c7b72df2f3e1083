"""Real builds. ``build_recipe`` is the one way a test runs ``ortdist build``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]


def build_recipe(recipe: str, dist: Path) -> tuple[Path, dict[str, Any]]:
    """``ortdist build RECIPE --dist DIST`` from the project root: (dist/<recipe>, its manifest)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ortdist", "build", recipe, "--dist", str(dist)],
        cwd=PROJECT,
        text=True,
        capture_output=True,
        check=False,
    )
    print(proc.stderr[-4000:], file=sys.stderr)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-5000:]
    out = dist / recipe
    return out, json.loads((out / "manifest.json").read_text())
