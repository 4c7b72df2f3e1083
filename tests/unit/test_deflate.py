"""Deflate in pieces side by side: one stream any inflater reads, the same bytes however many
threads made it, and gzip files Python's gzip module and tar read."""

from __future__ import annotations

import gzip
import io
import random
import tarfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ortdist import deflate
from ortdist.fsutil import TARBALL_LEVEL, deterministic_tarball


def _text(size: int) -> bytes:
    rng = random.Random(3)
    words = [bytes(rng.randrange(256) for _ in range(40)) for _ in range(300)]
    return b"".join(rng.choice(words) for _ in range(size // 40 + 7))


def test_pieces_make_one_deflate_stream_whatever_made_them() -> None:
    """Matches reach back into the piece before (its last 32 KiB is the next one's dictionary), the
    pieces and END inflate as one stream, and the stream is the same made one by one or side by side."""
    data = _text(3 * deflate.PIECE)
    bounds = [(a, min(a + deflate.PIECE, len(data))) for a in range(0, len(data), deflate.PIECE)]
    assert len(bounds) == 4
    stream = b"".join(deflate.piece(data, a, b, 8) for a, b in bounds) + deflate.END
    assert zlib.decompress(stream, -15) == data
    whole = zlib.compressobj(8, zlib.DEFLATED, -15)
    single = len(whole.compress(data) + whole.flush())
    assert single <= len(stream) <= single * 1.01  # the dictionaries keep what splitting would lose
    with ThreadPoolExecutor(4) as pool:
        assert b"".join(pool.map(lambda ab: deflate.piece(data, *ab, 8), bounds)) + deflate.END == stream
    assert deflate.open_stream(data, 8).result() + deflate.END == stream
    assert deflate.Shared().stream(data, 8) == stream
    assert zlib.decompress(deflate.open_stream(b"", 8).result() + deflate.END, -15) == b""  # an empty file


def test_a_run_of_pieces_sits_inside_a_longer_stream() -> None:
    """What the C archive does with the core library: pieces made for the file alone, between
    pieces of what comes before and after it, inflate as the whole."""
    before, middle, after = _text(5000), _text(deflate.PIECE + 9)[::-1], _text(70_000)
    whole = before + middle + after
    stream = (
        deflate.open_stream(whole, 8, 0, len(before)).result()
        + deflate.Shared().open(middle, 8)
        + deflate.open_stream(whole, 8, len(before) + len(middle)).result()
        + deflate.END
    )
    assert zlib.decompress(stream, -15) == whole


def test_a_gzip_file_in_pieces_reads_back_with_pythons_header() -> None:
    data = _text(deflate.PIECE + 5)
    made = deflate.gzip_bytes(data, 8, 1741221472)
    assert gzip.decompress(made) == data
    for level, mtime in ((8, 1741221472), (9, 0), (1, 5)):
        python = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=python, mtime=mtime, compresslevel=level) as out:
            out.write(data)
        made = deflate.gzip_bytes(data, level, mtime)
        # header (flags, time, extra flags, OS) and trailer (CRC-32, size) as GzipFile writes them
        assert made[:10] == python.getvalue()[:10] and made[-8:] == python.getvalue()[-8:]


def test_the_tarball_is_the_same_bytes_every_time_and_opens(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "libbig.so").write_bytes(_text(2 * deflate.PIECE))
    (tree / "include.h").write_text("int f(void);\n")
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    deterministic_tarball(tree, first, "top", 1741221472)
    (tree / "include.h").touch()  # a newer time changes nothing
    deterministic_tarball(tree, second, "top", 1741221472)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first, "r:gz") as tar:
        assert sorted(tar.getnames()) == ["top/include.h", "top/lib", "top/lib/libbig.so"]
        member = tar.extractfile("top/lib/libbig.so")
        assert member is not None and member.read() == (tree / "lib" / "libbig.so").read_bytes()
        assert {m.mtime for m in tar.getmembers()} == {1741221472} and {m.uid for m in tar.getmembers()} == {0}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first.read_bytes()))) as plain:
        assert plain.getnames()  # plain gzip, then tar, read it too
    assert TARBALL_LEVEL == 8


def test_a_large_file_of_an_archive_is_the_stream_the_wheels_carry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C archive and the wheels carry the same core library: its pieces inside the archive's
    one gzip stream are the ones deflate.SHARED made, which a wheel's member holds (ended)."""
    monkeypatch.setattr(deflate, "SHARED", deflate.Shared())
    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    big = _text(deflate.SHARED_AT + 3)
    (tree / "lib" / "libonnxruntime.so").write_bytes(big)
    (tree / "a.h").write_text("int a;\n")
    archive = tmp_path / "c.tar.gz"
    deterministic_tarball(tree, archive, "top", 1741221472)
    stream = deflate.SHARED.stream(big, TARBALL_LEVEL)  # already made: the archive's pieces, ended
    raw = archive.read_bytes()
    assert stream[: -len(deflate.END)] in raw and raw.count(b"\x1f\x8b\x08") == 1  # inside one member
    for mode in ("r:gz", "r|gz"):  # Python's streaming reader too, which reads one gzip member only
        with tarfile.open(archive, mode) as tar:
            for member in tar:
                if member.name == "top/lib/libonnxruntime.so":
                    extracted = tar.extractfile(member)
                    assert extracted is not None and extracted.read() == big
