"""Facts about execution providers, targets and ORT versions, loaded from ``data/*.toml``.

The data files are the single place an EP or target fact lives; everything else asks here.
Each file is read into the dataclasses below (config.py refuses unknown or mistyped keys), then
the invariants between entries are checked, so a bad edit fails loudly, naming the file and key.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from .config import KEY, convert_table, dotted, read_toml, where
from .errors import DataError
from .wheelnames import wheel_name

_CMAKE_SWITCH = re.compile(r"^onnxruntime_[A-Z0-9_]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def data_origin(name: str) -> str:
    """How errors name a data file shipped with ortdist."""
    return f"ortdist/data/{name}"


@dataclass(frozen=True, kw_only=True)
class Target:
    triple: str = field(metadata=KEY)
    os: str
    arch: str
    cmake_system_name: str
    wheel_repair: str
    wheel_platform: str

    @property
    def supports_wheels(self) -> bool:
        return bool(self.wheel_repair)


@dataclass(frozen=True, kw_only=True)
class ToolchainKind:
    """A toolchain kind (toolchain_kinds.toml): whether its builds run inside a root."""

    name: str = field(metadata=KEY)
    root: bool


@dataclass(frozen=True, kw_only=True)
class ManylinuxLevel:
    """A manylinux glibc level (manylinux.toml): the newest C++ runtime symbol versions it allows."""

    glibc: str = field(metadata=KEY)
    glibcxx: str
    cxxabi: str
    gcc: str

    def ceilings(self) -> dict[str, tuple[int, ...]]:
        """Symbol-version family -> its newest allowed version."""
        return {
            family: tuple(int(part) for part in value.split("."))
            for family, value in (("GLIBCXX", self.glibcxx), ("CXXABI", self.cxxabi), ("GCC", self.gcc))
        }


@dataclass(frozen=True, kw_only=True)
class DebianSuite:
    """A Debian suite ortdist makes roots of (debian_suites.toml)."""

    name: str = field(metadata=KEY)
    glibc: str


@dataclass(frozen=True, kw_only=True)
class ExecutionProvider:
    name: str = field(metadata=KEY)
    provider: str
    cmake: dict[str, str]
    targets: tuple[str, ...]
    static_link: bool
    runtime_libs: tuple[str, ...]
    wheel_suffix: str
    summary: str
    provider_library: str = ""
    build_py_flag: str = ""
    # Languages besides C/C++ the EP's kernels are compiled in (CMake's names): they get the
    # compiler cache as launcher too.
    compile_languages: tuple[str, ...] = ()
    # Optional wheel dependencies (extra -> requirements) that provide runtime_libs from PyPI.
    pip_extras: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Where those wheels put the libraries, relative to site-packages: the provider library's
    # RUNPATH, so loading it finds them with nothing on LD_LIBRARY_PATH.
    pip_library_dirs: tuple[str, ...] = ()
    # reduce_op_kernels.py's switch for this EP's own kernel registrations (reduced builds).
    reduce_flag: str = ""
    # The EP's own thread-count provider option, where its thread pool ignores the session's
    # intra_op_num_threads (the bench sets it so "same threads" holds).
    threads_option: str = ""


@dataclass(frozen=True, kw_only=True)
class DebianSource:
    package: str
    version: str
    sha256: str
    kind: Literal["debian"] = "debian"  # the default source of a version is always Debian's tarball

    @property
    def orig_tarball(self) -> str:
        return f"{self.package}_{self.version}.orig.tar.xz"

    @property
    def pool_path(self) -> str:
        """Debian pool layout: pool/main/<first letter, or libX>/<source>/<file>."""
        return f"{debian_pool_dir(self.package)}/{self.orig_tarball}"


def debian_pool_dir(package: str) -> str:
    """Debian pool layout: pool/main/<first letter, or libX>/<source package>."""
    prefix = package[:4] if package.startswith("lib") else package[0]
    return f"pool/main/{prefix}/{package}"


@dataclass(frozen=True, kw_only=True)
class DependencySource:
    """[<version>.deps.<name>]: a dependency's pinned source, handed to ORT's CMake as
    FETCHCONTENT_SOURCE_DIR_<NAME> (``name`` is ORT's FetchContent name), so ORT builds it the way
    its own build does. From PyPI (an sdist) or Debian's pool (an orig tarball, or a binary .deb
    whose files are unpacked, for a header-only library whose orig is not downloadable)."""

    name: str = field(metadata=KEY)
    version: str
    sha256: str
    pypi_sdist: str = ""  # a PyPI project: its <project>-<version>.tar.gz
    debian: str = ""  # a Debian source package: the pool directory that holds ``file``
    file: str = ""
    suite: str = ""  # the Debian suite whose Sources/Packages index lists the file and hash
    subdir: str = ""  # the directory CMake gets, inside the unpacked tree
    # Taken from source by every toolchain (onnx: a system libonnx registers the schemas twice);
    # the others only by toolchains with deps_from_source.
    always: bool = False
    eps: tuple[str, ...] = ()  # only builds with one of these EPs need it
    # Its build needs the compiler's OpenMP runtime (oneDNN's CPU runtime): a toolchain whose
    # [compiler] lacks one offers its EPs only with [openmp] (a root's own GCC has libgomp).
    openmp: bool = False
    # Named by a toolchain define through {deps}/<name> rather than a FETCHCONTENT_SOURCE_DIR
    # (pybind11's sdist has CMake package files but no CMakeLists.txt).
    fetchcontent: bool = True
    ort_pins: str = ""  # what ORT's cmake/deps.txt pins where this differs (the SBOM says so)

    @property
    def filename(self) -> str:
        return self.file or f"{self.pypi_sdist}-{self.version}.tar.gz"

    @property
    def pool_path(self) -> str:
        return f"{debian_pool_dir(self.debian)}/{self.file}"

    @property
    def is_deb(self) -> bool:
        return self.filename.endswith(".deb")

    @property
    def project(self) -> str:
        return self.pypi_sdist or self.debian


@dataclass(frozen=True, kw_only=True)
class OrtVersion:
    version: str = field(metadata=KEY)
    source: DebianSource
    deps: tuple[DependencySource, ...] = ()  # [<version>.deps.<name>] tables, in file order
    python_requires: tuple[str, ...] = field(default=())


def load_data(name: str) -> dict[str, Any]:
    """A data file's table, for the module that owns its facts (ci/runners.py: runners.toml)."""
    return read_toml(resources.files("ortdist.data").joinpath(name), DataError, origin=data_origin(name))


