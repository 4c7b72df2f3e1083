"""Every deletion goes through fsutil.remove_tree, which refuses anything outside ortdist's own trees."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import fsutil
from ortdist.errors import OrtdistError
from ortdist.fsutil import allow_removals_under, remove_tree


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A cache, a project and a temp dir of their own, and a victim outside all three."""
    places = {name: tmp_path / name for name in ("cache", "project", "tmp", "victim", "elsewhere")}
    for place in places.values():
        place.mkdir()
    (places["victim"] / "precious.txt").write_text("keep me")
    monkeypatch.setenv("ORTDIST_CACHE", str(places["cache"]))
    monkeypatch.setenv("ORTDIST_PROJECT", str(places["project"]))
    monkeypatch.setattr(tempfile, "tempdir", str(places["tmp"]))
    monkeypatch.setattr(fsutil, "_REGISTERED_ROOTS", set())
    return places


def test_removes_below_the_cache_the_project_dist_and_temp(roots: dict[str, Path]) -> None:
    targets = [roots["cache"] / "work" / "r", roots["project"] / "dist" / "r" / "x", roots["tmp"] / "t"]
    for target in targets:
        target.mkdir(parents=True)
        (target / "f").write_text("x")
        remove_tree(target)
        assert not target.exists()


@pytest.mark.parametrize(
    "spelling",
    [
        lambda r: r["victim"],
        lambda r: r["cache"] / "work" / ".." / ".." / "victim",  # a recipe named ../../victim
        lambda r: r["cache"] / "..",
        lambda r: r["cache"],  # the root itself is not below it
        lambda r: r["project"] / "dist",
    ],
    ids=["outside", "dotdot-escape", "parent-of-cache", "cache-root", "dist-root"],
)
def test_refuses_anything_else(roots: dict[str, Path], spelling: Callable[[dict[str, Path]], Path]) -> None:
    target = spelling(roots)
    (roots["project"] / "dist").mkdir(exist_ok=True)
    with pytest.raises(OrtdistError, match="refusing to delete") as caught:
        remove_tree(target)
    assert "how to fix" in str(caught.value)
    assert (roots["victim"] / "precious.txt").read_text() == "keep me"
    assert roots["cache"].is_dir()


def test_a_symlink_into_the_outside_is_unlinked_not_followed(roots: dict[str, Path]) -> None:
    link = roots["cache"] / "sources" / "link"
    link.parent.mkdir()
    link.symlink_to(roots["victim"])
    remove_tree(link)
    assert not link.is_symlink()
    assert (roots["victim"] / "precious.txt").read_text() == "keep me"


def test_a_symlinked_parent_is_judged_by_where_it_points(roots: dict[str, Path]) -> None:
    sneaky = roots["cache"] / "work"
    sneaky.symlink_to(roots["victim"])
    with pytest.raises(OrtdistError, match="refusing to delete"):
        remove_tree(sneaky / "precious.txt")
    assert (roots["victim"] / "precious.txt").exists()


def test_a_registered_dist_directory_is_removable_below_only(roots: dict[str, Path]) -> None:
    dist = roots["elsewhere"] / "dist" / "cpu-linux"
    (dist / "logs").mkdir(parents=True)
    with pytest.raises(OrtdistError):
        remove_tree(dist / "logs")
    allow_removals_under(dist)
    remove_tree(dist / "logs")
    assert not (dist / "logs").exists()
    with pytest.raises(OrtdistError):
        remove_tree(dist)
    with pytest.raises(OrtdistError):
        remove_tree(roots["elsewhere"] / "dist")


def test_a_missing_path_is_nothing_to_do_below_a_root(roots: dict[str, Path]) -> None:
    remove_tree(roots["cache"] / "not-there")
    with pytest.raises(OrtdistError):
        remove_tree(roots["victim"] / "not-there")
