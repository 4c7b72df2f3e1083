"""Every CPython's wheel from the first one's packaging: the same files but the binding.

The wheels of one build differ in one file, the binding compiled for each Python (the core is
linked into it; every other member is byte-identical), and in the CPython tag. So scikit-build-core
and auditwheel run for the root's own Python only, and each other version's wheel is made from
that version's stripped binding and the first wheel:

- ``swap_binding``: the raw wheel with the version's binding in place of the first one's, WHEEL's
  tag and RECORD following: what scikit-build-core would make from a stage differing in that file.
- ``derive``: the version's raw wheel made into what auditwheel made of the first one's, when
  auditwheel only re-tagged that one (``retag_only``: no library grafted or patched) and the
  version's libraries need exactly what the first one's need (``same_needs``: the sonames and
  symbol versions auditwheel's policy is decided from). Applied to the first raw wheel it must
  give back auditwheel's own wheel, member for member (``reproduces``), or nothing is derived.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..distinfo import dist_info_dir
from ..elffile import ElfNeeds, is_elf, read_needs, wheel_libraries
from ..errors import PackageError
from ..fsutil import atomic_file, remove_tree
from .record import INTERMEDIATE_LEVEL, record_line

# auditwheel's policies refuse some of zlib's symbols (its blacklist): a wheel needing libz is
# always repaired by auditwheel itself.
_BLACKLISTED = ("libz.so.1",)


@dataclass(frozen=True)
class Member:
    info: zipfile.ZipInfo
    data: bytes


def python_tag(wheel_name: str) -> str:
    """``cp313`` of ``onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl``."""
    parts = wheel_name[: -len(".whl")].split("-")
    if len(parts) < 5 or parts[-3] != parts[-2] or not parts[-3].startswith("cp"):
        raise PackageError(f"{wheel_name} is not a CPython-specific wheel", where=wheel_name, fix="rebuild it")
    return parts[-3]


def _retagged(text: str, old: str, new: str) -> str:
    return text.replace(f"-{old}-{old}-", f"-{new}-{new}-").replace(f" {old}-{old}-", f" {new}-{new}-")


def _read(wheel: Path) -> list[Member]:
    with zipfile.ZipFile(wheel) as zf:
        return [Member(info, zf.read(info.filename)) for info in zf.infolist()]


def _write(dest: Path, members: list[Member]) -> Path:
    with atomic_file(dest) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zout:
        for member in members:
            zout.writestr(member.info, member.data, compresslevel=INTERMEDIATE_LEVEL)
    return dest


def _rerecorded(members: list[Member]) -> list[Member]:
    """``members`` with RECORD's hashes recomputed, its lines in their order."""
    dist_info = dist_info_dir([m.info.filename for m in members])
    record_name = f"{dist_info}/RECORD"
    data = {m.info.filename: m.data for m in members}
    text = data[record_name].decode()
    end = "\r\n" if "\r\n" in text else "\n"  # auditwheel writes RECORD as csv does, CRLF
    lines = []
    for line in text.splitlines():
        name = line.rsplit(",", 2)[0]
        if not line or name == record_name:
            lines.append(line)
        elif name not in data:
            raise PackageError(f"RECORD names {name}, which the wheel lacks", fix="rebuild the wheel")
        else:
            lines.append(record_line(name, data[name]))
    record = (end.join(lines) + end).encode()
    return [Member(m.info, record) if m.info.filename == record_name else m for m in members]


def swap_binding(first_raw: Path, member: str, binding: bytes, python: str, out_dir: Path) -> Path:
    """``first_raw`` with ``binding`` as ``member`` and tagged for ``python`` (``3.11``), in ``out_dir``."""
    old, new = python_tag(first_raw.name), f"cp{python.replace('.', '')}"
    members = _read(first_raw)
    if member not in {m.info.filename for m in members}:
        raise PackageError(f"{first_raw.name} has no {member}", where=str(first_raw), fix="rebuild the wheel")
    wheel_file = f"{dist_info_dir([m.info.filename for m in members])}/WHEEL"
    swapped = [
        Member(m.info, binding)
        if m.info.filename == member
        else Member(m.info, _retagged(m.data.decode(), old, new).encode())
        if m.info.filename == wheel_file
        else m
        for m in members
    ]
    return _write(out_dir / _retagged(first_raw.name, old, new), _rerecorded(swapped))


def needs(wheel: Path) -> dict[str, ElfNeeds]:
    """What each ELF member asks of the system: its sonames and symbol versions."""
    return {name: read_needs(data) for name, data in wheel_libraries(wheel) if is_elf(data)}


