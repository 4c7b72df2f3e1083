"""What a shipped ELF needs from the system, read from its own bytes, held against what its tag promises.

A wheel's name says ``manylinux_2_17``; only its libraries' DT_NEEDED entries and version needs
(.gnu.version_r) say whether that is true. auditwheel derives the tag from the same facts but
allows anything on manylinux's list (libstdc++, libz, libX11, ...); a portable toolchain promises
less, only glibc's own libraries, and an EP's vendor runtime where the EP needs one. Read here with
``struct`` (no readelf, no pyelftools), so the repair and install steps and the tests share one reader.
"""

from __future__ import annotations

import fnmatch
import re
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import registry
from ..errors import PackageError
from ..wheel.repair import wheel_libraries

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


_PRIVATE = "GLIBC_PRIVATE"  # glibc's own libraries use it among themselves; nothing else may
_VERSION = re.compile(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_(\d+(?:\.\d+)*)$")


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@dataclass(frozen=True)
class ElfPolicy:
    """What the ELFs of one artifact may need: the glibc its tag (or toolchain) promises, the highest
    GLIBCXX_/CXXABI_/GCC_ versions that promise allows, the system libraries besides glibc's
    (a toolchain's shared C++ runtime), and the EP runtime libraries (globs) a user installs."""

    glibc: tuple[int, ...]
    ceilings: Mapping[str, tuple[int, ...]]
    system: frozenset[str]
    runtime: tuple[str, ...] = ()

    def describe(self) -> str:
        allowed = ", ".join(sorted(self.system)) or "nothing else"
        return f"glibc {'.'.join(map(str, self.glibc))} and glibc's own libraries; besides them {allowed}"


def policy(glibc: str | tuple[int, ...], system: Iterable[str] = (), runtime: Iterable[str] = ()) -> ElfPolicy:
    """The policy of an artifact promising ``glibc`` ("2.17" or (2, 17)): the C++ runtime ceilings of
    the highest manylinux level at or below it (manylinux.toml), else of the lowest level."""
    promised = _numbers(glibc) if isinstance(glibc, str) else tuple(glibc)
    levels = sorted(registry.manylinux_levels().values(), key=lambda level: _numbers(level.glibc))
    below = [level for level in levels if _numbers(level.glibc) <= promised]
    level = below[-1] if below else levels[0]
    return ElfPolicy(promised, MappingProxyType(level.ceilings()), frozenset(system), tuple(runtime))


def _read_all(members: Iterable[tuple[str, bytes]]) -> tuple[dict[str, ElfNeeds], set[str], list[str]]:
    """The ELF members' needs by name, the sonames the artifact itself provides (file names and
    DT_SONAMEs), and one line per member that is not a well-formed ELF."""
    elves: dict[str, ElfNeeds] = {}
    problems: list[str] = []
    for name, data in members:
        if not is_elf(data):
            continue
        try:
            elves[name] = read_needs(data)
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
    own = {name.rsplit("/", 1)[-1] for name in elves} | {e.soname for e in elves.values() if e.soname}
    return elves, own, problems


def violations(members: Iterable[tuple[str, bytes]], policy: ElfPolicy) -> list[str]:
    """Each way the ELF members of one artifact break ``policy``, one line each (empty: none).
    A library another member provides (by file name or DT_SONAME) is the artifact's own."""
    elves, own, problems = _read_all(members)
    for name, elf in sorted(elves.items()):
        for library in elf.needed:
            if library in own or library in policy.system or is_glibc_library(library):
                continue
            if any(fnmatch.fnmatchcase(library, pattern) for pattern in policy.runtime):
                continue
            problems.append(f"{name}: needs {library}, which the wheel does not carry and the target does not promise")
        for library, names in sorted(elf.versions.items()):
            if _PRIVATE in names:
                problems.append(
                    f"{name}: needs {_PRIVATE} from {library}, glibc's internal interface, which only the glibc "
                    "build it was linked against provides"
                )
            # The newest too-new version of each family is the one to name (GLIBC_2.38, not 2.18 .. 2.38).
            newest: dict[str, tuple[tuple[int, ...], str, str]] = {}
            for version in names:
                problem = _too_new(version, policy)
                match = _VERSION.match(version)
                if problem and match:
                    key = (_numbers(match.group(2)), version, problem)
                    newest[match.group(1)] = max(newest.get(match.group(1), key), key)
            for _, version, problem in sorted(newest.values(), key=lambda item: item[1]):
                problems.append(f"{name}: needs {version} from {library}, {problem}")
    return problems


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


def artifact_libraries(artifact: Path) -> list[tuple[str, bytes]]:
    """Every ELF file a wheel or a .tar.gz archive carries (found by its magic, whatever its name),
    by its member name."""
    if artifact.suffix == ".whl":
        return wheel_libraries(artifact)
    return [(name, data) for name, data in artifact_files(artifact) if is_elf(data)]


def needs_summary(members: Iterable[tuple[str, bytes]]) -> dict[str, Any]:
    """What an artifact's ELFs need from the system, for people (``ortdist inspect``): the newest
    version of each family (GLIBC, GLIBCXX, CXXABI, GCC) and the libraries the artifact does not carry."""
    elves, own, unreadable = _read_all(members)
    if unreadable:
        raise ValueError(unreadable[0])
    newest: dict[str, tuple[int, ...]] = {}
    for elf in elves.values():
        for names in elf.versions.values():
            for version in names:
                match = _VERSION.match(version)
                if match:
                    family, numbers = match.group(1), _numbers(match.group(2))
                    newest[family] = max(newest.get(family, numbers), numbers)
    system = sorted({lib for elf in elves.values() for lib in elf.needed if lib not in own})
    return {
        "elf_files": len(elves),
        "newest": {family: ".".join(map(str, v)) for family, v in sorted(newest.items())},
        "system": system,
        "beyond_glibc": [lib for lib in system if not is_glibc_library(lib)],
    }


def _too_new(version: str, policy: ElfPolicy) -> str | None:
    match = _VERSION.match(version)
    if not match:
        return None  # a library's own version names (libcudart.so.13, ...) promise nothing about the system
    family, numbers = match.group(1), _numbers(match.group(2))
    ceiling = policy.glibc if family == "GLIBC" else policy.ceilings.get(family)
    if ceiling is None or numbers <= ceiling:
        return None
    return (
        f"newer than the {family} {'.'.join(map(str, ceiling))} of glibc {'.'.join(map(str, policy.glibc))}'s promise"
    )


# glibc's own libraries, on every glibc system; the dynamic loader's name differs per architecture.
GLIBC_LIBRARIES = frozenset(
    {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libresolv.so.2", "libutil.so.1"}
    | {"libanl.so.1", "libnsl.so.1", "libmvec.so.1"}
)


def is_glibc_library(soname: str) -> bool:
    return soname in GLIBC_LIBRARIES or soname.startswith("ld-linux")


def check(members: Iterable[tuple[str, bytes]], policy: ElfPolicy, where: str) -> None:
    """Refuse an artifact whose ELFs need what its promise does not cover."""
    problems = violations(members, policy)
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise PackageError(
            f"its ELF files need more than it promises ({policy.describe()}): {shown}",
            where=where,
            fix="a library from outside the toolchain's sysroot was linked or grafted (a Debian library, a "
            "newer libstdc++): build it from source with the toolchain, link the C++ runtime statically, or "
            "add the library to the toolchain's system_libraries if every target system has it",
        )
