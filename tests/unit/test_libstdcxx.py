"""[libstdcxx]: libstdc++ shared up to an old system's versions, static beyond (toolchains/debian/
libstdcxx.py): the stub's symbols read from readelf, its sources, the root step and the file's checks."""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ortdist import run
from ortdist.errors import RecipeError
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian.libstdcxx import (
    COMPAT_SOURCE,
    SELF_CHECK,
    Symbol,
    build_script,
    install_libstdcxx,
    parse_dynsyms,
    shared_part,
    stub_sources,
    version_key,
)

# Lines of `readelf --dyn-syms -W` on GCC 11.2's libstdc++.so.6.0.29 (sizes as it prints them).
READELF = """
Symbol table '.dynsym' contains 6 entries:
   Num:    Value          Size Type    Bind   Vis      Ndx Name
     0: 0000000000000000     0 NOTYPE  LOCAL  DEFAULT  UND
     1: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND memcpy@GLIBC_2.14 (2)
     2: 0000000000000000     0 OBJECT  GLOBAL DEFAULT  ABS GLIBCXX_3.4.19
     3: 00000000001ad0a0    32 OBJECT  GLOBAL DEFAULT   23 _ZNSs4_Rep20_S_empty_rep_storageE@@GLIBCXX_3.4
     4: 00000000000a1c30    42 FUNC    WEAK   DEFAULT   12 _ZNSs6appendEPKcm@@GLIBCXX_3.4
     5: 00000000000f0e10    55 FUNC    GLOBAL DEFAULT   12 _ZNKSt10filesystem4path5_List3endEv@@GLIBCXX_3.4.26
     6: 0000000000098b40   123 FUNC    GLOBAL DEFAULT   12 __cxa_thread_atexit@@CXXABI_1.3.7
     7: 0000000000098b80 0x1200 OBJECT  GLOBAL DEFAULT   23 _ZSt4cout@GLIBCXX_3.4
     8: 0000000000000008     8 TLS     GLOBAL DEFAULT   19 __cxa_tls_thing@@CXXABI_1.3.13
"""
OPENVINO = "openvino"


def test_readelf_lines_give_the_defined_versioned_symbols() -> None:
    symbols = parse_dynsyms(READELF)
    assert [s.name for s in symbols] == [
        "_ZNSs4_Rep20_S_empty_rep_storageE",
        "_ZNSs6appendEPKcm",
        "_ZNKSt10filesystem4path5_List3endEv",
        "__cxa_thread_atexit",
        "_ZSt4cout",
        "__cxa_tls_thing",
    ]
    cout = symbols[4]
    assert (cout.kind, cout.size, cout.default, cout.version) == ("OBJECT", 0x1200, False, "GLIBCXX_3.4")
    assert symbols[0].default and symbols[0].size == 32


def test_only_versions_up_to_the_named_ones_are_shared() -> None:
    kept = shared_part(parse_dynsyms(READELF), {"GLIBCXX": "3.4.19", "CXXABI": "1.3.7"})
    assert [s.name for s in kept] == [
        "_ZNSs4_Rep20_S_empty_rep_storageE",
        "_ZNSs6appendEPKcm",
        "__cxa_thread_atexit",
        "_ZSt4cout",
    ]
    # A family not named is linked statically: nothing of it in the stub.
    assert [s.name for s in shared_part(parse_dynsyms(READELF), {"GLIBCXX": "3.4.30"})][-1] == "_ZSt4cout"
    assert version_key("GLIBCXX_3.4.9") < version_key("GLIBCXX_3.4.19")  # numbers, not text


def test_the_stub_defines_each_symbol_with_its_version_kind_and_size() -> None:
    symbols = shared_part(parse_dynsyms(READELF), {"GLIBCXX": "3.4.19", "CXXABI": "1.3.13"})
    source, script = stub_sources(symbols)
    assert "char ortdist_stub_0[32] = {0};" in source
    assert '__asm__(".symver ortdist_stub_0,_ZNSs4_Rep20_S_empty_rep_storageE@@GLIBCXX_3.4");' in source
    assert "void ortdist_stub_1(void) {}" in source
    assert '".symver ortdist_stub_3,_ZSt4cout@GLIBCXX_3.4"' in source  # not the default version
    assert "__thread char ortdist_stub_4[8];" in source
    # Each family's nodes in order, each inheriting the one before.
    assert script.splitlines() == [
        "CXXABI_1.3.7 { };",
        "CXXABI_1.3.13 { } CXXABI_1.3.7;",
        "GLIBCXX_3.4 { };",
    ]
    with pytest.raises(ValueError, match="no symbols"):
        stub_sources([])


