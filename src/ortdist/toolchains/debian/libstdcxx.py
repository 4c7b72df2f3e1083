"""[libstdcxx]: libstdc++ linked shared for what an old system's libstdc++.so.6 has, static for the rest.

Outputs that pass C++ objects to libraries built against the system's libstdc++ (OpenVINO's, with
the pre-C++11 ABI) must share one libstdc++ with them: the old ABI's std::string keeps its empty
value in a static of libstdc++ (_S_empty_rep_storage), so an empty string made by one copy and freed
by another aborts ("free(): invalid pointer"; measured with GCC 11.2, a library linking libstdc++
statically and one linking it shared). Linking GCC 11's libstdc++.so.6 would need GLIBCXX_3.4.29, a
far newer system than the glibc promise. So, as Red Hat's devtoolset does with its
libstdc++_nonshared.a: a link-time stub libstdc++.so.6 that defines only the symbols of versions up
to the ones the toolchain names (manylinux2014's GCC 4.8: GLIBCXX_3.4.19, CXXABI_1.3.7), put on the
link line before GCC's static libstdc++.a. The linker takes every symbol the stub has from the
system's libstdc++.so.6 at run time, and only newer ones from the archive. The stub is generated in
the build root from the compiler's own libstdc++.so.6 (its dynamic symbol table), installed at
{compiler}/libstdcxx-shared/ (spec.LIBSTDCXX_STUB), and proven by a self-check that reproduces the
abort above without it.

One archive member would still bring the string's state: the one instantiating the old ABI's
string (GCC 11: cow-string-inst.o) also defines newer members (C++20's ``reserve()``, the
allocator-extended copy and move constructors: GLIBCXX_3.4.23-29), and a call to one links the whole
member, _S_empty_rep_storage included (seen: re2 and std::filesystem in ORT). So the compat object
(spec.LIBSTDCXX_COMPAT, COMPAT_SOURCE) defines those members, hidden, from older ones the stub has;
the root refuses a compiler whose string members it does not all cover.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ... import run
from ...errors import ToolchainError
from ...fsutil import remove_tree
from ...paths import IN_ROOT_COMPILER, in_root
from ..spec import LIBSTDCXX_COMPAT, LIBSTDCXX_STUB, ToolchainSpec

WORK = Path("/tmp/ortdist-libstdcxx")  # in the root, removed once the stub is installed
# A versioned name in `readelf --dyn-syms -W`: name@@VERSION (the default) or name@VERSION.
_VERSIONED = re.compile(r"^(?P<name>[^@\s]+)(?P<at>@@?)(?P<version>[A-Z_]+_[0-9][0-9.]*)$")
_NODE = re.compile(r"^(?P<family>[A-Z_]+?)_(?P<number>[0-9][0-9.]*)$")

Wrap = Callable[[Path, Sequence[str]], list[str]]


@dataclass(frozen=True)
class Symbol:
    """One versioned definition of the library's dynamic symbol table."""

    name: str
    version: str
    kind: str  # readelf's Type: FUNC, OBJECT, TLS, ...
    size: int
    default: bool  # name@@version (what a new link binds to) rather than name@version


def version_key(version: str) -> tuple[str, tuple[int, ...]]:
    """GLIBCXX_3.4.19 -> ("GLIBCXX", (3, 4, 19)): versions compare within their family."""
    m = _NODE.match(version)
    if not m:
        raise ValueError(f"not a symbol version: {version!r}")
    return m["family"], tuple(int(part) for part in m["number"].split("."))


def parse_dynsyms(readelf: str) -> list[Symbol]:
    """The defined, versioned symbols of ``readelf --dyn-syms -W`` output (undefined ones and the
    version nodes' own ABS symbols left out)."""
    found = []
    for line in readelf.splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit() or fields[6] in ("UND", "ABS"):
            continue
        m = _VERSIONED.match(fields[7])
        if not m:
            continue
        size = int(fields[2], 16) if fields[2].startswith("0x") else int(fields[2])
        found.append(Symbol(m["name"], m["version"], fields[3], size, m["at"] == "@@"))
    return found


