"""wheel.derive: the other CPythons' wheels made from the first one's packaging, only where that
gives exactly what scikit-build-core and auditwheel would have made."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from ortdist.errors import PackageError
from ortdist.wheel import derive
from ortdist.wheel.record import record_line

from .steps.helpers import make_wheel
from .test_elf import shared_object

BINDING = "onnxruntime/capi/onnxruntime_pybind11_state.so"
SHARED = "onnxruntime/capi/libonnxruntime_providers_shared.so"
TAG = "manylinux_2_17_x86_64.manylinux2014_x86_64"


def raw(tmp: Path, python: str, binding: bytes, shared: bytes | None = None) -> Path:
    tag = f"cp{python.replace('.', '')}"
    members = {"onnxruntime/__init__.py": b"", BINDING: binding, SHARED: shared or shared_object(("libc.so.6",))}
    return make_wheel(tmp / f"raw-{python}", f"onnxruntime-1.21.0-{tag}-{tag}-linux_x86_64.whl", members)


def auditwheel(wheel: Path, out: Path, graft: bool = False, change: bytes = b"") -> Path:
    """What auditwheel repair writes: the same files (plus a graft, or a library patched), the
    platform tag in the name and in WHEEL's two Tag lines, RECORD anew."""
    with zipfile.ZipFile(wheel) as zf:
        files = {n: zf.read(n) for n in zf.namelist() if ".dist-info/" not in n}
    if graft:
        files["onnxruntime.libs/libgomp-a34b3233.so.1"] = b"gomp"
    files[BINDING] += change
    stem = wheel.name.rpartition("-linux_")[0]
    made = make_wheel(out, f"{stem}-{TAG}.whl", files)
    python = stem.split("-")[-1]
    with zipfile.ZipFile(made) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    info = "onnxruntime-1.21.0.dist-info"
    members[f"{info}/WHEEL"] = members[f"{info}/WHEEL"].replace(
        f"Tag: {python}-{python}-{TAG}\n".encode(),
        f"Tag: {python}-{python}-manylinux_2_17_x86_64\nTag: {python}-{python}-manylinux2014_x86_64\n".encode(),
    )
    # RECORD in auditwheel's own order, not the raw wheel's (here: reversed), and its line ends
    lines = sorted((record_line(n, members[n]) for n in members if n != f"{info}/RECORD"), reverse=True)
    with zipfile.ZipFile(made, "w") as zf:
        for name, data in members.items():
            for parent in [name[: i + 1] for i, c in enumerate(name) if c == "/"]:
                if parent not in zf.namelist():
                    zf.mkdir(parent)  # auditwheel writes an entry for each directory
            # RECORD as auditwheel writes it: csv's CRLF line ends
            zf.writestr(name, data if not name.endswith("RECORD") else ("\r\n".join([*lines, name + ",,"]) + "\r\n"))
    return made


def members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_a_retag_only_repair_is_derived_for_another_python(tmp_path: Path) -> None:
    first_raw = raw(tmp_path, "3.13", shared_object() + b"binding for 3.13")
    other_raw = raw(tmp_path, "3.11", shared_object() + b"binding for 3.11")
    first = auditwheel(first_raw, tmp_path / "repaired")
    assert derive.retag_only(first_raw, first) and derive.reproduces(first_raw, first)
    assert derive.same_needs(other_raw, first_raw)
    made = derive.derive(other_raw, first, tmp_path / "repaired-3.11")
    assert made.name == f"onnxruntime-1.21.0-cp311-cp311-{TAG}.whl"
    expected = auditwheel(other_raw, tmp_path / "auditwheel-3.11")  # what auditwheel itself makes
    assert members(made) == members(expected)
    with zipfile.ZipFile(made) as zf:
        assert [i.filename for i in zf.infolist()] == [i.filename for i in zipfile.ZipFile(first).infolist()]


