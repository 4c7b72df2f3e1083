"""Where the cache is: every build, and every test that looks for a warm tree, asks Cache.default()."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ortdist.paths import Cache

TESTS = Path(__file__).resolve().parents[1]


def test_ortdist_cache_names_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "mine" / ".." / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Cache.default().root == tmp_path / "mine"


def test_without_ortdist_cache_the_xdg_cache_or_home_holds_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ORTDIST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Cache.default().root == tmp_path / "xdg" / "ortdist"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Cache.default().root == tmp_path / "home" / ".cache" / "ortdist"
    monkeypatch.setenv("ORTDIST_CACHE", "")  # set but empty: the default, not the working directory
    assert Cache.default().root == tmp_path / "home" / ".cache" / "ortdist"


# A test that spells the cache's place itself (XDG_CACHE_HOME, ~/.cache) ignores ORTDIST_CACHE: a
# user who keeps the cache elsewhere would see it skip or fail (issue #39).
OWN_LOOKUP = re.compile(r"XDG_CACHE_HOME|home\(\)\s*/\s*[\"']\.cache[\"']")


def test_no_test_looks_up_the_cache_on_its_own() -> None:
    offenders = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OWN_LOOKUP.search(line)
    ]
    assert not offenders, f"use ortdist.paths.Cache.default() instead: {offenders}"
