"""Reading ELF files with ``struct`` (no readelf, no pyelftools): what each one needs from the
system (DT_NEEDED, DT_SONAME, version needs), its program interpreter, its sections; and the ELF
files of a wheel or an archive, found by their magic. A leaf: the checks (checks/elf.py holds these
facts against a promise), the wheel writer and the distcc workers all read ELFs, and none of them
need each other for it.
"""

from __future__ import annotations

import struct
import tarfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

_SHT_DYNAMIC = 6
_ET_DYN = 3
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME = 1, 5, 10, 14
_DT_VERNEED, _DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF


@dataclass(frozen=True)
class ElfNeeds:
    """One ELF's dynamic needs: its DT_NEEDED sonames, its own DT_SONAME, and the symbol versions it
    asks of each needed file (``{"libc.so.6": {"GLIBC_2.14", ...}}``)."""

    needed: tuple[str, ...]
    soname: str | None
    versions: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def _cstr(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode("utf-8", "replace")


def interpreter(data: bytes) -> str:
    """The program interpreter (PT_INTERP) an executable's bytes name ('' for none): the dynamic
    loader a binary unpacked from another system's package needs to be started by."""
    if not is_elf(data) or len(data) < 52:
        raise ValueError("not an ELF file")
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(f"{order}Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(f"{order}HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(f"{order}I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(f"{order}HH", data, 0x2A)
    for n in range(phnum):
        at = phoff + n * phentsize
        (kind,) = struct.unpack_from(f"{order}I", data, at)
        if kind == 3:  # PT_INTERP
            field_format, field_at = (f"{order}Q", at + 8) if wide else (f"{order}I", at + 4)
            (offset,) = struct.unpack_from(field_format, data, field_at)
            return _cstr(data, int(offset))
    return ""


def sections(data: bytes) -> tuple[bool, str, list[tuple[int, int, int, int, int]]]:
    """Whether an ELF file is 64-bit, its byte order (struct's "<" or ">"), and (type, offset,
    size, link, info) of every section header. Raises ValueError for bytes that are not an ELF."""
    if not is_elf(data) or len(data) < 52:
        raise ValueError("not an ELF file")
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if wide:
            (shoff,) = struct.unpack_from(f"{order}Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(f"{order}HH", data, 0x3A)
            section = f"{order}IIQQQQIIQQ"
        else:
            (shoff,) = struct.unpack_from(f"{order}I", data, 0x20)
            shentsize, shnum = struct.unpack_from(f"{order}HH", data, 0x2E)
            section = f"{order}IIIIIIIIII"
        headers = []
        for index in range(shnum):
            fields = struct.unpack_from(section, data, shoff + index * shentsize)
            headers.append((fields[1], fields[4], fields[5], fields[6], fields[7]))
    except struct.error as exc:
        raise ValueError(f"malformed ELF: {exc}") from None
    return wide, order, headers


def _segments(data: bytes) -> tuple[bool, str, int, list[tuple[int, int, int, int]]]:
    """Whether an ELF file is 64-bit, its byte order, its e_type, and (type, offset, vaddr, filesz) of
    every program header: the loader's view of the file, which section headers need not match."""
    if not is_elf(data) or len(data) < 52:
        raise ValueError("not an ELF file")
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        (e_type,) = struct.unpack_from(f"{order}H", data, 0x10)
        if wide:
            (phoff,) = struct.unpack_from(f"{order}Q", data, 0x20)
            phentsize, phnum = struct.unpack_from(f"{order}HH", data, 0x36)
            header, fields = f"{order}IIQQQQQQ", (0, 2, 3, 5)
        else:
            (phoff,) = struct.unpack_from(f"{order}I", data, 0x1C)
            phentsize, phnum = struct.unpack_from(f"{order}HH", data, 0x2A)
            header, fields = f"{order}IIIIIIII", (0, 1, 2, 4)
        segments = []
        for index in range(phnum):
            values = struct.unpack_from(header, data, phoff + index * phentsize)
            segments.append((values[fields[0]], values[fields[1]], values[fields[2]], values[fields[3]]))
    except struct.error as exc:
        raise ValueError(f"malformed ELF: {exc}") from None
    return wide, order, e_type, segments


def read_needs(data: bytes) -> ElfNeeds:
    """The dynamic needs of an ELF file's bytes, read as the dynamic loader reads them: PT_DYNAMIC's
    entries (DT_NEEDED, DT_SONAME, DT_VERNEED) through the PT_LOAD segments, so stripped or
    missing section headers hide nothing. A relocatable object (a static archive's member) or an
    executable without PT_DYNAMIC needs nothing, unless a dynamic section says otherwise. Raises
    ValueError for bytes that are not an ELF or that this cannot read to the end."""
    wide, order, e_type, segments = _segments(data)
    dynamic = [(offset, size) for kind, offset, _, size in segments if kind == _PT_DYNAMIC]
    if not dynamic:
        if e_type == _ET_DYN and not segments:
            raise ValueError("malformed ELF: a shared object without program headers cannot be loaded")
        if any(kind == _SHT_DYNAMIC for kind, *_ in sections(data)[2]):
            raise ValueError("malformed ELF: a dynamic section but no PT_DYNAMIC segment")
        return ElfNeeds((), None)
    if len(dynamic) > 1:
        raise ValueError("malformed ELF: more than one PT_DYNAMIC segment")
    loads = [(vaddr, offset, size) for kind, offset, vaddr, size in segments if kind == _PT_LOAD]

    def file_offset(address: int) -> int:
        for vaddr, offset, size in loads:
            if vaddr <= address < vaddr + size:
                return offset + address - vaddr
        raise ValueError(f"malformed ELF: address {address:#x} is in no PT_LOAD segment")

    try:
        entry = f"{order}qQ" if wide else f"{order}iI"
        step = struct.calcsize(entry)
        offset, size = dynamic[0]
        tags: list[tuple[int, int]] = []
        for at in range(offset, offset + size - step + 1, step):
            tag, value = struct.unpack_from(entry, data, at)
            if tag == 0:
                break
            tags.append((tag, value))
        else:
            raise ValueError("the dynamic segment has no DT_NULL end")
        first = dict(reversed(tags))
        if (_DT_NEEDED in first or _DT_SONAME in first or _DT_VERNEED in first) and _DT_STRTAB not in first:
            raise ValueError("DT_NEEDED, DT_SONAME or DT_VERNEED without DT_STRTAB")
        strings = file_offset(first[_DT_STRTAB]) if _DT_STRTAB in first else 0
        limit = strings + first.get(_DT_STRSZ, len(data) - strings)

        def string(at: int) -> str:
            if not strings <= strings + at < limit:
                raise ValueError(f"string offset {at} outside the dynamic string table")
            return _cstr(data, strings + at)

        needed = [string(value) for tag, value in tags if tag == _DT_NEEDED]
        soname = string(first[_DT_SONAME]) if _DT_SONAME in first else None
        versions: dict[str, set[str]] = {}
        if _DT_VERNEED in first:
            at = file_offset(first[_DT_VERNEED])
            for _ in range(first.get(_DT_VERNEEDNUM, 0)):
                _, count, file_name, aux, following = struct.unpack_from(f"{order}HHIII", data, at)
                names = versions.setdefault(string(file_name), set())
                at_aux = at + aux
                for _ in range(count):
                    _, _, _, name, next_aux = struct.unpack_from(f"{order}IHHII", data, at_aux)
                    names.add(string(name))
                    at_aux += next_aux
                if not following:
                    break
                at += following
    except (struct.error, ValueError, IndexError) as exc:
        raise ValueError(f"malformed ELF: {exc}") from None
    return ElfNeeds(tuple(needed), soname, MappingProxyType({k: frozenset(v) for k, v in versions.items()}))


def artifact_files(artifact: Path, wanted: Callable[[str], bool] = lambda _: True) -> list[tuple[str, bytes]]:
    """The files of a wheel or a .tar.gz archive whose member names are ``wanted``, by name."""
    if artifact.suffix == ".whl":
        with zipfile.ZipFile(artifact) as zf:
            return [(n, zf.read(n)) for n in zf.namelist() if not n.endswith("/") and wanted(n)]
    with tarfile.open(artifact) as tar:
        found = []
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() and wanted(member.name) else None
            if handle is not None:
                found.append((member.name, handle.read()))
        return found


def wheel_libraries(wheel: Path) -> list[tuple[str, bytes]]:
    """Every ELF file a wheel carries, by its member name: found by its magic, not its name (a
    library or an executable named otherwise is checked all the same)."""
    found = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or info.file_size < 52:
                continue
            with zf.open(info) as handle:
                if handle.read(4) != b"\x7fELF":
                    continue
            found.append((info.filename, zf.read(info)))
    return found


def artifact_libraries(artifact: Path) -> list[tuple[str, bytes]]:
    """Every ELF file a wheel or a .tar.gz archive carries (found by its magic, whatever its name),
    by its member name."""
    if artifact.suffix == ".whl":
        return wheel_libraries(artifact)
    return [(name, data) for name, data in artifact_files(artifact) if is_elf(data)]
