"""Which node ran on which execution provider, read from ORT's own profile.

ORT falls back to the CPU without a word when an EP cannot take a node; the profile is where
the truth is. Standard library only: this file is also copied into clean roots and venvs that
have nothing but the wheel under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_KERNEL_SUFFIX = "_kernel_time"


def node_placement(events: list[dict[str, Any]]) -> dict[str, str]:
    """Node name -> provider, from the profile's per-node kernel events."""
    placement: dict[str, str] = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") != "Node" or "provider" not in args:
            continue
        name = str(event.get("name", ""))
        if name.endswith(_KERNEL_SUFFIX):
            name = name[: -len(_KERNEL_SUFFIX)]
        placement[name] = str(args["provider"])
    return placement


def read_profile(path: str | Path) -> dict[str, str]:
    return node_placement(json.loads(Path(path).read_text(encoding="utf-8")))


def share_on(placement: dict[str, str], provider: str) -> float:
    """Fraction of profiled nodes that ran on ``provider`` (0.0 when nothing was profiled)."""
    if not placement:
        return 0.0
    return sum(1 for p in placement.values() if p == provider) / len(placement)
