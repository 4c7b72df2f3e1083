"""A check's venv kept for the next check of a wheel pip would install the same way.

What pip does with a wheel depends on its member names and modes, its dist-info (requirements,
entry points, WHEEL), the interpreter and what the wheelhouse offers; the bytes of its other files
it only copies. So a passing check keeps its venv with the facts of the wheel it installed, and
the next check of a wheel with the same facts (a patch loop's: one library relinked) replaces the
files whose RECORD hash changed, and their lines of the installed RECORD, instead of making a venv
and running pip: the venv then holds what pip would have installed, and the probe runs in it. A
failed check, other facts, or an update cut short (the facts file is removed before the first file
is touched and written after the check passed) gives a fresh venv.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..distinfo import dist_info_dir
from ..fsutil import atomic_file

FACTS = ".ortdist-installed.json"


@dataclass(frozen=True)
class Installed:
    """What a kept venv holds: the key of the wheel pip installed, where its site-packages is
    (relative to the venv), and every installed file's RECORD hash."""

    key: str
    site: str
    hashes: dict[str, str]


def _record(data: bytes) -> dict[str, str]:
    return {row[0]: row[1] for row in csv.reader(io.StringIO(data.decode("utf-8"))) if row and row[1]}


def install_key(wheel: Path, facts: Sequence[str]) -> str:
    """What pip's install of ``wheel`` depends on besides its files' bytes, with ``facts`` (the
    interpreter, the root, the wheelhouse's wheels)."""
    digest = hashlib.sha256(json.dumps(list(facts)).encode())
    with zipfile.ZipFile(wheel) as zf:
        infos = sorted(zf.infolist(), key=lambda i: i.filename)
        info_dir = dist_info_dir([i.filename for i in infos])
        for info in infos:
            digest.update(f"{info.filename}\0{info.external_attr}\0".encode())
            metadata = info.filename.startswith(f"{info_dir}/") and info.filename != f"{info_dir}/RECORD"
            if metadata or ".data/" in info.filename:  # .data: installed elsewhere, always by pip
                digest.update(zf.read(info) + b"\0")
    return digest.hexdigest()


def kept(venv: Path, key: str) -> Installed | None:
    """The venv's facts, when a passing check of a wheel with ``key`` left it."""
    try:
        data = json.loads((venv / FACTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or not (venv / str(data.get("site", ""))).is_dir():
        return None
    return Installed(key=key, site=str(data["site"]), hashes=dict(data["hashes"]))


def update(venv: Path, wheel: Path, installed: Installed) -> list[str]:
    """Replace the files of ``wheel`` whose hash differs from what ``venv`` holds, and their
    lines of the installed RECORD; the names replaced."""
    (venv / FACTS).unlink()
    site = venv / installed.site
    with zipfile.ZipFile(wheel) as zf:
        info_dir = dist_info_dir(zf.namelist())
        wanted = _record(zf.read(f"{info_dir}/RECORD"))
        changed = sorted(name for name, digest in wanted.items() if installed.hashes.get(name) != digest)
        for name in changed:
            data = zf.read(name)
            target = site / name
            target.write_bytes(data)
            mode = zf.getinfo(name).external_attr >> 16
            if mode & 0o111:
                target.chmod(target.stat().st_mode | 0o111)
    record = site / info_dir / "RECORD"
    rows = list(csv.reader(io.StringIO(record.read_text(encoding="utf-8"))))
    sizes = {name: str((site / name).stat().st_size) for name in changed}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        writer.writerow([row[0], wanted[row[0]], sizes[row[0]]] if row and row[0] in sizes else row)
    record.write_text(out.getvalue(), encoding="utf-8")
    return changed


def keep(venv: Path, wheel: Path, key: str) -> None:
    """After a passing check: the facts of the wheel ``venv`` now holds, written last."""
    with zipfile.ZipFile(wheel) as zf:
        info_dir = dist_info_dir(zf.namelist())
        hashes = _record(zf.read(f"{info_dir}/RECORD"))
    sites = [p.parent for p in venv.glob(f"lib/python*/site-packages/{info_dir}")]
    if len(sites) != 1:
        return  # pip put it somewhere else: nothing to update next time, the next check installs
    facts = {"key": key, "site": str(sites[0].relative_to(venv)), "hashes": hashes}
    with atomic_file(venv / FACTS, "w") as out:
        json.dump(facts, out)
