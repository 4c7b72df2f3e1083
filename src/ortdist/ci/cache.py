"""The GitHub Actions cache entries of a recipe's CI job, derived from its plan (pure: plan in, keys out).

ortdist already names every cached tree by a digest of what it is made of (paths.py, layout.py,
toolchains/debian/names.py), so a CI cache key is those same digests: an unchanged recipe
restores exactly the trees its build reuses, and a changed input changes the key of the entry
holding that tree, and of no other. GitHub caches are immutable per key; a fallback is a
``restore-keys`` prefix. Each entry lists its paths under ``$ORTDIST_CACHE``, and only those are
saved, so trees restored through a fallback but no longer used are not carried into the new entry.

- ``root``: the build root (``sysroots/<toolchain>-<root digest>``), keyed by the toolchain's
  root digest and the build host. Shared by every recipe of the toolchain; no fallback (an older
  root has another name and is never reused).
- ``roots``: the plan's other roots (clean root, a cross target's sysroots, the CPythons unpacked
  from Debian, the compat roots), keyed by their names, which carry their digests; fallback: the
  toolchain's last set on that host (unchanged roots in it are reused, after verification).
  CPythons copied from the build host are left out: their name digests the runner's installation,
  known only there.
- ``sources``: the patched ORT source (named by ``plan.source_key``: source and patches) and each
  dependency's unpacked source (named by its pin), keyed by those; fallback: the ORT version's last
  entry (its dependency trees are reused when a patch changed).
- ``compiler``: the compiler cache (ccache, sccache's local directory), keyed by the recipe and
  the full plan digest (``BuildPlan.digest``); fallback: the recipe's last one, then the
  toolchain's, so a changed recipe still compiles what did not change from cache.

The build tree is not cached: see ci/README.md for the sizes behind that choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..fsutil import sha256_text
from ..pipeline.layout import dep_tree_name, root_names, source_tree_name
from ..plan import BuildPlan
from ..treecheck import MANIFEST_SUFFIX

# Bumped when what an entry holds or how it is packed changes: every key changes with it.
LAYOUT = "v1"
# Every entry a job can have, in the order the workflow restores and saves them.
ENTRIES = ("root", "roots", "sources", "compiler")


@dataclass(frozen=True, kw_only=True)
class CacheEntry:
    name: str  # one of ENTRIES
    paths: tuple[str, ...]  # relative to $ORTDIST_CACHE, '/'-separated; saved only when all exist
    key: str
    restore_keys: tuple[str, ...] = ()  # prefixes, most specific first


def build_host(plan: BuildPlan) -> str:
    """The triple of the machine the build runs on: the target's, or a cross toolchain's host."""
    triple = plan.target.triple
    return plan.toolchain.cross_targets[triple].host if plan.toolchain.is_cross(triple) else triple


def _key(*parts: str) -> str:
    """Fields joined by '/', which no recipe, toolchain or triple contains: a prefix ending in '/'
    matches that field exactly (recipe slim-linux's does not match slim-linux-aarch64's keys)."""
    return "/".join(("ortdist", LAYOUT, *parts))


def _tree(parent: str, name: str) -> tuple[str, str]:
    """A cached tree and the content manifest beside it (treecheck.py): both are restored together."""
    return f"{parent}/{name}", f"{parent}/{name}{MANIFEST_SUFFIX}"


def other_roots(plan: BuildPlan) -> tuple[str, ...]:
    """Names of the roots besides the build root that the plan's build (and its CI smoke test,
    which runs in the same toolchain's roots) makes under sysroots/."""
    return root_names(plan)[1:]


def cache_entries(plan: BuildPlan) -> tuple[CacheEntry, ...]:
    """The entries of the plan's job, in ENTRIES order; none for a plan-only toolchain or one whose
    builds run without a root (their trees live elsewhere: nothing to restore yet)."""
    spec = plan.toolchain
    if spec.plan_only or not spec.has_root:
        return ()
    host, version = build_host(plan), plan.version.version
    entries = [
        CacheEntry(
            name="root",
            paths=_tree("sysroots", root_names(plan)[0]),
            key=_key("root", host, spec.name, spec.root_digest[:16]),
        )
    ]
    roots = other_roots(plan)
    if roots:
        prefix = _key("roots", host, spec.name, "")
        entries.append(
            CacheEntry(
                name="roots",
                paths=tuple(p for name in roots for p in _tree("sysroots", name)),
                key=prefix + sha256_text(*sorted(roots))[:16],
                restore_keys=(prefix,),
            )
        )
    trees = [] if plan.recipe.source.kind == "path" else [source_tree_name(plan)]  # a path is copied afresh
    trees += [dep_tree_name(dep) for dep in plan.deps]
    if trees:
        pins = sha256_text(*(f"{dep.name}={dep.version}:{dep.sha256}" for dep in plan.deps))
        entries.append(
            CacheEntry(
                name="sources",
                paths=tuple(p for name in trees for p in _tree("sources", name)),
                key=_key("sources", version, plan.source_key, pins[:16]),
                restore_keys=(_key("sources", version, ""),),
            )
        )
    cc = plan.compiler_cache
    if cc.cache_dir:
        toolchain_prefix = _key(cc.name, host, spec.name, "")
        recipe_prefix = f"{toolchain_prefix}{plan.recipe.name}/"
        entries.append(
            CacheEntry(
                name="compiler",
                paths=(cc.cache_dir,),
                key=recipe_prefix + plan.digest()[:16],
                restore_keys=(recipe_prefix, toolchain_prefix),
            )
        )
    return tuple(entries)