@functools.cache
def targets() -> dict[str, Target]:
    return parse_targets(load_data("targets.toml"))


def parse_targets(data: dict[str, Any]) -> dict[str, Target]:
    origin = data_origin("targets.toml")
    out = convert_table(Target, data, origin=origin, error=DataError)
    for triple, target in out.items():
        if bool(target.wheel_repair) != bool(target.wheel_platform):
            raise DataError(
                "wheel_repair and wheel_platform must be both set or both empty",
                where=where(origin, triple),
                fix='set both (a target with Python wheels) or neither (wheel_repair = "")',
            )
    return out


def parse_providers(data: dict[str, Any], known_targets: dict[str, Target]) -> dict[str, ExecutionProvider]:
    """Build the EP table from parsed TOML and check the registry's invariants."""
    origin = data_origin("providers.toml")
    out = convert_table(ExecutionProvider, data, origin=origin, error=DataError)
    seen_providers: dict[str, str] = {}
    for name, ep in out.items():
        for key in ep.cmake:
            if not _CMAKE_SWITCH.match(key):
                raise DataError(
                    f"cmake switch {key!r} is not an onnxruntime_* define",
                    where=where(origin, f"{name}.cmake"),
                    fix="an EP is switched on by ORT's own onnxruntime_USE_* options; other defines belong in a "
                    "toolchain's [ep_cmake]",
                )
        unknown = [t for t in ep.targets if t not in known_targets]
        if unknown:
            raise DataError(
                f"unknown target(s) {unknown}",
                where=where(origin, f"{name}.targets"),
                fix="add them to targets.toml first",
            )
        if not ep.provider.endswith("ExecutionProvider"):
            raise DataError(
                f"provider {ep.provider!r} must end in 'ExecutionProvider'",
                where=where(origin, f"{name}.provider"),
                fix="use the name onnxruntime.get_available_providers() reports",
            )
        if ep.provider in seen_providers:
            raise DataError(
                f"provider {ep.provider!r} is already used by [{seen_providers[ep.provider]}]",
                where=where(origin, f"{name}.provider"),
                fix="each registry entry is one EP: merge the two entries",
            )
        seen_providers[ep.provider] = name
        if ep.pip_library_dirs and not ep.provider_library:
            raise DataError(
                "pip_library_dirs needs a provider_library to set the RUNPATH of",
                where=where(origin, f"{name}.pip_library_dirs"),
                fix="add provider_library, or drop pip_library_dirs",
            )
    cpu = out.get("cpu")
    if cpu is None or cpu.cmake or cpu.provider != "CPUExecutionProvider":
        raise DataError(
            "[cpu] must exist, be CPUExecutionProvider and need no CMake switch",
            where=origin,
            fix='restore [cpu] with provider = "CPUExecutionProvider" and cmake = {}',
        )
    return out


@functools.cache
def providers() -> dict[str, ExecutionProvider]:
    return parse_providers(load_data("providers.toml"), targets())


def ep_switches() -> frozenset[str]:
    """Every EP's CMake switches: only execution_providers set them, never a recipe's or toolchain's
    own defines."""
    return frozenset(key for ep in providers().values() for key in ep.cmake)


def cuda_eps() -> frozenset[str]:
    """EPs whose kernels nvcc compiles: a recipe's [cuda] table applies to them."""
    return frozenset(name for name, ep in providers().items() if "CUDA" in ep.compile_languages)


@functools.cache
def debian_suites() -> dict[str, DebianSuite]:
    return convert_table(
        DebianSuite, load_data("debian_suites.toml"), origin=data_origin("debian_suites.toml"), error=DataError
    )


