"""Toolchain specs: ``toolchains/<name>.toml`` (and its ``extends`` chain) read into frozen dataclasses.

``ToolchainFile`` is the file as written (config.py refuses unknown or mistyped keys, per file);
``ToolchainSpec`` is what the rest of ortdist uses: the chain merged, with its digests and shims
(made by load.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from .. import registry
from ..config import (
    KEY,
    dotted,
)


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class CleanRoot:
    """[clean_root]: the bare root wheels are checked in."""

    packages: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CompatRoot:
    """[compat.<name>]: an older Debian root a finished build is proven to run in, offline (the
    compat step). Not part of any digest: changing one re-makes only its own root."""

    name: str = field(metadata=KEY)  # the table's name: the root's directory and the manifest entry
    suite: str  # the Debian suite debootstrapped (bullseye: glibc 2.31, the oldest on the mirror)
    # c: its gcc compiles the C program against the shipped library; wheel: below; web: the web
    # smoke test's browser runs the WebAssembly module there
    check: Literal["c", "wheel", "web"]
    packages: tuple[str, ...]  # installed into it (apt, no recommends): what the check needs
    python: str | None = None  # check "wheel": the root's CPython; the build's wheel for it is installed
    mirror: str = ""  # default: the toolchain's own

    @property
    def label(self) -> str:
        """How errors and logs name it."""
        return f"compat root {self.name!r} (Debian {self.suite})"


@dataclass(frozen=True, kw_only=True)
class CrossTarget:
    """[cross.<triple>]: a target built on ``host`` with a cross compiler and run under ``emulator``."""

    host: str
    dpkg_arch: str
    tool_prefix: str
    host_packages: tuple[str, ...]  # into the build root: the cross compiler, the emulator
    packages: tuple[str, ...]  # the target's own libraries, unpacked into a sysroot of their own
    clean_packages: tuple[str, ...]  # the target's bare Python, where a cross-built wheel is checked
    emulator: str
    cmake: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=_empty)
    glibc: str = ""
    library_path: tuple[str, ...] = ()  # where auditwheel finds the target's libraries to graft


@dataclass(frozen=True, kw_only=True)
class PinnedWheel:
    """[ep_wheels.<ep>.<distribution>]: a PyPI wheel unpacked into the build root, pinned by hash."""

    version: str
    sha256: str
    python: str = ""  # the CPython of the wheel's tag, when it has no wheel for the root's own
    # The directory under {wheels} it is unpacked into (default: its distribution name). Wheels that
    # pip installs into one prefix (CUDA 13's nvidia/cu13/) share one, so nvcc finds its toolkit.
    into: str = ""
    # Only this directory of the wheel, unpacked as the top of its tree: CUDA 12's wheels each keep
    # their files under nvidia/<component>/, which nvcc needs merged into one toolkit layout.
    subdir: str = ""

    def directory(self, dist: str) -> str:
        return self.into or dist


@dataclass(frozen=True, kw_only=True)
class EpPip:
    """[ep_pip.<ep>]: the EP's pip extras and their library directories for what this toolchain links
    (CUDA 13's wheels are other distributions in another directory than CUDA 12's); each replaces the
    registry's (data/providers.toml pip_extras, pip_library_dirs)."""

    extras: Mapping[str, tuple[str, ...]]
    library_dirs: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class OpenMP:
    """[openmp]: GCC's OpenMP runtime for a compiler wheel that lacks it (ppbt has no
    libgomp): libgomp is built from GCC's pinned source in the root with that compiler, against its
    sysroot, and installed into the compiler's own directories (a PIC libgomp.a, its spec file and
    omp.h), so -fopenmp links it statically and nothing is shipped beside the output."""

    debian: str  # the Debian source package whose orig tarball holds GCC's source (gcc-11)
    suite: str  # the suite whose Sources index lists the file and hash
    file: str  # the orig tarball
    sha256: str
    member: str  # the GCC source tarball inside it (Debian's orig wraps the dfsg tarball)
    version: str  # GCC's version: libgomp's ABI must cover what the compiler emits (same major)


