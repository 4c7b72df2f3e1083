"""``toolchains/<name>.toml`` and its ``extends`` chain read, merged, checked and digested into a
ToolchainSpec (the dataclasses are in spec.py)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from .. import registry
from ..config import (
    construct,
    convert_fields,
    convert_table,
    did_you_mean,
    dotted,
    parse_toml,
    read_toml,
    where,
)
from ..errors import RecipeError
from ..fsutil import sha256_file, sha256_text
from .spec import OtherPython, PinnedWheel, ToolchainFile, ToolchainSpec

# Tables a child toolchain (``extends``) merges into its parent's, key by key; every other key it
# sets replaces the parent's.
_MERGED_TABLES = (
    "cmake",
    "ep_packages",
    "ep_cmake",
    "ep_wheels",
    "ep_links",
    "ep_files",
    "ep_pip",
    "python_tools",
    "compat",
    "promise",
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CPYTHON = re.compile(r"^3\.[0-9]{1,2}$")
PYTHONS_FILE = "pythons.toml"
# What only a toolchain ortdist runs must state (a debootstrap root); plan-only ones may omit them.
_SYSROOT_KEYS = ("suite", "mirror", "glibc", "packages")
# What the sysroot is made from: its digest names the cached root (the Python picks the tools
# venv's interpreter). components and ep_wheels count only where set, so older roots keep their name.
_ROOT_KEYS = ("kind", "suite", "variant", "mirror", "python", "packages", "ep_packages", "python_tools")
_ROOT_KEYS_IF_SET = ("components", "ep_wheels", "ep_links", "ep_files", "compiler", "openmp")
# Not in either digest: what runs after the build, in roots of its own, or checks its outputs or
# a recipe (see _digest_input).
_UNDIGESTED = ("compat", "promise", "nvcc")
_TABLE_HEADER = re.compile(r"^\s*\[")
_UNDIGESTED_HEADER = re.compile(r"^\s*\[\s*(compat|promise|nvcc)\s*[.\]]")
_COMPAT_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_SUITE = re.compile(r"^[a-z][a-z0-9-]*$")


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
) -> tuple[dict[str, Any], list[tuple[Path, dict[str, Any]]]]:
    """The toolchain's table with its parents' merged in, and each file with its own table, the root
    parent's first. Each file's keys are checked on their own, so an error names the file that has it."""
    path = toolchain_file(project, name)
    if not path.is_file():
        known = sorted(p.stem for p in (project / "toolchains").glob("*.toml"))
        raise RecipeError(
            f"unknown toolchain {name!r} (no {path})",
            where=referrer,
            fix=did_you_mean(name, known) or f"known toolchains: {', '.join(known)}",
        )
    data = read_toml(path, RecipeError)
    parent_name = convert_fields(ToolchainFile, data, origin=str(path), error=RecipeError).get("extends", "")
    if not parent_name:
        return data, [(path, data)]
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
    return merged, [*files, (path, data)]


def _declared_in(chain: list[tuple[Path, dict[str, Any]]]) -> dict[str, str]:
    """Dotted key of each CMake define table entry -> the toolchain whose file states it (a child's wins)."""
    out: dict[str, str] = {}
    for path, data in chain:
        out.update({dotted("cmake", key): path.stem for key in data.get("cmake", {})})
        for ep, table in data.get("ep_cmake", {}).items():
            out.update({dotted(dotted("ep_cmake", ep), key): path.stem for key in table})
        out.update({dotted("cross", triple): path.stem for triple in data.get("cross", {})})
        out.update({"openmp": path.stem} if "openmp" in data else {})
    return out


def _extra_pythons(files: list[Path], own: tuple[str, ...]) -> dict[str, OtherPython]:
    """toolchains/<name>/pythons.toml along the extends chain (a child's entry wins)."""
    found: dict[str, OtherPython] = {}
    for spec_file in files:
        path = spec_file.with_suffix("") / PYTHONS_FILE
        if not path.is_file():
            continue
        table = convert_table(OtherPython, read_toml(path, RecipeError), origin=str(path), error=RecipeError)
        for version, facts in table.items():
            place = where(str(path), dotted("", version))
            if not _CPYTHON.match(version):
                raise RecipeError(f"{version!r} is not a CPython version", where=place, fix='e.g. ["3.11"]')
            if version in own:
                raise RecipeError(f"CPython {version} is the root's own Python", where=place, fix="drop it here")
            debian_keys = (bool(facts.suite), bool(facts.packages))
            if debian_keys != ((True, True) if facts.source == "debian" else (False, False)):
                raise RecipeError(
                    f"a {facts.source!r} CPython "
                    + ("needs a suite and packages" if facts.source == "debian" else "takes no suite or packages"),
                    where=place,
                    fix='source = "debian" with suite and packages, or source = "host" with numpy only',
                )
            found[version] = facts
    return found


def _digests(data: dict[str, Any], files: list[Path], shims_dirs: tuple[Path, ...]) -> tuple[str, str]:
    """`digest`: everything a build tree depends on (file texts and shims). `root_digest`: only what
    goes into the sysroot, so editing CMake defines or shims does not re-create a 1 GB root."""
    shim_files = [(d, p) for d in shims_dirs if d.is_dir() for p in sorted(d.rglob("*")) if p.is_file()]
    digest = sha256_text(
        *(_digest_input(f) for f in files),
        *(f"{p.relative_to(d)}:{sha256_file(p)}" for d, p in shim_files),
    )
    root = {key: data.get(key) for key in (*_ROOT_KEYS, *_ROOT_KEYS_IF_SET) if key in data or key in _ROOT_KEYS}
    root["cross_host_packages"] = {t: c.get("host_packages", []) for t, c in data.get("cross", {}).items()}
    return digest, sha256_text(json.dumps(root, sort_keys=True))


def _is_relative_below(text: str) -> bool:
    """A path that stays inside the directory it is relative to."""
    pure = PurePosixPath(text)
    return bool(pure.parts) and not pure.is_absolute() and ".." not in pure.parts


def _digest_input(path: Path) -> str:
    """A toolchain file's text as the build trees' digest sees it: without its ``[compat.*]`` tables
    and the comment lines right above each (what runs after the build, in roots of its own), so
    adding or editing them neither discards a build tree nor changes a wheel's build record. Only
    when what is left reads as the file's other keys, unchanged; else the whole text counts."""
    text = path.read_text(encoding="utf-8")
    data = parse_toml(text, str(path), RecipeError)
    if not any(key in data for key in _UNDIGESTED):
        return text
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if _TABLE_HEADER.match(line):
            skipping = bool(_UNDIGESTED_HEADER.match(line))
            while skipping and kept and (not kept[-1].strip() or kept[-1].lstrip().startswith("#")):
                kept.pop()
        if not skipping:
            kept.append(line)
    rest = "".join(kept)
    try:
        unchanged = tomllib.loads(rest) == {k: v for k, v in data.items() if k not in _UNDIGESTED}
    except tomllib.TOMLDecodeError:
        unchanged = False
    return rest if unchanged else text


def _check_compat(tc: ToolchainFile, path: Path, where_all: str) -> None:
    """[compat.<name>]: a name fit for a directory, a Debian suite, what each check needs."""
    origin = str(path) + where_all
    for name, compat in tc.compat.items():
        table = dotted("compat", name)

        def at(key: str, table: str = table) -> str:
            return where(origin, dotted(table, key) if key else table)

        if tc.plan_only:
            raise RecipeError(
                "a plan_only toolchain has no roots to check a build in",
                where=at(""),
                fix="drop the [compat] tables until the toolchain has an implementation",
            )
        if not _COMPAT_NAME.match(name):
            raise RecipeError(
                f"compat root name {name!r} is not lowercase letters, digits, dots and dashes",
                where=at(""),
                fix="rename the table, e.g. [compat.bullseye-c] (the name is part of the root's directory)",
            )
        if not _SUITE.match(compat.suite):
            raise RecipeError(
                f"suite {compat.suite!r} is not a Debian suite name",
                where=at("suite"),
                fix='a codename debootstrap knows, e.g. suite = "bullseye"',
            )
        if not compat.packages:
            raise RecipeError(
                "a compat root needs the packages its check runs",
                where=at("packages"),
                fix='check "c": packages = ["gcc", "libc6-dev"]; check "wheel": packages = ["python3", "python3-venv"]',
            )
        if compat.check == "wheel" and (compat.python is None or not _CPYTHON.match(compat.python)):
            raise RecipeError(
                f'check "wheel" needs the CPython version of the root\'s python3, got {compat.python!r}',
                where=at("python"),
                fix='e.g. python = "3.11" for bookworm (the recipe must ship a wheel for it)',
            )
        if compat.check in ("c", "web") and compat.python is not None:
            raise RecipeError(
                f'check "{compat.check}" runs no Python',
                where=at("python"),
                fix='drop python, or make it check = "wheel"',
            )
        if compat.mirror and not compat.mirror.startswith(("http://", "https://")):
            raise RecipeError(
                f"mirror {compat.mirror!r} is not an http(s) URL",
                where=at("mirror"),
                fix='e.g. mirror = "http://archive.debian.org/debian", or drop it to use the toolchain\'s mirror',
            )


def _check_ep_switches(chain: list[tuple[Path, dict[str, Any]]]) -> None:
    """No toolchain define is an EP switch: a [cmake] one would switch on EPs the recipe does not list,
    an [ep_cmake] one (passed after the EP's own switch) switch off one it does."""
    switches = registry.ep_switches()
    for path, data in chain:
        tables = {"cmake": data.get("cmake", {})}
        tables |= {dotted("ep_cmake", ep): defines for ep, defines in data.get("ep_cmake", {}).items()}
        tables |= {dotted(dotted("cross", t), "cmake"): c.get("cmake", {}) for t, c in data.get("cross", {}).items()}
        for table, defines in tables.items():
            for key in defines:
                if key in switches:
                    raise RecipeError(
                        f"{key} is an EP switch; toolchains do not set EP switches",
                        where=where(str(path), dotted(table, key)),
                        fix="drop it: the recipe's execution_providers switch EPs on (providers.toml), and a "
                        "toolchain provides an EP through [ep_packages], [ep_wheels] or provides",
                    )


def _check(tc: ToolchainFile, path: Path, where_all: str) -> None:
    """What the typed conversion cannot see: facts that span keys (or files, along ``extends``)."""
    kinds = registry.toolchain_kinds()
    if tc.kind not in kinds:
        raise RecipeError(
            f"unknown toolchain kind {tc.kind!r}",
            where=where(str(path) + where_all, "kind"),
            fix=did_you_mean(tc.kind, kinds)
            or f"kinds: {', '.join(kinds)} ({registry.data_origin('toolchain_kinds.toml')})",
        )
    if tc.plan_only and not tc.needs:
        raise RecipeError(
            "a plan_only toolchain must say what a machine needs to run it",
            where=f"{path} key 'needs'",
            fix='e.g. needs = "macOS with Xcode"',
        )
    lacking = [key for key in _SYSROOT_KEYS if not tc.plan_only and not getattr(tc, key)]
    if lacking:
        raise RecipeError(
            f"missing required key(s) {lacking}",
            where=str(path) + where_all,
            fix=f"a toolchain ortdist runs (not plan_only) builds its sysroot from {', '.join(_SYSROOT_KEYS)}",
        )
    pinned: dict[str, tuple[str, PinnedWheel]] = {}
    for ep, wheels in tc.ep_wheels.items():
        for dist, wheel in wheels.items():
            if not _SHA256.match(wheel.sha256):
                raise RecipeError(
                    f"[ep_wheels.{ep}.{dist}] must state a sha256 (64 lowercase hex digits)",
                    where=where(str(path) + where_all, f"ep_wheels.{ep}.{dist}.sha256"),
                    fix='e.g. {version = "9.7.1.26", sha256 = "…"} (optional: python = "3.12" for the wheel tag)',
                )
            other = pinned.setdefault(dist, (ep, wheel))
            if other[1] != wheel:
                raise RecipeError(
                    f"[ep_wheels.{ep}.{dist}] and [ep_wheels.{other[0]}.{dist}] pin {dist} differently",
                    where=str(path) + where_all,
                    fix="one root holds one copy of a wheel: pin the same version and sha256 in both",
                )
    pins = (
        (
            "compiler",
            tc.compiler,
            "the wheel's",
            "the sha256 PyPI lists for the wheel file (`pip download` then `sha256sum`)",
        ),
        ("openmp", tc.openmp, "the orig tarball's", "the sha256 Debian's Sources index lists for the file"),
    )
    for table, pin, what, fix in pins:
        if pin is not None and not _SHA256.match(pin.sha256):
            raise RecipeError(
                f"[{table}] must state {what} sha256 (64 lowercase hex digits)",
                where=where(str(path) + where_all, f"{table}.sha256"),
                fix=fix,
            )
    if tc.compiler is not None and tc.glibc != tc.compiler.glibc:
        raise RecipeError(
            f"glibc = {tc.glibc!r} but [compiler] has a glibc {tc.compiler.glibc} sysroot",
            where=where(str(path) + where_all, "glibc"),
            fix="the output runs on the compiler's sysroot glibc and newer: state the same version in both",
        )
    known = registry.targets()
    compiler_arch = tc.compiler.arch if tc.compiler is not None else ""
    other_arch = [t for t in tc.targets if compiler_arch and t in known and known[t].arch != compiler_arch]
    if other_arch:
        raise RecipeError(
            f"[compiler] is for {compiler_arch}, but target {other_arch[0]} is {known[other_arch[0]].arch}",
            where=where(str(path) + where_all, "compiler.arch"),
            fix="its sysroot and runtime libraries are what every target links: one toolchain file per "
            "machine (state arch = the wheel's platform machine, or narrow targets)",
        )
    if tc.openmp is not None and tc.compiler is None:
        raise RecipeError(
            "[openmp] builds libgomp for the toolchain's [compiler], and there is none",
            where=where(str(path) + where_all, "openmp"),
            fix="add a [compiler] (or extend a toolchain with one), or drop [openmp]: a root's own GCC has libgomp",
        )
    for table, entries in (("ep_links", tc.ep_links), ("ep_files", tc.ep_files)):
        for ep, paths in entries.items():
            if ep not in tc.ep_wheels:
                raise RecipeError(
                    f"[{table}.{ep}] names an EP this toolchain has no [ep_wheels] for",
                    where=str(path) + where_all,
                    fix=f"{table} are made among unpacked wheels: add [ep_wheels.{ep}.<distribution>] or drop "
                    "the section",
                )
            bad = next((p for p in paths if not _is_relative_below(p)), None)
            if bad is not None:
                raise RecipeError(
                    f"[{table}.{ep}] {bad!r}: a path must be relative, under {{wheels}}",
                    where=where(str(path) + where_all, f"{table}.{ep}"),
                    fix='e.g. "cuda/nvidia/cu13/lib/libcudart.so" = "libcudart.so.13"',
                )
    for ep, links in tc.ep_links.items():
        for link, target in links.items():
            in_root = PurePosixPath(target).is_absolute() and ".." not in PurePosixPath(target).parts
            if not target or ("/" in target and not in_root):
                raise RecipeError(
                    f"[ep_links.{ep}] {link!r} = {target!r}: a link's target is a name beside it or an "
                    "absolute path in the root",
                    where=where(str(path) + where_all, f"ep_links.{ep}"),
                    fix='e.g. "libcudart.so.13", or "/usr/bin/fatbinary" for a program of an [ep_packages] package',
                )
    for ep, wheels in tc.ep_wheels.items():
        for dist, wheel in wheels.items():
            if wheel.subdir and not _is_relative_below(wheel.subdir):
                raise RecipeError(
                    f"[ep_wheels.{ep}.{dist}] subdir {wheel.subdir!r} must be a relative path inside the wheel",
                    where=where(str(path) + where_all, f"ep_wheels.{ep}.{dist}.subdir"),
                    fix='e.g. subdir = "nvidia/cuda_runtime"',
                )
    provided = (*tc.ep_packages, *tc.ep_wheels, *tc.provides)
    for table, eps in (("ep_cmake", tc.ep_cmake), ("ep_pip", tc.ep_pip)):
        for ep in (ep for ep in eps if ep not in provided):
            raise RecipeError(
                f"[{table}.{ep}] names an EP this toolchain has no [ep_packages] or [ep_wheels] entry for",
                where=str(path) + where_all,
                fix="add the EP's packages under [ep_packages] or [ep_wheels] (or name it in provides), or drop "
                "the section",
            )
    for triple in tc.cross:
        if triple not in tc.targets:
            raise RecipeError(
                f"[cross.{triple}] is not in targets",
                where=where(str(path), f"cross.{triple}"),
                fix="add it to targets",
            )


def load_toolchain(project: Path, name: str, referrer: str = "recipe key 'toolchain'") -> ToolchainSpec:
    """``referrer``: where the name came from, for the error when there is no such toolchain."""
    data, chain = _read(project, name, referrer=referrer)
    files = [path for path, _ in chain]
    path = files[-1]
    # Errors about entries a parent may have contributed name the whole chain.
    where_all = " (with " + ", ".join(str(f) for f in files[:-1]) + ")" if len(files) > 1 else ""
    if data.get("plan_only") and "compat" not in chain[-1][1]:
        # A parent's [compat] checks the builds ortdist runs; a plan-only child has none to check
        # (cuda12-tensorrt over the portable cuda12). Its own [compat] is still refused below.
        data = {key: value for key, value in data.items() if key != "compat"}
    # Each file was checked on its own; what the merged chain still lacks is required keys.
    kwargs = convert_fields(ToolchainFile, data, origin=str(path) + where_all, error=RecipeError)
    tc = construct(ToolchainFile, kwargs, origin=str(path) + where_all, error=RecipeError)
    _check(tc, path, where_all)
    _check_compat(tc, path, where_all)
    _check_ep_switches(chain)
    shims_dirs = tuple(f.with_suffix("") / "cmake-shims" for f in files)
    digest, root_digest = _digests(data, files, shims_dirs)
    return ToolchainSpec(
        name=name,
        kind=tc.kind,
        suite=tc.suite,
        variant=tc.variant,
        mirror=tc.mirror,
        python=tc.python,
        glibc=tc.glibc,
        targets=tc.targets,
        packages=tc.packages,
        ep_packages=dict(tc.ep_packages),
        ep_cmake={ep: dict(defines) for ep, defines in tc.ep_cmake.items()},
        cmake=dict(tc.cmake),
        python_tools=dict(tc.python_tools),
        clean_root_packages=tc.clean_root.packages,
        shims_dirs=shims_dirs,
        digest=digest,
        root_digest=root_digest,
        plan_only=tc.plan_only,
        needs=tc.needs,
        platform_eps=tc.provides,
        cross_targets=tc.cross,
        components=tc.components,
        ep_wheels=tc.ep_wheels,
        ep_links=tc.ep_links,
        ep_files=tc.ep_files,
        ep_pip=tc.ep_pip,
        extends=tc.extends,
        extra_python=MappingProxyType(_extra_pythons(files, tc.python)),
        declared_in=MappingProxyType(_declared_in(chain)),
        compiler=tc.compiler,
        openmp=tc.openmp,
        deps_from_source=tc.deps_from_source,
        compat=tc.compat,
        system_libraries=tc.promise.system_libraries,
        nvcc=tc.nvcc,
    )
