"""Where the smoke suite runs a wheel when the host cannot: the clean root, judged by the glibc of
the root's Debian suite, not by the (older) glibc the toolchain's output promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortdist.errors import CheckError
from ortdist.smoke import env, run_suite
from ortdist.smoke.wheelinfo import WheelInfo
from ortdist.toolchains import load_toolchain, make_toolchain

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def wheel(glibc: tuple[int, int], platform: str) -> WheelInfo:
    name = f"onnxruntime-1.21.0-cp313-cp313-{platform}.whl"
    return WheelInfo(Path(name), "3.13", glibc, (), None, "x86_64", platform)


@pytest.fixture
def no_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host with no CPython 3.13 and an old glibc: only the clean root can run anything."""
    monkeypatch.setattr(env, "host_python", lambda version: None)
    monkeypatch.setattr(env, "host_glibc", lambda: (2, 17))


@pytest.mark.usefixtures("no_host")
def test_pypis_manylinux_2_28_wheel_runs_in_the_portable_toolchains_trixie_root() -> None:
    """portable-glibc2.17 promises 2.17 for what it builds; its clean root is trixie (2.41), which
    runs PyPI's manylinux_2_28 wheel: the node-test baseline."""
    toolchain = make_toolchain(load_toolchain(PROJECT_ROOT, "portable-glibc2.17"))
    assert toolchain.spec.glibc == "2.17" and toolchain.spec.suite == "trixie"
    choice = run_suite.where_to_run(wheel((2, 28), "manylinux_2_27_x86_64.manylinux_2_28_x86_64"), toolchain)
    assert choice.kind == "root" and choice.python == "python3.13"


@pytest.mark.usefixtures("no_host")
def test_a_wheel_newer_than_the_roots_suite_is_refused() -> None:
    toolchain = make_toolchain(load_toolchain(PROJECT_ROOT, "portable-glibc2.17"))
    with pytest.raises(CheckError, match=r"needs CPython 3\.13 with glibc >= 2\.42"):
        run_suite.where_to_run(wheel((2, 42), "manylinux_2_42_x86_64"), toolchain)
