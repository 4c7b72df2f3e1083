"""The fatbin reader: which SASS and PTX architectures a CUDA library carries, from a synthetic
.nv_fatbin laid out as nvcc's containers are (header, then entry headers each followed by payload)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest

from ortdist.checks import fatbin

ENTRY_HEADER = 64


def container(items: Sequence[tuple[int, int, bytes]], flags: int = 0x8011) -> bytes:
    """One container of (kind: 1 PTX / 2 SASS, arch, payload) entries, each with ``flags``."""
    body = b""
    for kind, arch, payload in items:
        fields = (kind, 0x101, ENTRY_HEADER, len(payload), len(payload), 0, 8, 1, arch, 0, 0, flags)
        head = struct.pack("<HHIQIIHHIIIQ", *fields)
        body += head + bytes(ENTRY_HEADER - len(head)) + payload
    return struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, len(body)) + body


def elf_with(sections: dict[str, bytes]) -> bytes:
    """A 64-bit little-endian ELF holding ``sections`` (and its section-name table)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [*sections, ".shstrtab"])
    blobs = [*sections.values(), names]
    offset, table, body = 64, [bytes(64)], b""
    name_at = 1
    for name, blob in zip([*sections, ".shstrtab"], blobs, strict=True):
        table.append(struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offset + len(body), len(blob), 0, 0, 1, 0))
        name_at += len(name) + 1
        body += blob
    shoff = offset + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, len(table), len(table) - 1)
    return header + body + b"".join(table)


PROVIDER = (
    container([(2, 80, b"s" * 40), (2, 90, b"s" * 64), (1, 90, b"p" * 24)])
    + bytes(8)
    + container([(2, 86, b"s" * 16), (2, 90, b"s" * 8)])
    + container([(2, 120, b"s" * 32)], flags=0x8011 | fatbin.ARCH_SPECIFIC)
)


def test_every_containers_entries_are_read_with_their_kind_arch_and_size() -> None:
    found = fatbin.library_entries(elf_with({".text": b"\x90" * 32, ".nv_fatbin": PROVIDER}))
    assert [(e.name, e.size) for e in found] == [
        ("sm_80", 40),
        ("sm_90", 64),
        ("compute_90", 24),
        ("sm_86", 16),
        ("sm_90", 8),
        ("sm_120a", 32),
    ]
    assert fatbin.architectures(found) == {"sass": ["sm_80", "sm_86", "sm_90", "sm_120a"], "ptx": ["compute_90"]}
    assert fatbin.bytes_per_arch(found) == {"sm_80": 40, "sm_86": 16, "sm_90": 72, "sm_120a": 32, "compute_90": 24}


def test_a_library_without_device_code_has_no_entries() -> None:
    assert fatbin.library_entries(elf_with({".text": b"\x90"})) == []


def test_a_missing_promised_architecture_is_named() -> None:
    found = fatbin.entries(PROVIDER)
    assert fatbin.missing(found, ["sm_80", "sm_86", "sm_89", "sm_90", "compute_90"]) == ["sm_89"]
    assert fatbin.missing(found, ["sm_90", "compute_80", "compute_90"]) == ["compute_80"]
    assert fatbin.missing(found, ["sm_120", "sm_120a"]) == ["sm_120"]  # arch-specific code is not sm_120's
    assert fatbin.missing(found, ["sm_80", "sm_86", "sm_90", "compute_90"]) == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:-5], "runs past the section"),
        (lambda b: b"\x11\x22\x33\x44" + b[4:], "no container magic"),
        (lambda b: b[:16] + struct.pack("<H", 7) + b[18:], "a malformed entry"),
    ],
    ids=["truncated", "foreign", "bad-kind"],
)
def test_a_damaged_section_is_refused_not_read_as_empty(damage: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fatbin.entries(damage(PROVIDER))  # type: ignore[operator]


def test_inspect_names_each_library_with_device_code_and_its_architectures() -> None:
    from .test_elf import shared_object

    members = [
        ("onnxruntime/capi/libonnxruntime_providers_cuda.so", elf_with({".nv_fatbin": PROVIDER})),
        ("onnxruntime/capi/libonnxruntime.so.1.21.0", shared_object()),  # no device code
        ("onnxruntime/__init__.py", b"import os\n"),
    ]
    assert fatbin.device_code(members) == {
        "onnxruntime/capi/libonnxruntime_providers_cuda.so": {
            "sass": ["sm_80", "sm_86", "sm_90", "sm_120a"],
            "ptx": ["compute_90"],
        }
    }


def test_a_recipes_cmake_architectures_promise_sass_and_ptx_as_cmake_compiles_them() -> None:
    assert fatbin.promised(["75-real", "90a-real", "90"]) == ["sm_75", "sm_90a", "sm_90", "compute_90"]
    assert fatbin.promised(["100-virtual"]) == ["compute_100"]
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        fatbin.promised(["sm_90"])


def test_the_size_report_gives_each_cuda_library_its_bytes_per_architecture() -> None:
    from ortdist import size

    from .test_elf import shared_object

    provider = elf_with({".text": b"\x90" * 32, ".nv_fatbin": PROVIDER})
    rows = size.device_code([("libonnxruntime_providers_cuda.so", provider), ("libonnxruntime.so", shared_object())])
    assert rows == [
        {
            "library": "libonnxruntime_providers_cuda.so",
            "fatbin_bytes": len(PROVIDER),
            "architectures": {"sass": ["sm_80", "sm_86", "sm_90", "sm_120a"], "ptx": ["compute_90"]},
            "bytes_per_arch": {"sm_80": 40, "sm_86": 16, "sm_90": 72, "sm_120a": 32, "compute_90": 24},
        }
    ]
    table = size.render_table("cuda13-linux", {"artifacts": [], "cuda_device_code": rows}, None)
    assert f"## libonnxruntime_providers_cuda.so: CUDA device code, {len(PROVIDER):,} bytes" in table
    assert "| sm_90 | SASS | 72 |" in table and "| compute_90 | PTX | 24 |" in table
