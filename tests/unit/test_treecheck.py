"""Cached trees are verified against the content manifest recorded at their creation, not trusted."""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import sources, treecheck
from ortdist.patches import MARKER, ensure_tree, read_series
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian import STAMP, DebianSysroot

ORIGINAL = "".join(f"int line{i};\n" for i in range(1, 21))
PATCHED = ORIGINAL.replace("int line5;\n", "int line_five;\n")


@pytest.fixture
def made(tmp_path: Path) -> tuple[Path, Callable[[], int]]:
    """A patched source tree made by the real functions (tar unpack + GNU patch), and a function
    doing what the source step does (reuse a verified tree, else make it), returning how often
    the tree has been made so far."""
    tarball = tmp_path / "pkg.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for name, text in {"src/a.cc": ORIGINAL, "src/b.cc": "int b;\n", "CMakeLists.txt": "project(x)\n"}.items():
            info = tarfile.TarInfo(f"pkg-1.0/{name}")
            info.size = len(text)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(text.encode()))
    series = tmp_path / "patches"
    series.mkdir()
    diff = difflib.unified_diff(
        ORIGINAL.splitlines(True), PATCHED.splitlines(True), fromfile="a/src/a.cc", tofile="b/src/a.cc"
    )
    (series / "0001-five.patch").write_text("".join(diff))
    (series / "series").write_text("0001-five.patch\n")
    patches = read_series(series)
    dest = tmp_path / "cache" / "sources" / "pkg-1.0-abc"
    count = [0]

    def fill(tree: Path) -> None:
        count[0] += 1
        sources.unpack(tarball, tree)

    def ensure() -> int:
        ensure_tree(dest, fill, patches)
        return count[0]

    return dest, ensure


def _empty(tree: Path) -> None:
    (tree / "src" / "a.cc").write_text("")


def _add(tree: Path) -> None:
    (tree / "src" / "extra.cc").write_text("int extra;\n")


def _remove(tree: Path) -> None:
    (tree / "src" / "b.cc").unlink()


def _chmod(tree: Path) -> None:
    (tree / "src" / "b.cc").chmod(0o755)


def _symlink(tree: Path) -> None:
    (tree / "src" / "b.cc").unlink()
    (tree / "src" / "b.cc").symlink_to("a.cc")


def _same_size_edit(tree: Path) -> None:
    (tree / "src" / "a.cc").write_text(PATCHED.replace("int", "INT", 1))


