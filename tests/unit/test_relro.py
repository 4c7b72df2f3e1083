"""RELRO on the common page with GNU ld 2.39+: the default script with one expression changed,
linked only where GNU ld links the shared library."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ortdist import relro
from ortdist.errors import BuildError

# What `aarch64-linux-gnu-ld --verbose -shared -z relro` (binutils 2.44) prints, abridged.
VERBOSE = """GNU ld (GNU Binutils for Debian) 2.44
  Supported emulations:
   aarch64linux
using internal linker script:
==================================================
OUTPUT_FORMAT("elf64-littleaarch64", "elf64-bigaarch64", "elf64-littleaarch64")
SECTIONS
{
  . = SEGMENT_START("text-segment", 0) + SIZEOF_HEADERS;
  .text           : { *(.text .text.*) }
  . = DATA_SEGMENT_ALIGN (CONSTANT (MAXPAGESIZE), CONSTANT (COMMONPAGESIZE));
  .data.rel.ro : { *(.data.rel.ro .data.rel.ro.*) }
  . = DATA_SEGMENT_RELRO_END (0, .);
  .data           : { *(.data .data.*) }
  . = DATA_SEGMENT_END (.);
}


==================================================
"""


def test_the_script_is_the_linkers_own_with_relro_ended_on_the_common_page() -> None:
    script = relro.common_page_script(VERBOSE, "aarch64-linux-gnu-ld")
    assert script.startswith('OUTPUT_FORMAT("elf64-littleaarch64"') and script.endswith("}\n")
    assert "GNU ld" not in script and "=====" not in script  # only the script, not the banner
    lines = script.splitlines()
    at = lines.index("  .text           : { *(.text .text.*) }") + 1
    # The address keeps the file offset's remainder modulo 64 KiB (the segment maps on every page
    # size); DATA_SEGMENT_ALIGN's first operand, which RELRO's end is aligned to, is the common page.
    assert lines[at : at + 2] == [
        "  . = ALIGN (CONSTANT (MAXPAGESIZE)) + (. & (CONSTANT (MAXPAGESIZE) - 1));",
        "  . = DATA_SEGMENT_ALIGN (CONSTANT (COMMONPAGESIZE), CONSTANT (COMMONPAGESIZE));",
    ]
    assert relro.DEFAULT_ALIGN not in script
    assert script.replace(relro.COMMON_PAGE_ALIGN, relro.DEFAULT_ALIGN) == VERBOSE.split("=" * 50)[1].strip("\n") + "\n"


@pytest.mark.parametrize(
    "verbose",
    [
        "GNU gold (version 2.44) 1.16\n",  # no default script printed
        VERBOSE.replace("DATA_SEGMENT_ALIGN (CONSTANT (MAXPAGESIZE), CONSTANT (COMMONPAGESIZE))", ". + 0x1000"),
        VERBOSE.replace(
            "  . = DATA_SEGMENT_RELRO_END",
            "  . = DATA_SEGMENT_ALIGN (CONSTANT (MAXPAGESIZE), "
            "CONSTANT (COMMONPAGESIZE));\n  . = DATA_SEGMENT_RELRO_END",
        ),
    ],
)
def test_a_script_it_cannot_rewrite_is_refused_with_the_fix(verbose: str) -> None:
    with pytest.raises(BuildError, match="printed no default linker script") as info:
        relro.common_page_script(verbose, "ld")
    assert "common_page_size" in (info.value.where or "") and "common_page_size = 0" in (info.value.fix or "")


def test_only_a_gnu_ld_link_of_the_shared_library_names_the_script(project: Path) -> None:
    from ortdist.defines import LINKER_FLAGS, SHARED_LINKER_FLAGS
    from ortdist.plan import make_plan
    from ortdist.recipe import load_recipe
    from ortdist.toolchains import load_toolchain

    recipe = load_recipe(project / "recipes" / "slim-c-linux-aarch64.toml")
    gnu = make_plan(recipe, load_toolchain(project, "debian-trixie"), ())
    assert gnu.cmake_defines[SHARED_LINKER_FLAGS].endswith(" -Wl,-T,/ortdist/build/ortdist-relro.ld")
    assert not any("-Wl,-T" in gnu.cmake_defines[key] for key in LINKER_FLAGS[1:])  # executables keep theirs
    # lld (the clang toolchain) never pads the file: -z common-page-size alone, no script.
    clang = dataclasses.replace(
        recipe,
        toolchain="portable-glibc2.17-aarch64",
        features=dataclasses.replace(recipe.features, packed_relocations=False),
    )
    lld = make_plan(clang, load_toolchain(project, "portable-glibc2.17-aarch64"), ())
    assert "-fuse-ld=lld" in lld.cmake_defines[SHARED_LINKER_FLAGS]
    assert "-Wl,-z,common-page-size=4096" in lld.cmake_defines[SHARED_LINKER_FLAGS]
    assert not any("-Wl,-T" in lld.cmake_defines[key] for key in LINKER_FLAGS)
    # Without common_page_size nothing changes the linker's layout.
    default = dataclasses.replace(recipe, features=dataclasses.replace(recipe.features, common_page_size=0))
    assert (
        "-Wl,-T"
        not in make_plan(default, load_toolchain(project, "debian-trixie"), ()).cmake_defines[SHARED_LINKER_FLAGS]
    )
