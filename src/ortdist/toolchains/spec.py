"""Toolchain specs: ``toolchains/<name>.toml`` loaded into a frozen dataclass."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RecipeError
from ..fsutil import sha256_file, sha256_text
from ..recipe.load import did_you_mean


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
    # Plan-only toolchains: ortdist plans for them (CI puts them on a runner of ``needs``) but has
    # no implementation that runs them yet, so a build stops with a ToolchainError.
    plan_only: bool = False
    needs: str = ""
    platform_eps: tuple[str, ...] = ()  # EPs the platform SDK itself provides (no packages)
    # Cross targets: triple -> facts (tool_prefix, dpkg_arch, packages, cmake, emulator).
    cross: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Debian archive components the root's apt uses (non-free for NVIDIA's CUDA toolkit).
    components: tuple[str, ...] = ("main",)
    # Per EP: PyPI wheels unpacked into the build root, for SDKs Debian cannot ship offline
    # (cuDNN downloads from NVIDIA at install time); name -> facts (version, sha256, python).
    ep_wheels: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    extends: str = ""
    # CPython versions besides the root's own, for the binding only (toolchains/<name>/pythons.toml):
    # version -> {suite, packages, numpy}.
    extra_python: dict[str, dict[str, Any]] = field(default_factory=dict)

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

    def all_wheels(self) -> dict[str, dict[str, str]]:
        """Every EP's PyPI wheels (one build root serves every recipe of this toolchain)."""
        return {name: facts for wheels in self.ep_wheels.values() for name, facts in wheels.items()}

    def tool_prefix(self, triple: str) -> str:
        """Prefix of the target's binutils/compilers ('' for a native target)."""
        return str(self.cross.get(triple, {}).get("tool_prefix", ""))

    def is_cross(self, triple: str) -> bool:
        return triple in self.cross

    def cross_facts(self, triple: str, key: str) -> dict[str, str]:
        """A cross target's table (cmake, env) with {target} made the in-root sysroot path."""
        from ..paths import IN_ROOT_TARGET

        table = self.cross.get(triple, {}).get(key, {})
        return {k: str(v).replace("{target}", str(IN_ROOT_TARGET)) for k, v in table.items()}

    def all_packages(self) -> tuple[str, ...]:
        """Base packages plus every EP's and cross target's build-root packages: one build root
        serves every recipe of this toolchain."""
        extra = [p for eps in self.ep_packages.values() for p in eps]
        extra += [p for cross in self.cross.values() for p in cross.get("host_packages", ())]
        return tuple(dict.fromkeys([*self.packages, *extra]))

    def provides(self, ep: str) -> bool:
        """The CPU EP is always there; any other EP needs this toolchain's packages for it."""
        return ep in self.available_eps

    @property
    def available_eps(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(("cpu", *self.ep_packages, *self.ep_wheels, *self.platform_eps)))


_KEYS = {
    "kind",
    "targets",
    "suite",
    "variant",
    "mirror",
    "python",
    "glibc",
    "packages",
    "ep_packages",
    "ep_cmake",
    "cmake",
    "python_tools",
    "clean_root",
    "plan_only",
    "needs",
    "provides",
    "cross",
    "components",
    "ep_wheels",
    "extends",
}
# Tables a child toolchain (``extends``) merges into its parent's, key by key; every other key it
# sets replaces the parent's.
_MERGED_TABLES = ("cmake", "ep_packages", "ep_cmake", "ep_wheels", "python_tools")
# What an [ep_wheels.<ep>.<distribution>] entry states.
_WHEEL_KEYS = frozenset({"version", "sha256"})
_WHEEL_OPTIONAL_KEYS = frozenset({"python"})
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What a [<version>] table of toolchains/<name>/pythons.toml states.
_PYTHON_KEYS = frozenset({"suite", "packages", "numpy"})
PYTHONS_FILE = "pythons.toml"
# What a [cross.<triple>] table must state.
_CROSS_KEYS = frozenset(
    {"host", "dpkg_arch", "tool_prefix", "host_packages", "packages", "clean_packages", "emulator", "cmake"}
)
# What only a toolchain ortdist runs must state (a debootstrap root); plan-only ones may omit them.
_SYSROOT_KEYS = ("suite", "mirror", "glibc", "packages")


