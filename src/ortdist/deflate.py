"""Raw deflate streams made in pieces side by side, as pigz makes them.

A 20 MB library at zlib level 8 is 1.5 s of one core; cut into PIECE-sized pieces, each compressed
with the 32 KiB before it as its dictionary and ended on a byte boundary (a sync flush), the pieces
compress on every core at once and their concatenation is one deflate stream any inflater reads.
Its bytes depend on the data, the level and PIECE only (not on how many threads made them): a
wheel or archive stays reproducible. About 5 bytes a piece larger than one zlib stream.

A large file's stream is also made once per content (SHARED) for every wheel and archive a build
writes: the C archive and every version's wheel carry the same core library.
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


def piece(data: bytes, index: int, level: int) -> bytes:
    """Piece ``index`` of ``data``'s stream; the last one ends the stream."""
    begin, end = index * PIECE, min((index + 1) * PIECE, len(data))
    window = data[max(0, begin - WINDOW) : begin]
    compressor = (
        zlib.compressobj(level, zlib.DEFLATED, -15, zdict=window)
        if window
        else zlib.compressobj(level, zlib.DEFLATED, -15)
    )
    last = end >= len(data)
    return compressor.compress(data[begin:end]) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def start(data: bytes, level: int, future: Future[bytes] | None = None) -> Future[bytes]:
    """Every piece on the pool; the future (``future``, or a new one) gets their concatenation, or
    the first error, when the last one ends. No pool thread waits for another: no deadlock."""
    out: Future[bytes] = future if future is not None else Future()
    count = max(1, -(-len(data) // PIECE))
    pieces = [POOL.submit(piece, data, i, level) for i in range(count)]
    left, lock = [count], threading.Lock()

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
    """Streams of large files by content, made once for every wheel and archive a build writes
    (the versions' wheels are repaired side by side: a second asker waits for the first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[tuple[int, str], Future[bytes]] = {}

    def _claim(self, data: bytes, level: int) -> tuple[Future[bytes], bool]:
        """The future of ``data``'s stream, and whether the caller is the one to make it."""
        key = (level, hashlib.sha256(data).hexdigest())
        with self._lock:
            found = self._streams.get(key)
            if found is not None:
                return found, False
            made = self._streams[key] = Future()
            return made, True

    def prefetch(self, data: bytes, level: int) -> None:
        """Start ``data``'s stream: a writer goes on with other members meanwhile."""
        future, mine = self._claim(data, level)
        if mine:
            start(data, level, future)

    def stream(self, data: bytes, level: int) -> bytes:
        future, mine = self._claim(data, level)
        if mine:
            start(data, level, future)
        return future.result()


SHARED = Shared()


def gzip_member(data: bytes, level: int, mtime: int) -> bytes:
    """One gzip member of ``data`` (no name), its stream made in pieces, a large one's from SHARED;
    the header is the one Python's gzip module writes."""
    extra_flags = 2 if level == 9 else 4 if level == 1 else 0
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", mtime) + bytes([extra_flags, 255])
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    stream = SHARED.stream(data, level) if len(data) >= SHARED_AT else start(data, level).result()
    return header + stream + trailer


def gzip_bytes(data: bytes, level: int, mtime: int, shared: Sequence[tuple[int, int]] = ()) -> bytes:
    """A gzip file of ``data``: one member, or, with ``shared`` ((offset, size) of large files'
    bytes in ``data``, in order), a member for each such file (its stream from SHARED, the one the
    wheels carry) and one for each run of bytes between them. gzip, tar and Python read the
    members of a file as one stream."""
    members, at = [], 0
    for offset, size in sorted(shared):
        if offset > at:
            members.append(gzip_member(data[at:offset], level, mtime))
        members.append(gzip_member(data[offset : offset + size], level, mtime))
        at = offset + size
    if at < len(data) or not members:
        members.append(gzip_member(data[at:], level, mtime))
    return b"".join(members)
