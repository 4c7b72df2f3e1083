"""Which GPU architectures a CUDA library carries code for, read from its own bytes.

nvcc puts a library's device code in the ELF section ``.nv_fatbin``: a run of fatbin containers
(magic 0xBA55ED50, a 16-byte header giving the size of what follows), each a run of entries, each
entry a header (its kind: PTX text or an ELF of SASS, its size, the virtual or real architecture)
followed by its payload, possibly compressed. Only the headers are read here: what a GPU can run
is the SASS of its own architecture or PTX of an older-or-equal one its driver can compile.
NVIDIA's cuobjdump lists the same for some libraries but stops at others ("Invalid ELF").
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import PackageError

MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
# kind, (unknown), header size, payload size, (compressed size), (unknown), minor, major, arch,
# (name offset, name size), flags
_ENTRY = struct.Struct("<HHIQIIHHIIIQ")
KINDS = {1: "ptx", 2: "sass"}
# The flag of arch-specific code (nvcc's sm_90a, sm_120a: that GPU's own instructions, no other's).
# Read off PyPI's onnxruntime-gpu 1.31.1, whose sm_90a and sm_120a entries alone carry it and which
# cuobjdump 13.5 lists entry for entry as this reader does.
ARCH_SPECIFIC = 1 << 20
SECTION = ".nv_fatbin"


def _is_elf64le(data: bytes) -> bool:
    """A 64-bit little-endian ELF: the only kind of file CUDA device code ships in here."""
    return data[:6] == b"\x7fELF\x02\x01"


@dataclass(frozen=True)
class Entry:
    """One entry of a fatbin: ``kind`` "ptx" or "sass", ``arch`` as nvcc numbers it (90: sm_90 or
    compute_90), whether it is arch-specific code (sm_90a), and its payload's size in the file."""

    kind: str
    arch: int
    size: int
    specific: bool = False

    @property
    def name(self) -> str:
        """As nvcc's -gencode names it: sm_90, sm_90a, compute_90."""
        return f"{'sm' if self.kind == 'sass' else 'compute'}_{self.arch}{'a' if self.specific else ''}"


def section(data: bytes, name: str = SECTION) -> bytes:
    """The bytes of an ELF file's section ``name`` (b"" where it has none). Raises ValueError for
    bytes that are not a 64-bit little-endian ELF with readable section headers."""
    if not _is_elf64le(data):
        raise ValueError("not a 64-bit little-endian ELF file")
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = headers[shstrndx][4] if shstrndx < len(headers) else 0
        for sh_name, _, _, _, offset, size in headers:
            end = data.index(b"\0", names + sh_name)
            if data[names + sh_name : end].decode("ascii", "replace") == name:
                if offset + size > len(data):
                    raise ValueError(f"section {name} runs past the end of the file")
                return data[offset : offset + size]
    except (struct.error, IndexError) as exc:
        raise ValueError(f"malformed ELF: {exc}") from None
    return b""


def entries(fatbin: bytes) -> list[Entry]:
    """Every entry of every container in a ``.nv_fatbin`` section's bytes, in order. Raises
    ValueError where a container or entry header does not add up (a truncated or foreign section)."""
    found: list[Entry] = []
    at = 0
    while at < len(fatbin):
        if len(fatbin) - at < _CONTAINER.size:
            if fatbin[at:].strip(b"\0"):
                raise ValueError(f"fatbin: {len(fatbin) - at} stray bytes at offset {at}")
            break
        magic, _, header, size = _CONTAINER.unpack_from(fatbin, at)
        if magic != MAGIC:
            if magic == 0:  # padding between containers
                at += 8
                continue
            raise ValueError(f"fatbin: no container magic at offset {at} ({magic:#x})")
        end = at + header + size
        if end > len(fatbin):
            raise ValueError(f"fatbin: the container at offset {at} runs past the section ({end} > {len(fatbin)})")
        entry_at = at + header
        while entry_at < end:
            kind, _, entry_header, payload, _, _, _, _, arch, _, _, flags = _ENTRY.unpack_from(fatbin, entry_at)
            if kind not in KINDS or entry_header < _ENTRY.size or entry_at + entry_header + payload > end:
                raise ValueError(f"fatbin: a malformed entry at offset {entry_at} (kind {kind}, arch {arch})")
            found.append(Entry(KINDS[kind], arch, payload, bool(flags & ARCH_SPECIFIC)))
            entry_at += entry_header + payload
        at = end
    return found


