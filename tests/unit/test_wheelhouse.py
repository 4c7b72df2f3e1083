"""wheelhouse.fill: pip asked once; a fill that found its wheels is not asked again while they stay."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ortdist import wheelhouse
from ortdist.errors import CheckError


class Pip:
    """pip download as the fill runs it: offline fails until the online run brought the wheels."""

    def __init__(self, house: Path, online_works: bool = True) -> None:
        self.house, self.online_works = house, online_works
        self.calls: list[str] = []

    def __call__(self, argv: list[str], check: bool = True, **_: Any) -> subprocess.CompletedProcess[str]:
        online = "--no-index" not in argv
        self.calls.append("online" if online else "offline")
        ok = any(self.house.glob("*.whl")) or (online and self.online_works)
        if online and ok:
            self.house.mkdir(parents=True, exist_ok=True)
            (self.house / "numpy-2.0-cp313-cp313-manylinux_2_17_x86_64.whl").write_bytes(b"wheel")
        if not ok and check:
            raise CheckError("pip download failed")
        return subprocess.CompletedProcess(argv, 0 if ok else 1, "", "")


def test_a_fill_is_remembered_while_its_wheels_stay(tmp_path: Path) -> None:
    house = tmp_path / "house"
    pip = Pip(house)
    wheelhouse.fill(house, "3.13", ["numpy"], capture=pip, error=CheckError)
    assert pip.calls == ["offline", "online"]
    wheelhouse.fill(house, "3.13", ["numpy"], capture=pip, error=CheckError)
    assert pip.calls == ["offline", "online"]  # nothing asked
    wheelhouse.fill(house, "3.13", ["numpy", "sympy"], capture=pip, error=CheckError)
    assert pip.calls[2:] == ["offline"]  # other requirements: pip decides
    next(house.glob("*.whl")).unlink()
    wheelhouse.fill(house, "3.13", ["numpy"], capture=pip, error=CheckError)
    assert pip.calls[3:] == ["offline", "online"]  # a wheel it found is gone: asked again


def test_a_failed_fill_is_not_remembered(tmp_path: Path) -> None:
    house = tmp_path / "house"
    pip = Pip(house, online_works=False)
    with pytest.raises(CheckError):
        wheelhouse.fill(house, "3.13", ["numpy"], capture=pip, error=CheckError)
    assert not (house / ".filled").exists()
