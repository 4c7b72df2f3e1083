"""apt and dpkg around a root: a private package database, unpacking .debs, relative symlinks."""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from ... import run
from ...errors import ToolchainError
from ...fsutil import remove_tree
from .. import Bind


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


def download_packages(
    wrap: Callable[..., list[str]],
    build_root: Path,
    state: Path,
    arch: str,
    packages: Sequence[str],
    dest: Path,
    log: TextIO,
    installed: str = "",
) -> dict[str, str]:
    """``packages`` of ``arch`` (the root's own: "") and their dependencies not in ``installed``
    (a dpkg status file's text), downloaded by the build root's apt (run through ``wrap``) into the
    private state directory ``state`` and unpacked into ``dest``: package -> version."""
    (state / "lists" / "partial").mkdir(parents=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True)
    (state / "status").write_text(installed)
    apt_state = Path("/ortdist/apt-state")
    arches = [f"-oAPT::Architecture={arch}", f"-oAPT::Architectures={arch}"] if arch else []
    options = [*arches, *private_apt_options(apt_state)]
    install = ["install", "-y", "-q", "--download-only", "--no-install-recommends", *packages]
    script = " && ".join(shlex.join(["apt-get", *options, *words]) for words in (["update", "-q"], install))
    run.call(
        wrap(
            build_root,
            ["/bin/sh", "-c", script],
            binds=[Bind(state, apt_state)],
            env={"DEBIAN_FRONTEND": "noninteractive"},
        ),
        log=log,
        error=ToolchainError,
        what=f"downloading the {arch or 'build root'} packages",
    )
    return unpack_debs(state / "cache" / "archives", dest, log)
