"""The ELF check every wheel and C library archive passes: DT_NEEDED and symbol-version needs read
from the files' own bytes (a synthetic ELF here, built the way a linker lays out those sections),
held against what the tag or toolchain promises."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ortdist.checks import elf
from ortdist.errors import PackageError
from ortdist.toolchains import load_toolchain

SHT_STRTAB, SHT_DYNAMIC, SHT_GNU_VERNEED, SHT_DYNSYM = 3, 6, 0x6FFFFFFE, 11
GLIBC_ONLY = {"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.14"), "libm.so.6": ("GLIBC_2.2.5",)}


def shared_object(
    needed: Sequence[str] = ("libm.so.6", "libc.so.6"),
    versions: Mapping[str, Sequence[str]] = GLIBC_ONLY,
    soname: str | None = None,
    *,
    wide: bool = True,
    order: str = "<",
    imports: Sequence[str] = (),
    exports: Sequence[str] = (),
    section_headers: bool = True,
    pt_dynamic: bool = True,
    named: Mapping[str, bytes] | None = None,
) -> bytes:
    """An ELF shared object laid out as a linker does: a .dynstr, a .dynamic (DT_NEEDED, DT_SONAME,
    DT_STRTAB, DT_STRSZ, DT_VERNEED, DT_VERNEEDNUM), a .gnu.version_r and, given symbols, a .dynsym
    (``imports`` undefined, ``exports`` defined in section 1); program headers PT_LOAD (the whole
    file at address 0x10000 + its offset), PT_DYNAMIC and PT_GNU_STACK, and section headers unless
    ``section_headers`` is false (a stripped file's loader view alone); ``named``: more sections
    (a CUDA library's .nv_fatbin), which a .shstrtab then names (the others stay unnamed)."""
    strings = bytearray(b"\0")
    offsets: dict[str, int] = {}

    def string(text: str) -> int:
        if text not in offsets:
            offsets[text] = len(strings)
            strings.extend(text.encode() + b"\0")
        return offsets[text]

    base = 0x10000  # load address minus file offset: the reader must map one to the other
    word, addr = ("q", "Q") if wide else ("i", "I")
    header_size, phentsize = (64, 56) if wide else (52, 32)
    phnum = 3 if pt_dynamic else 2
    start = header_size + phnum * phentsize
    for name in [*needed, *([soname] if soname else []), *versions]:
        string(name)
    for names in versions.values():
        for name in names:
            string(name)
    symbol = f"{order}IBBHQQ" if wide else f"{order}IIIBBH"
    dynsym = bytes(struct.calcsize(symbol))  # the null symbol
    for name, section in [*((n, 0) for n in imports), *((n, 1) for n in exports)]:
        fields = (string(name), 0x12, 0, section, 0, 0) if wide else (string(name), 0, 0, 0x12, 0, section)
        dynsym += struct.pack(symbol, *fields)
    verneed = b""
    files = list(versions.items())
    for index, (file, names) in enumerate(files):
        size = 16 + 16 * len(names)
        verneed += struct.pack(f"{order}HHIII", 1, len(names), string(file), 16, 0 if index == len(files) - 1 else size)
        for at, name in enumerate(names):
            last = at == len(names) - 1
            verneed += struct.pack(f"{order}IHHII", 0, 0, 2 + at, string(name), 0 if last else 16)
    entries = [(1, string(n)) for n in needed] + ([(14, string(soname))] if soname else [])
    entries += [(5, base + start), (10, len(strings))]
    entry_size = struct.calcsize(f"{order}{word}{addr}")
    dynamic_at = start + len(strings)
    verneed_at = dynamic_at + (len(entries) + 3) * entry_size
    entries += [(0x6FFFFFFE, base + verneed_at), (0x6FFFFFFF, len(files)), (0, 0)]
    dynamic = b"".join(struct.pack(f"{order}{word}{addr}", tag, value) for tag, value in entries)
    assert start + len(strings) + len(dynamic) == verneed_at
    body = bytes(strings) + dynamic + verneed + dynsym
    extra = []
    for name, blob in (named or {}).items():
        extra.append((name, start + len(body), blob))
        body += blob
    shstrtab = b"\0" + b"".join(name.encode() + b"\0" for name, _, _ in extra) + b".shstrtab\0" if extra else b""
    shstrtab_at = start + len(body)
    body += shstrtab
    shoff = start + len(body)
    sections = [(0, 0, 0, 0, 0), (SHT_STRTAB, start, len(strings), 0, 0)]
    sections.append((SHT_DYNAMIC, dynamic_at, len(dynamic), 1, 0))
    sections.append((SHT_GNU_VERNEED, verneed_at, len(verneed), 1, len(files)))
    if imports or exports:
        sections.append((SHT_DYNSYM, verneed_at + len(verneed), len(dynsym), 1, 1))
    names = [0] * len(sections)  # the linker's sections stay unnamed; the named ones get .shstrtab offsets
    at = 1
    for name, offset, blob in extra:
        sections.append((1, offset, len(blob), 0, 0))  # SHT_PROGBITS
        names.append(at)
        at += len(name) + 1
    if extra:
        sections.append((SHT_STRTAB, shstrtab_at, len(shstrtab), 0, 0))
        names.append(at)
    shstrndx = len(sections) - 1 if extra else 0
    if not section_headers:
        sections, names, shstrndx = [], [], 0
    total = shoff
    # PT_LOAD over the whole file, PT_DYNAMIC, and PT_GNU_STACK without PF_X (as the portable toolchain links).
    programs = [(1, 5, 0, base, total, 0x1000)]
    if pt_dynamic:
        programs.append((2, 6, dynamic_at, base + dynamic_at, len(dynamic), 8))
    programs.append((0x6474E551, 6, 0, 0, 0, 16))
    if wide:
        program = b"".join(struct.pack(f"{order}IIQQQQQQ", t, f, o, v, v, n, n, a) for t, f, o, v, n, a in programs)
    else:
        program = b"".join(struct.pack(f"{order}IIIIIIII", t, o, v, v, n, n, f, a) for t, f, o, v, n, a in programs)
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if order == "<" else 2, 1]) + bytes(9)
    shnum = len(sections)
    if wide:
        fields = (3, 62, 1, 0, header_size, shoff if shnum else 0, 0, 64, 56, phnum, 64, shnum, shstrndx)
        header = ident + struct.pack(f"{order}HHIQQQIHHHHHH", *fields)
        layout = f"{order}IIQQQQIIQQ"
    else:
        fields = (3, 40, 1, 0, header_size, shoff if shnum else 0, 0, 52, 32, phnum, 40, shnum, shstrndx)
        header = ident + struct.pack(f"{order}HHIIIIIHHHHHH", *fields)
        layout = f"{order}IIIIIIIIII"
    table = b"".join(
        struct.pack(layout, name, t, 0, 0, off, size, link, info, 1, 0)
        for name, (t, off, size, link, info) in zip(names, sections, strict=True)
    )
    assert len(header) == header_size and len(program) == phnum * phentsize
    return header + program + body + table


