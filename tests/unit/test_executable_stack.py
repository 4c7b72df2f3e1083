"""The executable-stack test the repair and install steps apply to every shared object they ship."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from ortdist.errors import PackageError
from ortdist.wheel.repair import check_no_executable_stack, executable_stack

PT_LOAD, PT_GNU_STACK, PF_R, PF_W, PF_X = 1, 0x6474E551, 4, 2, 1


def elf64(*headers: tuple[int, int], order: str = "<") -> bytes:
    """An ELF64 file header followed by program headers (type, flags), as a linker writes them."""
    ident = b"\x7fELF" + bytes([2, 1 if order == "<" else 2, 1]) + bytes(9)
    header = ident + struct.pack(f"{order}HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, len(headers), 0, 0, 0)
    return header + b"".join(struct.pack(f"{order}IIQQQQQQ", t, f, 0, 0, 0, 0, 0, 0) for t, f in headers)


def elf32(*headers: tuple[int, int]) -> bytes:
    ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIIIIIHHHHHH", 3, 40, 1, 0, 52, 0, 0, 52, 32, len(headers), 0, 0, 0)
    return header + b"".join(struct.pack("<IIIIIIII", t, 0, 0, 0, 0, 0, f, 0) for t, f in headers)


@pytest.mark.parametrize("make", [elf64, elf32, lambda *h: elf64(*h, order=">")], ids=["elf64", "elf32", "elf64-be"])
def test_the_stack_flags_are_read_from_pt_gnu_stack(make: object) -> None:
    assert callable(make)
    assert executable_stack(make((PT_LOAD, PF_R | PF_X), (PT_GNU_STACK, PF_R | PF_W | PF_X)))
    assert not executable_stack(make((PT_LOAD, PF_R | PF_X), (PT_GNU_STACK, PF_R | PF_W)))
    # No PT_GNU_STACK at all: the loader's default is an executable stack.
    assert executable_stack(make((PT_LOAD, PF_R | PF_X)))


def test_a_real_library_of_this_host_has_no_executable_stack() -> None:
    libs = [p for p in Path(sys.base_prefix, "lib").rglob("lib-dynload/*.so")][:3]
    if not libs:
        pytest.skip("this Python has no lib-dynload extension modules")
    assert [executable_stack(p.read_bytes()) for p in libs] == [False] * len(libs)


def test_what_is_not_elf_is_not_flagged() -> None:
    assert not executable_stack(b"#!/bin/sh\n" + bytes(100))
    assert not executable_stack(b"\x7fELF")


def test_a_library_asking_for_an_executable_stack_is_refused_by_name() -> None:
    good = elf64((PT_GNU_STACK, PF_R | PF_W))
    bad = elf64((PT_GNU_STACK, PF_R | PF_W | PF_X))
    check_no_executable_stack([("onnxruntime/capi/a.so", good)], "w.whl")
    with pytest.raises(PackageError, match=r"onnxruntime/capi/b\.so ask\(s\) for an executable stack") as info:
        check_no_executable_stack([("onnxruntime/capi/a.so", good), ("onnxruntime/capi/b.so", bad)], "w.whl")
    assert info.value.where == "w.whl" and "noexecstack" in (info.value.fix or "")
