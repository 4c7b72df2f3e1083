"""The EP recipes on Linux: build recipes/xnnpack-linux.toml, dnnl-linux.toml and xnnpack-dnnl-linux.toml
end to end and prove with the smoke suite, in the clean root, that reference-model nodes ran on the EP.

Every one is portable: xnnpack-linux on cpu-linux's toolchain (XNNPACK and its dependencies compiled
in from their pinned sources), the oneDNN ones on portable-glibc2.17-openmp (oneDNN from its pinned
source, static, with the compiler's libgomp built from GCC's source): manylinux_2_17 wheels for
every Python, nothing grafted, every shipped ELF within the promise, and the compat roots ran the
reference models on the EP. With cpu-linux's compiler cache the compile is the EP's own sources
(and XNNPACK's or oneDNN's); ORT's own hit in ccache's preprocessor mode.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ortdist.checks import elf
from ortdist.fsutil import sha256_file
from ortdist.registry import pypi_wheels
from ortdist.smoke.models import BUILDERS
from ortdist.smoke.run_suite import smoke_wheel
from ortdist.smoke.suite import expectations
from ortdist.toolchains import load_toolchain, make_toolchain
from ortdist.wheelnames import required_glibc
from smoke_helpers import expected_smoke_environment

from . import build_recipe, scratch_cache, shipped_libraries

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]
PROJECT = Path(__file__).resolve().parents[2]
EVERY_PYTHON = ("3.10", "3.11", "3.12", "3.13", "3.14")


@dataclass(frozen=True)
class EpCase:
    recipe: str
    providers: tuple[str, ...]  # besides the CPU EP, in registry order
    distribution: str
    must_carry: tuple[str, ...]  # wheel members (prefixes) the EP needs at run time
    toolchain: str
    glibc: tuple[int, int]  # the wheels' manylinux tag
    pythons: tuple[str, ...]
    portable: bool = True  # every ELF within the toolchain's promise; the compat roots run it
    pypi: str = ""  # PyPI's package of the same EP: the node-test baseline for every Python


CASES = [
    EpCase(
        "xnnpack-linux",
        ("XnnpackExecutionProvider",),
        "onnxruntime_xnnpack",
        ("onnxruntime/capi/onnxruntime_pybind11_state", "onnxruntime/capi/libonnxruntime.so"),
        "portable-glibc2.17",
        (2, 17),
        EVERY_PYTHON,
    ),
    EpCase(
        "dnnl-linux",
        ("DnnlExecutionProvider",),
        "onnxruntime_dnnl",
        ("onnxruntime/capi/libonnxruntime_providers_dnnl.so", "onnxruntime/capi/libonnxruntime_providers_shared.so"),
        "portable-glibc2.17-openmp",
        (2, 17),
        EVERY_PYTHON,
    ),
    EpCase(
        "xnnpack-dnnl-linux",
        ("DnnlExecutionProvider", "XnnpackExecutionProvider"),
        "onnxruntime_dnnl_xnnpack",
        ("onnxruntime/capi/libonnxruntime_providers_dnnl.so", "onnxruntime/capi/libonnxruntime.so"),
        "portable-glibc2.17-openmp",
        (2, 17),
        EVERY_PYTHON,
    ),
    # OpenVINO's runtime for device CPU carried beside the provider library (toolchains/openvino.toml
    # [ep_bundle]), libstdc++ linked shared: the promise names libstdc++.so.6 and libgcc_s.so.1.
    EpCase(
        "openvino-linux",
        ("OpenVINOExecutionProvider",),
        "onnxruntime_openvino",
        (
            "onnxruntime/capi/libonnxruntime_providers_openvino.so",
            "onnxruntime/capi/libopenvino.so.2500",
            "onnxruntime/capi/libopenvino_onnx_frontend.so.2500",
            "onnxruntime/capi/libopenvino_intel_cpu_plugin.so",
            "onnxruntime/capi/libtbb.so.12",
        ),
        "openvino",
        (2, 17),
        EVERY_PYTHON,
        pypi="onnxruntime-openvino",
    ),
]


Built = tuple[EpCase, Path, dict[str, Any]]
_BUILDS: dict[str, Built] = {}  # one build per recipe for both fixtures below


def _params(cases: list[EpCase]) -> list[Any]:
    return [pytest.param(c, id=c.recipe, marks=pytest.mark.recipe_tree(c.recipe)) for c in cases]


def _build(case: EpCase, tmp_path_factory: pytest.TempPathFactory, python: tuple[str, ...] | None) -> Built:
    """One build per recipe; where CI's time builds fewer Pythons (``python``), the case says which."""
    if case.recipe not in _BUILDS:
        out, manifest = build_recipe(case.recipe, tmp_path_factory.mktemp(f"dist-{case.recipe}"), python)
        left_out = [v for v in case.pythons if python and v not in python]
        assert manifest.get("python_not_built", []) == left_out, "a subset must never read as the release"
        built_case = replace(case, pythons=tuple(v for v in case.pythons if v not in left_out))
        _BUILDS[case.recipe] = (built_case, out, manifest)
    return _BUILDS[case.recipe]