PORTABLE = elf.policy("2.17")


@pytest.mark.parametrize(("wide", "order"), [(True, "<"), (False, "<"), (True, ">")], ids=["64-le", "32-le", "64-be"])
def test_needs_are_read_from_the_dynamic_and_version_sections(wide: bool, order: str) -> None:
    data = shared_object(
        ("libstdc++.so.6", "libc.so.6"),
        {"libstdc++.so.6": ("GLIBCXX_3.4", "CXXABI_1.3"), "libc.so.6": ("GLIBC_2.2.5",)},
        soname="libonnxruntime.so.1",
        wide=wide,
        order=order,
    )
    needs = elf.read_needs(data)
    assert needs.needed == ("libstdc++.so.6", "libc.so.6") and needs.soname == "libonnxruntime.so.1"
    assert dict(needs.versions) == {
        "libstdc++.so.6": frozenset({"GLIBCXX_3.4", "CXXABI_1.3"}),
        "libc.so.6": frozenset({"GLIBC_2.2.5"}),
    }


def test_what_is_not_an_elf_or_is_cut_short_is_refused_by_the_reader() -> None:
    with pytest.raises(ValueError, match="not an ELF"):
        elf.read_needs(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="malformed ELF"):
        elf.read_needs(shared_object()[:200])


def test_needs_are_read_as_the_loader_reads_them_without_section_headers() -> None:
    """A stripped library (e_shnum = 0) hides nothing: PT_DYNAMIC says what it needs."""
    versions = {"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.34")}
    bare = shared_object(("libstdc++.so.6", "libc.so.6"), versions, section_headers=False)
    assert struct.unpack_from("<H", bare, 0x3C)[0] == 0  # e_shnum
    needs = elf.read_needs(bare)
    assert needs.needed == ("libstdc++.so.6", "libc.so.6")
    assert dict(needs.versions) == {"libc.so.6": frozenset(versions["libc.so.6"])}
    assert len(elf.violations([("capi/x.so", bare)], PORTABLE)) == 2