def toolchain_file(project: Path, name: str) -> Path:
    return project / "toolchains" / f"{name}.toml"


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Key by key, one table deep: [ep_cmake.cuda] in a child adds to the parent's CUDA defines."""
    merged = dict(parent)
    for key, value in child.items():
        old = merged.get(key)
        merged[key] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def _read(
    project: Path, name: str, chain: tuple[str, ...] = (), referrer: str = "recipe key 'toolchain'"
) -> tuple[dict[str, Any], list[Path]]:
    """The toolchain's table with its parents' merged in, and its files, the root parent's first."""
    path = toolchain_file(project, name)
    if not path.is_file():
        known = sorted(p.stem for p in (project / "toolchains").glob("*.toml"))
        raise RecipeError(
            f"unknown toolchain {name!r} (no {path})",
            where=referrer,
            fix=did_you_mean(name, known) or f"known toolchains: {', '.join(known)}",
        )
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"not valid TOML: {exc}", where=str(path)) from exc
    for key in data:
        if key not in _KEYS:
            raise RecipeError(f"unknown key '{key}'", where=str(path), fix=did_you_mean(key, _KEYS) or None)
    parent_name = data.pop("extends", "")
    if not parent_name:
        return data, [path]
    if parent_name in (*chain, name):
        raise RecipeError(
            f"toolchains extend each other in a cycle: {' -> '.join((*chain, name, parent_name))}",
            where=f"{path} key 'extends'",
            fix="make one of them stand alone",
        )
    parent, files = _read(project, parent_name, (*chain, name), f"{path} key 'extends'")
    merged = {**parent, **{k: v for k, v in data.items() if k not in _MERGED_TABLES}}
    for key in _MERGED_TABLES:
        if key in parent or key in data:
            merged[key] = _merge(parent.get(key, {}), data.get(key, {}))
    if "targets" in data:
        # A child that narrows the targets does not inherit the cross tables of the dropped ones.
        merged["cross"] = {t: c for t, c in merged.get("cross", {}).items() if t in data["targets"]}
    merged["extends"] = parent_name
    return merged, [*files, path]


