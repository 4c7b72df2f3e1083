"""BuildContext.each_python: the per-version packaging steps run their versions side by side."""

from __future__ import annotations

import threading
import time

import pytest

from ortdist.errors import PackageError

from .conftest import MakeEnv

VERSIONS = ("3.13", "3.10", "3.11")


def test_versions_run_side_by_side_and_come_back_in_version_order(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux")  # -j 2
    both = threading.Barrier(2, timeout=5)  # passes only when two versions run at once

    def work(version: str) -> str:
        if version != "3.11":
            both.wait()
        time.sleep(0.01 if version == "3.13" else 0.0)
        return f"wheel {version}"

    results, seconds = env.ctx.each_python(VERSIONS, work)
    assert list(results.items()) == [(v, f"wheel {v}") for v in VERSIONS]
    assert list(seconds) == list(VERSIONS) and all(s >= 0 for s in seconds.values())


def test_every_version_ends_then_the_first_failing_one_in_order_is_raised(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux")
    ran: list[str] = []

    def work(version: str) -> str:
        ran.append(version)
        if version in ("3.10", "3.11"):
            raise PackageError(f"repair of {version} failed")
        return version

    with pytest.raises(PackageError, match=r"3\.10"):
        env.ctx.each_python(VERSIONS, work)
    assert sorted(ran) == sorted(VERSIONS)  # 3.11 still ran: one failure does not hide another's log