def shared_part(symbols: Iterable[Symbol], newest: Mapping[str, str]) -> list[Symbol]:
    """The symbols whose version is no newer than ``newest`` names for its family (GLIBCXX ->
    "3.4.19"); families ``newest`` does not name are left out (linked statically)."""
    limits = {family: version_key(f"{family}_{number}")[1] for family, number in newest.items()}
    kept = []
    for symbol in symbols:
        family, number = version_key(symbol.version)
        if family in limits and number <= limits[family]:
            kept.append(symbol)
    return kept


def stub_sources(symbols: Sequence[Symbol]) -> tuple[str, str]:
    """(C source, version script) of a stub library defining ``symbols`` with their versions: each
    is an alias given its versioned name by ``.symver``, functions as empty functions, data as
    zeroed objects of the real size (a link only needs the names, versions, kinds and sizes)."""
    if not symbols:
        raise ValueError("no symbols for the stub")
    lines = []
    for index, symbol in enumerate(symbols):
        alias = f"ortdist_stub_{index}"
        if symbol.kind == "FUNC":
            lines.append(f"void {alias}(void) {{}}")
        elif symbol.kind == "TLS":
            lines.append(f"__thread char {alias}[{max(symbol.size, 1)}];")
        else:
            lines.append(f"char {alias}[{max(symbol.size, 1)}] = {{0}};")
        marker = "@@" if symbol.default else "@"
        lines.append(f'__asm__(".symver {alias},{symbol.name}{marker}{symbol.version}");')
    versions = sorted({s.version for s in symbols}, key=version_key)
    script: list[str] = []
    previous: dict[str, str] = {}
    for version in versions:
        family = version_key(version)[0]
        parent = previous.get(family)
        script.append(f"{version} {{ }}{' ' + parent if parent else ''};")
        previous[family] = version
    return "\n".join(lines) + "\n", "\n".join(script) + "\n"


def install_libstdcxx(spec: ToolchainSpec, root: Path, log: TextIO, wrap: Wrap) -> None:
    """Make the stub in ``root`` (a root being made) from its compiler's libstdc++.so.6, then run
    the self-check."""
    shared = spec.libstdcxx
    if shared is None:
        return
    cxx = in_root(spec.cmake["CMAKE_CXX_COMPILER"])
    what = f"toolchains/{spec.declared_in.get('libstdcxx', spec.name)}.toml [libstdcxx]"
    library = run.capture(
        wrap(root, [cxx, "-print-file-name=libstdc++.so.6"]), error=ToolchainError, what="finding libstdc++.so.6"
    ).stdout.strip()
    listing = run.capture(
        wrap(root, ["readelf", "--dyn-syms", "-W", library]), error=ToolchainError, what=f"reading {library}"
    ).stdout
    symbols = shared_part(parse_dynsyms(listing), shared.newest)
    if not symbols:
        raise ToolchainError(
            f"{library} has no symbols of the versions {what} names ({dict(shared.newest)})",
            fix=f"name version families libstdc++ has (GLIBCXX, CXXABI) in {what}",
        )
    work = root / WORK.relative_to("/")
    work.mkdir(parents=True, exist_ok=True)
    source, script = stub_sources(symbols)
    (work / "stub.c").write_text(source)
    (work / "stub.map").write_text(script)
    (work / "compat.cc").write_text(COMPAT_SOURCE)
    for name, text in SELF_CHECK.items():
        (work / name).write_text(text)
    print(
        f"ortdist: a stub libstdc++.so.6 of {len(symbols)} symbols ({what}) at {{compiler}}/{LIBSTDCXX_STUB}", file=log
    )
    run.call(
        wrap(root, ["bash", "-euo", "pipefail", "-c", build_script(spec)]),
        log=log,
        error=ToolchainError,
        what=f"making and checking the shared-libstdc++ stub ({what})",
    )
    remove_tree(work)


