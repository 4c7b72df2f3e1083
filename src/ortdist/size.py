"""What takes the space: stripped artifact sizes and a breakdown of the shared library.

The breakdown attributes every defined symbol of the (unstripped) library to the static archive
of the link graph that defines it, i.e. to an ORT component (ort:framework, ort:providers,
ort:mlas, ...) or a dependency (abseil, protobuf, ...), and lists the largest kernels (symbols of
the CPU kernels' component, grouped by class). Pure functions over ``nm`` output; the size step
runs the tools.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .checks import fatbin

KERNEL_COMPONENTS = ("ort:providers",)
_SYMBOL_LINE = re.compile(r"^(?P<addr>[0-9a-f]+)\s+(?P<size>[0-9a-f]+)\s+(?P<kind>[A-Za-z])\s+(?P<name>.+)$")


@dataclass(frozen=True)
class Symbol:
    name: str
    size: int
    kind: str


def parse_nm_sizes(text: str) -> list[Symbol]:
    """``nm -S --defined-only`` lines with a size (address size type name)."""
    out = []
    for line in text.splitlines():
        match = _SYMBOL_LINE.match(line.strip())
        if match:
            out.append(Symbol(match.group("name"), int(match.group("size"), 16), match.group("kind")))
    return out


def parse_archive_definitions(text: str) -> set[str]:
    """Symbol names an archive defines, from ``nm --defined-only`` (no sizes needed)."""
    names = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and len(parts[-2]) == 1:
            names.add(parts[-1])
    return names


# readelf -SW: "[Nr] Name Type Address Off Size ..."; the name may hold spaces in principle, never here.
_SECTION_LINE = re.compile(
    r"^\s*\[\s*(?P<nr>\d+)\]\s+(?P<name>\S+)\s+(?P<type>\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+(?P<size>[0-9a-f]+)\s"
)
HEADERS_AND_PADDING = "(ELF headers, alignment padding)"


def parse_sections(text: str, file_bytes: int) -> list[dict[str, Any]]:
    """The bytes each section takes in the file (``readelf -SW``; .bss takes none), largest
    first, and what no section holds (headers, the padding that aligns segments to pages)."""
    sizes: dict[str, int] = defaultdict(int)
    for line in text.splitlines():
        match = _SECTION_LINE.match(line)
        if match and match.group("nr") != "0" and match.group("type") != "NOBITS":  # [0] is the NULL entry
            sizes[match.group("name")] += int(match.group("size"), 16)
    rows = [{"section": n, "bytes": b} for n, b in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))]
    return [*rows, {"section": HEADERS_AND_PADDING, "bytes": max(file_bytes - sum(sizes.values()), 0)}]


def base_name(symbol: str) -> str:
    """GCC's clones and LTO-local copies keep their origin before a dot: foo.lto_priv.0, bar.constprop.0."""
    return symbol.split(".", 1)[0] if not symbol.startswith(".") else symbol


def attribute(symbols: Iterable[Symbol], definers: Iterable[tuple[str, set[str]]]) -> dict[str, str]:
    """Symbol name -> component; the first archive in link order that defines it wins (as for the linker)."""
    owner: dict[str, str] = {}
    for component, names in definers:
        for name in names:
            owner.setdefault(base_name(name), component)
    return {s.name: owner.get(base_name(s.name), "unattributed") for s in symbols}


@functools.cache
def _brackets_and(char: str) -> re.Pattern[str]:
    return re.compile(f"[<>{re.escape(char)}]")


def _depth0(text: str, char: str) -> list[int]:
    """Positions of ``char`` outside template brackets (the regex visits only the brackets and
    ``char``: a demangled kernel name is hundreds of characters, and there are tens of thousands)."""
    depth, out = 0, []
    for match in _brackets_and(char).finditer(text):
        c = match.group()
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(match.start())
    return out


def kernel_key(demangled: str) -> str:
    """onnxruntime::Conv<float>::Compute(...) const -> onnxruntime::Conv<float> (the kernel class);
    a free function keeps its own name, without its return type."""
    name = demangled.replace("(anonymous namespace)", "{anonymous}")
    parens = _depth0(name, "(")
    head = name[: parens[0]] if parens else name
    spaces = _depth0(head, " ")
    if spaces:  # "Status onnxruntime::MaxPoolV8<float>": drop the return type
        head = head[spaces[-1] + 1 :]
    colons = [i for i in _depth0(head, ":") if head[i : i + 2] == "::"]
    if not colons:
        return head
    owner = head[: colons[-1]]
    # ORT's classes are CamelCase; an all-lowercase owner is a namespace: keep the function.
    last = owner[colons[-2] + 2 :] if len(colons) > 1 else owner
    return owner if any(c.isupper() for c in last.split("<", 1)[0]) else head


