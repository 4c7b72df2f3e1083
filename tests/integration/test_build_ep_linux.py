"""The second and third EP: build recipes/xnnpack-linux.toml and recipes/dnnl-linux.toml end to end
and prove with the smoke suite, in the clean root, that reference-model nodes ran on the EP.

With the ccache of the CPU build these are minutes each (only the EP's own sources and the
files that include its switch miss the cache); from nothing, each is a full ORT compile.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ortdist.paths import Cache
from ortdist.smoke.models import BUILDERS
from ortdist.smoke.run_suite import smoke_wheel
from ortdist.smoke.suite import expectations
from ortdist.toolchains import load_toolchain, make_toolchain
from smoke_helpers import expected_smoke_environment

from . import build_recipe

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]
PROJECT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class EpCase:
    recipe: str
    providers: tuple[str, ...]  # besides the CPU EP, in registry order
    distribution: str
    must_carry: tuple[str, ...]  # wheel members (prefixes) the EP needs at run time


CASES = [
    EpCase(
        "xnnpack-linux",
        ("XnnpackExecutionProvider",),
        "onnxruntime_xnnpack",
        ("onnxruntime_xnnpack.libs/libXNNPACK", "onnxruntime_xnnpack.libs/libpthreadpool"),
    ),
    EpCase(
        "dnnl-linux",
        ("DnnlExecutionProvider",),
        "onnxruntime_dnnl",
        (
            "onnxruntime/capi/libonnxruntime_providers_dnnl.so",
            "onnxruntime_dnnl.libs/libdnnl",
            "onnxruntime_dnnl.libs/libgomp",
        ),
    ),
    EpCase(
        "xnnpack-dnnl-linux",
        ("DnnlExecutionProvider", "XnnpackExecutionProvider"),
        "onnxruntime_dnnl_xnnpack",
        (
            "onnxruntime/capi/libonnxruntime_providers_dnnl.so",
            "onnxruntime_dnnl_xnnpack.libs/libdnnl",
            "onnxruntime_dnnl_xnnpack.libs/libXNNPACK",
        ),
    ),
]


@pytest.fixture(
    scope="module",
    params=[pytest.param(c, id=c.recipe, marks=pytest.mark.recipe_tree(c.recipe)) for c in CASES],
)
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[EpCase, Path, dict[str, Any]]:
    case: EpCase = request.param
    dist = tmp_path_factory.mktemp(f"dist-{case.recipe}")
    out, manifest = build_recipe(case.recipe, dist)
    return case, out, manifest


def test_wheel_is_named_and_packaged_for_its_ep(built: tuple[EpCase, Path, dict[str, Any]]) -> None:
    case, out, manifest = built
    wheel = next(a for a in manifest["artifacts"] if a["kind"] == "wheel")
    assert wheel["path"].startswith(f"{case.distribution}-1.21.0-cp313-cp313-manylinux_")
    assert wheel["provider_names"] == ["CPUExecutionProvider", *case.providers]
    with zipfile.ZipFile(out / wheel["path"]) as zf:
        names = zf.namelist()
        record = json.loads(zf.read("onnxruntime/ortdist_build.json"))
    for prefix in case.must_carry:
        assert any(n.startswith(prefix) for n in names), f"{prefix} missing from {wheel['path']}"
    assert [ep["provider"] for ep in record["execution_providers"]] == ["CPUExecutionProvider", *case.providers]
    check = manifest["clean_root_check"]
    assert check["ok"] and set(case.providers) <= set(check["available_providers"])


def test_smoke_suite_proves_nodes_ran_on_the_ep(built: tuple[EpCase, Path, dict[str, Any]], tmp_path: Path) -> None:
    case, out, manifest = built
    wheel = out / next(a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel")
    toolchain = make_toolchain(load_toolchain(PROJECT, "debian-trixie"))
    report, verdicts = smoke_wheel(wheel, tmp_path, Cache.default(), toolchain, with_node_tests=False)
    assert report["passed"], [f"{v.provider} {v.name}: {v.message}" for v in verdicts if not v.passed]
    assert report["environment"]["kind"] == expected_smoke_environment((2, 39), "3.13")
    table = expectations()
    for provider in ("CPUExecutionProvider", *case.providers):
        on_ep = {v.name: v for v in verdicts if v.provider == provider and v.suite == "model"}
        # Every reference model ran with [EP, CPU], as a user calls it (control flow included).
        assert set(on_ep) == set(BUILDERS), provider
        assert all(v.passed and not v.skipped for v in on_ep.values())
        # Proof, not a pass by default: every placement model of the EP put nodes on the EP.
        placed = {name: on_ep[name].share for name in table[provider].placement_models}
        assert all(share > 0 for share in placed.values()), (provider, placed)
