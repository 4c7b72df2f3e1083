"""What a wheel file says about itself: tags, glibc floor, requirements, its ortdist build record."""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path
from typing import Any

from ..errors import PackageError
from ..wheelnames import wheel_name, wheel_tag

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_")
# "nvidia-cudnn-cu12<10,>=9.7; extra == \"cudnn\"": a requirement that only an extra brings in.
_EXTRA_REQUIREMENT = re.compile(r"^(?P<req>[^;]+);\s*extra\s*==\s*[\"'](?P<extra>[^\"']+)[\"']\s*$")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


@dataclass(frozen=True)
class WheelInfo:
    path: Path
    python: str  # "3.13"
    glibc: tuple[int, int] | None  # None: not a manylinux wheel (linux_x86_64 runs only where built)
    requires: tuple[str, ...]
    record: dict[str, Any] | None
    arch: str = "x86_64"  # the CPU of the wheel's platform tag
    platform: str = ""  # the platform tag(s) as in the file name, e.g. manylinux_2_28_x86_64
    # Optional dependencies (extra -> requirements), e.g. onnxruntime-gpu[cuda,cudnn]: the suite
    # installs them all, as a user of the EP would, so vendor runtimes come from their wheels.
    extras: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def install_spec(self) -> str:
        """What pip installs: the wheel file, with every extra it declares."""
        return f"{self.path.name}[{','.join(sorted(self.extras))}]" if self.extras else self.path.name

    @property
    def all_requirements(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.requires, *(r for reqs in self.extras.values() for r in reqs)]))

    @property
    def claimed_providers(self) -> list[str] | None:
        """The EPs ortdist's build record claims; None for foreign wheels (ask the wheel itself)."""
        if self.record is None:
            return None
        return [ep["provider"] for ep in self.record["execution_providers"]]


def glibc_floor(platform_tags: str) -> tuple[int, int] | None:
    floors = []
    for plat in platform_tags.split("."):
        if m := _MANYLINUX.match(plat):
            floors.append((int(m[1]), int(m[2])))
        elif plat.split("_x86_64")[0].split("_aarch64")[0] in _LEGACY:
            floors.append(_LEGACY[plat.split("_x86_64")[0].split("_aarch64")[0]])
    return min(floors) if floors else None


def wheel_arch(platform_tags: str) -> str:
    """'manylinux_2_39_aarch64' -> 'aarch64' (the first tag's CPU; 'any' wheels count as x86_64)."""
    first = platform_tags.split(".")[0]
    for arch in ("x86_64", "aarch64"):
        if first.endswith(arch):
            return arch
    return "x86_64"


_LINUX_PLATFORM = re.compile(r"^(manylinux\d*(_\d+_\d+)?|linux)_(x86_64|aarch64)$")


def linux_platform(platform_tags: str) -> bool:
    """Every platform tag is a glibc Linux one for x86_64 or aarch64 (what a venv on Linux can run)."""
    return all(_LINUX_PLATFORM.match(tag) for tag in platform_tags.split("."))


def read_project(path: Path) -> str:
    """The wheel's distribution name, normalised (PEP 503)."""
    parsed = wheel_name(path.name)
    if parsed is None:
        raise PackageError("not a wheel file name", where=str(path), fix="pass a .whl file")
    return parsed[0]


def read_wheel(path: Path) -> WheelInfo:
    try:
        py, _abi, plat = wheel_tag(path.name).split("-")
    except ValueError as exc:
        raise PackageError(str(exc), where=str(path), fix="pass a .whl file") from exc
    if not py.startswith("cp") or len(py) < 4:
        raise PackageError(f"wheel tag {py!r} is not a CPython tag", where=str(path))
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
            if meta_name is None:
                raise PackageError(
                    "no .dist-info/METADATA in the wheel",
                    where=str(path),
                    fix="rebuild the wheel; this file is not a complete wheel",
                )
            wheel_name = next((n for n in names if n.endswith(".dist-info/WHEEL")), None)
            if wheel_name is None or not Parser().parsestr(zf.read(wheel_name).decode("utf-8")).get("Wheel-Version"):
                raise PackageError(
                    "no valid .dist-info/WHEEL in the wheel (a WHEEL file with a Wheel-Version field)",
                    where=str(path),
                    fix="rebuild the wheel; this file is not a complete wheel",
                )
            meta = Parser().parsestr(zf.read(meta_name).decode("utf-8"))
            record_name = "onnxruntime/ortdist_build.json"
            record = json.loads(zf.read(record_name)) if record_name in names else None
    except OSError as exc:
        raise PackageError(
            f"cannot read the wheel: {exc.strerror or exc}",
            where=str(path),
            fix="check the path (a glob that matched nothing stays literal in the shell)",
        ) from exc
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise PackageError(
            f"unreadable wheel metadata: {exc}", where=str(path), fix="rebuild the wheel; its metadata is damaged"
        ) from exc
    except zipfile.BadZipFile as exc:
        raise PackageError(
            f"not a zip archive: {exc}", where=str(path), fix="re-download or rebuild the wheel"
        ) from exc
    requires = tuple(r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r)
    extras: dict[str, tuple[str, ...]] = {}
    for line in meta.get_all("Requires-Dist") or []:
        if m := _EXTRA_REQUIREMENT.match(line):
            extras[m["extra"]] = (*extras.get(m["extra"], ()), m["req"].strip())
    return WheelInfo(
        path=path,
        python=f"{py[2]}.{py[3:]}",
        glibc=glibc_floor(plat),
        requires=requires,
        record=record,
        arch=wheel_arch(plat),
        platform=plat,
        extras=extras,
    )
