"""One libstdc++ state per process (checks/cxx_state.py): an output's own copy of libstdc++'s data,
read from readelf's symbol tables, is found; its own copies of functions are not a problem."""

from __future__ import annotations

from ortdist.checks import cxx_state

STUB = """
Symbol table '.dynsym' contains 4 entries:
   Num:    Value          Size Type    Bind   Vis      Ndx Name
     1: 0000000000004020    32 OBJECT  GLOBAL DEFAULT   20 _ZNSs4_Rep20_S_empty_rep_storageE@@GLIBCXX_3.4
     2: 0000000000001000     1 FUNC    GLOBAL DEFAULT   12 _ZNSs7reserveEm@@GLIBCXX_3.4
     3: 0000000000004060     8 OBJECT  GLOBAL DEFAULT   20 _ZNSt7codecvtIcc11__mbstate_tE2idE@@GLIBCXX_3.4
     4: 0000000000000000     8 TLS     GLOBAL DEFAULT   21 __cxa_tls_state@@CXXABI_1.3
"""
# libonnxruntime.so of the first OpenVINO build: the string state is its own (LOCAL, in .bss).
OURS = """
Symbol table '.symtab' contains 5 entries:
   Num:    Value          Size Type    Bind   Vis      Ndx Name
 24655: 000000000165fb60    32 OBJECT  LOCAL  DEFAULT   30 _ZNSs4_Rep20_S_empty_rep_storageE
 24656: 0000000000a1c000    42 FUNC    LOCAL  DEFAULT   12 _ZNSs7reserveEm
   285: 0000000000000000     0 OBJECT  GLOBAL DEFAULT  UND _ZNSt7codecvtIcc11__mbstate_tE2idE@GLIBCXX_3.4 (4)
"""


def test_the_stubs_data_objects_are_the_state_to_share() -> None:
    assert cxx_state.shared_objects(STUB) == {
        "_ZNSs4_Rep20_S_empty_rep_storageE",
        "_ZNSt7codecvtIcc11__mbstate_tE2idE",
        "__cxa_tls_state",
    }


SECTIONS = """
  [15] .rodata           PROGBITS        00000000010734c0 10734c0 154b89 00   A  0   0 64
  [29] .data             PROGBITS        0000000001656900 1456900 000a10 00  WA  0   0 32
  [30] .bss              NOBITS          0000000001657340 1457310 008850 00  WA  0   0 64
"""


def test_a_library_with_its_own_copy_of_the_empty_string_is_found() -> None:
    shared, writable = cxx_state.shared_objects(STUB), cxx_state.writable_sections(SECTIONS)
    assert writable == {"29", "30"}
    assert cxx_state.own_copies(OURS, shared, writable) == ["_ZNSs4_Rep20_S_empty_rep_storageE"]  # not the function
    constant = OURS.replace("LOCAL  DEFAULT   30", "LOCAL  DEFAULT   15")  # read-only, like npos: harmless
    assert cxx_state.own_copies(constant, shared, writable) == []
    shared_only = OURS.replace("000000000165fb60    32 OBJECT  LOCAL  DEFAULT   30", "0 0 OBJECT GLOBAL DEFAULT UND")
    assert cxx_state.own_copies(shared_only, shared, writable) == []
