"""Which node ran on which execution provider (read from ORT's own profile), and whether outputs match.

ORT falls back to the CPU without a word when an EP cannot take a node; the profile is where
the truth is. This file is also copied into clean roots and venvs that have nothing but the
wheel under test, so it needs only the standard library (and numpy, which onnxruntime brings).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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


def absorbed_nodes(placement: dict[str, str], model_nodes: dict[str, str], provider: str) -> dict[str, str]:
    """Model nodes a compiling EP (oneDNN, TensorRT, CoreML...) took into its fused partitions.

    Such an EP replaces the nodes it takes with a few compiled nodes of its own (``DNNL_<hash>_0``),
    so the profile names no op types. ``placement`` must come from a run with graph optimizations
    off: then the EP's fused nodes are the only nodes that replace others, and every model node
    missing from the profile went into one of them. Empty when the EP compiled nothing.
    """
    compiled = [n for n, p in placement.items() if p == provider and model_node(n) not in model_nodes]
    if not compiled:
        return {}
    present = {model_node(n) for n in placement}
    return {name: op for name, op in model_nodes.items() if name not in present}


def compiled_share(
    placement: dict[str, str], ran: dict[str, str], model_nodes: dict[str, str], provider: str
) -> tuple[dict[str, str], float]:
    """(absorbed model nodes, share of the model nodes that ran which ran on ``provider``) for an EP
    that compiles what it takes.

    ``placement`` is the EP's unoptimized profiled run and ``ran`` a CPU-only one on the same inputs:
    only model nodes the CPU run executed count, so the branch of an If these inputs do not take is
    neither credited as absorbed nor counted against the EP.
    """
    executed = {name: op for name, op in model_nodes.items() if name in {model_node(n) for n in ran}}
    absorbed = absorbed_nodes(placement, executed, provider)
    kept = sum(1 for n, p in placement.items() if p == provider and model_node(n) in executed)
    return absorbed, (len(absorbed) + kept) / len(executed) if executed else 0.0


_LAYOUT_TOKEN = re.compile(r"_token_\d+$")


def model_node(profiled: str) -> str:
    """The model node a profiled node stands for: ORT's NHWC layout transformation re-creates the
    nodes it converts as ``<name>_token_<n>``."""
    return _LAYOUT_TOKEN.sub("", profiled)


def share_on(placement: dict[str, str], provider: str) -> float:
    """Fraction of profiled nodes that ran on ``provider`` (0.0 when nothing was profiled)."""
    if not placement:
        return 0.0
    return sum(1 for p in placement.values() if p == provider) / len(placement)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float
    worst_index: tuple[int, ...]


def compare(got: Any, expected: Any, atol: float, rtol: float) -> Comparison:
    """|got - expected| <= atol + rtol * |expected| elementwise; shapes and NaN positions must match.
    Non-float outputs must be equal."""
    import numpy as np

    if got.shape != expected.shape:
        return Comparison(ok=False, max_abs_err=float("inf"), worst_index=())
    if expected.dtype.kind not in "fc":
        equal = bool(np.array_equal(got, expected))
        return Comparison(ok=equal, max_abs_err=0.0 if equal else float("inf"), worst_index=())
    g, e = got.astype(np.float64), expected.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(e)):
        return Comparison(ok=False, max_abs_err=float("nan"), worst_index=())
    diff = np.abs(np.nan_to_num(g) - np.nan_to_num(e))
    if not diff.size:
        return Comparison(ok=True, max_abs_err=0.0, worst_index=())
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    ok = bool(np.all(diff <= atol + rtol * np.abs(np.nan_to_num(e))))
    return Comparison(ok=ok, max_abs_err=float(diff.max()), worst_index=worst)