# GCC's newer members of the old ABI's strings (what its archive member with the strings' state
# defines beyond GLIBCXX_3.4.19), each made of older ones: reserve() asks reserve(0) (the old
# shrink request); with std::allocator the allocator-extended constructors are the plain ones.
COMPAT_SOURCE = """\
#include <new>
#include <string>
#include <utility>

namespace {
template <class S> void reserve(S* self) { self->reserve(0); }
template <class S> void copy(S* self, const S& s, const typename S::allocator_type&) { new (self) S(s); }
template <class S> void move(S* self, S&& s, const typename S::allocator_type&) { new (self) S(std::move(s)); }
template <class S> void tail(S* self, const S& s, typename S::size_type pos, const typename S::allocator_type& a) {
  new (self) S(s, pos, S::npos, a);
}
}  // namespace

#define DEFINE(name, helper, S, params, args) \\
  extern "C" __attribute__((visibility("hidden"))) void name params __asm__(#name); \\
  extern "C" void name params { helper<S> args; }

using C = std::string;
using W = std::wstring;
using CA = C::allocator_type;
using WA = W::allocator_type;
using N = std::size_t;
DEFINE(_ZNSs7reserveEv, reserve, C, (C* t), (t))
DEFINE(_ZNSsC1ERKSsRKSaIcE, copy, C, (C* t, const C& s, const CA& a), (t, s, a))
DEFINE(_ZNSsC2ERKSsRKSaIcE, copy, C, (C* t, const C& s, const CA& a), (t, s, a))
DEFINE(_ZNSsC1EOSsRKSaIcE, move, C, (C* t, C&& s, const CA& a), (t, std::move(s), a))
DEFINE(_ZNSsC2EOSsRKSaIcE, move, C, (C* t, C&& s, const CA& a), (t, std::move(s), a))
DEFINE(_ZNSsC1ERKSsmRKSaIcE, tail, C, (C* t, const C& s, N p, const CA& a), (t, s, p, a))
DEFINE(_ZNSsC2ERKSsmRKSaIcE, tail, C, (C* t, const C& s, N p, const CA& a), (t, s, p, a))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEE7reserveEv, reserve, W, (W* t), (t))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEEC1ERKS2_RKS1_, copy, W, (W* t, const W& s, const WA& a), (t, s, a))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEEC2ERKS2_RKS1_, copy, W, (W* t, const W& s, const WA& a), (t, s, a))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEEC1EOS2_RKS1_, move, W, (W* t, W&& s, const WA& a), (t, std::move(s), a))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEEC2EOS2_RKS1_, move, W, (W* t, W&& s, const WA& a), (t, std::move(s), a))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEEC1ERKS2_mRKS1_, tail, W, (W* t, const W& s, N p, const WA& a), (t, s, p, a))
DEFINE(_ZNSbIwSt11char_traitsIwESaIwEEC2ERKS2_mRKS1_, tail, W, (W* t, const W& s, N p, const WA& a), (t, s, p, a))
"""

