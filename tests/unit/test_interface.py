"""checks.interface: what a build's artefacts present to an older system, the compat step's key."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from ortdist.checks import interface

from .test_elf import shared_object


@pytest.mark.parametrize(("wide", "order"), [(True, "<"), (False, "<"), (True, ">")], ids=["64-le", "32-le", "64-be"])
def test_imports_are_the_undefined_dynamic_symbols(wide: bool, order: str) -> None:
    data = shared_object(wide=wide, order=order, imports=("expf", "PyLong_FromLong"), exports=("PyInit_x",))
    assert interface.imports(data) == {"expf", "PyLong_FromLong"}
    assert interface.imports(shared_object()) == frozenset()  # no .dynsym: imports nothing


def wheel(path: Path, binding: bytes, script: bytes = b"import x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/_x.so", binding)
        zf.writestr("pkg/__init__.py", script)
        zf.writestr("pkg-1.0.dist-info/RECORD", f"pkg/_x.so,sha256={len(binding)},\n")
    return path


def test_the_digest_follows_the_interface_not_the_code(tmp_path: Path) -> None:
    name = "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    base = interface.digest([wheel(tmp_path / "a" / name, shared_object(imports=("expf",)) + b"code A")])
    # other code, same needs and imports (RECORD, which only hashes the files, differs too)
    same = interface.digest([wheel(tmp_path / "b" / name, shared_object(imports=("expf",)) + b"code B, longer")])
    assert same == base
    changed = [
        wheel(tmp_path / "c" / name, shared_object(imports=("expf", "logf"))),  # one more import
        wheel(tmp_path / "d" / name, shared_object(("libz.so.1", "libc.so.6"), imports=("expf",))),  # a library
        wheel(tmp_path / "e" / name, shared_object(imports=("expf",)), script=b"import y\n"),  # a Python file
        wheel(tmp_path / "f" / name.replace("2_17", "2_28"), shared_object(imports=("expf",))),  # its tag
    ]
    assert all(interface.digest([w]) != base for w in changed)


def test_a_c_library_archive_is_read_as_well(tmp_path: Path) -> None:
    library = tmp_path / "libonnxruntime.so"
    library.write_bytes(shared_object(imports=("expf",)))
    archive = tmp_path / "onnxruntime.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(library, "lib/libonnxruntime.so")
    (line,) = interface.describe(archive)
    assert line.startswith("lib/libonnxruntime.so elf needed=libm.so.6,libc.so.6 versions=libc.so.6:GLIBC_2.14,")
    assert line.endswith(" expf")
