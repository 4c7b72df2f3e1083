"""Tests leave the user's cache alone: what they make goes to a scratch cache (tests/integration's
scratch_cache), which links what the user's cache holds and keeps whatever a test adds to itself."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from integration import scratch_cache

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's cache with a root, an unpacked source, a download and a wheelhouse wheel."""
    root = tmp_path / "user"
    (root / "sysroots" / "portable-abc" / "usr").mkdir(parents=True)
    (root / "sysroots" / ".portable-abc.tmp-x").mkdir()  # a root being made: not shared
    (root / "sources" / "onnxruntime-1.21.0-x").mkdir(parents=True)
    (root / "downloads").mkdir()
    (root / "downloads" / "a.deb").write_bytes(b"deb")
    (root / "wheelhouse" / "cp313").mkdir(parents=True)
    (root / "wheelhouse" / "cp313" / "numpy.whl").write_bytes(b"whl")
    monkeypatch.setenv("ORTDIST_CACHE", str(root))
    monkeypatch.delenv("ORTDIST_TEST_CACHE", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return root


def test_a_scratch_cache_shares_the_users_entries_and_keeps_its_own_writes(user: Path, tmp_path: Path) -> None:
    cache = scratch_cache()
    assert cache.root.parent == Path(tempfile.gettempdir()) and cache.root.name.startswith("ortdist-tests-")
    from ortdist.fsutil import removable_roots

    assert any(cache.root.is_relative_to(r) for r in removable_roots())  # ortdist may delete what it made there
    assert (cache.sysroots / "portable-abc").resolve() == user / "sysroots" / "portable-abc"
    assert not (cache.sysroots / ".portable-abc.tmp-x").exists()
    assert (cache.downloads / "a.deb").samefile(user / "downloads" / "a.deb")  # hard-linked: seen inside roots too
    assert (cache.wheelhouse("3.13") / "numpy.whl").samefile(user / "wheelhouse" / "cp313" / "numpy.whl")
    assert not cache.wheelhouse("3.13").is_symlink()  # a real directory: new wheels stay in the scratch cache
    (cache.wheelhouse("3.13") / "onnx.whl").write_bytes(b"new")
    (cache.sysroots / "debian-trixie-def").mkdir()
    (cache.root / "tools").mkdir()
    assert sorted(p.name for p in (user / "wheelhouse" / "cp313").iterdir()) == ["numpy.whl"]
    assert sorted(p.name for p in (user / "sysroots").iterdir()) == [".portable-abc.tmp-x", "portable-abc"]
    assert not (user / "tools").exists()
    # Refreshed on every call: an entry the user's cache gained since is linked, nothing is duplicated.
    (user / "downloads" / "b.deb").write_bytes(b"b")
    assert scratch_cache().root == cache.root and (cache.downloads / "b.deb").samefile(user / "downloads" / "b.deb")
    assert scratch_cache(tmp_path / "own").root == tmp_path / "own"


def test_no_integration_test_makes_or_removes_anything_in_the_users_cache() -> None:
    """Cache.default() in a test is read (a build tree's files, the root a build made), never handed
    to what makes roots, tools or smoke runs, and never written, removed or copied into."""
    writes = re.compile(r"rmtree|unlink|write_|mkdir|symlink_to|copy|smoke_wheel|ensure_|open\(")
    offenders = []
    for path in sorted(INTEGRATION.glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "Cache.default()" not in line:
                continue
            assigned = re.match(r"\s*(\w+) = Cache\.default\(\)\s*(#.*)?$", line)
            allowed = assigned and (assigned[1], path.name) in {("user", "__init__.py"), ("WARM", "test_interrupts.py")}
            if writes.search(line) or (assigned and not allowed):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, offenders
