"""Patch series: ``patches/<series>/series`` lists patch files applied in order with ``patch -p1``.

Patches are applied to a fresh copy of the source. Each one is dry-run first; a patch that
does not apply is reported with the patch, the file and the hunk, and the copy is discarded.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import registry, run, treecheck
from .config import did_you_mean
from .errors import PatchError
from .fsutil import remove_tree, sha256_file, temp_sibling_dir
from .log import log

MARKER = ".ortdist-patched"


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path
    sha256: str
    # Applied only to builds with one of these EPs (``eps=cuda,tensorrt`` on its series line):
    # a patch to one EP's code does not change, and so does not rebuild, every other recipe.
    eps: tuple[str, ...] = ()
    # Applied only to builds whose recipe sets one of these [features] keys away from its default
    # (``features=fp16_and_nbit_kernels``): a patch that removes code for one cut keeps the others'
    # trees.
    features: tuple[str, ...] = ()
    # Applied only to builds for one of these target triples (``targets=aarch64-unknown-linux-gnu``):
    # a fix for one machine's headers keeps every other target's tree.
    targets: tuple[str, ...] = ()

    def applies_to(self, eps: Iterable[str], features: Iterable[str] = (), target: str = "") -> bool:
        return (
            (not self.eps or bool(set(self.eps) & set(eps)))
            and (not self.features or bool(set(self.features) & set(features)))
            and (not self.targets or target in self.targets)
        )


def _feature_keys() -> list[str]:
    from .recipe.model import FeatureSettings

    return [f.name for f in dataclasses.fields(FeatureSettings)]


def read_series(
    directory: Path, eps: Iterable[str] | None = None, features: Iterable[str] = (), target: str = ""
) -> tuple[Patch, ...]:
    """The series' patches; with ``eps``, only those that apply to a build with those EPs, those
    [features] keys changed from their defaults, and for ``target``."""
    series = directory / "series"
    if not series.is_file():
        raise PatchError(
            f"no series file in {directory}",
            where=str(directory),
            fix='create it listing one patch file per line, or set patches = "none" in the recipe',
        )
    out: list[Patch] = []
    for lineno, raw in enumerate(series.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        line, *options = line.split()
        conditions: dict[str, tuple[str, ...]] = {"eps": (), "features": (), "targets": ()}
        for option in options:
            key, _, value = option.partition("=")
            known = {
                "eps": list(registry.providers()),
                "features": _feature_keys(),
                "targets": list(registry.targets()),
            }.get(key, [])
            values = tuple(v for v in value.split(",") if v)
            unknown = [v for v in values if v not in known]
            if not known or not values or unknown:
                what = {"eps": "EP", "features": "[features] key", "targets": "target"}.get(key, "")
                hint = did_you_mean(unknown[0], known) if unknown else ""
                raise PatchError(
                    f"{option!r} is not an option of a series line"
                    + (f" (unknown {what} {', '.join(unknown)})" if unknown and what else ""),
                    where=f"{series}:{lineno}",
                    fix=hint
                    or "write `<patch file>`, then optionally `eps=<ep>[,<ep>...]` with registry EP names "
                    f"({', '.join(registry.providers())}), `features=<key>[,<key>...]` with recipe [features] keys "
                    "and `targets=<triple>[,<triple>...]` with data/targets.toml triples",
                )
            conditions[key] = values
        path = directory / line
        if not path.is_file():
            raise PatchError(
                f"listed patch {line!r} does not exist",
                where=f"{series}:{lineno}",
                fix="add the file or remove the line",
            )
        out.append(
            Patch(
                name=line,
                path=path,
                sha256=sha256_file(path),
                eps=conditions["eps"],
                features=conditions["features"],
                targets=conditions["targets"],
            )
        )
    if eps is not None:
        wanted, changed = set(eps), set(features)
        return tuple(p for p in out if p.applies_to(wanted, changed, target))
    return tuple(out)


_FILE = re.compile(r"^(?:checking|patching) file (?P<file>.+?)(?: \(read from .*\))?$")
_HUNK = re.compile(r"^Hunk #(?P<hunk>\d+) FAILED at (?P<line>\d+)")


def describe_failure(output: str) -> list[str]:
    """Turn GNU patch's output into 'file: hunk #N failed at line L' items (pure, unit-tested)."""
    problems: list[str] = []
    current = "?"
    for line in output.splitlines():
        if m := _FILE.match(line):
            current = m["file"].strip("'`")
        elif m := _HUNK.match(line):
            problems.append(f"{current}: hunk #{m['hunk']} does not apply (expected near line {m['line']})")
        elif "can't find file to patch" in line:
            problems.append("a file the patch changes does not exist in the source")
        elif line.startswith("Reversed (or previously applied) patch detected"):
            problems.append(f"{current}: already applied (or reversed)")
        elif "No such file" in line:
            problems.append(f"{current}: {line.strip()}")
    return problems or [output.strip().splitlines()[-1] if output.strip() else "patch failed"]