def library_entries(data: bytes) -> list[Entry]:
    """The fatbin entries of an ELF library's bytes ([] for one without device code)."""
    return entries(section(data))


def device_code(members: Iterable[tuple[str, bytes]]) -> dict[str, dict[str, list[str]]]:
    """Each 64-bit little-endian ELF member that carries device code, with its architectures
    ({"sass": [...], "ptx": [...]}): what ``ortdist inspect`` shows."""
    found = {}
    for name, data in members:
        if _is_elf64le(data):
            code = library_entries(data)
            if code:
                found[name] = architectures(code)
    return found


def _order(name: str) -> tuple[int, str]:
    number = name.split("_", 1)[1]
    return int(number.rstrip("abf")), number


def architectures(found: Iterable[Entry]) -> dict[str, list[str]]:
    """{"sass": ["sm_80", "sm_90a", ...], "ptx": ["compute_90"]}: what each kind of code covers."""
    names: dict[str, set[str]] = {"sass": set(), "ptx": set()}
    for entry in found:
        names[entry.kind].add(entry.name)
    return {kind: sorted(values, key=_order) for kind, values in names.items()}


def bytes_per_arch(found: Iterable[Entry]) -> dict[str, int]:
    """Payload bytes per architecture ({"sm_90": n, "compute_90": n}): what each costs the library."""
    sizes: dict[str, int] = {}
    for entry in found:
        sizes[entry.name] = sizes.get(entry.name, 0) + entry.size
    return dict(sorted(sizes.items(), key=lambda item: (item[0].startswith("compute"), _order(item[0]))))


def missing(found: Iterable[Entry], promised: Iterable[str]) -> list[str]:
    """Each promised architecture (nvcc's names: "sm_89", "sm_90a", "compute_90") the entries lack."""
    have = {entry.name for entry in found}
    return [name for name in promised if name not in have]


def promised(architectures: Iterable[str]) -> list[str]:
    """What a recipe's ``[cuda] architectures`` (CMAKE_CUDA_ARCHITECTURES entries) promise, in nvcc's
    names: "90" is SASS and PTX (sm_90, compute_90), "90-real" SASS only, "90-virtual" PTX only."""
    names = []
    for entry in architectures:
        arch, _, only = entry.partition("-")
        if not re.fullmatch(r"\d+[af]?", arch) or only not in ("", "real", "virtual"):
            raise ValueError(f"not a CUDA architecture as CMake writes one: {entry!r}")
        if only != "virtual":
            names.append(f"sm_{arch}")
        if only != "real":
            names.append(f"compute_{arch}")
    return names


def check(members: Iterable[tuple[str, bytes]], architectures: Iterable[str], where: str) -> None:
    """Refuse an artifact whose CUDA libraries do not carry every architecture the recipe promises
    (or that carries no device code at all): a GPU of a missing one gets no kernel image."""
    wanted = promised(architectures)
    code = {name: library_entries(data) for name, data in members if _is_elf64le(data)}
    code = {name: found for name, found in code.items() if found}
    if not code:
        raise PackageError(
            "no library in it carries CUDA device code (an .nv_fatbin section)",
            where=where,
            fix="the CUDA provider was not built with nvcc's device code: check the build log for the CUDA "
            "compile and CMAKE_CUDA_ARCHITECTURES",
        )
    gaps = [f"{name}: no {', '.join(lost)}" for name, found in sorted(code.items()) if (lost := missing(found, wanted))]
    if gaps:
        raise PackageError(
            f"its CUDA code lacks architectures the recipe promises ({', '.join(wanted)}): {'; '.join(gaps)}",
            where=where,
            fix="the compile did not target them: rebuild with the recipe's [cuda] architectures (a tree "
            "configured for other architectures is discarded with --fresh)",
        )
