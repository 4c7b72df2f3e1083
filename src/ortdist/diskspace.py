"""Free disk space: checked before a build starts, and named when a write runs out of it anyway.

A build that fills the disk fails an hour in with "No space left on device" from whichever tool
wrote last (CI did, on a machine whose cache had grown for weeks). What a cold build takes is
measured per toolchain (data/disk.toml); what the cache already holds for the recipe is not
needed again, so a warm rebuild needs only the spare.
"""

from __future__ import annotations

import errno
import functools
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .config import KEY, convert
from .errors import DataError, DiskSpaceError
from .paths import Cache
from .pipeline.layout import root_names, source_tree_name
from .plan import BuildPlan
from .registry import data_origin, load_data

GB = 1e9
# errno values that mean the disk (or the user's quota on it) is full
FULL = (errno.ENOSPC, errno.EDQUOT)
PRUNE = "`ortdist cache` lists what the cache holds and `ortdist cache --prune` removes the trees no recipe uses"


@dataclass(frozen=True, kw_only=True)
class ToolchainDisk:
    name: str = field(metadata=KEY)
    root_gb: float
    tree_gb: float


@dataclass(frozen=True, kw_only=True)
class DiskFacts:
    spare_gb: float
    source_gb: float
    toolchains: Mapping[str, ToolchainDisk]

    def of(self, toolchain: str) -> ToolchainDisk:
        return self.toolchains.get(toolchain) or self.toolchains["default"]


@functools.cache
def facts() -> DiskFacts:
    origin = data_origin("disk.toml")
    disk = convert(DiskFacts, load_data("disk.toml"), origin=origin, error=DataError)
    if "default" not in disk.toolchains:
        raise DataError("no [toolchains.default]", where=origin, fix="add one: what an unlisted toolchain takes")
    return disk


@dataclass(frozen=True)
class Need:
    """What a build still needs on the cache's disk: (part, bytes) for each part not cached yet."""

    parts: tuple[tuple[str, float], ...]

    @property
    def total(self) -> float:
        return sum(size for _, size in self.parts)

    def said(self) -> str:
        return ", ".join(f"{what} {size / GB:.1f} GB" for what, size in self.parts)


def need(plan: BuildPlan, cache: Cache, disk: DiskFacts) -> Need:
    """The parts of ``plan``'s build its cache lacks, at their measured sizes, and the spare."""
    sizes = disk.of(plan.toolchain.name)
    parts: list[tuple[str, float]] = []
    roots = root_names(plan)
    if roots and not (cache.sysroots / roots[0]).is_dir():
        parts.append((f"the {plan.toolchain.name} roots", sizes.root_gb * GB))
    if plan.recipe.source.kind != "path" and not (cache.sources / source_tree_name(plan)).is_dir():
        parts.append(("the patched source", disk.source_gb * GB))
    if not cache.work(plan.recipe.name).is_dir():
        parts.append(("the build tree", sizes.tree_gb * GB))
    parts.append(("to spare", disk.spare_gb * GB))
    return Need(tuple(parts))


def free_bytes(path: Path) -> int:
    """Free bytes on the disk that holds ``path`` (or would: its nearest existing parent)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return shutil.disk_usage(candidate).free
    return 0


def check_free(plan: BuildPlan, cache: Cache, dist: Path) -> None:
    """Refuse a build whose cache disk lacks what it still needs (or dist/'s, the spare), before
    the lock, a download or a root; ORTDIST_DISK_CHECK=0 skips it (a disk ortdist misjudges)."""
    disk = facts()
    wanted = need(plan, cache, disk)
    free = free_bytes(cache.root)
    if free < wanted.total:
        raise DiskSpaceError(
            f"building {plan.recipe.name} needs about {wanted.total / GB:.1f} GB free on the cache's disk "
            f"({wanted.said()}); it has {free / GB:.1f} GB",
            where=str(cache.root),
            fix=f"free {(wanted.total - free) / GB:.1f} GB or more: {PRUNE}; or set ORTDIST_CACHE to a larger disk "
            "(ORTDIST_DISK_CHECK=0 builds anyway)",
        )
    free_dist = free_bytes(dist)
    if free_dist < disk.spare_gb * GB:
        raise DiskSpaceError(
            f"dist/ has {free_dist / GB:.1f} GB free, less than the {disk.spare_gb:.1f} GB the wheels and logs take",
            where=str(dist),
            fix="free space there, or pass --dist on a disk with room (ORTDIST_DISK_CHECK=0 builds anyway)",
        )


def full_disk(path: str | None, command: str) -> DiskSpaceError:
    """What a write that ran out of space says (an OSError with errno in FULL)."""
    where = Path(path) if path else Path.cwd()
    return DiskSpaceError(
        f"ortdist {command}: the disk is full ({free_bytes(where) / GB:.2f} GB free now)",
        where=str(where),
        fix=f"free space ({PRUNE}), then rerun the same command: it resumes where it stopped",
    )
