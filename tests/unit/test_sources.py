from __future__ import annotations

import hashlib
import http.server
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from ortdist import sources
from ortdist.errors import SourceError
from ortdist.registry import DebianSource, DependencySource


def make_tarball(path: Path, files: dict[str, str], top: str = "pkg-1.0") -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server over a temp dir: the same code path as a real mirror."""
    root = tmp_path / "www"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", root
    finally:
        server.shutdown()


def test_fetch_verifies_and_caches(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    digest = make_tarball(root / "pkg.tar.gz", {"a.txt": "hello"})
    pin = sources.Pinned(url=f"{url}/pkg.tar.gz", filename="pkg.tar.gz", sha256=digest, origin="test")
    cache = tmp_path / "downloads"
    got = sources.fetch(pin, cache)
    assert got == cache / "pkg.tar.gz"
    assert hashlib.sha256(got.read_bytes()).hexdigest() == digest
    (root / "pkg.tar.gz").unlink()  # served file gone: the cache must answer
    assert sources.fetch(pin, cache) == got


def test_hash_mismatch_refuses_and_keeps_nothing(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    make_tarball(root / "pkg.tar.gz", {"a.txt": "tampered"})
    pin = sources.Pinned(url=f"{url}/pkg.tar.gz", filename="pkg.tar.gz", sha256="0" * 64, origin="ort_versions.toml")
    cache = tmp_path / "downloads"
    with pytest.raises(SourceError) as info:
        sources.fetch(pin, cache)
    text = str(info.value)
    assert "sha256 mismatch for pkg.tar.gz" in text
    assert "expected " + "0" * 64 in text
    assert "ort_versions.toml" in text and "nothing was extracted" in text
    assert list(cache.iterdir()) == []  # neither the file nor a .part


def test_corrupt_cache_entry_is_fetched_again(served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    digest = make_tarball(root / "pkg.tar.gz", {"a.txt": "hello"})
    cache = tmp_path / "downloads"
    cache.mkdir()
    (cache / "pkg.tar.gz").write_bytes(b"truncated")
    pin = sources.Pinned(url=f"{url}/pkg.tar.gz", filename="pkg.tar.gz", sha256=digest, origin="test")
    assert hashlib.sha256(sources.fetch(pin, cache).read_bytes()).hexdigest() == digest


def test_download_failure_is_explained(served: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = served
    pin = sources.Pinned(url=f"{url}/missing.tar.gz", filename="missing.tar.gz", sha256="0" * 64, origin="t")
    with pytest.raises(SourceError, match="download failed"):
        sources.fetch(pin, tmp_path / "d")


def test_unpack_strips_the_single_top_dir(tmp_path: Path) -> None:
    make_tarball(tmp_path / "p.tar.gz", {"a.txt": "A", "sub/b.txt": "B"})
    dest = tmp_path / "out" / "tree"
    sources.unpack(tmp_path / "p.tar.gz", dest)
    assert (dest / "a.txt").read_text() == "A"
    assert (dest / "sub" / "b.txt").read_text() == "B"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tree"]


def test_unpack_of_a_broken_archive_leaves_nothing(tmp_path: Path) -> None:
    make_tarball(tmp_path / "p.tar.gz", {"a.txt": "A" * 10000})
    data = (tmp_path / "p.tar.gz").read_bytes()
    (tmp_path / "p.tar.gz").write_bytes(data[: len(data) // 2])
    dest = tmp_path / "out" / "tree"
    with pytest.raises(SourceError, match="cannot unpack"):
        sources.unpack(tmp_path / "p.tar.gz", dest)
    assert list(dest.parent.iterdir()) == []


def test_unpack_refuses_path_traversal(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "evil.tar", "w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(SourceError):
        sources.unpack(tmp_path / "evil.tar", tmp_path / "out" / "t")
    assert not (tmp_path / "out" / "escape.txt").exists()


def test_debian_url_follows_the_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    src = DebianSource(package="onnxruntime", version="1.21.0+dfsg", sha256="a" * 64)
    declared = "http://declared.example/debian"
    assert sources.debian_orig(src, declared).url.startswith(f"{declared}/pool/main/o/onnxruntime/")
    monkeypatch.setenv("ORTDIST_DEBIAN_MIRROR", "http://mirror.example/debian/")
    sources.mirrors.debian_archive.cache_clear()
    pin = sources.debian_orig(src, declared)
    assert pin.url == "http://mirror.example/debian/pool/main/o/onnxruntime/onnxruntime_1.21.0+dfsg.orig.tar.xz"
    assert pin.sha256 == "a" * 64
    assert sources.debian_orig(src, declared, "b" * 64).origin == "recipe [source] sha256"


def test_pypi_sdist_url_from_simple_index(served: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, root = served
    (root / "onnx").mkdir()
    (root / "onnx" / "index.html").write_text(
        '<a href="../../files/onnx-1.16.0.tar.gz#sha256=aa">x</a>\n'
        '<a href="https://files.example/p/onnx-1.17.0.tar.gz#sha256=bb">y</a>\n'
    )
    monkeypatch.setenv("ORTDIST_PYPI_SIMPLE", url)
    assert sources.pypi_sdist_url("onnx", "onnx-1.17.0.tar.gz") == "https://files.example/p/onnx-1.17.0.tar.gz"
    assert sources.pypi_sdist_url("onnx", "onnx-1.16.0.tar.gz") == f"{url}/files/onnx-1.16.0.tar.gz"
    with pytest.raises(SourceError, match=r"onnx-9\.9\.tar\.gz is not on"):
        sources.pypi_sdist_url("onnx", "onnx-9.9.tar.gz")


def test_path_source_must_look_like_ort(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not an ONNX Runtime source tree"):
        sources.copy_tree(tmp_path, tmp_path / "copy")


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"x"
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.mode = 0o644
    return info, data


MALICIOUS = {
    "absolute path": ([_member("/tmp/ortdist-evil.txt")], "'/tmp/ortdist-evil.txt'", "absolute path"),
    "dot-dot escape": ([_member("pkg/../../escape.txt")], "'pkg/../../escape.txt'", "leads outside"),
    "symlink escape": ([_member("pkg/link", tarfile.SYMTYPE, "../../outside")], "'pkg/link'", "outside the dest"),
    "absolute symlink": ([_member("pkg/etc", tarfile.SYMTYPE, "/etc")], "'pkg/etc'", "absolute path '/etc'"),
    "hardlink escape": ([_member("pkg/pw", tarfile.LNKTYPE, "../etc/passwd")], "'pkg/pw'", "outside the dest"),
    "device file": ([_member("pkg/sda", tarfile.BLKTYPE)], "'pkg/sda'", "special file"),
    "fifo": ([_member("pkg/fifo", tarfile.FIFOTYPE)], "'pkg/fifo'", "special file"),
    # Inside by its text (x, d2, d1 cancel three '..'), outside once x, a link to '.', is resolved:
    # only a check made as each member is extracted sees it.
    "symlink chain": (
        [
            _member("pkg/d1/d2", tarfile.DIRTYPE),
            _member("pkg/d1/d2/x", tarfile.SYMTYPE, "."),
            _member("pkg/a", tarfile.SYMTYPE, "d1/d2/x/../../../.."),
        ],
        "'pkg/a'",
        "outside the dest",
    ),
}


@pytest.fixture(params=["fallback", "filter"])
def extraction(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of extracting: ortdist's own checks alone (Python < 3.11.4), and with tarfile's filter."""
    if request.param == "filter" and not sources.HAS_TAR_FILTER:
        pytest.skip(f"this Python ({sys.version.split()[0]}) has no tarfile filters")
    monkeypatch.setattr(sources, "HAS_TAR_FILTER", request.param == "filter")
    return str(request.param)


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_members_are_refused_naming_archive_and_member(tmp_path: Path, case: str, extraction: str) -> None:
    members, named, reason = MALICIOUS[case]
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    dest = tmp_path / "out" / "tree"
    with pytest.raises(SourceError) as err:
        sources.unpack(archive, dest)
    assert f"refusing member {named} of evil.tar: " in str(err.value) and reason in str(err.value)
    assert err.value.where == "evil.tar"
    assert list((tmp_path / "out").iterdir()) == []  # nothing kept, nothing outside
    assert not (tmp_path / "escape.txt").exists() and not Path("/tmp/ortdist-evil.txt").exists()