@pytest.fixture(scope="module", params=_params(CASES))
def built(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    ci_python: Callable[[str], tuple[str, ...] | None],
) -> Built:
    return _build(request.param, tmp_path_factory, ci_python(request.param.recipe))


@pytest.fixture(scope="module", params=_params([c for c in CASES if c.pypi]))
def built_with_counterpart(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    ci_python: Callable[[str], tuple[str, ...] | None],
) -> Built:
    """The recipes whose EP PyPI publishes a package of (onnxruntime-openvino)."""
    return _build(request.param, tmp_path_factory, ci_python(request.param.recipe))


@pytest.fixture(scope="module", params=_params([c for c in CASES if c.portable]))
def built_portable(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    ci_python: Callable[[str], tuple[str, ...] | None],
) -> Built:
    """The recipes on the portable toolchain: ELF promise and compat roots."""
    return _build(request.param, tmp_path_factory, ci_python(request.param.recipe))


def wheels(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in manifest["artifacts"] if a["kind"] == "wheel"]


def test_wheel_is_named_and_packaged_for_its_ep(built: Built) -> None:
    case, out, manifest = built
    tags = sorted(a["path"].split("-")[2] for a in wheels(manifest))
    assert tags == sorted(f"cp{v.replace('.', '')}" for v in case.pythons), tags
    for wheel in wheels(manifest):
        assert wheel["path"].startswith(f"{case.distribution}-1.21.0-cp3"), wheel["path"]
        assert required_glibc(wheel["path"]) == case.glibc, wheel["path"]
        assert wheel["provider_names"] == ["CPUExecutionProvider", *case.providers]
        with zipfile.ZipFile(out / wheel["path"]) as zf:
            names = zf.namelist()
            record = json.loads(zf.read("onnxruntime/ortdist_build.json"))
        for prefix in case.must_carry:
            assert any(n.startswith(prefix) for n in names), f"{prefix} missing from {wheel['path']}"
        if case.portable:  # XNNPACK, pthreadpool, cpuinfo: linked in, nothing grafted
            assert not [n for n in names if n.startswith(f"{case.distribution}.libs/")], wheel["path"]
        assert [ep["provider"] for ep in record["execution_providers"]] == ["CPUExecutionProvider", *case.providers]
    check = manifest["clean_root_check"]
    assert check["ok"] and set(case.providers) <= set(check["available_providers"])


def test_every_shipped_elf_keeps_the_toolchains_promise(built_portable: Built) -> None:
    """DT_NEEDED and symbol versions of every ELF in every wheel and the archive, read from the
    files, against the wheel's tag and the toolchain's [promise] (portable: glibc's own libraries)."""
    case, out, manifest = built_portable
    system = load_toolchain(PROJECT, case.toolchain).system_libraries
    checked = 0
    for art, members in shipped_libraries(out, manifest):
        assert elf.violations(members, elf.policy(case.glibc, system)) == [], art["path"]
        checked += sum(1 for _, data in members if elf.is_elf(data))
    assert checked >= len(case.pythons) * 3 + 2, checked


def test_compat_roots_ran_the_reference_models_on_the_ep(built_portable: Built) -> None:
    """bullseye's gcc built the C program against the archive and ran it; bookworm's CPython 3.11 ran
    every reference model on the EP (as [EP, CPU]) from the cp311 wheel, offline."""
    case, _, manifest = built_portable
    compat = {entry["name"]: entry for entry in manifest["compat"]}
    assert set(compat) == {"bullseye-c", "bookworm-wheel"}
    c = compat["bullseye-c"]
    assert c["ok"] and c["details"]["models"] and all(m["max_abs_err"] < 1e-5 for m in c["details"]["models"]), c
    wheel = compat["bookworm-wheel"]
    assert wheel["ok"] and wheel["details"]["wheel"].startswith(f"{case.distribution}-1.21.0-cp311-cp311-"), wheel
    assert set(case.providers) <= set(wheel["details"]["available_providers"]), wheel["details"]
    for provider in case.providers:
        ran = {m["name"] for m in wheel["details"]["models"] if m["provider"] == provider and m["passed"]}
        assert ran == set(BUILDERS), (provider, ran)