# Where a [libstdcxx] root has its stub libstdc++.so.6, under {compiler}: its [cmake] linker flags name it.
LIBSTDCXX_STUB = "libstdcxx-shared/libstdc++.so.6"
# ...and its object with GCC's newer COW-string members made of older ones (linked beside the stub).
LIBSTDCXX_COMPAT = "libstdcxx-shared/libstdcxx-compat.o"
# What the root's [libstdcxx] files are made of, in its digest: change it when libstdcxx.py makes
# them differently, so roots made before are made again rather than linked against.
LIBSTDCXX_LAYOUT = "stub+compat-2"


@dataclass(frozen=True, kw_only=True)
class Libstdcxx:
    """[libstdcxx]: libstdc++ linked shared for the symbols an old system's libstdc++.so.6 has,
    static for the newer ones (toolchains/debian/libstdcxx.py), for outputs that share C++ objects
    with libraries linked against the system's libstdc++ (one libstdc++ in the process)."""

    # The newest version of each symbol-version family taken from the system's libstdc++.so.6
    # (GLIBCXX = "3.4.19", CXXABI = "1.3.7": manylinux2014's GCC 4.8); the rest is linked statically.
    newest: Mapping[str, str]


@dataclass(frozen=True, kw_only=True)
class Compiler:
    """[compiler]: a C/C++ toolchain from a PyPI wheel, unpacked into the build root at {compiler}
    (the [cmake] defines name its programs and sysroot through that placeholder)."""

    wheel: str  # PyPI distribution
    version: str
    sha256: str
    archive: str  # the toolchain tarball inside the wheel; its one top directory becomes {compiler}
    description: str  # what it is, for the SBOM: compiler, binutils and C library versions
    glibc: str  # the C library of its sysroot: the oldest glibc its output runs on
    # The machine its sysroot and runtime libraries are for (the wheel's platform tag): a cross
    # target's, where the root's clang compiles with them (ppbt's aarch64 programs cannot run there).
    arch: str = "x86_64"
    # Symlinks made inside {compiler}: relative path -> a path of the build root.
    links: Mapping[str, str] = field(default_factory=_empty)


@dataclass(frozen=True, kw_only=True)
class OtherPython:
    """A [<version>] table of toolchains/<name>/pythons.toml: a CPython from another Debian suite
    (``suite`` and ``packages``) or installed on the build host (see toolchains/host_python.py)."""

    numpy: str
    source: Literal["debian", "host"] = "debian"
    suite: str = ""
    packages: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Promise:
    """[promise]: what the toolchain's outputs need of a target system besides glibc's own
    libraries; every shipped ELF is checked against it (src/ortdist/checks/elf.py)."""

    # Sonames a target system provides (a C++ runtime linked shared: libgcc_s.so.1, ...).
    system_libraries: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Nvcc:
    """[nvcc]: what the toolchain's CUDA compiler can do, so a recipe asking for more is refused
    while planning, not an hour into the compile."""

    # The real architectures it compiles SASS for (its `nvcc --list-gpu-code`, without "sm_"); an
    # arch-specific variant ("90a") is allowed where its base is listed.
    architectures: tuple[str, ...]
    # Its `--compress-mode` values (CUDA 12.8 and later); none: only ORT's own -Xfatbin=-compress-all.
    compress_modes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ToolchainFile:
    """toolchains/<name>.toml; a file that ``extends`` another states only what it adds or changes."""

    kind: str
    python: tuple[str, ...]
    targets: tuple[str, ...]
    suite: str = ""
    variant: str = "minbase"
    mirror: str = ""
    glibc: str = ""
    packages: tuple[str, ...] = ()
    ep_packages: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    ep_cmake: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    cmake: Mapping[str, str] = field(default_factory=_empty)
    python_tools: Mapping[str, str] = field(default_factory=_empty)
    clean_root: CleanRoot = field(default_factory=CleanRoot)
    # Plan-only toolchains: ortdist plans for them (CI puts them on a runner of ``needs``) but has
    # no implementation that runs them yet, so a build stops with a ToolchainError.
    plan_only: bool = False
    needs: str = ""
    provides: tuple[str, ...] = ()  # EPs the platform SDK itself provides (no packages)
    cross: Mapping[str, CrossTarget] = field(default_factory=_empty)
    # Debian archive components the root's apt uses (non-free for NVIDIA's CUDA toolkit).
    components: tuple[str, ...] = ("main",)
    # Per EP: PyPI wheels unpacked into the build root, for SDKs Debian cannot ship offline
    # (cuDNN downloads from NVIDIA at install time).
    ep_wheels: Mapping[str, Mapping[str, PinnedWheel]] = field(default_factory=_empty)
    # Per EP: symlinks made under {wheels} once the wheels are unpacked, relative path -> target
    # (wheels cannot carry links: a toolkit's libfoo.so -> libfoo.so.N development names). A target
    # is a name beside the link, or an absolute path in the root (a program of a Debian package).
    ep_links: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    # Per EP: small text files written under {wheels} after the links, relative path -> text (the
    # nvcc.profile that makes a toolkit tree of links and wheels one CUDA layout).
    ep_files: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    ep_pip: Mapping[str, EpPip] = field(default_factory=_empty)
    # Per EP: files of its unpacked wheels (paths under {wheels}) the package carries beside the
    # provider library, unrenamed: a vendor runtime no pip requirement can bring for every Python
    # (OpenVINO's, which finds its plugins beside itself).
    ep_bundle: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    extends: str = ""
    compiler: Compiler | None = None
    openmp: OpenMP | None = None
    libstdcxx: Libstdcxx | None = None
    # Every dependency of ORT_versions.toml [deps] is compiled from its pinned source (else only
    # those marked `always`; the root's -dev packages serve the rest).
    deps_from_source: bool = False
    # Older systems a build's outputs are proven on (x86_64 Linux targets): the compat step.
    compat: Mapping[str, CompatRoot] = field(default_factory=_empty)
    promise: Promise = field(default_factory=Promise)
    nvcc: Nvcc | None = None