def same_needs(wheel: Path, first: Path) -> bool:
    """Whether auditwheel would decide ``wheel`` as it decided ``first``: the same ELF members,
    each needing the same libraries at the same symbol versions, none on its blacklist."""
    mine, theirs = needs(wheel), needs(first)
    blacklisted = any(lib in n.needed for n in mine.values() for lib in _BLACKLISTED)
    return mine == theirs and not blacklisted


def retag_only(raw: Path, repaired: Path) -> bool:
    """Whether auditwheel left every file as it was (nothing grafted, patched or stripped) and
    changed only the tags (WHEEL, RECORD, the file name)."""
    before, after = _read(raw), _read(repaired)
    dist_before = dist_info_dir([m.info.filename for m in before])
    dist_after = dist_info_dir([m.info.filename for m in after])
    tags = {f"{dist_before}/WHEEL", f"{dist_before}/RECORD", f"{dist_after}/WHEEL", f"{dist_after}/RECORD"}
    # auditwheel also writes an entry for every directory: structure, no file
    files_before = {m.info.filename: m.data for m in before if m.info.filename not in tags and not m.info.is_dir()}
    files_after = {m.info.filename: m.data for m in after if m.info.filename not in tags and not m.info.is_dir()}
    return dist_before == dist_after and files_before == files_after


def _derived(raw: Path, first_repaired: Path) -> Iterator[Member]:
    old, new = python_tag(first_repaired.name), python_tag(raw.name)
    data = {m.info.filename: m.data for m in _read(raw) if not m.info.is_dir()}
    template = _read(first_repaired)
    dist_info = dist_info_dir([m.info.filename for m in template])
    wheel_file, record_file = f"{dist_info}/WHEEL", f"{dist_info}/RECORD"
    if set(data) != {m.info.filename for m in template if not m.info.is_dir()}:
        raise PackageError(
            f"{raw.name} does not hold the files {first_repaired.name} holds",
            where=str(raw),
            fix="rebuild: every version's wheel is made from the same package",
        )
    for m in template:
        if m.info.is_dir() or m.info.filename == record_file:
            yield m  # its directory entries; its RECORD's lines in their order (hashes redone after)
        elif m.info.filename == wheel_file:
            yield Member(m.info, _retagged(m.data.decode(), old, new).encode())
        else:
            yield Member(m.info, data[m.info.filename])


def derive(raw: Path, first_repaired: Path, out_dir: Path) -> Path:
    """``raw`` repaired as ``first_repaired`` was: its files in that wheel's order and zip
    metadata, its WHEEL tags with this version's CPython, RECORD recomputed."""
    name = _retagged(first_repaired.name, python_tag(first_repaired.name), python_tag(raw.name))
    return _write(out_dir / name, _rerecorded(list(_derived(raw, first_repaired))))


def reproduces(raw: Path, repaired: Path) -> bool:
    """Whether ``derive`` applied to auditwheel's own input gives auditwheel's output: the same
    members in the same order, with the same bytes, times and modes."""
    try:
        mine = _rerecorded(list(_derived(raw, repaired)))
    except PackageError:
        return False
    theirs = _read(repaired)

    def key(m: Member) -> tuple[object, ...]:
        return (m.info.filename, m.info.date_time, m.info.external_attr, m.info.compress_type, m.data)

    return [key(m) for m in mine] == [key(m) for m in theirs]


def fingerprint(raw: Path) -> list[list[Any]]:
    """What auditwheel's repair of ``raw`` is decided by, as ``derive`` uses it: every member's
    name, time and mode; an ELF member's needs (``same_needs``); WHEEL's bytes (the derived wheel
    takes WHEEL from the repaired one). Any other member's bytes pass through unchanged (and come
    from the raw wheel); RECORD is recomputed."""
    rows: list[list[Any]] = []
    for m in _read(raw):
        name = m.info.filename
        if name.endswith(".dist-info/RECORD"):
            continue
        what: Any = None
        if is_elf(m.data):
            n = read_needs(m.data)
            what = [list(n.needed), n.soname, {k: sorted(v) for k, v in sorted(n.versions.items())}]
        elif name.endswith(".dist-info/WHEEL"):
            what = hashlib.sha256(m.data).hexdigest()
        rows.append([name, list(m.info.date_time), m.info.external_attr, what])
    return rows


def kept_key(facts: list[Any]) -> str:
    """What a kept wheel is kept under: ``facts`` (what the tool it stands in for depends on
    besides its input) and this module's own code, which decides when it holds."""
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps([*facts, code]).encode()).hexdigest()


