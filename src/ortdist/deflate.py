"""Raw deflate streams made in pieces side by side, as pigz makes them.

A 20 MB library at zlib level 8 is 1.5 s of one core; cut into PIECE-sized pieces, each compressed
with the 32 KiB before it as its dictionary and ended on a byte boundary (a sync flush), the pieces
compress on every core at once, and their concatenation, with an empty final block (END), is one
deflate stream any inflater reads. Its bytes depend on the data, the level and PIECE only (not on
how many threads made them): a wheel or archive stays reproducible. About 5 bytes a piece larger
than one zlib stream.

A large file's pieces are also made once per content (SHARED) for every wheel and archive a build
writes: the C archive and every version's wheel carry the same core library, and a run of pieces
can sit anywhere inside a longer stream (the C archive's gzip stream holds the library's).
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

PIECE = 1 << 20
WINDOW = 1 << 15  # deflate's window: each piece's dictionary
POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="ortdist-deflate")
# A file at least this large is compressed once per content (SHARED): level 8 is about 1.6 s of
# one core for each 20 MB.
SHARED_AT = 1 << 20


def piece(data: bytes, begin: int, end: int, level: int) -> bytes:
    """``data[begin:end]`` compressed with the 32 KiB before it as the dictionary, ended by a sync
    flush: a piece any number of which, in order, is a deflate stream not yet ended (END ends it)."""
    window = data[max(0, begin - WINDOW) : begin]
    compressor = (
        zlib.compressobj(level, zlib.DEFLATED, -15, zdict=window)
        if window
        else zlib.compressobj(level, zlib.DEFLATED, -15)
    )
    return compressor.compress(data[begin:end]) + compressor.flush(zlib.Z_SYNC_FLUSH)


# An empty final block (fixed codes, end of block): what ends a stream of sync-flushed pieces.
END = b"\x03\x00"


def open_stream(
    data: bytes, level: int, begin: int = 0, end: int | None = None, future: Future[bytes] | None = None
) -> Future[bytes]:
    """``data[begin:end]``'s pieces (every PIECE bytes from ``begin``) on the pool; the future
    (``future``, or a new one) gets their concatenation, not ended, or the first error, when the
    last one ends. No pool thread waits for another: no deadlock."""
    out: Future[bytes] = future if future is not None else Future()
    stop = len(data) if end is None else end
    bounds = [(at, min(at + PIECE, stop)) for at in range(begin, stop, PIECE)] or [(begin, begin)]
    pieces = [POOL.submit(piece, data, a, b, level) for a, b in bounds]
    left, lock = [len(pieces)], threading.Lock()

    def done(_: Future[bytes]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        failed = next((p.exception() for p in pieces if p.exception() is not None), None)
        if failed is not None:
            out.set_exception(failed)
        else:
            out.set_result(b"".join(p.result() for p in pieces))

    for made in pieces:
        made.add_done_callback(done)
    return out


class Shared:
    """Streams of large files by content, not ended, made once for every wheel and archive a build
    writes (the versions' wheels are repaired side by side: a second asker waits for the first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[tuple[int, str], Future[bytes]] = {}

    def _future(self, data: bytes, level: int) -> Future[bytes]:
        key = (level, hashlib.sha256(data).hexdigest())
        with self._lock:
            found = self._streams.get(key)
            if found is None:
                found = self._streams[key] = Future()
                open_stream(data, level, future=found)
            return found

    def prefetch(self, data: bytes, level: int) -> None:
        """Start ``data``'s stream: a writer goes on with other members meanwhile."""
        self._future(data, level)

    def open(self, data: bytes, level: int) -> bytes:
        """``data``'s pieces, not ended: to go inside a longer stream (a gzip file's)."""
        return self._future(data, level).result()

    def stream(self, data: bytes, level: int) -> bytes:
        """``data``'s whole raw deflate stream (a zip member's)."""
        return self.open(data, level) + END


SHARED = Shared()


def gzip_bytes(data: bytes, level: int, mtime: int, shared: Sequence[tuple[int, int]] = ()) -> bytes:
    """A gzip file of ``data`` (one member, no name, the header Python's gzip module writes), its
    stream made in pieces; with ``shared`` ((offset, size) of large files' bytes in ``data``), each
    such file's pieces are the ones SHARED made for it, which the wheels carry too. One stream,
    one member: every gzip reader, Python's streaming tarfile included, reads it."""
    extra_flags = 2 if level == 9 else 4 if level == 1 else 0
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", mtime) + bytes([extra_flags, 255])
    parts: list[Future[bytes] | bytes] = []
    at = 0
    for offset, size in sorted(shared):
        if offset > at:
            parts.append(open_stream(data, level, at, offset))
        parts.append(SHARED.open(data[offset : offset + size], level))
        at = offset + size
    if at < len(data) or not parts:
        parts.append(open_stream(data, level, at))
    body = b"".join(p if isinstance(p, bytes) else p.result() for p in parts)
    return header + body + END + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
