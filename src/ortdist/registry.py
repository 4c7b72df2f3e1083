"""Facts about execution providers, targets and ORT versions, loaded from ``data/*.toml``.

The data files are the single place an EP or target fact lives; everything else asks here.
Invariants are checked at load so a bad edit fails loudly, naming the file and entry.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from .errors import DataError

_CMAKE_SWITCH = re.compile(r"^onnxruntime_[A-Z0-9_]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True)
class Target:
    triple: str
    os: str
    arch: str
    cmake_system_name: str
    wheel_repair: str
    wheel_platform: str

    @property
    def supports_wheels(self) -> bool:
        return bool(self.wheel_repair)


@dataclass(frozen=True, kw_only=True)
class ExecutionProvider:
    name: str
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


@dataclass(frozen=True, kw_only=True)
class DebianSource:
    package: str
    version: str
    sha256: str

    @property
    def orig_tarball(self) -> str:
        return f"{self.package}_{self.version}.orig.tar.xz"

    @property
    def pool_path(self) -> str:
        """Debian pool layout: pool/main/<first letter, or libX>/<source>/<file>."""
        prefix = self.package[:4] if self.package.startswith("lib") else self.package[0]
        return f"pool/main/{prefix}/{self.package}/{self.orig_tarball}"


@dataclass(frozen=True, kw_only=True)
class SdistDependency:
    name: str
    pypi_sdist: str
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.pypi_sdist}-{self.version}.tar.gz"


@dataclass(frozen=True, kw_only=True)
class OrtVersion:
    version: str
    source: DebianSource
    deps: tuple[SdistDependency, ...]
    python_requires: tuple[str, ...] = field(default=())


def _load(name: str) -> dict[str, Any]:
    text = resources.files("ortdist.data").joinpath(name).read_text(encoding="utf-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(str(exc), where=f"ortdist/data/{name}") from exc


def load_data(name: str) -> dict[str, Any]:
    """A data file for a module that owns its facts (ci.py: runners.toml), with the same errors."""
    return _load(name)


def _require(entry: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in entry:
        raise DataError(f"missing key '{key}'", where=where)
    value = entry[key]
    if not isinstance(value, kind):
        raise DataError(f"'{key}' must be {kind.__name__}, got {type(value).__name__}", where=where)
    return value


@functools.cache
def targets() -> dict[str, Target]:
    out: dict[str, Target] = {}
    for triple, entry in _load("targets.toml").items():
        where = f"ortdist/data/targets.toml [{triple}]"
        out[triple] = Target(
            triple=triple,
            os=_require(entry, "os", str, where),
            arch=_require(entry, "arch", str, where),
            cmake_system_name=_require(entry, "cmake_system_name", str, where),
            wheel_repair=_require(entry, "wheel_repair", str, where),
            wheel_platform=_require(entry, "wheel_platform", str, where),
        )
        if bool(out[triple].wheel_repair) != bool(out[triple].wheel_platform):
            raise DataError("wheel_repair and wheel_platform must be both set or both empty", where=where)
    return out


def parse_providers(data: dict[str, Any], known_targets: dict[str, Target]) -> dict[str, ExecutionProvider]:
    """Build the EP table from parsed TOML and check the registry's invariants."""
    out: dict[str, ExecutionProvider] = {}
    seen_providers: dict[str, str] = {}
    for name, entry in data.items():
        where = f"ortdist/data/providers.toml [{name}]"
        cmake = _require(entry, "cmake", dict, where)
        for key, value in cmake.items():
            if not _CMAKE_SWITCH.match(key) or not isinstance(value, str):
                raise DataError(f"cmake switch {key!r} = {value!r} is not an onnxruntime_* string define", where=where)
        ep_targets = tuple(_require(entry, "targets", list, where))
        unknown = [t for t in ep_targets if t not in known_targets]
        if unknown:
            raise DataError(f"unknown target(s) {unknown}; add them to targets.toml first", where=where)
        provider = _require(entry, "provider", str, where)
        if not provider.endswith("ExecutionProvider"):
            raise DataError(f"provider {provider!r} must end in 'ExecutionProvider'", where=where)
        if provider in seen_providers:
            raise DataError(f"provider {provider!r} is already used by [{seen_providers[provider]}]", where=where)
        seen_providers[provider] = name
        extra = set(entry) - {
            "provider",
            "cmake",
            "targets",
            "static_link",
            "runtime_libs",
            "wheel_suffix",
            "summary",
            "provider_library",
            "build_py_flag",
            "compile_languages",
            "pip_extras",
            "pip_library_dirs",
            "reduce_flag",
        }
        if extra:
            raise DataError(f"unknown key(s) {sorted(extra)}", where=where)
        out[name] = ExecutionProvider(
            name=name,
            provider=provider,
            cmake=dict(cmake),
            targets=ep_targets,
            static_link=_require(entry, "static_link", bool, where),
            runtime_libs=tuple(_require(entry, "runtime_libs", list, where)),
            wheel_suffix=_require(entry, "wheel_suffix", str, where),
            summary=_require(entry, "summary", str, where),
            provider_library=entry.get("provider_library", ""),
            build_py_flag=entry.get("build_py_flag", ""),
            compile_languages=tuple(entry.get("compile_languages", ())),
            pip_extras={k: tuple(v) for k, v in entry.get("pip_extras", {}).items()},
            pip_library_dirs=tuple(entry.get("pip_library_dirs", ())),
            reduce_flag=entry.get("reduce_flag", ""),
        )
        if out[name].pip_library_dirs and not out[name].provider_library:
            raise DataError("pip_library_dirs needs a provider_library to set the RUNPATH of", where=where)
    cpu = out.get("cpu")
    if cpu is None or cpu.cmake or cpu.provider != "CPUExecutionProvider":
        raise DataError(
            "[cpu] must exist, be CPUExecutionProvider and need no CMake switch", where="ortdist/data/providers.toml"
        )
    return out


@functools.cache
def providers() -> dict[str, ExecutionProvider]:
    return parse_providers(_load("providers.toml"), targets())


def cuda_eps() -> frozenset[str]:
    """EPs whose kernels nvcc compiles: a recipe's [cuda] table applies to them."""
    return frozenset(name for name, ep in providers().items() if "CUDA" in ep.compile_languages)


@functools.cache
def ort_versions() -> dict[str, OrtVersion]:
    out: dict[str, OrtVersion] = {}
    for version, entry in _load("ort_versions.toml").items():
        where = f"ortdist/data/ort_versions.toml [{version}]"
        src = _require(entry, "source", dict, where)
        if src.get("kind") != "debian":
            raise DataError("the default source must be kind = 'debian'", where=where)
        source = DebianSource(package=src["package"], version=src["version"], sha256=src["sha256"])
        deps = tuple(
            SdistDependency(name=name, pypi_sdist=d["pypi_sdist"], version=d["version"], sha256=d["sha256"])
            for name, d in entry.get("deps", {}).items()
        )
        for digest in [source.sha256, *(d.sha256 for d in deps)]:
            if not _SHA256.match(digest):
                raise DataError(f"{digest!r} is not a lowercase sha256", where=where)
        out[version] = OrtVersion(
            version=version,
            source=source,
            deps=deps,
            python_requires=tuple(entry.get("python_requires", ())),
        )
    return out
