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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .. import registry
from ..elffile import (
    ElfNeeds,
    artifact_files,
    artifact_libraries,
    interpreter,
    is_elf,
    read_needs,
    sections,
    wheel_libraries,
)
from ..errors import PackageError

# The reader lives in the leaf elffile.py (anything may read an ELF); what it returns, for callers here.
__all__ = [
    "ElfNeeds",
    "artifact_files",
    "artifact_libraries",
    "interpreter",
    "is_elf",
    "read_needs",
    "sections",
    "wheel_libraries",
]

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
