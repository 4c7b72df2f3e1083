"""Add files to a finished wheel and re-record it, byte-reproducibly.

After auditwheel has repaired a wheel, the SBOM (PEP 770: ``<dist-info>/sboms/``) can finally
name every library the wheel ships; it goes in here. Existing members keep their order and zip
metadata; new members get the build's fixed timestamp; RECORD is rewritten with their hashes.
"""

from __future__ import annotations

import base64
import hashlib
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from .. import deflate
from ..distinfo import dist_info_dir
from ..errors import PackageError
from ..fsutil import atomic_file


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


# The wheel is written once and downloaded many times: 8 rather than auditwheel's 6 takes 72 KB
# (0.45%) off the cpu-linux wheel. 9 takes 1.3 KB more for 17% more time (zlib, the cp313 wheel's
# files: 6 1.80 s, 7 2.15 s, 8 3.50 s, 9 4.09 s; 15,969,926 / 15,933,156 / 15,897,858 / 15,896,587 B).
COMPRESSLEVEL = 8
# A wheel the repair unpacks and writes again: compressing it would be work thrown away.
INTERMEDIATE_LEVEL = 0


class _Deferred:
    """zipfile's compressor for one member, handing the whole stream over at flush (zipfile writes
    a member's bytes in one call): deflate.SHARED's stream, made once for every wheel and archive."""

    def __init__(self, level: int) -> None:
        self.level, self.data = level, bytearray()

    def compress(self, data: bytes) -> bytes:
        self.data += data
        return b""

    def flush(self) -> bytes:
        return deflate.SHARED.stream(bytes(self.data), self.level)


class _SharingZipFile(zipfile.ZipFile):
    """A ZipFile whose large deflated members come from ``deflate.SHARED``."""

    def _open_to_write(self, zinfo: zipfile.ZipInfo, force_zip64: bool = False) -> IO[bytes]:
        dest: Any = super()._open_to_write(zinfo, force_zip64)  # type: ignore[misc]
        level = getattr(zinfo, "_compresslevel", None)
        if zinfo.compress_type == zipfile.ZIP_DEFLATED and level is not None and zinfo.file_size >= deflate.SHARED_AT:
            dest._compressor = _Deferred(level)
        return dest  # type: ignore[no-any-return]


def add_to_dist_info(wheel: Path, files: Mapping[str, bytes], epoch: int) -> None:
    """Add ``files`` (paths relative to the .dist-info directory) to ``wheel`` in place, every
    member recompressed at COMPRESSLEVEL (this is the last write of a repaired wheel)."""
    date_time = time.gmtime(max(epoch, 315532800))[:6]  # zip cannot store times before 1980
    with zipfile.ZipFile(wheel) as zin:
        infos = zin.infolist()
        dist_info = dist_info_dir([i.filename for i in infos])
        record_name = f"{dist_info}/RECORD"
        added = {f"{dist_info}/{rel}": data for rel, data in sorted(files.items())}
        clash = [n for n in added if n in {i.filename for i in infos}]
        if clash:
            raise PackageError(f"{wheel.name} already has {clash}", where=str(wheel), fix="rebuild the wheel")
        large = {
            i.filename: zin.read(i.filename)
            for i in infos
            if i.filename != record_name and i.file_size >= deflate.SHARED_AT
        }
        for data in large.values():
            deflate.SHARED.prefetch(data, COMPRESSLEVEL)
        with atomic_file(wheel) as raw, _SharingZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in infos:
                if info.filename != record_name:
                    data = large[info.filename] if info.filename in large else zin.read(info.filename)
                    zout.writestr(info, data, compresslevel=COMPRESSLEVEL)
            for name, data in added.items():
                member = zipfile.ZipInfo(name, date_time=date_time)
                member.compress_type = zipfile.ZIP_DEFLATED
                member.external_attr = 0o100644 << 16
                zout.writestr(member, data, compresslevel=COMPRESSLEVEL)
            lines = [
                line
                for line in zin.read(record_name).decode().splitlines()
                if line and not line.startswith(f"{record_name},")
            ]
            lines += [record_line(name, data) for name, data in added.items()]
            lines.append(f"{record_name},,")
            record_info = next(i for i in infos if i.filename == record_name)
            zout.writestr(record_info, ("\n".join(lines) + "\n").encode(), compresslevel=COMPRESSLEVEL)


def retag(wheel: Path, python: str) -> Path:
    """The same wheel for another CPython's binding: ``cpXY-cpXY`` becomes ``python``'s tag in the
    file name and in WHEEL's Tag lines, RECORD follows. scikit-build-core tags a wheel with the
    interpreter it runs under (the root's own); the binding inside was compiled for ``python``."""
    new = f"cp{python.replace('.', '')}"
    parts = wheel.name[: -len(".whl")].split("-")
    old = parts[-3]
    if parts[-2] != old:
        raise PackageError(f"{wheel.name} is not a CPython-specific wheel", where=str(wheel), fix="rebuild it")
    dest = wheel.with_name("-".join([*parts[:-3], new, new, parts[-1]]) + ".whl")
    with zipfile.ZipFile(wheel) as zin:
        infos = zin.infolist()
        dist_info = dist_info_dir([i.filename for i in infos])
        wheel_name, record_name = f"{dist_info}/WHEEL", f"{dist_info}/RECORD"
        text = zin.read(wheel_name).decode()
        tagged = "".join(
            line.replace(f"Tag: {old}-{old}-", f"Tag: {new}-{new}-") for line in text.splitlines(keepends=True)
        )
        if tagged == text:
            raise PackageError(f"{wheel.name}'s WHEEL has no {old}-{old} tag", where=str(wheel), fix="rebuild it")
        with atomic_file(dest) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in infos:
                if info.filename == record_name:
                    continue
                data = tagged.encode() if info.filename == wheel_name else zin.read(info.filename)
                zout.writestr(info, data, compresslevel=INTERMEDIATE_LEVEL)
            lines = [
                record_line(wheel_name, tagged.encode()) if line.startswith(f"{wheel_name},") else line
                for line in zin.read(record_name).decode().splitlines()
                if line
            ]
            record_info = next(i for i in infos if i.filename == record_name)
            zout.writestr(record_info, ("\n".join(lines) + "\n").encode(), compresslevel=INTERMEDIATE_LEVEL)
    if dest != wheel:
        wheel.unlink()
    return dest
