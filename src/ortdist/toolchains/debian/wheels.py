"""The PyPI wheels a build root is finished with: the Python tools, the SDK wheels ([ep_wheels],
unpacked with their executable bits and [ep_links]) and the [compiler] wheel's toolchain."""

from __future__ import annotations

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
    spec: ToolchainSpec, cache: Cache, dist: str, version: str, sha256: str, python: str, table: str
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
    )


def install_compiler(spec: ToolchainSpec, cache: Cache, root: Path, log: TextIO) -> None:
    """Unpack the [compiler] wheel's toolchain tarball into <root>{compiler} and make its links."""
    compiler = spec.compiler
    if compiler is None:
        return
    wheel = pinned_wheel(spec, cache, compiler.wheel, compiler.version, compiler.sha256, "", "[compiler]")
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
    """Unpack each SDK wheel into <root>/opt/ortdist-wheels/<distribution, or its ``into``> with
    its executable bits (no pip: they are file trees of headers, programs and libraries, not
    Python packages the root would import), then make the [ep_links]."""
    pins = spec.all_wheels()
    base = root / IN_ROOT_EP_WHEELS.relative_to("/")
    for dist, wheel in download_ep_wheels(spec, cache).items():
        into = pins[dist].directory(dist)
        print(f"ortdist: unpacking {wheel.name} into {IN_ROOT_EP_WHEELS / into}", file=log)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(base / into)
            for member in archive.infolist():
                mode = member.external_attr >> 16
                if mode & 0o111 and not member.is_dir():  # as pip does: zipfile drops the x bits
                    (base / into / member.filename).chmod(0o755)
    for ep, links in sorted(spec.ep_links.items()):
        for relative, target in sorted(links.items()):
            link = base / relative
            if not (link.parent / target).exists():
                raise ToolchainError(
                    f"[ep_links.{ep}] {relative} -> {target}: no {target} beside it in the unpacked wheels",
                    fix=f"correct [ep_links.{ep}] in toolchains/{spec.name}.toml (or the wheel pins)",
                )
            link.symlink_to(target)