def test_the_root_step_makes_the_stub_then_runs_the_self_check(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_toolchain(project, OPENVINO)
    root = tmp_path / "root"
    (root / "tmp").mkdir(parents=True)
    seen: dict[str, Any] = {}

    def capture(argv: Sequence[str], **kwargs: Any) -> Any:
        out = (
            "/opt/ortdist-compiler/x86_64-linux-gnu/lib64/libstdc++.so.6\n"
            if "-print-file-name" in argv[-1]
            else READELF
        )
        return type("Done", (), {"stdout": out})()

    def call(argv: Sequence[str], **kwargs: Any) -> None:
        work = root / "tmp" / "ortdist-libstdcxx"
        seen.update(argv=list(argv), files=sorted(p.name for p in work.iterdir()), map=(work / "stub.map").read_text())

    monkeypatch.setattr(run, "capture", capture)
    monkeypatch.setattr(run, "call", call)
    log = io.StringIO()
    install_libstdcxx(spec, root, log, lambda r, argv: ["chroot", str(r), *argv])
    assert seen["argv"][:4] == ["chroot", str(root), "bash", "-euo"] and seen["argv"][-1] == build_script(spec)
    assert seen["files"] == sorted(["stub.c", "stub.map", "compat.cc", *SELF_CHECK])
    assert "GLIBCXX_3.4.26" not in seen["map"] and "CXXABI_1.3.7 { };" in seen["map"]
    assert not (root / "tmp" / "ortdist-libstdcxx").exists()
    assert "a stub libstdc++.so.6 of 4 symbols (toolchains/openvino.toml [libstdcxx])" in log.getvalue()


def test_the_self_check_links_the_way_the_toolchain_links_and_fails_on_a_second_copy(project: Path) -> None:
    """The check library is linked with the toolchain's own flags, and the script fails if the old
    ABI's empty string is defined in it (its own libstdc++ copy) or if loading it aborts."""
    script = build_script(load_toolchain(project, OPENVINO))
    assert "-D_GLIBCXX_USE_CXX11_ABI=0" in script
    assert "-static-libstdc++ -Wl,-z,noexecstack /opt/ortdist-compiler/libstdcxx-shared/libstdc++.so.6" in script
    assert "UND _ZNSs4_Rep20_S_empty_rep_storageE" in script and "./main ./libours.so" in script
    assert "vendor_empty" in SELF_CHECK["vendor.cc"] and "RTLD_LOCAL" in SELF_CHECK["main.c"]
    # The compat object: old-ABI strings whatever the toolchain's flags, on the check library's link
    # line, and every newer string member of the archive's string-state members must be its own.
    assert "-U_GLIBCXX_USE_CXX11_ABI -D_GLIBCXX_USE_CXX11_ABI=0" in script
    assert "libstdc++.so.6 /opt/ortdist-compiler/libstdcxx-shared/libstdcxx-compat.o" in script
    assert "comm -23 member.syms stub.syms | comm -23 - compat.syms" in script
    assert "w.reserve()" in SELF_CHECK["ours.cc"] and "std::allocator<char>()" in SELF_CHECK["ours.cc"]


def test_the_compat_object_defines_each_newer_string_member_for_both_string_types() -> None:
    """GCC 11's newer members of the old ABI's string and wstring beside their state (read from its
    libstdc++.a: reserve() and three allocator-extended constructors, complete and base object), all
    hidden so no output exports them."""
    names = re.findall(r"^DEFINE\((\w+),", COMPAT_SOURCE, re.M)
    assert len(names) == len(set(names)) == 14
    for prefix in ("_ZNSs", "_ZNSbIwSt11char_traitsIwESaIwEE"):
        mine = [n for n in names if n.startswith(prefix)]
        assert len(mine) == 7 and sum("7reserveEv" in n for n in mine) == 1
        assert sum("C1E" in n for n in mine) == sum("C2E" in n for n in mine) == 3
    assert 'visibility("hidden")' in COMPAT_SOURCE


def test_a_new_stub_layout_makes_the_root_again(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Roots made before the compat object existed lack it: the layout is in the root's digest."""
    from ortdist.toolchains import load

    before, parent = load_toolchain(project, OPENVINO), load_toolchain(project, "portable-glibc2.17")
    monkeypatch.setattr(load, "LIBSTDCXX_LAYOUT", "another")
    assert load_toolchain(project, OPENVINO).root_digest != before.root_digest
    assert load_toolchain(project, "portable-glibc2.17").root_digest == parent.root_digest  # no [libstdcxx]


def test_a_toolchain_without_the_table_makes_no_stub(project: Path, tmp_path: Path) -> None:
    def wrap(root: Path, argv: Sequence[str]) -> list[str]:
        raise AssertionError("nothing runs in the root")

    install_libstdcxx(load_toolchain(project, "portable-glibc2.17"), tmp_path, io.StringIO(), wrap)
    assert list(tmp_path.iterdir()) == []


def test_the_table_names_a_root_of_its_own(project: Path) -> None:
    parent, child = load_toolchain(project, "portable-glibc2.17"), load_toolchain(project, OPENVINO)
    assert child.libstdcxx is not None and parent.libstdcxx is None
    assert child.root_digest != parent.root_digest and child.compiler == parent.compiler


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ('extends = "portable-glibc2.17"', 'extends = "debian-trixie"', "libstdcxx", "and there is none"),
        ('GLIBCXX = "3.4.19"', 'GLIBC = "2.17"', "libstdcxx.newest.GLIBC", "is not a libstdc++ symbol version"),
        ('GLIBCXX = "3.4.19"', 'GLIBCXX = "latest"', "libstdcxx.newest.GLIBCXX", "is not a libstdc++ symbol"),
        (
            'CMAKE_MODULE_LINKER_FLAGS = "-static-libstdc++ -Wl,-z,noexecstack {compiler}/libstdcxx-shared/'
            'libstdc++.so.6 {compiler}/libstdcxx-shared/libstdcxx-compat.o"',
            'CMAKE_MODULE_LINKER_FLAGS = "-static-libstdc++"',
            "cmake.CMAKE_MODULE_LINKER_FLAGS",
            "does not link {compiler}/libstdcxx-shared/libstdc++.so.6",
        ),
        (
            'CMAKE_EXE_LINKER_FLAGS = "-static-libstdc++ -Wl,-z,noexecstack {compiler}/libstdcxx-shared/'
            'libstdc++.so.6 {compiler}/libstdcxx-shared/libstdcxx-compat.o"',
            'CMAKE_EXE_LINKER_FLAGS = "-static-libstdc++ -Wl,-z,noexecstack {compiler}/libstdcxx-shared/'
            'libstdc++.so.6"',
            "cmake.CMAKE_EXE_LINKER_FLAGS",
            "does not link {compiler}/libstdcxx-shared/libstdcxx-compat.o",
        ),
    ],
    ids=["no-compiler", "not-a-libstdcxx-family", "not-a-version", "a-link-without-the-stub", "without-compat"],
)
def test_a_bad_libstdcxx_table_is_refused(
    project: Path, tmp_path: Path, old: str, new: str, key: str, message: str
) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    path = tmp_path / "toolchains" / f"{OPENVINO}.toml"
    original = path.read_text()
    assert old in original
    path.write_text(original.replace(old, new))
    with pytest.raises(RecipeError) as err:
        load_toolchain(tmp_path, OPENVINO)
    assert message in err.value.message and err.value.where.endswith(f"key '{key}'")


def test_symbols_compare_by_version_family() -> None:
    assert Symbol("a", "GLIBCXX_3.4", "FUNC", 1, True) != Symbol("a", "GLIBCXX_3.4.1", "FUNC", 1, True)
    with pytest.raises(ValueError, match="not a symbol version"):
        version_key("3.4.19")
