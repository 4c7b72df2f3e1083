"""The PyPI wheels a build root is finished with: the Python tools, the SDK wheels ([ep_wheels],
unpacked with their executable bits and [ep_links]) and the [compiler] wheel's toolchain."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path
from typing import TextIO

from ... import run, sources, wheelhouse
from ...errors import ToolchainError
from ...paths import IN_ROOT_COMPILER, IN_ROOT_EP_WHEELS, Cache
from ..spec import ToolchainSpec


def download_python_tools(spec: ToolchainSpec, cache: Cache, python: str) -> Path:
    """Fetch wheels of the in-root tools on the host (pip in the root fails the TLS check here)."""
    house = cache.wheelhouse(python)
    house.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={version}" for name, version in spec.python_tools.items()]
    if pins:
        run.capture(
            wheelhouse.pip_download_argv(house, python, pins),
            error=ToolchainError,
            what=f"downloading {', '.join(pins)} from PyPI",
        )
    return house


def download_ep_wheels(spec: ToolchainSpec, cache: Cache) -> dict[str, Path]:
    """The [ep_wheels] from PyPI, hash-checked by pip (--require-hashes): distribution -> file."""
    return {
        dist: pinned_wheel(spec, cache, dist, facts.version, facts.sha256, facts.python, "[ep_wheels]")
        for dist, facts in sorted(spec.all_wheels().items())
    }


def pinned_wheel(
    spec: ToolchainSpec,
    cache: Cache,
    dist: str,
    version: str,
    sha256: str,
    python: str,
    table: str,
    arch: str = "x86_64",
) -> Path:
    """A wheel pinned in the toolchain file, keyed by the pin itself: a changed pin downloads afresh
    instead of failing on the old file."""
    return wheelhouse.pinned_wheel(
        cache.downloads / "ep-wheels" / f"{dist}-{version}-{sha256[:12]}",
        dist,
        version,
        sha256,
        python or spec.python[0],
        fix=f"check {table} in toolchains/{spec.name}.toml against PyPI's file list",
        arch=arch,
    )


def install_compiler(spec: ToolchainSpec, cache: Cache, root: Path, log: TextIO) -> None:
    """Unpack the [compiler] wheel's toolchain tarball into <root>{compiler} and make its links."""
    compiler = spec.compiler
    if compiler is None:
        return
    wheel = pinned_wheel(
        spec, cache, compiler.wheel, compiler.version, compiler.sha256, "", "[compiler]", arch=compiler.arch
    )
    dest = root / IN_ROOT_COMPILER.relative_to("/")
    print(f"ortdist: unpacking {compiler.archive} of {wheel.name} into {IN_ROOT_COMPILER}", file=log)
    with zipfile.ZipFile(wheel) as archive:
        if compiler.archive not in archive.namelist():
            raise ToolchainError(
                f"{wheel.name} has no {compiler.archive}",
                fix=f"correct [compiler] archive in toolchains/{spec.name}.toml",
            )
        with archive.open(compiler.archive) as inner:
            sources.unpack_stream(inner, dest, f"{wheel.name}:{compiler.archive}")
    for relative, target in compiler.links.items():
        link = dest / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)


def install_ep_wheels(spec: ToolchainSpec, cache: Cache, root: Path, log: TextIO) -> None:
    """Unpack each SDK wheel (or its ``subdir``) into <root>/opt/ortdist-wheels/<distribution, or
    its ``into``> with its executable bits (no pip: they are file trees of headers, programs and
    libraries, not Python packages the root would import), then make the [ep_links] and [ep_files]."""
    pins = spec.all_wheels()
    base = root / IN_ROOT_EP_WHEELS.relative_to("/")
    for dist, wheel in download_ep_wheels(spec, cache).items():
        pin = pins[dist]
        into = pin.directory(dist)
        part = f"{wheel.name}:{pin.subdir}" if pin.subdir else wheel.name
        print(f"ortdist: unpacking {part} into {IN_ROOT_EP_WHEELS / into}", file=log)
        _unpack_wheel(wheel, pin.subdir, base / into, f"toolchains/{spec.name}.toml [ep_wheels] {dist}")
    for ep, links in sorted(spec.ep_links.items()):
        for relative, target in sorted(links.items()):
            link = base / relative
            # An absolute target is a path in the root (a program an [ep_packages] package installed).
            there = root / target.lstrip("/") if target.startswith("/") else link.parent / target
            if not os.path.lexists(there):
                raise ToolchainError(
                    f"[ep_links.{ep}] {relative} -> {target}: no {target} "
                    + ("in the root" if target.startswith("/") else "beside it in the unpacked wheels"),
                    fix=f"correct [ep_links.{ep}] in toolchains/{spec.name}.toml (or the wheel pins, or [ep_packages])",
                )
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    for files in spec.ep_files.values():
        for relative, text in sorted(files.items()):
            (base / relative).parent.mkdir(parents=True, exist_ok=True)
            (base / relative).write_text(text)


def _unpack_wheel(wheel: Path, subdir: str, dest: Path, what: str) -> None:
    """The wheel's files (those under ``subdir``, re-rooted at ``dest``) with pip's executable bits.
    Wheels merged into one tree may hold the same file only with the same bytes (their empty
    ``__init__.py``s): a clash of different files would leave whichever came last."""
    prefix = subdir.rstrip("/") + "/" if subdir else ""
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.infolist() if m.filename.startswith(prefix) and m.filename != prefix]
        if not members:
            raise ToolchainError(f"{wheel.name} has nothing under {subdir!r}", fix=f"correct the subdir in {what}")
        for member in members:
            out = dest / member.filename[len(prefix) :]
            if member.is_dir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            if ".." in Path(member.filename).parts:
                raise ToolchainError(f"{wheel.name}: {member.filename} points outside its tree", fix=f"check {what}")
            if out.exists():
                if out.read_bytes() != archive.read(member):
                    raise ToolchainError(
                        f"{wheel.name}: {member.filename} would overwrite a different {out.relative_to(dest)} "
                        "of another wheel in the same tree",
                        fix=f"unpack one of them elsewhere (into / subdir in {what})",
                    )
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, out.open("wb") as sink:  # streamed: cuBLASLt is 500 MB
                shutil.copyfileobj(source, sink, 1 << 20)
            mode = member.external_attr >> 16
            if mode & 0o111:  # as pip does: the zip's x bits (zipfile alone drops them)
                out.chmod(0o755)