@dataclass(frozen=True, kw_only=True)
class ToolchainSpec:
    name: str
    kind: str
    suite: str
    variant: str
    mirror: str
    python: tuple[str, ...]
    glibc: str
    targets: tuple[str, ...]
    packages: tuple[str, ...]
    ep_packages: dict[str, tuple[str, ...]]
    ep_cmake: dict[str, dict[str, str]]
    cmake: dict[str, str]
    python_tools: dict[str, str]
    clean_root_packages: tuple[str, ...]
    # CMake shim directories, the parent toolchain's first: a later one's subdirectory of the
    # same name wins (see ``shims``).
    shims_dirs: tuple[Path, ...]
    digest: str
    root_digest: str
    plan_only: bool = False
    needs: str = ""
    platform_eps: tuple[str, ...] = ()  # ToolchainFile.provides
    cross_targets: Mapping[str, CrossTarget] = field(default_factory=_empty)
    components: tuple[str, ...] = ("main",)
    ep_wheels: Mapping[str, Mapping[str, PinnedWheel]] = field(default_factory=_empty)
    ep_links: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    ep_files: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    ep_pip: Mapping[str, EpPip] = field(default_factory=_empty)
    ep_bundle: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    extends: str = ""
    # CPython versions besides the root's own, for the binding only (toolchains/<name>/pythons.toml).
    extra_python: Mapping[str, OtherPython] = field(default_factory=_empty)
    # Along ``extends``: the toolchain whose file states a define ("ep_cmake.cuda.X" -> "cuda12").
    declared_in: Mapping[str, str] = field(default_factory=_empty)
    compiler: Compiler | None = None
    openmp: OpenMP | None = None
    libstdcxx: Libstdcxx | None = None
    deps_from_source: bool = False
    compat: Mapping[str, CompatRoot] = field(default_factory=_empty)
    system_libraries: tuple[str, ...] = ()  # [promise]
    nvcc: Nvcc | None = None

    @property
    def has_openmp(self) -> bool:
        """Whether its compiler links OpenMP: a root's own GCC ships libgomp; a [compiler] wheel
        only with [openmp]."""
        return self.compiler is None or self.openmp is not None

    @property
    def has_root(self) -> bool:
        """Its builds run inside a root, at the fixed /ortdist paths; else on the runner itself
        (data/toolchain_kinds.toml)."""
        return registry.toolchain_kinds()[self.kind].root

    def declaring(self, table: str, key: str) -> str:
        """The toolchain, this one or a parent, whose file states ``key`` of [table] (plan provenance)."""
        return self.declared_in.get(dotted(table, key), self.name)

    @property
    def python_versions(self) -> tuple[str, ...]:
        """Every CPython a wheel can be built for: the root's own first."""
        return (*self.python, *self.extra_python)

    @property
    def shims(self) -> dict[str, Path]:
        """Shim name (the CMake package it stands for) -> its directory on the host."""
        found: dict[str, Path] = {}
        for directory in self.shims_dirs:
            if directory.is_dir():
                found.update({p.name: p for p in sorted(directory.iterdir()) if p.is_dir()})
        return found

    def all_wheels(self) -> dict[str, PinnedWheel]:
        """Every EP's PyPI wheels (one build root serves every recipe of this toolchain)."""
        return {name: facts for wheels in self.ep_wheels.values() for name, facts in wheels.items()}

    def glibc_for(self, triple: str) -> str:
        """The glibc a build for ``triple`` runs on and newer: a cross target's own, else the toolchain's."""
        cross = self.cross_targets.get(triple)
        return (cross.glibc if cross and cross.glibc else self.glibc) or ""

    def tool_prefix(self, triple: str) -> str:
        """Prefix of the target's binutils/compilers ('' for a native target)."""
        cross = self.cross_targets.get(triple)
        return cross.tool_prefix if cross else ""

    def is_cross(self, triple: str) -> bool:
        return triple in self.cross_targets

    @property
    def emulated_python(self) -> tuple[str, ...]:
        """The CPythons its emulator runs for a cross target: the target root's own, and the other
        versions where they are that machine's packages (a host version gives headers only)."""
        if not self.python_target:
            return self.python
        return (*self.python, *(v for v, facts in self.extra_python.items() if facts.source != "host"))

    @property
    def python_target(self) -> str:
        """The cross target its other CPythons are for, where every target is that one (their
        bindings and checks are that machine's); "" where they are the build machine's own."""
        return self.targets[0] if len(self.targets) == 1 and self.is_cross(self.targets[0]) else ""

    def cross_facts(self, triple: str, key: Literal["cmake", "env"]) -> dict[str, str]:
        """A cross target's table (cmake, env) with {target} made the in-root sysroot path."""
        from ..paths import IN_ROOT_TARGET

        cross = self.cross_targets.get(triple)
        table: Mapping[str, str] = getattr(cross, key) if cross else {}
        return {k: v.replace("{target}", str(IN_ROOT_TARGET)) for k, v in table.items()}

    def all_packages(self) -> tuple[str, ...]:
        """Base packages plus every EP's and cross target's build-root packages: one build root
        serves every recipe of this toolchain."""
        extra = [p for eps in self.ep_packages.values() for p in eps]
        extra += [p for cross in self.cross_targets.values() for p in cross.host_packages]
        return tuple(dict.fromkeys([*self.packages, *extra]))

    def compat_roots(self, check: Literal["system", "web"]) -> tuple[CompatRoot, ...]:
        """The [compat.*] roots the compat step checks the outputs in ("system": checks c and
        wheel), or the ones the web smoke's browser runs in ("web")."""
        return tuple(c for c in self.compat.values() if (c.check == "web") == (check == "web"))

    def provides(self, ep: str) -> bool:
        """The CPU EP is always there; any other EP needs this toolchain's packages for it."""
        return ep in self.available_eps

    @property
    def available_eps(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(("cpu", *self.ep_packages, *self.ep_wheels, *self.platform_eps)))


__all__ = [
    "CompatRoot",
    "Compiler",
    "CrossTarget",
    "EpPip",
    "Nvcc",
    "OpenMP",
    "OtherPython",
    "PinnedWheel",
    "Promise",
    "ToolchainFile",
    "ToolchainSpec",
]
