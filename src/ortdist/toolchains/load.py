"""``toolchains/<name>.toml`` and its ``extends`` chain read, merged, checked and digested into a
ToolchainSpec (the dataclasses are in spec.py)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from types import MappingProxyType
from typing import Any

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
from .checks import check_compat, check_ep_switches, check_file
from .spec import LIBSTDCXX_LAYOUT, OtherPython, ToolchainFile, ToolchainSpec

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
    "ep_bundle",
    "python_tools",
    "compat",
    "promise",
)
_CPYTHON = re.compile(r"^3\.[0-9]{1,2}$")
PYTHONS_FILE = "pythons.toml"
# What the sysroot is made from: its digest names the cached root (the Python picks the tools
# venv's interpreter). components and ep_wheels count only where set, so older roots keep their name.
_ROOT_KEYS = ("kind", "suite", "variant", "mirror", "python", "packages", "ep_packages", "python_tools")
_ROOT_KEYS_IF_SET = ("components", "ep_wheels", "ep_links", "ep_files", "compiler", "openmp", "libstdcxx")
# Not in either digest: what runs after the build, in roots of its own, or checks its outputs or
# a recipe (see _digest_input).
_UNDIGESTED = ("compat", "promise", "nvcc")
_TABLE_HEADER = re.compile(r"^\s*\[")
_UNDIGESTED_HEADER = re.compile(r"^\s*\[\s*(compat|promise|nvcc)\s*[.\]]")


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
        out.update({table: path.stem for table in ("openmp", "libstdcxx") if table in data})
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
    if "libstdcxx" in data:
        root["libstdcxx_layout"] = LIBSTDCXX_LAYOUT
    return digest, sha256_text(json.dumps(root, sort_keys=True))


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
    check_file(tc, path, where_all)
    check_compat(tc, path, where_all)
    check_ep_switches(chain)
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
        ep_bundle=tc.ep_bundle,
        extends=tc.extends,
        extra_python=MappingProxyType(_extra_pythons(files, tc.python)),
        declared_in=MappingProxyType(_declared_in(chain)),
        compiler=tc.compiler,
        openmp=tc.openmp,
        libstdcxx=tc.libstdcxx,
        deps_from_source=tc.deps_from_source,
        compat=tc.compat,
        system_libraries=tc.promise.system_libraries,
        nvcc=tc.nvcc,
    )