def test_smoke_suite_proves_nodes_ran_on_the_ep(built: Built, tmp_path: Path) -> None:
    case, out, manifest = built
    wheel = out / next(a["path"] for a in wheels(manifest) if "-cp313-" in a["path"])
    toolchain = make_toolchain(load_toolchain(PROJECT, case.toolchain))
    report, verdicts = smoke_wheel(wheel, tmp_path, scratch_cache(), toolchain, with_node_tests=False)
    assert report["passed"], [f"{v.provider} {v.name}: {v.message}" for v in verdicts if not v.passed]
    assert report["environment"]["kind"] == expected_smoke_environment(case.glibc, "3.13")
    table = expectations()
    for provider in ("CPUExecutionProvider", *case.providers):
        on_ep = {v.name: v for v in verdicts if v.provider == provider and v.suite == "model"}
        # Every reference model ran with [EP, CPU], as a user calls it (control flow included).
        assert set(on_ep) == set(BUILDERS), provider
        assert all(v.passed and not v.skipped for v in on_ep.values())
        # Proof, not a pass by default: every placement model of the EP put nodes on the EP.
        placed = {name: on_ep[name].share for name in table[provider].placement_models}
        assert all(share > 0 for share in placed.values()), (provider, placed)


def host_pythons_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI's onnxruntime-openvino 1.21.0 asks for an executable stack, which glibc 2.41 (the clean
    root's trixie) refuses to load ("cannot enable executable stack"): its baseline runs on the host
    (Debian 12, glibc 2.36) where the host has that CPython. pyenv's are made visible by name."""
    pyenv = shutil.which("pyenv")
    if pyenv:
        versions = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, check=True)
        monkeypatch.setenv("PYENV_VERSION", ":".join(versions.stdout.split()))


def test_node_tests_match_pypis_package_of_the_ep_for_every_python(
    built_with_counterpart: Built,
    tmp_path_factory: pytest.TempPathFactory,
    download_official_wheel: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ONNX's node tests on the CPU EP and the EP, each wheel of ours against PyPI's package of the
    same Python (its pinned sha256 checked) as the baseline: no test PyPI's passes fails on ours.
    A Python PyPI's package lacks (cp310, cp314) is held to ours of the nearest one it has."""
    case, out, manifest = built_with_counterpart
    host_pythons_visible(monkeypatch)
    toolchain = make_toolchain(load_toolchain(PROJECT, case.toolchain))
    pinned = {w.file: w for w in pypi_wheels()}
    ours = {a["python"]: out / a["path"] for a in wheels(manifest)}
    providers = ("CPUExecutionProvider", *case.providers)
    reports: dict[str, dict[str, Any]] = {}

    def compare(python: str, baseline: dict[str, Any], against: str) -> None:
        tag = f"cp{python.replace('.', '')}"
        report, _ = smoke_wheel(
            ours[python],
            tmp_path_factory.mktemp(f"ours-{tag}"),
            scratch_cache(),
            toolchain,
            baseline=baseline["node_test_outcomes"],
        )
        passed = {p: (report["node_tests"][p]["passed"], baseline["node_tests"][p]["passed"]) for p in providers}
        print(f"{case.recipe} {tag} against {against}: node tests passed (ours, baseline's): {passed}")
        assert report["regressions"] == {p: [] for p in providers}, (python, against)
        reports[python] = report

    def minor(version: str) -> int:
        return int(version.split(".")[1])

    for python in sorted(ours, key=minor):
        tag = f"cp{python.replace('.', '')}"
        official = next((f for f in pinned if f.startswith(f"{case.pypi.replace('-', '_')}-1.21.0-{tag}-")), None)
        if official is None:
            continue
        wheel = download_official_wheel(tmp_path_factory.mktemp(f"pypi-{tag}"), python, distribution=case.pypi)
        assert wheel.name == official and sha256_file(wheel) == pinned[official].sha256, wheel.name
        theirs, _ = smoke_wheel(wheel, tmp_path_factory.mktemp(f"base-{tag}"), scratch_cache(), toolchain)
        assert theirs["environment"]["kind"] == "host", (python, theirs["environment"])
        assert set(providers) <= set(theirs["node_tests"]), theirs["node_tests"].keys()
        compare(python, theirs, f"PyPI's {official}")
    assert reports, f"no Python of {sorted(ours)} has PyPI's {case.pypi} to compare with"
    for python in sorted(set(ours) - set(reports), key=minor):
        nearest = min(reports, key=lambda v: abs(minor(v) - minor(python)))
        compare(python, reports[nearest], f"ours of {nearest}")
    assert set(reports) == set(case.pythons)
