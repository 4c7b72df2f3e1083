"""apt and dpkg around a root: a private package database, unpacking .debs, relative symlinks."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from ... import run
from ...errors import ToolchainError
from ...fsutil import remove_tree


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
