"""The pinned ORT source with the recipe's patch series applied, and the dependency sdists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import mirrors, sources, treecheck
from ...hosttools import require_host_tools
from ...patches import ensure_tree, prepare_tree, source_exclude
from ..context import BuildContext
from ..state import BuildState, Source
from ..step import StepDef


def run(ctx: BuildContext, state: BuildState) -> Source:
    plan, src = ctx.plan, ctx.plan.recipe.source
    record: dict[str, Any]
    if src.kind == "debian":
        pin = sources.debian_orig(plan.version.source, plan.toolchain.mirror, src.sha256)
        archive = sources.fetch(pin, ctx.cache.downloads)
        mirror = mirrors.debian_archive(plan.toolchain.mirror)
        record = {
            "kind": "debian",
            "file": pin.filename,
            "url": pin.url,
            "sha256": pin.sha256,
            "mirror": {"url": mirror.url, "origin": mirror.origin},
        }
    else:
        record = {"kind": src.kind, "url": src.url, "tag": src.tag, "path": src.path, "sha256": ""}

    def fill(tree: Path) -> None:
        if src.kind == "debian":
            sources.unpack(archive, tree)
        elif src.kind == "git":
            sources.git_checkout(src.url, src.tag, src.commit, tree)
        else:
            sources.copy_tree((ctx.recipe_path.parent / src.path).resolve(), tree)

    if plan.patches:
        require_host_tools("patch")
    tree = ctx.layout.source.host
    # Keyed by source + patch digests, so a reused tree is exactly what this plan asks for, once its
    # content is verified against the manifest recorded at creation (a changed tree is re-made).
    # A local path can change under us: copy it afresh every run.
    if src.kind == "path":
        prepare_tree(tree, fill, plan.patches)
    else:
        ensure_tree(tree, fill, plan.patches)
    if any(dep.is_deb for dep in plan.deps):
        require_host_tools("dpkg-deb")
    for dep in plan.deps:
        target = ctx.layout.deps[dep.name].host
        if not (target.is_dir() and treecheck.reuse(target, f"{dep.name} source tree", source_exclude)):
            archive = sources.fetch(sources.dependency(dep, plan.toolchain.mirror), ctx.cache.downloads)
            sources.unpack_dependency(archive, target, dep.subdir)
            treecheck.record(target, source_exclude)
    return Source(record=record, patches=tuple({"name": p.name, "sha256": p.sha256} for p in plan.patches))


STEP = StepDef(run)
