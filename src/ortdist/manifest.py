"""dist/<recipe>/manifest.json and the atomic publishing of artifacts into dist/."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fsutil import atomic_copy, atomic_write_text, remove_tree, sha256_file

MANIFEST = "manifest.json"
# The manifest of the build published before this one, kept so the report can compare the two
# (sizes, step times); only its manifest: the older artifacts themselves are replaced.
PREVIOUS_MANIFEST = "previous-manifest.json"


@dataclass(frozen=True)
class Artifact:
    """A file produced by a build, before publishing (``source`` is where it sits in the work dir)."""

    source: Path
    kind: str
    tag: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def publish(dist: Path, artifacts: list[Artifact], manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Copy artifacts into ``dist`` and write the manifest last.

    Each file appears whole or not at all (temp file + rename). The old manifest is first renamed
    to ``previous-manifest.json`` (replacing an older one), so a reader never sees a manifest
    describing files that are being replaced, and the report can compare this build with the last
    one published (a publish that fails midway leaves no manifest.json, and the last published one
    as previous-manifest.json for the next publish to keep). Artifacts of an older run that this
    run did not produce are removed.
    """
    dist.mkdir(parents=True, exist_ok=True)
    published = dist / MANIFEST
    if published.is_file() and not published.is_symlink():
        published.replace(dist / PREVIOUS_MANIFEST)
    else:
        remove_tree(published)
    entries: list[dict[str, Any]] = []
    for art in artifacts:
        dest = dist / art.source.name
        atomic_copy(art.source, dest)
        entry = {"path": dest.name, "kind": art.kind, "sha256": sha256_file(dest), "size": dest.stat().st_size}
        if art.tag:
            entry["tag"] = art.tag
        entry.update(art.extra)
        entries.append(entry)
    keep = {e["path"] for e in entries} | {MANIFEST, PREVIOUS_MANIFEST, "logs"}
    for old in dist.iterdir():
        if old.name not in keep and not old.name.startswith(".") and old.is_file():
            remove_tree(old)
    manifest = {**manifest, "artifacts": entries}
    atomic_write_text(dist / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return entries


def read_manifest(dist: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((dist / MANIFEST).read_text(encoding="utf-8"))
    return data
