"""One libstdc++ state per process, for toolchains that link libstdc++ shared ([libstdcxx]).

Functions may be linked in twice; libstdc++'s data may not: the old ABI's empty string
(_S_empty_rep_storage), locale facet ids, the standard streams. An output that defines its own copy
of an object the shared libstdc++.so.6 exports (a static archive member the linker took for a newer
function, with that member's data) hands out values another library frees or compares against the
other copy: the first OpenVINO build aborted so ("free(): invalid pointer"). Read from
``readelf -sW`` of the library before it is stripped, against the objects the toolchain's stub
(what the system's libstdc++.so.6 provides) exports.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"@.*$")


def _rows(readelf: str) -> list[list[str]]:
    return [f for f in (line.split() for line in readelf.splitlines()) if len(f) >= 8 and f[0].rstrip(":").isdigit()]


# Type information and vtables (_ZTI, _ZTS, _ZTV, _ZTT): fixed once relocated, compared by name.
_IMMUTABLE = ("_ZTI", "_ZTS", "_ZTV", "_ZTT")


def shared_objects(stub_dynsyms: str) -> set[str]:
    """The data objects (OBJECT, TLS) the stub defines, type information and vtables aside:
    libstdc++'s state a process must share."""
    names = {_VERSION.sub("", f[7]) for f in _rows(stub_dynsyms) if f[3] in ("OBJECT", "TLS") and f[6] != "UND"}
    return {n for n in names if not n.startswith(_IMMUTABLE)}


_SECTION = re.compile(r"^\s*\[\s*(\d+)\]\s+\S+\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+(\S+)")


def writable_sections(readelf_sections: str) -> set[str]:
    """The indexes (as readelf's Ndx column prints them) of the sections ``readelf -SW`` flags W:
    where state lives (.data, .bss, .tdata, ...); constants (npos) may be copied freely."""
    found = set()
    for line in readelf_sections.splitlines():
        m = _SECTION.match(line)
        if m and "W" in m[2]:
            found.add(m[1])
    return found


def own_copies(library_symbols: str, shared: set[str], writable: set[str]) -> list[str]:
    """The objects of ``shared`` the library defines itself in a writable section, sorted."""
    return sorted({_VERSION.sub("", f[7]) for f in _rows(library_symbols) if f[6] in writable} & shared)