def breakdown(
    symbols: list[Symbol],
    owners: Mapping[str, str],
    demangled: Mapping[str, str],
    stripped_bytes: int,
    top: int = 15,
) -> dict[str, Any]:
    by_component: dict[str, int] = defaultdict(int)
    kernels: dict[str, int] = defaultdict(int)
    for sym in symbols:
        component = owners.get(sym.name, "unattributed")
        by_component[component] += sym.size
        if component in KERNEL_COMPONENTS:
            kernels[kernel_key(demangled.get(sym.name, sym.name))] += sym.size
    in_symbols = sum(by_component.values())
    rows = sorted(by_component.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "stripped_bytes": stripped_bytes,
        "symbol_bytes": in_symbols,
        # .eh_frame, .rodata without symbols, dynamic symbol/relocation tables, padding
        "other_bytes": max(stripped_bytes - in_symbols, 0),
        "by_component": [{"component": c, "bytes": b} for c, b in rows],
        "largest_kernels": [
            {"kernel": k, "bytes": b} for k, b in sorted(kernels.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        ],
    }


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def section_rows(lib: Mapping[str, Any], base_lib: Mapping[str, Any] | None) -> list[str]:
    """Markdown rows: each section's bytes, the baseline's and what this build saves on it; the
    saved column adds up to the whole difference, so every saved byte has a place."""
    ours = {r["section"]: r["bytes"] for r in lib.get("sections", [])}
    theirs = {r["section"]: r["bytes"] for r in (base_lib or {}).get("sections", [])}
    names = list(ours) + [n for n in theirs if n not in ours]
    # Largest saving first; with nothing to compare with, largest section first.
    names.sort(
        key=lambda n: (n == HEADERS_AND_PADDING, -(theirs.get(n, 0) - ours.get(n, 0)) if theirs else -ours[n], n)
    )
    rows = []
    for name in names:
        mine, base = ours.get(name, 0), (theirs.get(name, 0) if theirs else None)
        saved = f"{base - mine:,}" if base is not None else "-"
        rows.append(f"| {name} | {mine:,} | {f'{base:,}' if base is not None else '-'} | {saved} |")
    if theirs:
        total_saved = sum(theirs.values()) - sum(ours.values())
        rows.append(f"| **total** | {sum(ours.values()):,} | {sum(theirs.values()):,} | {total_saved:,} |")
    return rows


def device_code(libraries: Iterable[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """Each CUDA library's device code (its .nv_fatbin section): the section's bytes and the stored
    (compressed) bytes of each architecture's SASS and PTX, what every GPU generation costs."""
    rows = []
    for name, data in libraries:
        entries = fatbin.library_entries(data)
        if entries:
            rows.append(
                {
                    "library": name,
                    "fatbin_bytes": len(fatbin.section(data)),
                    "architectures": fatbin.architectures(entries),
                    "bytes_per_arch": fatbin.bytes_per_arch(entries),
                }
            )
    return rows


def device_code_rows(libraries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Markdown: per CUDA library, one line per architecture (SASS sm_XX, PTX compute_XX)."""
    lines = []
    for lib in libraries:
        lines += ["", f"## {lib['library']}: CUDA device code, {lib['fatbin_bytes']:,} bytes (.nv_fatbin)"]
        lines += ["", "| architecture | code | stored bytes |", "|---|---|---:|"]
        for arch, stored in lib["bytes_per_arch"].items():
            lines.append(f"| {arch} | {'PTX' if arch.startswith('compute_') else 'SASS'} | {stored:,} |")
    return lines


def render_table(recipe: str, report: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> str:
    """Markdown: artifact sizes, then the library breakdown, with the baseline build alongside."""
    lines = [f"# Size report: {recipe}", "", "| artifact | bytes | stripped bytes |", "|---|---:|---:|"]
    for art in report["artifacts"]:
        stripped = f"{art['stripped_bytes']:,}" if art.get("stripped_bytes") is not None else "-"
        lines.append(f"| {art['name']} | {art['bytes']:,} | {stripped} |")
    lib = report.get("shared_library")
    if lib:
        base_lib = (baseline or {}).get("shared_library")
        lines += ["", f"## {lib['name']}: {lib['stripped_bytes']:,} bytes stripped"]
        base_name_ = (baseline or {}).get("recipe", "baseline")
        if base_lib:
            ratio = lib["stripped_bytes"] / base_lib["stripped_bytes"]
            lines.append(
                f"Compared with {base_name_}: {base_lib['stripped_bytes']:,} bytes stripped; "
                f"this one is {ratio:.1%} of it."
            )
        if lib.get("sections"):
            lines += ["", f"| section | bytes | {base_name_} | saved |", "|---|---:|---:|---:|"]
            lines += section_rows(lib, base_lib)
        base_rows = {r["component"]: r["bytes"] for r in (base_lib or {}).get("by_component", [])}
        lines += ["", f"| component | size | {base_name_} |", "|---|---:|---:|"]
        for row in lib["by_component"]:
            base = _kib(base_rows[row["component"]]) if row["component"] in base_rows else "-"
            lines.append(f"| {row['component']} | {_kib(row['bytes'])} | {base} |")
        base_other = _kib(base_lib["other_bytes"]) if base_lib else "-"
        lines.append(
            f"| (no symbol: unwind tables, constants, dynamic tables) | {_kib(lib['other_bytes'])} | {base_other} |"
        )
        if lib["largest_kernels"]:
            lines += ["", "| largest CPU kernels | size |", "|---|---:|"]
            lines += [f"| `{k['kernel'][:100]}` | {_kib(k['bytes'])} |" for k in lib["largest_kernels"]]
    lines += device_code_rows(report.get("cuda_device_code", []))
    return "\n".join(lines) + "\n"
