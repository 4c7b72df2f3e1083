"""One ONNX Runtime per wheel (patch 0017), read from the files: the binding links the library
beside it, and that library exports every ONNX Runtime symbol the binding imports.

The library's exports for the binding are listed at build time from the main binding's objects;
each other CPython's binding compiles the same sources, and one whose import the library lacks
would fail only when Python loads it (a version checked from its ELF files alone, such as an
aarch64 CPython no root here runs, would ship that way). Which imports are the runtime's is told
from the name, as the export list is made: an Itanium-mangled name outside the C++ runtime's own
namespaces (std::, __gnu_cxx::, __cxxabiv1::) and operators new/delete, or a C name of ONNX
Runtime's (Ort*, Mlas*); the others are libc's, libstdc++'s, Python's and numpy's.
"""

from __future__ import annotations

import re

from .interface import exports, imports

_SPECIAL = re.compile(r"^_Z(?:T[VTIS]|GV|Thn?\d+_|Tvn?\d+_n?\d+_)?")
_CXX_RUNTIME = re.compile(r"^(?:N[rVKRO]*)?(?:St|Sa|Sb|Ss|Si|So|Sd|9__gnu_cxx|10__cxxabiv1)|^(?:nw|na|dl|da)")
_ORT_C_NAME = re.compile(r"^(?:Ort|Mlas)")


def from_onnxruntime(symbol: str) -> bool:
    """Whether ``symbol`` is ONNX Runtime's (or a dependency it links in), not a runtime's or Python's."""
    if not symbol.startswith("_Z"):
        return bool(_ORT_C_NAME.match(symbol))
    special = _SPECIAL.match(symbol)
    rest = symbol[special.end() if special else 2 :]
    return not _CXX_RUNTIME.match(rest)


def missing_exports(binding: bytes, library: bytes) -> list[str]:
    """The ONNX Runtime symbols ``binding`` imports that ``library`` does not export (sorted)."""
    return sorted(s for s in imports(binding) - exports(library) if from_onnxruntime(s))
