"""What a toolchain file (with its ``extends`` chain merged) must hold beyond what the typed
conversion sees: facts that span keys, tables or files. load.py calls them on every toolchain."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from .. import registry
from ..config import did_you_mean, dotted, where
from ..errors import RecipeError
from .spec import LIBSTDCXX_COMPAT, LIBSTDCXX_STUB, PinnedWheel, ToolchainFile

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CPYTHON = re.compile(r"^3\.[0-9]{1,2}$")
# What only a toolchain ortdist runs must state (a debootstrap root); plan-only ones may omit them.
_SYSROOT_KEYS = ("suite", "mirror", "glibc", "packages")
_COMPAT_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_SUITE = re.compile(r"^[a-z][a-z0-9-]*$")


def _is_relative_below(text: str) -> bool:
    """A path that stays inside the directory it is relative to."""
    pure = PurePosixPath(text)
    return bool(pure.parts) and not pure.is_absolute() and ".." not in pure.parts


def check_compat(tc: ToolchainFile, path: Path, where_all: str) -> None:
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
                fix="an http(s) URL of a Debian archive, or drop it to use the toolchain's mirror",
            )


def check_ep_switches(chain: list[tuple[Path, dict[str, Any]]]) -> None:
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


_LIBSTDCXX_FAMILIES = ("GLIBCXX", "CXXABI")
_LINKER_FLAGS = ("CMAKE_SHARED_LINKER_FLAGS", "CMAKE_MODULE_LINKER_FLAGS", "CMAKE_EXE_LINKER_FLAGS")


def _check_libstdcxx(tc: ToolchainFile, path: Path, where_all: str) -> None:
    """[libstdcxx] needs a [compiler] (whose libstdc++ the stub is made from), version families
    libstdc++ has, and linker flags that put the stub on every link line: without it on one, that
    output would carry its own libstdc++ after all."""
    shared = tc.libstdcxx
    if shared is None:
        return
    if tc.compiler is None:
        raise RecipeError(
            "[libstdcxx] makes its stub from the toolchain's [compiler] libstdc++, and there is none",
            where=where(str(path) + where_all, "libstdcxx"),
            fix="add a [compiler] (or extend a toolchain with one), or drop [libstdcxx]",
        )
    for family, number in shared.newest.items():
        if family not in _LIBSTDCXX_FAMILIES or not re.fullmatch(r"[0-9]+(\.[0-9]+)*", number):
            raise RecipeError(
                f"[libstdcxx] newest: {family} = {number!r} is not a libstdc++ symbol version",
                where=where(str(path) + where_all, f"libstdcxx.newest.{family}"),
                fix=f'name {" or ".join(_LIBSTDCXX_FAMILIES)} with a dotted version (GLIBCXX = "3.4.19")',
            )
    for name in (LIBSTDCXX_STUB, LIBSTDCXX_COMPAT):
        needed = f"{{compiler}}/{name}"
        for key in _LINKER_FLAGS:
            if needed not in tc.cmake.get(key, "").split():
                raise RecipeError(
                    f"[libstdcxx] is set but [cmake] {key} does not link {needed}",
                    where=where(str(path) + where_all, f"cmake.{key}"),
                    fix=f"add {{compiler}}/{LIBSTDCXX_STUB} and {{compiler}}/{LIBSTDCXX_COMPAT} to {key} (with "
                    "-static-libstdc++: the stub's symbols come from the system's libstdc++.so.6, the newer "
                    "string members from the compat object, the rest from GCC's static archive)",
                )


def check_file(tc: ToolchainFile, path: Path, where_all: str) -> None:
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
    _check_libstdcxx(tc, path, where_all)
    for ep, files in tc.ep_bundle.items():
        names = [PurePosixPath(f).name for f in files]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise RecipeError(
                f"[ep_bundle.{ep}] names {twice[0]} twice: the package holds each file once, by its name",
                where=where(str(path) + where_all, f"ep_bundle.{ep}"),
                fix="bundle one of them",
            )
    tables: tuple[tuple[str, Mapping[str, Iterable[str]]], ...] = (
        ("ep_links", tc.ep_links),
        ("ep_files", tc.ep_files),
        ("ep_bundle", tc.ep_bundle),
    )
    for table, entries in tables:
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