def test_a_repair_that_grafted_or_patched_is_not_derived(tmp_path: Path) -> None:
    first_raw = raw(tmp_path, "3.13", shared_object() + b"binding")
    assert not derive.retag_only(first_raw, auditwheel(first_raw, tmp_path / "graft", graft=True))
    assert not derive.retag_only(first_raw, auditwheel(first_raw, tmp_path / "patch", change=b" patched"))


def test_a_library_needing_something_else_is_repaired_by_auditwheel(tmp_path: Path) -> None:
    first_raw = raw(tmp_path, "3.13", shared_object())
    newer = shared_object(versions={"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.28"), "libm.so.6": ("GLIBC_2.2.5",)})
    assert not derive.same_needs(raw(tmp_path, "3.11", newer), first_raw)
    more = shared_object(("libm.so.6", "libc.so.6", "libpthread.so.0"))
    assert not derive.same_needs(raw(tmp_path, "3.12", more), first_raw)
    zlib = shared_object(("libz.so.1", "libc.so.6"))  # auditwheel's blacklist reads its symbols
    assert not derive.same_needs(raw(tmp_path, "3.10", zlib, zlib), raw(tmp_path, "3.14", zlib, zlib))


def test_the_derivation_must_give_back_auditwheels_own_wheel(tmp_path: Path) -> None:
    """derive writes RECORD as ortdist does (sha256, every line in the first wheel's order): a
    repair that records otherwise (here sha512) is caught by deriving auditwheel's own input."""
    first_raw = raw(tmp_path, "3.13", shared_object())
    first = auditwheel(first_raw, tmp_path / "repaired")
    with zipfile.ZipFile(first) as zf:
        files = [(i, zf.read(i.filename)) for i in zf.infolist()]
    record_info, record = files[-1]
    sha512 = "\n".join(
        f"{n},sha512={hashlib.sha512(dict((i.filename, d) for i, d in files)[n]).hexdigest()},{size}"
        if n != record_info.filename
        else line
        for line in record.decode().splitlines()
        for n, _, size in [line.split(",")]
    )
    with zipfile.ZipFile(first, "w") as zf:
        for info, data in files[:-1]:
            zf.writestr(info, data)
        zf.writestr(record_info, sha512 + "\n")
    assert derive.retag_only(first_raw, first) and not derive.reproduces(first_raw, first)


def test_a_binding_is_swapped_into_the_first_wheel_with_its_tag(tmp_path: Path) -> None:
    first_raw = raw(tmp_path, "3.13", b"binding for 3.13")
    made = derive.swap_binding(first_raw, BINDING, b"binding for 3.11", "3.11", tmp_path / "raw-3.11")
    assert made.name == "onnxruntime-1.21.0-cp311-cp311-linux_x86_64.whl"
    assert members(made) == members(raw(tmp_path / "expected", "3.11", b"binding for 3.11"))
    with pytest.raises(PackageError, match=r"has no onnxruntime/capi/other\.so"):
        derive.swap_binding(first_raw, "onnxruntime/capi/other.so", b"", "3.11", tmp_path / "x")


def test_the_last_repair_is_kept_for_a_raw_wheel_auditwheel_would_repair_the_same(tmp_path: Path) -> None:
    """The patch loop: the same files, the libraries rebuilt with the same needs (and a non-ELF
    file edited), under the same repair: every wheel is derived from the kept one, and is what
    auditwheel itself makes of the new raw wheel."""
    kept = derive.Kept(tmp_path / "kept")
    before = raw(tmp_path / "before", "3.13", shared_object() + b"binding, before the change")
    kept.keep("key", derive.fingerprint(before), auditwheel(before, tmp_path / "repaired-before"))
    after = make_wheel(
        tmp_path / "after",
        before.name,
        {
            "onnxruntime/__init__.py": b"# edited",
            BINDING: shared_object() + b"binding, after",
            SHARED: shared_object(("libc.so.6",)),
        },
    )
    template = kept.matching("key", after, derive.fingerprint(after))
    assert template is not None
    made = derive.derive(after, template, tmp_path / "derived")
    assert members(made) == members(auditwheel(after, tmp_path / "auditwheel-after"))
    assert (
        kept.matching("another key", after, derive.fingerprint(after)) is None
    )  # other auditwheel arguments, root or code
    other_python = raw(tmp_path / "other", "3.11", shared_object() + b"binding, before the change")
    assert (
        kept.matching("key", other_python, derive.fingerprint(other_python)) is None
    )  # kept for the first version only


