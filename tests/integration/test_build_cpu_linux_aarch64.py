"""cpu-linux-aarch64 end to end: the full CPU wheel for arm64 Linux, cross-compiled on x86_64 with
clang and lld against ppbt's aarch64 glibc 2.17 sysroot (toolchains/portable-glibc2.17-aarch64.toml),
proven under qemu-aarch64: manylinux_2_17_aarch64 wheels for cp310-cp314, nothing grafted, every
shipped ELF an AArch64 one within the glibc 2.17 promise (read from the files), none larger than
PyPI's aarch64 wheel of its Python, the target's CPythons checked in a bare arm64 root, and the smoke
suite's node tests at parity with PyPI's aarch64 wheel under the same emulation."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ortdist import registry
from ortdist.checks import elf
from ortdist.smoke.run_suite import smoke_wheel
from ortdist.toolchains import load_toolchain, make_toolchain
from ortdist.wheelnames import required_glibc

from . import build_recipe, scratch_cache, shipped_libraries

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]
PROJECT = Path(__file__).resolve().parents[2]
RECIPE = "cpu-linux-aarch64"
TOOLCHAIN = "portable-glibc2.17-aarch64"
EM_AARCH64 = 183  # e_machine of an AArch64 ELF
NOT_RUN = {"3.10", "3.12"}  # no aarch64 CPython of these is reachable offline

Built = tuple[Path, dict[str, Any]]


@pytest.fixture(scope="module", params=[pytest.param(RECIPE, marks=pytest.mark.recipe_tree(RECIPE))])
def built(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    ci_python: Callable[[str], tuple[str, ...] | None],
) -> Built:
    return build_recipe(RECIPE, tmp_path_factory.mktemp("dist-aarch64"), ci_python(request.param))


def wheels(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in manifest["artifacts"] if a["kind"] == "wheel"]


def test_wheels_are_manylinux_2_17_aarch64_no_larger_than_pypis_with_nothing_grafted(built: Built) -> None:
    out, manifest = built
    pypi = {w.file.split("-")[2]: w for w in registry.pypi_wheels() if w.target == "aarch64-unknown-linux-gnu"}
    built_tags = []
    for art in wheels(manifest):
        tag = art["path"].split("-")[2]
        built_tags.append(tag)
        assert required_glibc(art["path"]) == (2, 17) and "manylinux_2_17_aarch64" in art["tag"], art["path"]
        with zipfile.ZipFile(out / art["path"]) as zf:
            assert not [n for n in zf.namelist() if n.startswith("onnxruntime.libs/")], art["path"]
        assert (out / art["path"]).stat().st_size == art["size"], art["path"]  # the manifest tells the file's size
        if tag in pypi:  # PyPI has cp310-cp313 for aarch64 (no cp314)
            assert art["size"] <= pypi[tag].size, (art["path"], art["size"], pypi[tag].size)
    expected = [f"cp{v.replace('.', '')}" for v in manifest["python"]]
    assert sorted(built_tags) == sorted(expected)


def test_every_shipped_elf_is_aarch64_and_keeps_the_glibc_2_17_promise(built: Built) -> None:
    """DT_NEEDED and symbol versions of every ELF in every wheel and the C library archive, read from
    the files: glibc's own libraries at GLIBC_2.17 at most, and an AArch64 machine in the header."""
    out, manifest = built
    system = load_toolchain(PROJECT, TOOLCHAIN).system_libraries
    checked = 0
    for art, members in shipped_libraries(out, manifest):
        assert elf.violations(members, elf.policy((2, 17), system)) == [], art["path"]
        for name, data in members:
            if elf.is_elf(data):
                assert int.from_bytes(data[18:20], "little") == EM_AARCH64, (art["path"], name)
                checked += 1
    assert checked >= len(wheels(manifest)) * 2 + 1, checked


def test_the_targets_pythons_ran_the_model_under_qemu_and_the_others_say_why(built: Built) -> None:
    _, manifest = built
    check = manifest["clean_root_check"]
    assert check["ok"] and check["python"] == "3.13" and "CPUExecutionProvider" in check["available_providers"]
    others = manifest["clean_root_check_other_python"]
    assert set(others) == set(manifest["python"]) - {check["python"]}, sorted(others)  # every other Python said
    for version, result in others.items():
        if version in NOT_RUN:
            assert result["ok"] is None and "checked from its ELF files only" in result["not_run"], version
        else:
            assert result["ok"] is True and result["outputs"], version
    assert set(manifest.get("python_not_run", [])) == NOT_RUN & set(manifest["python"])


@pytest.fixture(scope="module")
def pypi_aarch64_smoke(
    tmp_path_factory: pytest.TempPathFactory, download_official_wheel: Callable[..., Path]
) -> Callable[[str], dict[str, Any]]:
    """PyPI's aarch64 wheel for a Python through the smoke suite under the same emulation: the
    baseline (each Python's run once per module)."""
    toolchain = make_toolchain(load_toolchain(PROJECT, TOOLCHAIN))
    reports: dict[str, dict[str, Any]] = {}

    def baseline(python: str) -> dict[str, Any]:
        if python not in reports:
            wheel_dir = tmp_path_factory.mktemp("official-aarch64")
            official = download_official_wheel(wheel_dir, python=python, arch="aarch64")
            report, _ = smoke_wheel(official, tmp_path_factory.mktemp("base-aarch64"), scratch_cache(), toolchain)
            assert report["passed"], report
            assert report["environment"]["kind"] == "emulated" and report["environment"]["machine"] == "aarch64"
            assert report["environment"]["python"].startswith(python + ".")
            reports[python] = report
        return reports[python]

    return baseline


# Every Python the target's roots run under qemu here; PyPI has no cp314 aarch64 wheel of 1.21.0,
# so cp314 is held to cp313's baseline (the same ORT, the same node tests).
@pytest.mark.parametrize(("python", "pypi_python"), [("3.11", "3.11"), ("3.13", "3.13"), ("3.14", "3.13")])
def test_smoke_suite_under_qemu_has_node_test_parity_with_pypis_aarch64_wheel(
    built: Built,
    pypi_aarch64_smoke: Callable[[str], dict[str, Any]],
    python: str,
    pypi_python: str,
    tmp_path: Path,
) -> None:
    out, manifest = built
    tag = f"-cp{python.replace('.', '')}-"
    wheel = out / next(a["path"] for a in wheels(manifest) if tag in a["path"])
    toolchain = make_toolchain(load_toolchain(PROJECT, TOOLCHAIN))
    theirs = pypi_aarch64_smoke(pypi_python)
    report, verdicts = smoke_wheel(wheel, tmp_path, scratch_cache(), toolchain, baseline=theirs["node_test_outcomes"])
    assert report["passed"], [f"{v.provider} {v.name}: {v.message}" for v in verdicts if not v.passed]
    environment = report["environment"]
    assert environment["kind"] == "emulated" and environment["machine"] == "aarch64"
    assert environment["python"].startswith(python + ".")
    assert report["regressions"] == {"CPUExecutionProvider": []}
    ours, pypi = report["node_tests"]["CPUExecutionProvider"], theirs["node_tests"]["CPUExecutionProvider"]
    assert ours["passed"] >= pypi["passed"]