@functools.cache
def manylinux_levels() -> dict[str, ManylinuxLevel]:
    return convert_table(
        ManylinuxLevel, load_data("manylinux.toml"), origin=data_origin("manylinux.toml"), error=DataError
    )


@dataclass(frozen=True, kw_only=True)
class PyconfigMachine:
    """pyconfig.toml: the pyconfig.h macros CPython's configure sets differently on this machine."""

    arch: str = field(metadata=KEY)
    defined: tuple[str, ...] = ()
    undefined: tuple[str, ...] = ()
    values: dict[str, str] = field(default_factory=dict)


@functools.cache
def pyconfig_machines() -> dict[str, PyconfigMachine]:
    return convert_table(
        PyconfigMachine, load_data("pyconfig.toml"), origin=data_origin("pyconfig.toml"), error=DataError
    )


@functools.cache
def toolchain_kinds() -> dict[str, ToolchainKind]:
    return parse_toolchain_kinds(load_data("toolchain_kinds.toml"))


def parse_toolchain_kinds(data: dict[str, Any]) -> dict[str, ToolchainKind]:
    return convert_table(ToolchainKind, data, origin=data_origin("toolchain_kinds.toml"), error=DataError)


@functools.cache
def ort_versions() -> dict[str, OrtVersion]:
    return parse_ort_versions(load_data("ort_versions.toml"))


def parse_ort_versions(data: dict[str, Any]) -> dict[str, OrtVersion]:
    origin = data_origin("ort_versions.toml")
    out = convert_table(OrtVersion, data, origin=origin, error=DataError)
    for version, entry in out.items():
        pins = [("source.sha256", entry.source.sha256), *((f"deps.{d.name}.sha256", d.sha256) for d in entry.deps)]
        for dep in entry.deps:
            if bool(dep.pypi_sdist) == bool(dep.debian) or (dep.debian and not dep.file):
                raise DataError(
                    f"dependency {dep.name!r} must come from exactly one place",
                    where=where(origin, f"{dotted('', version)}.deps.{dep.name}"),
                    fix='pypi_sdist = "<project>", or debian = "<source package>" with file = "<pool file>"',
                )
            if dep.debian and not dep.suite:
                raise DataError(
                    f"dependency {dep.name!r} names no Debian suite",
                    where=where(origin, f"{dotted('', version)}.deps.{dep.name}"),
                    fix='suite = "<suite>": the suite whose Sources (or Packages) index lists the file and its sha256',
                )
        for key, digest in pins:
            if not _SHA256.match(digest):
                raise DataError(
                    f"{digest!r} is not a lowercase sha256",
                    where=where(origin, f"{dotted('', version)}.{key}"),
                    fix="64 lowercase hex digits, as `sha256sum` prints them",
                )
    return out


PYPI_WHEELS = "pypi_wheels.toml"


@dataclass(frozen=True, kw_only=True)
class PypiWheel:
    """A wheel published on PyPI (data/pypi_wheels.toml), named by its file name."""

    file: str = field(metadata=KEY)
    target: str
    size: int
    sha256: str
    # The recipes whose wheels it is the counterpart of, whatever their version (PyPI's CUDA 13
    # onnxruntime-gpu is 1.31.1; cuda13-linux's is 1.21.0): then it is compared with those recipes'
    # wheels alone. Empty: any wheel of the same distribution, version and CPython tag.
    recipes: tuple[str, ...] = ()


@functools.cache
def pypi_wheels() -> tuple[PypiWheel, ...]:
    return parse_pypi_wheels(load_data(PYPI_WHEELS))


def parse_pypi_wheels(data: dict[str, Any]) -> tuple[PypiWheel, ...]:
    origin = data_origin(PYPI_WHEELS)
    entries = convert_table(PypiWheel, data, origin=origin, error=DataError)
    seen: dict[tuple[str, ...], str] = {}
    for name, wheel in entries.items():
        key = dotted("", name)
        parsed = wheel_name(name)
        if parsed is None:
            raise DataError(
                "not a wheel's file name (<distribution>-<version>-<python>-<abi>-<platform>.whl)",
                where=where(origin, key),
                fix="name the table after PyPI's file, as `pip download` saves it",
            )
        if wheel.target not in targets():
            raise DataError(
                f"unknown target {wheel.target!r}",
                where=where(origin, f"{key}.target"),
                fix="use a triple of targets.toml",
            )
        if wheel.size <= 0:
            raise DataError(
                f"size {wheel.size} is not a file's size",
                where=where(origin, f"{key}.size"),
                fix="the file's bytes, as `ls -l` shows them for the downloaded wheel",
            )
        if not _SHA256.match(wheel.sha256):
            raise DataError(
                f"{wheel.sha256!r} is not a lowercase sha256",
                where=where(origin, f"{key}.sha256"),
                fix="64 lowercase hex digits, as `sha256sum` prints them",
            )
        slot = (*parsed, wheel.target, *wheel.recipes)
        if slot in seen:
            raise DataError(
                f"a second wheel for {' '.join(slot)} (the first: {seen[slot]})",
                where=where(origin, key),
                fix="keep one wheel per distribution, version, CPython and target",
            )
        seen[slot] = name
    return tuple(entries.values())