def apply(patch: Patch, tree: Path) -> None:
    base = [
        "patch",
        "-p1",
        "--forward",
        "--batch",
        "--no-backup-if-mismatch",
        "-r",
        "-",
        "-d",
        str(tree),
        "-i",
        str(patch.path),
    ]
    if shutil.which("patch") is None:
        raise PatchError("GNU patch is not installed", fix="apt-get install patch (ortdist does this itself as root)")
    dry = run.capture([*base, "--dry-run"], check=False)
    if dry.returncode != 0:
        problems = describe_failure(dry.stdout + dry.stderr)
        raise PatchError(
            "does not apply:\n" + "\n".join(f"    {p}" for p in problems),
            where=f"patch {patch.path}",
            fix="refresh the patch against this source (or drop it from the series); the patched copy was discarded",
        )
    run.capture(base, error=PatchError, what=f"applying {patch.name}")


def apply_series(patches: tuple[Patch, ...], tree: Path) -> None:
    for patch in patches:
        apply(patch, tree)


def _make(tree: Path, fill: Callable[[Path], None], patches: tuple[Patch, ...]) -> None:
    fill(tree)
    apply_series(patches, tree)
    (tree / MARKER).write_text("".join(f"{p.name} {p.sha256}\n" for p in patches), encoding="utf-8")


def prepare_tree(dest: Path, fill: Callable[[Path], None], patches: tuple[Patch, ...]) -> None:
    """Create ``dest`` as a patched copy: ``fill`` writes the pristine tree, then the series is applied.

    All of it happens in a temp sibling renamed into place at the end, so a patch that does not
    apply (or an interrupted run) leaves neither ``dest`` nor a half-patched tree behind. Its content
    manifest is recorded before the rename, so every reuse can be verified (``reuse_tree``).
    """
    with temp_sibling_dir(dest) as tmp:
        tree = tmp / "tree"
        _make(tree, fill, patches)
        treecheck.record(tree, source_exclude, manifest=treecheck.manifest_path(dest))
        if dest.exists():
            remove_tree(dest)
        tree.rename(dest)


def source_exclude(rel: str) -> bool:
    """Left out of a source tree's manifest: Python's bytecode caches. ORT's build imports its own
    tools from the source tree (the flatbuffers and ORT-format helpers), which writes ``__pycache__``
    beside them; Python re-validates each one against its ``.py``, which is verified."""
    return rel.rpartition("/")[2] == "__pycache__"


def reuse_tree(dest: Path) -> bool:
    """Whether the patched tree ``dest`` may be reused: it exists and its content is what
    ``prepare_tree`` recorded. A tree that differs, or one without a manifest, is deleted so the
    caller re-creates it from the verified tarball and the patches."""
    if not (dest / MARKER).is_file():
        return False
    return treecheck.reuse(dest, "patched source tree", source_exclude)


def ensure_tree(dest: Path, fill: Callable[[Path], None], patches: tuple[Patch, ...]) -> None:
    """``dest`` verified, or made afresh (``reuse_tree``, ``prepare_tree``).

    A tree made before manifests were recorded is neither trusted nor thrown away unseen: a fresh
    copy is made beside it and compared. When they are identical the existing tree is kept, with
    its file times, and its digest recorded: the build tree stays up to date (a re-made tree has
    new times on every patched file, so the build would re-run CMake and recompile what those
    reach). Otherwise the fresh copy replaces it. A digest recorded without that comparison would
    vouch for whatever the old tree holds now.
    """
    if (dest / MARKER).is_file() and not treecheck.manifest_path(dest).is_file():
        with temp_sibling_dir(dest) as tmp:
            fresh = tmp / "tree"
            _make(fresh, fill, patches)
            made = treecheck.scan(fresh, source_exclude)
            difference = treecheck.compare(made.entries, treecheck.scan(dest, source_exclude).entries)
            if not difference:
                log.warning(
                    f"recording content digest of existing patched source tree {dest} "
                    "(made before ortdist recorded one; identical to a fresh copy from the pinned source and patches)"
                )
                treecheck.record(dest, source_exclude)
                return
            log.warning(
                f"patched source tree {dest} (made before ortdist recorded a digest) differs from a fresh copy "
                f"of the pinned source and patches ({difference.describe()}); replacing it"
            )
            treecheck.record(fresh, source_exclude, manifest=treecheck.manifest_path(dest))
            remove_tree(dest)
            fresh.rename(dest)
            return
    if not reuse_tree(dest):
        prepare_tree(dest, fill, patches)