def test_a_dynamic_section_without_its_segment_or_a_library_without_program_headers_is_refused() -> None:
    with pytest.raises(ValueError, match="a dynamic section but no PT_DYNAMIC"):
        elf.read_needs(shared_object(pt_dynamic=False))
    data = bytearray(shared_object())
    struct.pack_into("<H", data, 0x38, 0)  # e_phnum = 0
    with pytest.raises(ValueError, match="without program headers"):
        elf.read_needs(bytes(data))
    assert elf.violations([("capi/x.so", bytes(data))], PORTABLE) == [
        "capi/x.so: malformed ELF: a shared object without program headers cannot be loaded"
    ]


def test_needing_glibc_private_breaks_every_promise() -> None:
    lib = shared_object(versions={"libc.so.6": ("GLIBC_2.2.5", "GLIBC_PRIVATE")})
    assert elf.violations([("capi/x.so", lib)], elf.policy("2.41")) == [
        "capi/x.so: needs GLIBC_PRIVATE from libc.so.6, glibc's internal interface, which only the glibc build "
        "it was linked against provides"
    ]


def test_every_elf_an_artifact_carries_is_found_by_its_magic_whatever_its_name(tmp_path: Path) -> None:
    import io
    import tarfile
    import zipfile

    from ortdist.checks.elf import wheel_libraries

    members = {"pkg/libx.so.1": shared_object(), "pkg/helper": shared_object(), "pkg/data.so.txt": b"not an elf"}
    wheel = tmp_path / "x-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    archive = tmp_path / "x.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    for found in (wheel_libraries(wheel), elf.artifact_libraries(wheel), elf.artifact_libraries(archive)):
        assert sorted(name for name, _ in found) == ["pkg/helper", "pkg/libx.so.1"]


def test_a_glibc_only_library_keeps_the_portable_promise() -> None:
    from ortdist.wheel.repair import executable_stack

    assert elf.violations([("capi/libonnxruntime.so.1.21.0", shared_object())], PORTABLE) == []
    assert not executable_stack(shared_object()) and not executable_stack(shared_object(wide=False))


def test_a_glibc_2_28_symbol_breaks_a_manylinux_2_17_promise() -> None:
    lib = shared_object(versions={"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.28")})
    assert elf.violations([("capi/x.so", lib)], PORTABLE) == [
        "capi/x.so: needs GLIBC_2.28 from libc.so.6, newer than the GLIBC 2.17 of glibc 2.17's promise"
    ]
    assert elf.violations([("capi/x.so", lib)], elf.policy("2.28")) == []


def test_a_grafted_debian_library_is_caught_by_what_it_needs() -> None:
    """auditwheel grafts a library and renames it; the graft is the wheel's own, but its needs are not."""
    binding = shared_object(("libre2-1a2b3c4d.so.11", "libc.so.6"), GLIBC_ONLY)
    grafted = shared_object(
        ("libstdc++.so.6", "libabsl_strings.so.20240722", "libc.so.6"),
        {"libstdc++.so.6": ("GLIBCXX_3.4.32",), "libc.so.6": ("GLIBC_2.34",)},
        soname="libre2.so.11",
    )
    found = elf.violations([("capi/state.so", binding), ("onnxruntime.libs/libre2-1a2b3c4d.so.11", grafted)], PORTABLE)
    assert found == [
        "onnxruntime.libs/libre2-1a2b3c4d.so.11: needs libstdc++.so.6, which the wheel does not carry and the "
        "target does not promise",
        "onnxruntime.libs/libre2-1a2b3c4d.so.11: needs libabsl_strings.so.20240722, which the wheel does not "
        "carry and the target does not promise",
        "onnxruntime.libs/libre2-1a2b3c4d.so.11: needs GLIBC_2.34 from libc.so.6, newer than the GLIBC 2.17 of "
        "glibc 2.17's promise",
        "onnxruntime.libs/libre2-1a2b3c4d.so.11: needs GLIBCXX_3.4.32 from libstdc++.so.6, newer than the GLIBCXX "
        "3.4.19 of glibc 2.17's promise",
    ]


