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


def node_ops(events: list[dict[str, Any]]) -> dict[str, str]:
    """Node name -> op type (ORT records ``op_name`` with each kernel event)."""
    ops: dict[str, str] = {}
    for event in events:
        args = event.get("args") or {}
        if event.get("cat") == "Node" and "op_name" in args:
            name = str(event.get("name", ""))
            ops[name[: -len(_KERNEL_SUFFIX)] if name.endswith(_KERNEL_SUFFIX) else name] = str(args["op_name"])
    return ops


def read_profile(path: str | Path) -> dict[str, str]:
    return node_placement(json.loads(Path(path).read_text(encoding="utf-8")))


def read_profile_ops(path: str | Path) -> tuple[dict[str, str], dict[str, str]]:
    """(node -> provider, node -> op type) from one profile file."""
    events = json.loads(Path(path).read_text(encoding="utf-8"))
    return node_placement(events), node_ops(events)


def share_on(placement: dict[str, str], provider: str) -> float:
    """Fraction of profiled nodes that ran on ``provider`` (0.0 when nothing was profiled)."""
    if not placement:
        return 0.0
    return sum(1 for p in placement.values() if p == provider) / len(placement)
