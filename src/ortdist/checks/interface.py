"""What a build's artefacts present to the system they run on: for every ELF file the libraries
it needs, the symbol versions it asks of them and each symbol it imports; every other file by
its bytes. Equal between two builds, an older system sees the same thing: the compat step's
proof of the earlier build stands for the later one (its code changed, not its interface)."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path

from .elf import artifact_files, is_elf, read_needs, sections

_SHT_DYNSYM = 11
# Files that only record the others (a wheel's RECORD hashes every file, the binding included).
_DERIVED = (".dist-info/RECORD",)


def imports(data: bytes) -> frozenset[str]:
    """The undefined symbols of an ELF file's dynamic symbol table: what it takes from the libraries
    it needs, and from the process (a Python binding's C API calls)."""
    return dynamic_symbols(data, defined=False)


def exports(data: bytes) -> frozenset[str]:
    """The defined symbols of an ELF file's dynamic symbol table: what a library gives others."""
    return dynamic_symbols(data, defined=True)


def dynamic_symbols(data: bytes, *, defined: bool) -> frozenset[str]:
    wide, order, headers = sections(data)
    symbol = f"{order}IBBHQQ" if wide else f"{order}IIIBBH"
    try:
        names: set[str] = set()
        step = struct.calcsize(symbol)
        for kind, offset, size, link, _ in headers:
            if kind != _SHT_DYNSYM:
                continue
            strings = headers[link][1]
            for at in range(offset, offset + size - step + 1, step):
                fields = struct.unpack_from(symbol, data, at)
                name, shndx = fields[0], fields[3] if wide else fields[5]
                if name and (shndx != 0) == defined:
                    end = data.index(b"\0", strings + name)
                    names.add(data[strings + name : end].decode("utf-8", "replace"))
    except (struct.error, ValueError, IndexError) as exc:
        raise ValueError(f"malformed ELF: {exc}") from None
    return frozenset(names)


def describe(artefact: Path) -> Iterator[str]:
    """One line per file of a wheel or .tar.gz archive: an ELF's interface, any other file's hash."""
    for name, data in sorted(artifact_files(artefact)):
        if name.endswith(_DERIVED):
            continue
        try:
            if is_elf(data):
                needs = read_needs(data)
                versions = sorted(f"{lib}:{v}" for lib, names in needs.versions.items() for v in names)
                symbols = ",".join(sorted(imports(data)))
                yield f"{name} elf needed={','.join(needs.needed)} versions={','.join(versions)} {symbols}"
                continue
        except ValueError:
            pass  # an ELF the reader cannot follow counts by its bytes: any change reruns the check
        yield f"{name} sha256={hashlib.sha256(data).hexdigest()}"


def digest(artefacts: list[Path]) -> str:
    """One digest over ``describe`` of every artefact (by file name: a wheel's tag is part of it)."""
    total = hashlib.sha256()
    for artefact in artefacts:
        total.update(f"{artefact.name}\n".encode())
        for line in describe(artefact):
            total.update(line.encode() + b"\n")
    return total.hexdigest()