def test_modes_are_made_safe_and_links_inside_kept(tmp_path: Path, extraction: str) -> None:
    archive = tmp_path / "ok.tar"
    setuid, _ = _member("pkg/bin/tool")
    setuid.mode = 0o6777
    plain, _ = _member("pkg/data.txt")
    plain.mode = 0o666
    with tarfile.open(archive, "w") as tar:
        tar.addfile(setuid, io.BytesIO(b"x"))
        tar.addfile(plain, io.BytesIO(b"x"))
        tar.addfile(_member("pkg/bin/alias", tarfile.SYMTYPE, "tool")[0])
        tar.addfile(_member("pkg/hard", tarfile.LNKTYPE, "pkg/data.txt")[0])
    dest = tmp_path / "tree"
    sources.unpack(archive, dest)
    assert (dest / "bin" / "tool").stat().st_mode & 0o7777 == 0o755
    assert (dest / "data.txt").stat().st_mode & 0o7777 == 0o644
    assert (dest / "bin" / "alias").readlink() == Path("tool")
    assert (dest / "hard").read_text() == "x"
    assert (dest / "bin" / "tool").stat().st_uid == os.geteuid()


# --- dependency sources: where they come from, and the part of them CMake gets ------------------------
def test_a_dependency_comes_from_pypi_or_debians_pool(
    served: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An sdist is found through the simple index; a Debian file is at its pool path on the mirror.
    Either way the pin names its origin in ort_versions.toml."""
    url, root = served
    (root / "pybind11").mkdir()
    (root / "pybind11" / "index.html").write_text(
        '<a href="https://files.example/pybind11-2.13.6.tar.gz#sha256=a">x</a>'
    )
    monkeypatch.setenv("ORTDIST_PYPI_SIMPLE", url)
    monkeypatch.setenv("ORTDIST_DEBIAN_MIRROR", "http://mirror.example/debian/")
    sdist = DependencySource(name="pybind11", pypi_sdist="pybind11", version="2.13.6", sha256="a" * 64)
    pin = sources.dependency(sdist, "http://declared.example/debian")
    assert (pin.url, pin.filename) == ("https://files.example/pybind11-2.13.6.tar.gz", "pybind11-2.13.6.tar.gz")
    assert (pin.sha256, pin.origin) == ("a" * 64, "ortdist/data/ort_versions.toml deps.pybind11")
    deb = DependencySource(
        name="safeint",
        debian="safeint",
        file="libsafeint-dev_3.0.28a+dfsg-4_all.deb",
        version="3.0.28a+dfsg-4",
        suite="trixie",
        sha256="b" * 64,
    )
    pin = sources.dependency(deb, "http://declared.example/debian")
    assert pin.url == "http://mirror.example/debian/pool/main/s/safeint/libsafeint-dev_3.0.28a+dfsg-4_all.deb"
    assert (pin.filename, pin.origin) == (deb.file, "ortdist/data/ort_versions.toml deps.safeint")


PROTOBUF = {
    "CMakeLists.txt": "protobuf",
    "src/google/protobuf/message.cc": "message",
    "third_party/utf8_range/CMakeLists.txt": "utf8_range",
    "third_party/utf8_range/utf8_validity.cc": "validity",
    "third_party/utf8_range_extra/x.txt": "a sibling whose name starts the same",
}


@pytest.mark.parametrize("subdir", ["third_party/utf8_range", "third_party/utf8_range/"])
def test_a_dependency_subdir_is_all_that_is_unpacked(tmp_path: Path, subdir: str) -> None:
    """utf8_range is a directory of protobuf's tarball (mp11 one of Boost's 700 MB): only it is
    extracted, at its path below the top directory, so FETCHCONTENT_SOURCE_DIR names <dest>/<subdir>."""
    make_tarball(tmp_path / "protobuf.tar.gz", PROTOBUF, top="protobuf-3.21.12")
    dest = tmp_path / "deps" / "utf8_range"
    sources.unpack_dependency(tmp_path / "protobuf.tar.gz", dest, subdir)
    files = sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file())
    assert files == ["third_party/utf8_range/CMakeLists.txt", "third_party/utf8_range/utf8_validity.cc"]
    assert (dest / "third_party" / "utf8_range" / "CMakeLists.txt").read_text() == "utf8_range"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["utf8_range"]  # no temp dir left


def test_a_dependency_without_subdir_is_its_whole_tree(tmp_path: Path) -> None:
    make_tarball(tmp_path / "protobuf.tar.gz", PROTOBUF, top="protobuf-3.21.12")
    dest = tmp_path / "deps" / "protobuf"
    sources.unpack_dependency(tmp_path / "protobuf.tar.gz", dest)
    assert sorted(str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file()) == sorted(PROTOBUF)


def test_a_missing_dependency_subdir_is_named(tmp_path: Path) -> None:
    """A wrong ``subdir`` (or a top directory's own name given as one) is refused, naming it, and
    leaves nothing behind."""
    make_tarball(tmp_path / "protobuf.tar.gz", PROTOBUF, top="protobuf-3.21.12")
    dest = tmp_path / "deps" / "utf8_range"
    for subdir in ("third_party/utf8", "protobuf-3.21.12/third_party/utf8_range"):
        with pytest.raises(
            SourceError, match=re.escape(f"protobuf.tar.gz has no directory '{subdir}' below its top")
        ) as info:
            sources.unpack_dependency(tmp_path / "protobuf.tar.gz", dest, subdir)
        assert info.value.fix is not None and "subdir" in info.value.fix
        assert list(dest.parent.iterdir()) == []


def test_a_dependency_subdir_is_checked_like_any_member(tmp_path: Path) -> None:
    """The members of a subdir go through the same checks as a whole unpack: a link out is refused."""
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        info, data = _member("pkg/sub/ok.txt")
        tar.addfile(info, io.BytesIO(data))
        tar.addfile(_member("pkg/sub/out", tarfile.SYMTYPE, "../../../../outside")[0])
    dest = tmp_path / "deps" / "d"
    with pytest.raises(SourceError, match=r"refusing member 'pkg/sub/out' of evil\.tar"):
        sources.unpack_dependency(archive, dest, "sub")
    assert list(dest.parent.iterdir()) == []


def test_a_broken_dependency_tarball_is_a_source_error(tmp_path: Path) -> None:
    (tmp_path / "broken.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(SourceError, match=r"cannot unpack broken\.tar\.gz"):
        sources.unpack_dependency(tmp_path / "broken.tar.gz", tmp_path / "deps" / "d", "sub")
    assert list((tmp_path / "deps").iterdir()) == []


def build_deb(tmp_path: Path, files: dict[str, str]) -> Path:
    """A real binary package, made by dpkg-deb --build."""
    pkg = tmp_path / "pkgroot"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: libsafeint-dev\nVersion: 3.0.28a+dfsg-4\nArchitecture: all\n"
        "Maintainer: Test <test@example.org>\nDescription: SafeInt headers\n"
    )
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    deb = tmp_path / "libsafeint-dev_3.0.28a+dfsg-4_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(deb)], check=True, capture_output=True)
    return deb


needs_dpkg_deb = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed")


@needs_dpkg_deb
def test_a_binary_package_dependency_is_its_files(tmp_path: Path) -> None:
    """safeint's orig is not downloadable: its -dev .deb is unpacked whole (no control files), and
    the subdir is where CMake looks inside that tree."""
    deb = build_deb(
        tmp_path,
        {"usr/include/safeint/SafeInt.hpp": "// SafeInt", "usr/share/doc/libsafeint-dev/copyright": "MIT"},
    )
    dest = tmp_path / "deps" / "safeint"
    sources.unpack_dependency(deb, dest, "usr/include/safeint")
    assert (dest / "usr" / "include" / "safeint" / "SafeInt.hpp").read_text() == "// SafeInt"
    assert (dest / "usr" / "share" / "doc" / "libsafeint-dev" / "copyright").is_file()
    assert not (dest / "DEBIAN").exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["safeint"]


@needs_dpkg_deb
def test_a_binary_package_without_the_named_subdir_is_refused(tmp_path: Path) -> None:
    deb = build_deb(tmp_path, {"usr/include/SafeInt.hpp": "// SafeInt"})
    dest = tmp_path / "deps" / "safeint"
    with pytest.raises(SourceError, match=r"_all\.deb has no directory 'usr/include/safeint'") as info:
        sources.unpack_dependency(deb, dest, "usr/include/safeint")
    assert "dpkg-deb -c" in (info.value.fix or "")
    assert list(dest.parent.iterdir()) == []


def tar_of(archive: Path, *names: str) -> Path:
    """An uncompressed tarball of regular files with these member names."""
    with tarfile.open(archive, "w") as tar:
        for name in names:
            info, data = _member(name)
            tar.addfile(info, io.BytesIO(data))
    return archive


def test_a_dependency_subdir_is_found_below_a_dot_top(tmp_path: Path) -> None:
    """Some tarballs name members ``./<top>/...``: the subdir is still found below the top."""
    archive = tar_of(tmp_path / "dotted.tar", "./pkg-1.0/sub/a.txt", "./pkg-1.0/other/b.txt")
    dest = tmp_path / "deps" / "d"
    sources.unpack_dependency(archive, dest, "sub")
    assert [str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file()] == ["sub/a.txt"]


def test_a_subdir_under_two_top_directories_is_refused(tmp_path: Path) -> None:
    archive = tar_of(tmp_path / "two.tar", "a-1.0/sub/x.txt", "b-1.0/sub/y.txt")
    dest = tmp_path / "deps" / "d"
    with pytest.raises(SourceError, match=r"two\.tar has 2 top directories holding 'sub'"):
        sources.unpack_dependency(archive, dest, "sub")
    assert list(dest.parent.iterdir()) == []


@needs_dpkg_deb
def test_a_broken_binary_package_is_a_source_error(tmp_path: Path) -> None:
    deb = tmp_path / "libsafeint-dev_3.0.28a+dfsg-4_all.deb"
    deb.write_bytes(b"!<arch>\nnot really a package")
    dest = tmp_path / "deps" / "safeint"
    with pytest.raises(SourceError, match=r"unpacking libsafeint-dev_3\.0\.28a\+dfsg-4_all\.deb failed"):
        sources.unpack_dependency(deb, dest, "usr/include/safeint")
    assert list(dest.parent.iterdir()) == []


# --- a tarball read from a stream (the compiler inside its wheel) ------------------------------------
def tar_xz(members: dict[str, bytes], symlinks: dict[str, str] | None = None) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    buffer.seek(0)
    return buffer


def test_a_streamed_tarballs_top_directory_becomes_dest(tmp_path: Path) -> None:
    stream = tar_xz(
        {"x86_64-linux-gnu/bin/gcc": b"gcc", "x86_64-linux-gnu/sysroot/usr/include/stdio.h": b"stdio"},
        {"x86_64-linux-gnu/bin/cc": "gcc"},
    )
    dest = tmp_path / "root" / "opt" / "ortdist-compiler"  # its parent is made
    sources.unpack_stream(stream, dest, "ppbt.whl:toolchain.tar.xz")
    assert (dest / "bin" / "gcc").read_bytes() == b"gcc"
    assert (dest / "bin" / "cc").readlink() == Path("gcc")
    assert (dest / "sysroot" / "usr" / "include" / "stdio.h").read_text() == "stdio"
    assert os.access(dest / "bin" / "gcc", os.X_OK)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["ortdist-compiler"]


@pytest.mark.parametrize(
    "members",
    [{"a/x": b"1", "b/y": b"2"}, {"loose.txt": b"1"}],
    ids=["two-top-directories", "a-top-file"],
)
def test_a_streamed_tarball_without_one_top_directory_is_refused(tmp_path: Path, members: dict[str, bytes]) -> None:
    dest = tmp_path / "opt" / "ortdist-compiler"
    with pytest.raises(SourceError, match=r"ppbt\.whl:t\.tar\.xz has no single top directory") as info:
        sources.unpack_stream(tar_xz(members), dest, "ppbt.whl:t.tar.xz")
    assert info.value.where == "ppbt.whl:t.tar.xz"
    assert list(dest.parent.iterdir()) == []


def test_a_broken_or_malicious_stream_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "opt" / "ortdist-compiler"
    with pytest.raises(SourceError, match=r"cannot unpack w:t\.tar\.xz"):
        sources.unpack_stream(io.BytesIO(b"not a tarball"), dest, "w:t.tar.xz")
    evil = tar_xz({"top/ok": b"1"}, {"top/as": "/usr/bin/as"})
    with pytest.raises(SourceError, match=r"refusing member 'top/as' of w:t\.tar\.xz"):
        sources.unpack_stream(evil, dest, "w:t.tar.xz")
    assert list(dest.parent.iterdir()) == []
