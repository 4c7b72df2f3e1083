"""Toolchain kind ``debian-sysroot``: a debootstrap root, entered with chroot as root.

Commands run as ``unshare --mount`` + ``chroot``: bind mounts and /proc live in a private
mount namespace that the kernel tears down when the command exits, so an interrupted build
(Ctrl-C, kill -9) never leaves mounts behind, and ``rm -rf`` of the cache stays safe.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ... import mirrors, run, treecheck
from ...errors import ToolchainError
from ...fsutil import remove_tree, temp_sibling_dir
from ...hosttools import require_host_tools, require_root
from ...log import log as status
from ...paths import IN_ROOT_TOOLS_VENV, IN_ROOT_WHEELHOUSE, Cache
from .. import Bind, ToolTree
from ..host_python import find_host_python
from ..spec import CompatRoot, ToolchainSpec
from .apt import apt_state_dir, download_packages, relativize_symlinks
from .libstdcxx import install_libstdcxx
from .names import (
    Origin,
    build_root_name,
    clean_root_name,
    compat_origin,
    compat_root_name,
    python_overlay_name,
    target_root_name,
    tool_tree_name,
)
from .openmp import install_openmp
from .overlays import fill_overlay
from .verify import dpkg_mismatches, has_dpkg_sums, root_exclude
from .wheels import download_python_tools, install_compiler, install_ep_wheels

STAMP = ".ortdist-root.json"
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}


@dataclass(frozen=True)
class RootRecipe:
    """What a root is made of, for every kind (build, clean, compat, cross target, CPython overlay):
    where it lives, what the log says when it is made, and ``make``, which fills an empty directory
    and returns what the root's stamp records besides the toolchain. ``DebianSysroot.make_root``
    is the one path that reuses, makes, stamps and records a root.

    A new kind of root is a method that builds one of these and hands it to ``make_root``, plus its
    name in names.py (which ``root_names`` lists for CI's caches)."""

    final: Path
    announce: str
    make: Callable[[Path], Mapping[str, object]]


class DebianSysroot:
    def __init__(self, spec: ToolchainSpec) -> None:
        self.spec = spec
        self._verified: set[Path] = set()  # roots verified by this process (a build asks several times)

    def reuse_root(self, final: Path) -> bool:
        """Whether the root ``final`` exists, is complete (its stamp) and holds what was recorded at
        its creation; one that differs is deleted, so the caller creates it again.

        Every regular file is sha256-hashed, on a thread per core. Measured on this project's 2-core
        VM, shared (load 2-3; cold = the tree's pages evicted first): the trixie build root, 41,076
        files / 1.77 GB, 6.4-12.5 s cold and 2.9-4.5 s warm; the clean root (6,284 files / 257 MB)
        1.5 s / 0.6 s; the arm64 target root (24,364 files / 442 MB) 4.2 s / 1.4 s; a CPython
        overlay (1,854 files / 114 MB) 0.4 s / 0.2 s. Under 1% of a cold build and a few seconds of
        a warm one, so the full hash was kept over a cheaper stat-based check (size, mtime, inode),
        which a copy restored from a CI cache would fail wholesale and which a tool that preserves
        times would pass. A root several times larger (cuda12's) would be worth a stat fast path.
        A root made before roots had a manifest is first checked against what dpkg recorded when it
        installed the packages (``dpkg_mismatches``: every packaged file's md5, 3.6 s for the build
        root): one that differs is made again, one that matches has its content recorded, with a
        warning. Re-creating every such root unseen would cost a debootstrap each (minutes, the
        network); recording it unchecked would vouch for whatever it holds now.
        """
        if not (final / STAMP).is_file():
            return False
        if final in self._verified:
            return True
        if not treecheck.manifest_path(final).is_file():
            problems = dpkg_mismatches(final)
            if problems:
                status.warning(
                    f"root {final} (made before ortdist recorded a digest) differs from what dpkg installed "
                    f"({len(problems)} file(s): {', '.join(problems[:5])}); rebuilding it"
                )
                remove_tree(final)
                return False
            checked = "its packaged files match dpkg's md5sums" if has_dpkg_sums(final) else "no dpkg database"
            status.warning(
                f"recording content digest of existing root {final} (made before ortdist recorded one; {checked})"
            )
            treecheck.record(final, root_exclude)
            self._verified.add(final)
            return True
        if treecheck.reuse(final, "root", root_exclude, ignore_new_empty_dirs=True):
            self._verified.add(final)
            return True
        return False

    def _finish_root(self, tmp: Path, final: Path) -> None:
        """Record the new root's manifest, then rename it into place (a root without one is older)."""
        treecheck.record(tmp, root_exclude, manifest=treecheck.manifest_path(final))
        tmp.rename(final)
        self._verified.add(final)

    def preflight(self) -> None:
        require_root()
        require_host_tools("unshare", "chroot")

    # --- paths -------------------------------------------------------------------------------
    def build_root_path(self, cache: Cache) -> Path:
        return cache.sysroots / build_root_name(self.spec)

    def clean_root_path(self, cache: Cache) -> Path:
        return cache.sysroots / clean_root_name(self.spec)

    # --- running inside ----------------------------------------------------------------------
    def wrap(
        self,
        root: Path,
        cmd: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        writable: Path | None = None,
    ) -> list[str]:
        q = shlex.quote
        lines = ["set -e"]
        if writable is not None:
            # The root as a lower layer: what the command writes lands in ``writable``, and the
            # merged top directory is world-readable (a root is made 0700), for a daemon that drops
            # root (distccd runs compilers as nobody).
            upper, work, merged = writable / "upper", writable / "work", writable / "merged"
            lines.append(f"mkdir -p {q(str(upper))} {q(str(work))} {q(str(merged))} && chmod 755 {q(str(upper))}")
            options = f"lowerdir={root},upperdir={upper},workdir={work}"
            lines.append(f"mount -t overlay overlay -o {q(options)} {q(str(merged))}")
            root = merged
        for bind in binds:
            target = root / bind.inside.relative_to("/")
            lines.append(f"mkdir -p {q(str(target))}")
            lines.append(f"mount --bind {q(str(bind.host))} {q(str(target))}")
            if bind.read_only:
                lines.append(f"mount -o remount,bind,ro {q(str(target))}")
        lines.append(f"mount -t proc proc {q(str(root / 'proc'))}")
        # /sys read-only, as every system has it: cpuinfo on arm64 reads the CPU lists there (and
        # aborts without them), which a wheel's check under the emulator runs into.
        lines.append(f"mkdir -p {q(str(root / 'sys'))} && mount -t sysfs -o ro sysfs {q(str(root / 'sys'))}")
        lines.append(f"mount --rbind /dev {q(str(root / 'dev'))}")
        variables = {**BASE_ENV, **(env or {})}
        inner = shlex.join(cmd)
        if cwd is not None:
            inner = f"cd {q(str(cwd))} && exec {inner}"
        launcher = [
            "chroot",
            str(root),
            "/usr/bin/env",
            "-i",
            *(f"{k}={v}" for k, v in variables.items()),
            "/bin/sh",
            "-c",
            inner,
        ]
        lines.append("exec " + shlex.join(launcher))
        argv = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(lines)]
        return run.Shown(argv, f"[{root.name}] {inner}")

    # --- creating roots ----------------------------------------------------------------------
    def _bootstrap(self, tmp: Path, packages: Sequence[str], log: TextIO, origin: Origin) -> None:
        run.call(
            # A private mount namespace: the proc/sys mounts debootstrap makes in the target die with
            # it, even when it is killed, so the half-made root can always be deleted.
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "debootstrap",
                f"--variant={self.spec.variant}",
                f"--components={','.join(origin.components)}",
                origin.suite,
                str(tmp),
                mirrors.debian_archive(origin.mirror).url,  # the host's Debian mirror, if apt names one
            ],
            log=log,
            error=ToolchainError,
            what="debootstrap",
        )
        shutil.copyfile("/etc/resolv.conf", tmp / "etc" / "resolv.conf")
        apt_env = {"DEBIAN_FRONTEND": "noninteractive"}
        run.call(
            self.wrap(tmp, ["apt-get", "update"], env=apt_env),
            log=log,
            error=ToolchainError,
            what="apt-get update in the new root",
        )
        run.call(
            self.wrap(tmp, ["apt-get", "install", "-y", "--no-install-recommends", *packages], env=apt_env),
            log=log,
            error=ToolchainError,
            what=f"apt-get install in the new root ({len(packages)} packages)",
        )
        run.call(self.wrap(tmp, ["apt-get", "clean"]), log=log, error=ToolchainError, what="apt-get clean")

    def _installed(self, tmp: Path) -> dict[str, str]:
        """Package -> version, as dpkg in the new root records them."""
        versions = run.capture(
            self.wrap(tmp, ["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"]),
            error=ToolchainError,
            what="dpkg-query",
        ).stdout
        return dict(line.split("\t", 1) for line in versions.splitlines() if "\t" in line)

    @property
    def _own_origin(self) -> Origin:
        """The toolchain's own suite: its build and clean roots."""
        spec = self.spec
        return Origin(spec.suite, spec.mirror, spec.components, spec.root_digest)

    def make_root(self, recipe: RootRecipe) -> Path:
        """Every kind of root, made once: reused when its stamp and content check out, else filled
        in a temp sibling by ``recipe.make``, stamped with what that returned and renamed into place."""
        require_root()  # an existing root too: every command in it needs unshare and chroot
        if self.reuse_root(recipe.final):
            return recipe.final
        if recipe.announce:
            status.info(recipe.announce)
        with temp_sibling_dir(recipe.final) as tmp:
            facts = {"toolchain": self.spec.name, **recipe.make(tmp)}
            (tmp / STAMP).write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            self._finish_root(tmp, recipe.final)
        return recipe.final

    def _debootstrapped(
        self,
        final: Path,
        packages: Sequence[str],
        log: TextIO,
        finish: Callable[[Path], None] | None = None,
        origin: Origin | None = None,
    ) -> RootRecipe:
        """A root bootstrapped from ``origin``'s suite (default: the toolchain's) with ``packages``
        installed by its own apt, then ``finish``ed: the build, clean and compat roots."""
        origin = origin or self._own_origin

        def make(tmp: Path) -> dict[str, object]:
            require_host_tools("debootstrap", "unshare", "chroot")
            self._bootstrap(tmp, packages, log, origin)
            if finish is not None:
                finish(tmp)
            facts: dict[str, object] = {"suite": origin.suite, "digest": origin.digest, "requested": list(packages)}
            if origin.compat:
                facts["compat"] = origin.compat
            facts["installed"] = self._installed(tmp)
            return facts

        count = f"{len(packages)} packages"
        announce = f"creating root {final.name} (debootstrap {origin.suite}, {count}; once per content digest)"
        return RootRecipe(final, announce, make)

    def ensure_build_root(self, cache: Cache, log: TextIO) -> Path:
        python = self.spec.python[0]

        def install_tools(tmp: Path) -> None:
            if not self.spec.python_tools:
                return  # nothing to install (the WebAssembly toolchain packages no wheel)
            house = download_python_tools(self.spec, cache, python)
            venv = str(IN_ROOT_TOOLS_VENV)
            run.call(
                self.wrap(tmp, [f"python{python}", "-m", "venv", venv]),
                log=log,
                error=ToolchainError,
                what="creating the tools venv",
            )
            pins = [f"{n}=={v}" for n, v in self.spec.python_tools.items()]
            pip = [f"{venv}/bin/pip", "install", "--no-index", "--find-links", str(IN_ROOT_WHEELHOUSE), *pins]
            run.call(
                self.wrap(tmp, pip, binds=[Bind(house, IN_ROOT_WHEELHOUSE, read_only=True)]),
                log=log,
                error=ToolchainError,
                what="installing the Python tools in the root",
            )

        def finish(tmp: Path) -> None:
            install_tools(tmp)
            install_ep_wheels(self.spec, cache, tmp, log)
            install_compiler(self.spec, cache, tmp, log)
            install_openmp(self.spec, cache, tmp, log, self.wrap)
            install_libstdcxx(self.spec, tmp, log, self.wrap)

        return self.make_root(self._debootstrapped(self.build_root_path(cache), self.spec.all_packages(), log, finish))

    def ensure_clean_root(self, cache: Cache, log: TextIO) -> Path:
        return self.make_root(self._debootstrapped(self.clean_root_path(cache), self.spec.clean_root_packages, log))

    # --- older systems (the compat step) ----------------------------------------------------------
    def _compat_origin(self, compat: CompatRoot) -> Origin:
        return compat_origin(self.spec, compat)

    def compat_root_path(self, cache: Cache, compat: CompatRoot) -> Path:
        """<cache>/sysroots/compat-<name>-<digest>: keyed by what it is made of (suite, mirror,
        packages), not by the toolchain, whose digests it is no part of."""
        return cache.sysroots / compat_root_name(self.spec, compat)

    def ensure_compat_root(self, cache: Cache, compat: CompatRoot, log: TextIO) -> Path:
        """An older Debian (``compat.suite``) with only ``compat.packages``: made, stamped and
        verified like the clean root, from its own suite."""
        origin = self._compat_origin(compat)
        final = self.compat_root_path(cache, compat)
        return self.make_root(self._debootstrapped(final, compat.packages, log, origin=origin))

    # --- cross targets ------------------------------------------------------------------------
    def target_root_path(self, cache: Cache, triple: str, clean: bool = False) -> Path:
        return cache.sysroots / target_root_name(self.spec, triple, clean)

    def ensure_clean_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        """The target's bare Python only (no build dependency): where a cross-built wheel is checked,
        under the emulator, so a library the wheel forgot to bundle shows up as an import error."""
        return self.ensure_target_root(cache, build_root, triple, log, clean=True)

    def ensure_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO, clean: bool = False) -> Path:
        """The cross target's libraries, in a sysroot of their own (the build root keeps the host's:
        some -dev packages cannot be co-installed across architectures). The build root's apt,
        told the target is its only architecture and given an empty package database, downloads
        the packages' whole dependency closure; the .debs are unpacked, not installed (nothing of
        the target runs), and absolute symlinks are made relative so they resolve inside it."""
        final = self.target_root_path(cache, triple, clean)
        cross = self.spec.cross_targets[triple]
        arch = cross.dpkg_arch
        packages = cross.clean_packages if clean else cross.packages

        def make(tmp: Path) -> dict[str, object]:
            with apt_state_dir(final) as state:
                versions = download_packages(self.wrap, build_root, state, arch, packages, tmp, log)
            relativize_symlinks(tmp)
            # Debian's merged /usr: /lib etc. are links a real root gets from debootstrap; the
            # program interpreter (/lib/ld-linux-*.so.1) is found through them.
            for top in ("bin", "sbin", "lib"):
                if not (tmp / top).exists() and (tmp / "usr" / top).is_dir():
                    (tmp / top).symlink_to(f"usr/{top}")
            return {"arch": arch, "requested": list(packages), "installed": versions}

        announce = f"creating target sysroot {final.name} ({arch}, {len(packages)} packages)"
        return self.make_root(RootRecipe(final, announce, make))

    def ensure_tool_tree(self, cache: Cache, build_root: Path, tree: ToolTree, log: TextIO) -> Path:
        """``tree``'s packages and those of their dependencies the build root lacks, downloaded by
        its apt and unpacked into a tree of their own beside it (nothing installed, the root
        untouched), then ``tree.finish``ed."""
        final = cache.sysroots / tool_tree_name(self.spec, tree.name, tree.packages, tree.layout)
        packages = tree.packages

        def make(tmp: Path) -> dict[str, object]:
            with apt_state_dir(final) as state:
                installed = (build_root / "var" / "lib" / "dpkg" / "status").read_text(encoding="utf-8")
                versions = download_packages(self.wrap, build_root, state, "", packages, tmp, log, installed)
            tree.finish(tmp)
            return {"build_root": build_root.name, "requested": list(packages), "installed": versions}

        return self.make_root(RootRecipe(final, f"unpacking {', '.join(packages)} beside {build_root.name}", make))

    # --- other CPython versions ------------------------------------------------------------------
    def python_overlay_path(self, cache: Cache, version: str) -> Path:
        if self.spec.extra_python[version].source == "host":
            host = find_host_python(version)
            origin = ["host", str(host.prefix), host.full_version]
            return cache.sysroots / python_overlay_name(self.spec, version, origin)
        return cache.sysroots / python_overlay_name(self.spec, version)

    def ensure_python_overlay(self, cache: Cache, build_root: Path, version: str, log: TextIO) -> Path:
        """CPython ``version`` in a directory of its own (bound at /ortdist/python/<version>), laid out
        like an unpacked Debian CPython under usr/, plus numpy from PyPI for the binding's headers."""
        final = self.python_overlay_path(cache, version)
        return self.make_root(
            RootRecipe(final, "", lambda tmp: fill_overlay(self.spec, self.wrap, build_root, cache, version, tmp, log))
        )

    def root_names(self, triple: str, steps: Collection[str], extra_python: Sequence[str]) -> tuple[str, ...]:
        """The build root's name, then those of the other roots a build of ``steps`` (and its smoke
        test, in the same toolchain's roots) makes; host CPythons' overlays are the host's own."""
        spec, cross = self.spec, self.spec.is_cross(triple)
        names = [build_root_name(spec)]
        if set(steps) & {"c_smoke", "models"} or ("check" in steps and not cross):
            names.append(clean_root_name(spec))
        if cross:
            names.append(target_root_name(spec, triple))
            if "check" in steps:
                names.append(target_root_name(spec, triple, clean=True))
        names += [python_overlay_name(spec, v) for v in extra_python if spec.extra_python[v].source != "host"]
        if "compat" in steps:
            names += [compat_root_name(spec, compat) for compat in spec.compat.values()]
        elif "web_smoke" in steps:  # the browser's root (check "web"), which the compat step otherwise lists
            names += [compat_root_name(spec, compat) for compat in spec.compat_roots("web")]
        return tuple(names)

    def installed_packages(self, root: Path) -> dict[str, str]:
        data = json.loads((root / STAMP).read_text(encoding="utf-8"))
        return dict(data["installed"])

    def library_packages(self, root: Path) -> dict[str, str]:
        """Shared-library file name -> the Debian package that installed it (from dpkg's file lists)."""
        owners: dict[str, str] = {}
        for listing in sorted((root / "var" / "lib" / "dpkg" / "info").glob("*.list")):
            package = listing.stem.split(":", 1)[0]
            for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
                name = line.rsplit("/", 1)[-1]
                if ".so" in name:
                    owners.setdefault(name, package)
        return owners