@pytest.mark.parametrize(
    ("tamper", "reported"),
    [
        (_empty, "modified 1: src/a.cc"),
        (_same_size_edit, "modified 1: src/a.cc"),
        (_add, "added 1: src/extra.cc"),
        (_remove, "removed 1: src/b.cc"),
        (_chmod, "modified 1: src/b.cc"),
        (_symlink, "modified 1: src/b.cc"),
    ],
)
def test_a_tampered_source_tree_is_caught_and_made_again(
    made: tuple[Path, Callable[[], int]],
    tamper: Callable[[Path], None],
    reported: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dest, ensure = made
    assert ensure() == 1
    assert (dest / "src" / "a.cc").read_text() == PATCHED
    assert ensure() == 1  # untampered: reused, not made again
    tamper(dest)
    assert ensure() == 2
    err = capsys.readouterr().err
    assert f"patched source tree {dest} no longer matches what was recorded at its creation ({reported})" in err
    assert "rebuilding it" in err
    assert (dest / "src" / "a.cc").read_text() == PATCHED
    assert (dest / "src" / "b.cc").read_text() == "int b;\n" and not (dest / "src" / "b.cc").is_symlink()
    assert not (dest / "src" / "extra.cc").exists()
    assert oct((dest / "src" / "b.cc").stat().st_mode & 0o777) == oct(0o644 & ~_umask())
    assert ensure() == 2  # the re-made tree verifies


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_manifest_lives_beside_the_tree(made: tuple[Path, Callable[[], int]]) -> None:
    dest, ensure = made
    ensure()
    manifest = json.loads(treecheck.manifest_path(dest).read_text())
    assert treecheck.manifest_path(dest).parent == dest.parent
    assert not list(dest.rglob("*.content.json"))
    entries = manifest["entries"]
    assert (
        entries["src/a.cc"].startswith(f"file 0{0o644 & ~_umask():o} ") and len(entries["src/a.cc"].split()[-1]) == 64
    )
    assert entries["src"].startswith("dir ") and MARKER in entries
    assert manifest["files"] == 4 and manifest["digest"] == treecheck.scan(dest).digest


def test_bytecode_caches_a_build_writes_do_not_rebuild(made: tuple[Path, Callable[[], int]]) -> None:
    """ORT's build imports its tools from the source tree, leaving __pycache__ beside them."""
    dest, ensure = made
    ensure()
    (dest / "src" / "__pycache__").mkdir()
    (dest / "src" / "__pycache__" / "tool.cpython-313.pyc").write_bytes(b"\0" * 16)
    assert ensure() == 1


def test_a_tree_made_before_manifests_is_compared_with_a_fresh_copy(
    made: tuple[Path, Callable[[], int]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Identical: kept with its file times (no recompile) and recorded. Different: replaced."""
    dest, ensure = made
    ensure()
    treecheck.manifest_path(dest).unlink()
    before = (dest / "src" / "a.cc").stat()
    assert ensure() == 2  # the fresh copy it was compared with
    assert "recording content digest of existing patched source tree" in capsys.readouterr().err
    after = (dest / "src" / "a.cc").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert ensure() == 2 and treecheck.manifest_path(dest).is_file()  # now verified like any other

    treecheck.manifest_path(dest).unlink()
    _empty(dest)
    assert ensure() == 3
    err = capsys.readouterr().err
    assert "differs from a fresh copy of the pinned source and patches (modified 1: src/a.cc); replacing it" in err
    assert (dest / "src" / "a.cc").read_text() == PATCHED
    assert ensure() == 3
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name, treecheck.manifest_path(dest).name]


def test_the_difference_names_the_first_paths() -> None:
    recorded = {f"f{i}": "file 0644 0:0 1 x" for i in range(8)}
    current = {**{f"f{i}": "file 0644 0:0 1 y" for i in range(7)}, "new": "link x"}
    diff = treecheck.compare(recorded, current)
    assert diff.describe(limit=3) == "modified 7: f0, f1, f2 and 4 more; added 1: new; removed 1: f7"
    assert not treecheck.compare(recorded, recorded)


# --- sysroots -------------------------------------------------------------------------------


@pytest.fixture
def sysroot(project: Path, tmp_path: Path) -> tuple[DebianSysroot, Path]:
    """A small stand-in root created through the toolchain's own finishing step (as after debootstrap)."""
    tc = DebianSysroot(load_toolchain(project, "debian-trixie"))
    final = tmp_path / "sysroots" / "debian-trixie-abc"
    tmp = tmp_path / "sysroots" / ".tmp"
    for name, text in {"usr/bin/gcc": "gcc", "usr/include/stdio.h": "/* stdio */", "etc/passwd": "root"}.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    (tmp / "lib").symlink_to("usr/lib")
    for scratch in ("tmp", "root", "proc", "dev", "ortdist/source"):
        (tmp / scratch).mkdir(parents=True)
    (tmp / STAMP).write_text("{}")
    tc._finish_root(tmp, final)
    return tc, final


def test_what_a_build_writes_into_a_root_does_not_rebuild_it(sysroot: tuple[DebianSysroot, Path]) -> None:
    tc, final = sysroot
    (final / "tmp" / "cc1.o").write_text("x")
    (final / "root" / ".cache" / "pip").mkdir(parents=True)
    (final / "root" / ".cache" / "pip" / "w.whl").write_text("x")
    (final / "ortdist" / "shims" / "re2").mkdir(parents=True)  # wrap's mount points
    (final / "t").mkdir()  # a bind mount point elsewhere
    (final / "proc" / "1").mkdir()
    assert DebianSysroot(tc.spec).reuse_root(final)


@pytest.mark.parametrize(
    ("tamper", "reported"),
    [
        (lambda r: (r / "usr" / "include" / "stdio.h").write_text(""), "modified 1: usr/include/stdio.h"),
        (lambda r: (r / "usr" / "bin" / "cc").write_text("evil"), "added 1: usr/bin/cc"),
        (lambda r: (r / "t" / "sub").mkdir(parents=True) or (r / "t" / "sub" / "x").write_text(""), "added 3: t"),
        (lambda r: (r / STAMP).unlink() or (r / STAMP).write_text("{ }"), f"modified 1: {STAMP}"),
        (lambda r: (r / "etc" / "passwd").unlink(), "removed 1: etc/passwd"),
    ],
)
def test_a_tampered_root_is_deleted_for_re_creation(
    sysroot: tuple[DebianSysroot, Path],
    tamper: Callable[[Path], object],
    reported: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tc, final = sysroot
    tamper(final)
    assert not DebianSysroot(tc.spec).reuse_root(final)
    assert not final.exists() and not treecheck.manifest_path(final).exists()
    assert f"root {final} no longer matches what was recorded at its creation ({reported}" in capsys.readouterr().err


def test_a_root_made_before_manifests_is_recorded_once_then_verified(
    sysroot: tuple[DebianSysroot, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tc, final = sysroot
    treecheck.manifest_path(final).unlink()
    assert DebianSysroot(tc.spec).reuse_root(final)
    assert f"recording content digest of existing root {final}" in capsys.readouterr().err
    (final / "usr" / "bin" / "gcc").write_text("")
    assert not DebianSysroot(tc.spec).reuse_root(final)


def _dpkg_sums(root: Path) -> None:
    info = root / "var" / "lib" / "dpkg" / "info"
    info.mkdir(parents=True)
    sums = [f"{hashlib.md5((root / rel).read_bytes()).hexdigest()}  {rel}\n" for rel in ("usr/bin/gcc", "etc/passwd")]
    (info / "gcc-14.md5sums").write_text("".join(sums))


def test_a_root_made_before_manifests_is_checked_against_dpkg_first(
    sysroot: tuple[DebianSysroot, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """What dpkg installed is known without a manifest: a changed package file re-makes the root."""
    tc, final = sysroot
    _dpkg_sums(final)
    treecheck.manifest_path(final).unlink()
    assert DebianSysroot(tc.spec).reuse_root(final)
    assert "its packaged files match dpkg's md5sums" in capsys.readouterr().err
    treecheck.manifest_path(final).unlink()
    (final / "usr" / "bin" / "gcc").write_text("evil")
    (final / "etc" / "passwd").unlink()
    assert not DebianSysroot(tc.spec).reuse_root(final)
    assert not final.exists()
    err = capsys.readouterr().err
    assert (
        "differs from what dpkg installed (2 file(s): usr/bin/gcc (modified), etc/passwd (missing)); rebuilding" in err
    )


def test_a_root_is_hashed_once_per_process(sysroot: tuple[DebianSysroot, Path]) -> None:
    tc, final = sysroot
    assert tc.reuse_root(final)  # _finish_root already counted it as verified
    fresh = DebianSysroot(tc.spec)
    assert fresh.reuse_root(final)
    (final / "usr" / "bin" / "gcc").write_text("")
    assert fresh.reuse_root(final)  # the same build asking again is not re-hashed
    assert not DebianSysroot(tc.spec).reuse_root(final)


def test_files_whose_stat_identity_is_unchanged_are_not_read_again(tmp_path: Path) -> None:
    """A no-op rebuild verifies gigabytes of roots by stat; a changed file is hashed whatever its
    mtime says, since writing it moved its ctime, which no tool can set back."""
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    for name in ("a.h", "b.h", "sub/c.h"):
        (tree / name).write_text(f"// {name}\n")
    treecheck.record(tree)
    again = treecheck.verify(tree)
    assert again.ok and again.scan is not None and again.scan.hashed == 0
    target = tree / "b.h"
    before = target.stat()
    target.write_text("// B.h\n")  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old mtime
    changed = treecheck.verify(tree)
    assert changed.difference.modified == ("b.h",)
    assert changed.scan is not None and changed.scan.hashed == 1


def test_a_manifest_without_identities_is_verified_in_full_once_then_by_stat(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.h").write_text("a\n")
    (tree / "b.h").write_text("b\n")
    treecheck.record(tree)
    manifest = treecheck.manifest_path(tree)
    document = json.loads(manifest.read_text())
    del document["identities"]  # as an ortdist before identities wrote it
    manifest.write_text(json.dumps(document))
    first = treecheck.verify(tree)
    assert first.ok and first.scan is not None and first.scan.hashed == 2
    upgraded = json.loads(manifest.read_text())
    assert set(upgraded["identities"]) == {"a.h", "b.h"} and upgraded["digest"] == document["digest"]
    second = treecheck.verify(tree)
    assert second.ok and second.scan is not None and second.scan.hashed == 0


def test_a_changed_mode_is_seen_through_the_identity(tmp_path: Path) -> None:
    """A chmod moves the ctime too, so the entry is described afresh and its new mode differs."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.sh").write_text("echo\n")
    treecheck.record(tree)
    (tree / "a.sh").chmod(0o755)
    verdict = treecheck.verify(tree)
    assert verdict.difference.modified == ("a.sh",)
