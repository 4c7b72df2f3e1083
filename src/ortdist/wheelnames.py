"""What a wheel's file name says (PEP 427 and the manylinux tags): a leaf module, so anything that
reads a wheel's name (the registry, the report, publish, the smoke suite) imports nothing else."""

from __future__ import annotations

import re

_WHEEL = re.compile(
    r"^(?P<dist>[^-]+)-(?P<ver>[^-]+)(-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)


def wheel_tag(filename: str) -> str:
    m = _WHEEL.match(filename)
    if not m:
        raise ValueError(f"{filename!r} is not a wheel file name")
    return f"{m['py']}-{m['abi']}-{m['plat']}"


def wheel_name(filename: str) -> tuple[str, str, str] | None:
    """(distribution, version, python tag) of a wheel's file name (PEP 427), the distribution
    normalised (PEP 503); None for a name that is not a wheel's."""
    m = _WHEEL.match(filename)
    if m is None:
        return None
    return re.sub(r"[-_.]+", "-", m["dist"]).lower(), m["ver"], m["py"]


_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def required_glibc(wheel_name: str) -> tuple[int, int] | None:
    """The glibc a repaired wheel's platform tag asks for (the oldest of its compressed tags), or
    None for a wheel with no manylinux tag."""
    found = [(int(a), int(b)) for a, b in _MANYLINUX.findall(wheel_name)]
    found += [glibc for legacy, glibc in _LEGACY.items() if f"{legacy}_" in wheel_name]
    return min(found) if found else None
