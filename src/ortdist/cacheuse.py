"""What the cache holds, which recipe uses each tree, and removing the trees none uses.

ortdist names a patched source, a root and a build tree by what it is made of, so a changed patch
or toolchain leaves the old tree beside the new one, and nothing ever used it again: one machine
held 17 patched ORT sources of 328 MB (5.6 GB) when its disk filled and CI failed. The plans of
the project's recipes name every tree they use (the names CI's cache keys come from), so a tree
no plan names is one ``ortdist cache --prune`` may remove. Pure but for ``disk_bytes`` and
``remove``: a survey is data in, data out, and unit-tested so.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .fsutil import remove_tree, unmount_below
from .paths import Cache
from .pipeline.layout import dep_tree_name, root_names, source_tree_name
from .plan import BuildPlan
from .treecheck import MANIFEST_SUFFIX

# The cache directories whose entries are trees named by what they are made of (prunable), and
# the others, listed with their size only: shared by recipes, or bounded by their own tool.
TREES = ("sources", "sysroots", "work")
SHARED = {
    "ccache": "the compiler cache: bounded by its max_size",
    "downloads": "Debian packages and source tarballs, shared by every recipe",
    "wheelhouse": "wheels the checks and smoke tests install offline",
    "smoke": "smoke tests' environments, one per wheel name",
    "bench": "`nox -s bench`'s own trees",
    "tools": "host tools ortdist unpacked",
}


@dataclass(frozen=True)
class Entry:
    """One tree (or shared directory) of the cache and who uses it."""

    kind: str  # sources | sysroots | work, or one of SHARED
    name: str
    size: int  # bytes on disk, the content manifest beside it included
    used_by: tuple[str, ...] = ()  # recipes whose plan names it
    kept: str = ""  # why it stays although no plan names it (SHARED's reason, a host's own CPython)

    @property
    def prunable(self) -> bool:
        return not self.used_by and not self.kept


def used_trees(plans: Mapping[str, BuildPlan]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(kind, name) -> the recipes whose plan uses that tree: their roots (as ``root_names``
    lists them for CI), their patched source and dependency sources, their build tree."""
    users: dict[tuple[str, str], set[str]] = {}
    for recipe, plan in plans.items():
        names = [("work", plan.recipe.name), *(("sources", dep_tree_name(dep)) for dep in plan.deps)]
        if plan.recipe.source.kind != "path":
            names.append(("sources", source_tree_name(plan)))
        names += [("sysroots", name) for name in root_names(plan)]
        for key in names:
            users.setdefault(key, set()).add(recipe)
    return {key: tuple(sorted(who)) for key, who in users.items()}


def host_named(plans: Iterable[BuildPlan]) -> re.Pattern[str] | None:
    """Roots named by this host's own CPython installation (a toolchain's ``source = "host"``
    Pythons): their names digest what is installed here, which a plan does not know. Kept."""
    prefixes = sorted(
        {
            f"{re.escape(plan.toolchain.name)}-python{re.escape(version)}-"
            for plan in plans
            for version, facts in plan.toolchain.extra_python.items()
            if facts.source == "host"
        }
    )
    return re.compile("|".join(prefixes)) if prefixes else None


def survey(cache: Cache, plans: Mapping[str, BuildPlan], size: Callable[[Path], int]) -> tuple[Entry, ...]:
    """Every tree under sources/, sysroots/ and work/ with the recipes that use it, then the shared
    directories; temp trees of a run in progress (dot names) are not listed."""
    users = used_trees(plans)
    host = host_named(plans.values())
    entries: list[Entry] = []
    for kind in TREES:
        directory = cache.root / kind
        names = sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) if directory.is_dir() else []
        for name in names:
            if name.endswith(MANIFEST_SUFFIX) and name[: -len(MANIFEST_SUFFIX)] in names:
                continue  # listed with its tree
            paths = [directory / name, directory / (name + MANIFEST_SUFFIX)]
            kept = "a CPython copied from this host" if kind == "sysroots" and host and host.match(name) else ""
            used = users.get((kind, name), ())
            entries.append(Entry(kind, name, sum(size(p) for p in paths), used, "" if used else kept))
    for name, why in SHARED.items():
        if (cache.root / name).is_dir():
            entries.append(Entry(name, "", size(cache.root / name), kept=why))
    return tuple(entries)


def disk_bytes(path: Path) -> int:
    """Bytes ``path`` takes on disk (blocks, each hard-linked file once, symlinks not followed)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            st = current.lstat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        total += st.st_blocks * 512
        if stat.S_ISDIR(st.st_mode):  # lstat's: a link to a directory is not followed
            try:
                stack.extend(Path(e.path) for e in os.scandir(current))
            except OSError:
                continue
    return total


def remove(cache: Cache, entry: Entry) -> None:
    """Delete an unused tree and its content manifest (a link into another cache: the link only)."""
    for path in (cache.root / entry.kind / entry.name, cache.root / entry.kind / (entry.name + MANIFEST_SUFFIX)):
        if path.is_dir() and not path.is_symlink():
            unmount_below(path)
        remove_tree(path)