def test_a_raw_wheel_auditwheel_might_repair_otherwise_runs_auditwheel(tmp_path: Path) -> None:
    kept = derive.Kept(tmp_path / "kept")
    before = raw(tmp_path / "before", "3.13", shared_object())
    kept.keep("key", derive.fingerprint(before), auditwheel(before, tmp_path / "repaired-before"))
    newer = shared_object(versions={"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.28"), "libm.so.6": ("GLIBC_2.2.5",)})
    newer_raw = raw(tmp_path / "newer", "3.13", newer)
    assert kept.matching("key", newer_raw, derive.fingerprint(newer_raw)) is None
    more = {
        "onnxruntime/__init__.py": b"",
        "onnxruntime/new.py": b"",
        BINDING: shared_object(),
        SHARED: shared_object(("libc.so.6",)),
    }
    more_raw = make_wheel(tmp_path / "more", before.name, more)
    assert kept.matching("key", more_raw, derive.fingerprint(more_raw)) is None
    (tmp_path / "kept" / "kept.json").write_text("{half written")
    assert kept.matching("key", before, derive.fingerprint(before)) is None
    kept.forget()
    assert not (tmp_path / "kept").exists() and kept.matching("key", before, derive.fingerprint(before)) is None


def stage(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_the_last_wheel_is_kept_for_a_stage_that_differs_in_packed_files(tmp_path: Path) -> None:
    """What scikit-build-core would make of a stage whose libraries changed: its last wheel with
    those members' bytes, RECORD following; it left out a file (here a cache), which must not change."""
    files = {"onnxruntime/__init__.py": b"", BINDING: b"binding before", "onnxruntime/cache.pyc": b"x"}
    before = stage(tmp_path / "stage", files)
    packed = {k: v for k, v in files.items() if not k.endswith(".pyc")}
    kept = derive.KeptRaw(tmp_path / "kept")
    assert kept.keep(
        "key",
        derive.staged_files(before),
        make_wheel(tmp_path / "raw", "onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl", packed),
    )
    (before / BINDING).write_bytes(b"binding after")
    made = kept.made("key", before, derive.staged_files(before), tmp_path / "out")
    assert made is not None
    expected = make_wheel(tmp_path / "expected", made.name, {**packed, BINDING: b"binding after"})
    assert members(made) == members(expected)
    assert kept.made("another key", before, derive.staged_files(before), tmp_path / "out2") is None
    (before / "onnxruntime/cache.pyc").write_bytes(b"y")  # a file it left out changed
    assert kept.made("key", before, derive.staged_files(before), tmp_path / "out3") is None
    (before / "onnxruntime/cache.pyc").write_bytes(b"x")
    (before / "onnxruntime/new.py").write_bytes(b"")  # a file more
    assert kept.made("key", before, derive.staged_files(before), tmp_path / "out4") is None
    (before / "onnxruntime/new.py").unlink()
    (before / BINDING).chmod(0o755)  # a mode changed
    assert kept.made("key", before, derive.staged_files(before), tmp_path / "out5") is None


def test_a_wheel_that_changed_a_staged_file_is_not_kept(tmp_path: Path) -> None:
    before = stage(tmp_path / "stage", {"onnxruntime/__init__.py": b"", BINDING: b"binding"})
    kept = derive.KeptRaw(tmp_path / "kept")
    raw_wheel = make_wheel(
        tmp_path / "raw",
        "onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl",
        {"onnxruntime/__init__.py": b"", BINDING: b"stripped"},
    )
    assert not kept.keep("key", derive.staged_files(before), raw_wheel)
    assert kept.made("key", before, derive.staged_files(before), tmp_path / "out") is None