@dataclass(frozen=True)
class _KeptWheel:
    """A wheel kept in ``directory`` for the next build, with the facts that say when it holds
    (``kept.json``, written last: a half-kept wheel is no wheel)."""

    directory: Path

    def forget(self) -> None:
        remove_tree(self.directory)

    def _store(self, wheel: Path, facts: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheel, self.directory / wheel.name)
        with atomic_file(self.directory / "kept.json", "w") as out:
            out.write(json.dumps({**facts, "wheel": wheel.name}))

    def _load(self, key: str) -> tuple[Path, dict[str, Any]] | None:
        """The kept wheel and its facts, if kept under ``key``."""
        try:
            facts = json.loads((self.directory / "kept.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        wheel = self.directory / str(facts.get("wheel", ""))
        return (wheel, facts) if facts.get("key") == key and wheel.is_file() else None


@dataclass(frozen=True)
class Kept(_KeptWheel):
    """The last build's auditwheel repair of its first raw wheel, kept for the next build (the
    patch loop): a first raw wheel with the same ``fingerprint``, repaired under the same ``key``
    (auditwheel's arguments, its root, this module), gets from auditwheel what that one got, so
    every version's wheel is derived from it and auditwheel does not run."""

    def keep(self, key: str, rows: list[list[Any]], repaired: Path) -> None:
        """Keep ``repaired`` (auditwheel's faithful re-tag of the raw wheel whose ``fingerprint``
        is ``rows``) for the next build."""
        self.forget()
        self._store(repaired, {"key": key, "fingerprint": rows})

    def matching(self, key: str, raw: Path, rows: list[list[Any]]) -> Path | None:
        """The kept repaired wheel, if ``raw`` (its ``fingerprint``: ``rows``) would be repaired
        as its raw wheel was."""
        loaded = self._load(key)
        if loaded is None or python_tag(loaded[0].name) != python_tag(raw.name):
            return None
        return loaded[0] if loaded[1].get("fingerprint") == rows else None


def replace_members(raw: Path, changed: dict[str, bytes], out_dir: Path) -> Path:
    """``raw`` with ``changed`` members' bytes replaced, everything else as it was, RECORD following."""
    members = _read(raw)
    missing = set(changed) - {m.info.filename for m in members}
    if missing:
        raise PackageError(f"{raw.name} has no {sorted(missing)}", where=str(raw), fix="rebuild the wheel")
    replaced = [Member(m.info, changed[m.info.filename]) if m.info.filename in changed else m for m in members]
    return _write(out_dir / raw.name, _rerecorded(replaced))


def staged_files(stage: Path) -> dict[str, list[Any]]:
    """Every file of a staged package, by its path under ``stage`` (its wheel member name): its
    mode and its bytes' digest."""
    return {
        p.relative_to(stage).as_posix(): [p.stat().st_mode, hashlib.sha256(p.read_bytes()).hexdigest()]
        for p in sorted(stage.rglob("*"))
        if p.is_file()
    }


@dataclass(frozen=True)
class KeptRaw(_KeptWheel):
    """The last build's scikit-build-core wheel of the first version, kept for the next build (the
    patch loop): packed from a stage whose files reached it verbatim (those scikit-build-core
    took), made under the same ``key`` (the project, its root, the build's timestamp). A stage with
    the same files (names, modes), differing only in files the wheel holds verbatim, gives the same
    wheel with those members' bytes changed: scikit-build-core does not run."""

    def keep(self, key: str, files: dict[str, list[Any]], raw: Path) -> bool:
        """Keep ``raw`` if every member it took from the stage (its ``staged_files``: ``files``)
        is that file's bytes; say whether."""
        self.forget()
        with zipfile.ZipFile(raw) as zf:
            packed = [n for n in zf.namelist() if n in files]
            if any(hashlib.sha256(zf.read(n)).hexdigest() != files[n][1] for n in packed):
                return False
        self._store(raw, {"key": key, "files": files, "packed": packed})
        return True

    def made(self, key: str, stage: Path, files: dict[str, list[Any]], out_dir: Path) -> Path | None:
        """The wheel scikit-build-core would make of ``stage`` (its ``staged_files``: ``files``),
        from the kept one; None if it might differ."""
        loaded = self._load(key)
        if loaded is None:
            return None
        wheel, facts = loaded
        kept_files, packed = facts.get("files", {}), set(facts.get("packed", []))
        if set(files) != set(kept_files):
            return None
        differ = [n for n in files if files[n] != kept_files[n]]
        # a mode changed, or a file the wheel does not hold verbatim (scikit-build-core left it out) changed
        if any(n not in packed or files[n][0] != kept_files[n][0] for n in differ):
            return None
        return replace_members(wheel, {n: (stage / n).read_bytes() for n in differ}, out_dir)
