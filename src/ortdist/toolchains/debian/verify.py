"""What of a root is verified at reuse, and how a root from an older ortdist is checked once (dpkg)."""

from __future__ import annotations

import hashlib
from pathlib import Path

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
