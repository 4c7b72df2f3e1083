"""``ortdist matrix``: generate ci/ from the recipes' plans, as pure text, so it can be checked.

One GitHub Actions job per recipe on the runner that has what the recipe needs (runners.toml:
by target triple, overridden per EP where special hardware is needed), calling the same nox
sessions as a developer; plus one cibuildwheel config per recipe whose platform fits
cibuildwheel's per-Python loop. Output is deterministic (recipes sorted, fixed key order), so a
test can fail when the committed ci/ drifts from recipes/.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..fsutil import atomic_write_text
from ..plan import BuildPlan
from .runners import HEADER, JOB_COMPILER_CACHE, WORKFLOW, RunnerFacts, parse_runner_facts, runner_facts
from .workflow import _yaml, cibuildwheel_text, host_pythons, job_cache_entries, matrix_entry, workflow_text

__all__ = [
    "HEADER",
    "JOB_COMPILER_CACHE",
    "WORKFLOW",
    "RunnerFacts",
    "_yaml",
    "cibuildwheel_text",
    "drift",
    "generate",
    "generated_on_disk",
    "host_pythons",
    "job_cache_entries",
    "matrix_entry",
    "parse_runner_facts",
    "runner_facts",
    "workflow_text",
    "write",
]


def generate(plans: Iterable[BuildPlan], facts: RunnerFacts | None = None) -> dict[str, str]:
    """Relative path under ci/ -> file text, for every generated file."""
    facts = facts or runner_facts()
    plans = sorted(plans, key=lambda p: p.recipe.name)
    files = {WORKFLOW: workflow_text(plans, facts)}
    for plan in plans:
        text = cibuildwheel_text(plan, facts)
        if text is not None:
            files[f"cibuildwheel/{plan.recipe.name}.toml"] = text
    return files


def generated_on_disk(ci_dir: Path) -> dict[str, str]:
    """The files under ci/ that `ortdist matrix` wrote (they start with HEADER); hand-written ones are left alone."""
    out: dict[str, str] = {}
    for path in sorted(p for p in ci_dir.rglob("*") if p.is_file()) if ci_dir.is_dir() else []:
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.startswith(HEADER):
            out[path.relative_to(ci_dir).as_posix()] = text
    return out


def drift(ci_dir: Path, files: Mapping[str, str]) -> list[str]:
    """Generated files that are missing, differ, or should no longer exist."""
    on_disk = generated_on_disk(ci_dir)
    return sorted(p for p in set(files) | set(on_disk) if files.get(p) != on_disk.get(p))


def write(ci_dir: Path, files: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Write changed files and delete stale generated ones; returns (written, removed)."""
    stale = drift(ci_dir, files)
    written = [p for p in stale if p in files]
    removed = [p for p in stale if p not in files]
    for rel in written:
        dest = ci_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dest, files[rel])
    for rel in removed:
        (ci_dir / rel).unlink()
    return written, removed