def test_a_toolchains_shared_cxx_runtime_is_allowed_up_to_the_levels_ceilings() -> None:
    lib = shared_object(("libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"), {"libstdc++.so.6": ("GLIBCXX_3.4.33",)})
    trixie = elf.policy("2.41", ["libstdc++.so.6", "libgcc_s.so.1"])
    assert trixie.ceilings["GLIBCXX"] == (3, 4, 33) and elf.violations([("a.so", lib)], trixie) == []
    newer = shared_object(("libstdc++.so.6", "libc.so.6"), {"libstdc++.so.6": ("GLIBCXX_3.4.34", "CXXABI_TM_1")})
    assert [p.split(", ")[0] for p in elf.violations([("a.so", newer)], trixie)] == [
        "a.so: needs GLIBCXX_3.4.34 from libstdc++.so.6"
    ]
    assert elf.policy("2.31").ceilings["GLIBCXX"] == (3, 4, 24)  # the manylinux_2_28 level below it


def test_an_eps_vendor_runtime_is_allowed_by_its_registry_patterns() -> None:
    provider = shared_object(
        ("libcudart.so.13", "libcublas.so.13", "libgcc_s.so.1", "libc.so.6"),
        {"libcudart.so.13": ("libcudart.so.13",), "libc.so.6": ("GLIBC_2.14",)},
    )
    cuda = elf.policy("2.17", ["libgcc_s.so.1"], ["libcudart.so.*", "libcublas.so.*"])
    assert elf.violations([("capi/libonnxruntime_providers_cuda.so", provider)], cuda) == []
    assert len(elf.violations([("capi/libonnxruntime_providers_cuda.so", provider)], elf.policy("2.17"))) == 3


def test_the_check_names_the_artifact_and_how_to_fix() -> None:
    lib = shared_object(versions={"libc.so.6": ("GLIBC_2.28",)})
    with pytest.raises(PackageError, match=r"GLIBC_2\.28") as info:
        elf.check([("capi/x.so", lib), ("README", b"text")], PORTABLE, "w.whl")
    assert info.value.where == "w.whl" and "system_libraries" in (info.value.fix or "")
    elf.check([("capi/x.so", shared_object()), ("README", b"text")], PORTABLE, "w.whl")


def test_the_toolchains_promise_what_their_builds_link(project: Path) -> None:
    assert load_toolchain(project, "portable-glibc2.17").system_libraries == ()
    assert load_toolchain(project, "cuda13").system_libraries == ("libgcc_s.so.1",)
    assert load_toolchain(project, "cuda12").system_libraries == ("libgcc_s.so.1",)
    assert "libstdc++.so.6" in load_toolchain(project, "debian-trixie").system_libraries


def test_the_promise_is_no_part_of_the_build_trees_digest(project: Path, tmp_path: Path) -> None:
    """[promise] checks outputs: editing it must not discard a build tree or re-create a root."""
    import shutil

    before = load_toolchain(project, "cuda13")
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    path = tmp_path / "toolchains" / "cuda13.toml"
    path.write_text(
        path.read_text().replace('system_libraries = ["libgcc_s.so.1"]', 'system_libraries = ["libz.so.1"]')
    )
    after = load_toolchain(tmp_path, "cuda13")
    assert after.system_libraries == ("libz.so.1",)
    assert (after.digest, after.root_digest) == (before.digest, before.root_digest)


def test_the_summary_inspect_prints_names_the_newest_versions_and_what_the_system_gives() -> None:
    core = shared_object(("libm.so.6", "libc.so.6"), {"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.14")}, soname="libx.so.1")
    provider = shared_object(
        ("libx.so.1", "libcudart.so.13", "libgcc_s.so.1", "libc.so.6"),
        {"libgcc_s.so.1": ("GCC_3.0", "GCC_4.2.0"), "libc.so.6": ("GLIBC_2.3",)},
    )
    summary = elf.needs_summary([("capi/libx.so.1", core), ("capi/provider.so", provider), ("README", b"text")])
    assert summary == {
        "elf_files": 2,
        "newest": {"GCC": "4.2.0", "GLIBC": "2.14"},
        "system": ["libc.so.6", "libcudart.so.13", "libgcc_s.so.1", "libm.so.6"],
        "beyond_glibc": ["libcudart.so.13", "libgcc_s.so.1"],
    }