# The self-check: "vendor" links the real libstdc++.so.6 (as OpenVINO's libraries do) and hands out
# empty strings; "ours" is linked the way the toolchain links its outputs; "main" dlopens ours.
SELF_CHECK = {
    "vendor.cc": "#include <string>\nstd::string vendor_empty() { return std::string(); }\n",
    # Besides the vendor's empty strings, newer string members (the compat object's): none may
    # bring the archive's string state in.
    "ours.cc": (
        "#include <string>\nstd::string vendor_empty();\n"
        'extern "C" int ours() { int n = 0; for (int i = 0; i < 3; ++i) { std::string s = vendor_empty(); '
        "s += 'x'; n += (int)s.size(); }\n"
        "  std::string t(std::string(\"ab\"), 1, std::allocator<char>()); std::wstring w(2, L'x'); w.reserve();\n"
        "  return n + (int)t.size() + (int)w.size() - 3; }\n"
    ),
    "main.c": (
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(int argc, char **argv) {\n"
        "  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL); if (!h) { puts(dlerror()); return 2; }\n"
        '  int (*f)(void) = (int (*)(void))dlsym(h, "ours"); return f() == 3 ? 0 : 3; }\n'
    ),
}


def build_script(spec: ToolchainSpec) -> str:
    """Compile the stub into {compiler}, then the self-check: one script run in the root."""
    q = shlex.quote
    cmake = spec.cmake
    cc, cxx = in_root(cmake["CMAKE_C_COMPILER"]), in_root(cmake["CMAKE_CXX_COMPILER"])
    cxxflags = in_root(cmake.get("CMAKE_CXX_FLAGS", ""))
    ldflags = in_root(cmake.get("CMAKE_SHARED_LINKER_FLAGS", ""))
    stub, compat = IN_ROOT_COMPILER / LIBSTDCXX_STUB, IN_ROOT_COMPILER / LIBSTDCXX_COMPAT
    return "\n".join(
        [
            f"cd {WORK}",
            f"mkdir -p {q(str(stub.parent))}",
            f"{q(cc)} -shared -fPIC -nostdlib -o {q(str(stub))} "
            "-Wl,-soname,libstdc++.so.6 -Wl,--version-script=stub.map stub.c",
            # The old ABI's strings whatever the toolchain's default ABI: their members are named so.
            f"{q(cxx)} {cxxflags} -U_GLIBCXX_USE_CXX11_ABI -D_GLIBCXX_USE_CXX11_ABI=0 -std=c++17 -O2 -fPIC "
            f"-ffunction-sections -c compat.cc -o {q(str(compat))}",
            # Every newer string member of the archive members holding the strings' state is the
            # compat object's (a newer GCC may add some: the root is refused, naming them).
            f'mkdir members && (cd members && ar x "$({q(cxx)} -print-file-name=libstdc++.a)")',
            # (grep without -q: it reads nm's whole output, so pipefail never sees a SIGPIPE.)
            "for m in members/*.o; do if nm --defined-only \"$m\" | grep ' _ZNS[sb].*_Rep20_S_empty_rep_storageE$' "
            ">/dev/null; then nm --defined-only \"$m\" | awk '$2 ~ /^[TW]$/ {print $3}'; fi; done "
            "| grep '^_ZNS[sb]' | sort -u > member.syms",
            f"readelf --dyn-syms -W {q(str(stub))} | awk '{{print $8}}' | sed 's/@.*//' | sort -u > stub.syms",
            f"nm --defined-only {q(str(compat))} | awk '{{print $3}}' | sort -u > compat.syms",
            "test -s member.syms || { echo 'found no libstdc++.a member with the strings state' >&2; exit 1; }",
            "missing=$(comm -23 member.syms stub.syms | comm -23 - compat.syms)",
            'if [ -n "$missing" ]; then echo "libstdc++.a has newer string members beside the string state '
            'that the compat object lacks (a call to one would link a second copy of that state): $missing" >&2; '
            "exit 1; fi",
            # The vendor library: the real libstdc++.so.6, shared, as a system's libraries link it.
            f"{q(cxx)} {cxxflags} -O2 -fPIC -shared -o libvendor.so vendor.cc",
            f"{q(cxx)} {cxxflags} -O2 -fPIC -shared -o libours.so ours.cc -L. -lvendor -Wl,-rpath,{WORK} {ldflags}",
            f"{q(cc)} -o main main.c -ldl",
            "if ! readelf -sW --dyn-syms libours.so | grep -q 'UND _ZNSs4_Rep20_S_empty_rep_storageE'; then",
            "  echo 'the check library has its own copy of the empty string: the stub or the compat object was not "
            "linked' >&2; exit 1",
            "fi",
            "./main ./libours.so || { echo 'an empty string from a shared-libstdc++ library crashed the check "
            "library (two libstdc++ copies)' >&2; exit 1; }",
        ]
    )