def _extra_pythons(files: list[Path], own: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """toolchains/<name>/pythons.toml along the extends chain (a child's entry wins)."""
    found: dict[str, dict[str, Any]] = {}
    for spec_file in files:
        path = spec_file.with_suffix("") / PYTHONS_FILE
        if not path.is_file():
            continue
        try:
            table: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise RecipeError(f"not valid TOML: {exc}", where=str(path)) from exc
        for version, facts in table.items():
            where = f"{path} [{version!r}]"
            if not re.fullmatch(r"3\.[0-9]{1,2}", version):
                raise RecipeError(f"{version!r} is not a CPython version", where=where, fix='e.g. ["3.11"]')
            if not isinstance(facts, dict) or set(facts) != _PYTHON_KEYS:
                raise RecipeError(
                    f"a Python version states exactly {', '.join(sorted(_PYTHON_KEYS))}",
                    where=where,
                    fix='e.g. suite = "bookworm", packages = ["python3.11", ...], numpy = "2.2.6"',
                )
            if version in own:
                raise RecipeError(
                    f"CPython {version} is the root's own Python", where=where, fix="drop it from this file"
                )
            found[version] = dict(facts)
    return found


def load_toolchain(project: Path, name: str) -> ToolchainSpec:
    data, files = _read(project, name)
    path = files[-1]
    # Errors about entries a parent may have contributed name the whole chain.
    where_all = " (with " + ", ".join(str(f) for f in files[:-1]) + ")" if len(files) > 1 else ""
    shims_dirs = tuple(f.with_suffix("") / "cmake-shims" for f in files)
    shim_files = [(d, p) for d in shims_dirs if d.is_dir() for p in sorted(d.rglob("*")) if p.is_file()]
    # `digest`: everything a build tree depends on (file texts and shims). `root_digest`: only what
    # goes into the sysroot, so editing CMake defines or shims does not re-create a 1 GB root.
    digest = sha256_text(
        *(f.read_text(encoding="utf-8") for f in files),
        *(f"{p.relative_to(d)}:{sha256_file(p)}" for d, p in shim_files),
    )
    root_digest = sha256_text(
        json.dumps(
            {
                **{
                    key: data.get(key)
                    # Everything the root is made from: the Python picks the tools venv's interpreter.
                    for key in (
                        "kind",
                        "suite",
                        "variant",
                        "mirror",
                        "python",
                        "packages",
                        "ep_packages",
                        "python_tools",
                        "components",
                        "ep_wheels",
                    )
                    if key in data or key not in ("components", "ep_wheels")
                },
                "cross_host_packages": {t: c.get("host_packages", []) for t, c in data.get("cross", {}).items()},
            },
            sort_keys=True,
        )
    )
    pinned: dict[str, tuple[str, Any]] = {}
    for ep, wheels in data.get("ep_wheels", {}).items():
        for dist, facts in wheels.items():
            lacking = sorted(_WHEEL_KEYS - set(facts))
            unknown = sorted(set(facts) - _WHEEL_KEYS - _WHEEL_OPTIONAL_KEYS)
            if lacking or unknown or not _SHA256.match(str(facts.get("sha256", ""))):
                raise RecipeError(
                    f"[ep_wheels.{ep}.{dist}] must state version and a sha256 (64 lowercase hex digits)"
                    + (f"; unknown key(s) {', '.join(unknown)}" if unknown else ""),
                    where=str(path) + where_all,
                    fix='e.g. {version = "9.7.1.26", sha256 = "…"} (optional: python = "3.12" for the wheel tag)',
                )
            other = pinned.setdefault(dist, (ep, facts))
            if other[1] != facts:
                raise RecipeError(
                    f"[ep_wheels.{ep}.{dist}] and [ep_wheels.{other[0]}.{dist}] pin {dist} differently",
                    where=str(path) + where_all,
                    fix="one root holds one copy of a wheel: pin the same version and sha256 in both",
                )
    extra_python = _extra_pythons(files, tuple(data.get("python", ())))
    plan_only = data.get("plan_only", False)
    if plan_only and not data.get("needs"):
        raise RecipeError(
            "a plan_only toolchain must say what a machine needs to run it",
            where=f"{path} key 'needs'",
            fix='e.g. needs = "macOS with Xcode"',
        )
    ep_cmake = data.get("ep_cmake", {})
    for ep in ep_cmake:
        if not any(ep in data.get(k, ()) for k in ("ep_packages", "ep_wheels", "provides")):
            raise RecipeError(
                f"[ep_cmake.{ep}] names an EP this toolchain has no [ep_packages] or [ep_wheels] entry for",
                where=str(path) + where_all,
                fix="add the EP's packages under [ep_packages] or [ep_wheels] (or name it in provides), or drop "
                "the section",
            )
    for triple, facts in data.get("cross", {}).items():
        lacking = sorted(_CROSS_KEYS - set(facts))
        if lacking:
            raise RecipeError(
                f"[cross.{triple}] lacks {', '.join(lacking)}",
                where=str(path),
                fix=f"a cross target states {', '.join(sorted(_CROSS_KEYS))}",
            )
        if triple not in data.get("targets", ()):
            raise RecipeError(f"[cross.{triple}] is not in targets", where=str(path), fix="add it to targets")
    try:
        sysroot = {key: data[key] for key in _SYSROOT_KEYS if key in data or not plan_only}
        return ToolchainSpec(
            name=name,
            kind=data["kind"],
            suite=sysroot.get("suite", ""),
            variant=data.get("variant", "minbase"),
            mirror=sysroot.get("mirror", ""),
            python=tuple(data["python"]),
            glibc=sysroot.get("glibc", ""),
            targets=tuple(data["targets"]),
            packages=tuple(sysroot.get("packages", ())),
            ep_packages={k: tuple(v) for k, v in data.get("ep_packages", {}).items()},
            ep_cmake={k: dict(v) for k, v in ep_cmake.items()},
            cmake=dict(data.get("cmake", {})),
            python_tools=dict(data.get("python_tools", {})),
            clean_root_packages=tuple(data.get("clean_root", {}).get("packages", ())),
            shims_dirs=shims_dirs,
            digest=digest,
            root_digest=root_digest,
            plan_only=plan_only,
            needs=data.get("needs", ""),
            platform_eps=tuple(data.get("provides", ())),
            cross={k: dict(v) for k, v in data.get("cross", {}).items()},
            components=tuple(data.get("components", ("main",))),
            ep_wheels={ep: {d: dict(f) for d, f in w.items()} for ep, w in data.get("ep_wheels", {}).items()},
            extends=data.get("extends", ""),
            extra_python=extra_python,
        )
    except KeyError as exc:
        raise RecipeError(f"missing key {exc.args[0]!r}", where=str(path)) from exc


__all__ = ["ToolchainSpec", "load_toolchain", "toolchain_file"]
