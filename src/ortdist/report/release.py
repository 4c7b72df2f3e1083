"""What the report says about one build beside its artifacts, as a release page would.

- The steps in the order they ran (``driver.STEPS``), each placed on the build's timeline, marked
  when it reused earlier work instead of doing real work (the rule: ``reuse``), with the previous
  build's time for it.
- The compiler cache's hit rate for the build.
- Each artifact against the previous build of the same recipe (``previous-manifest.json``, which
  publishing keeps beside ``manifest.json``: ``ortdist.manifest.publish``) and, for a wheel,
  against PyPI's wheel of the same distribution, version, CPython and target, whose size is data
  (``data/pypi_wheels.toml``), not code.

Pure functions of manifests and of that data file; report.py draws what they return.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..pipeline.driver import STEPS
from ..registry import PypiWheel, pypi_wheels
from ..wheelnames import wheel_name

Manifest = Mapping[str, Any]


@dataclass(frozen=True)
class Reuse:
    """Why a step counts as reusing earlier work: ``cached`` (its work came from a cache) or
    ``no-op`` (there was nothing to do)."""

    label: Literal["cached", "no-op"]
    why: str


@dataclass(frozen=True)
class Step:
    """One step on a build's timeline."""

    name: str
    seconds: float
    start: float  # the seconds of the steps that ran before it
    reuse: Reuse | None  # None: real work
    previous: float | None = None  # the previous build's seconds for the step, if it ran then


@dataclass(frozen=True)
class CacheStats:
    """The compiler cache's counters for one build."""

    name: str
    hits: int
    misses: int
    hit_kinds: Mapping[str, int]  # each hit counter (ccache: direct_cache_hit, preprocessed_cache_hit)

    @property
    def compiles(self) -> int:
        return self.hits + self.misses

    @property
    def rate(self) -> float | None:
        return self.hits / self.compiles if self.compiles else None


@dataclass(frozen=True)
class Versus:
    """An artifact of ours against a reference file: the previous build's, or PyPI's."""

    reference: str  # the reference's file name
    size: int  # the reference's bytes
    delta: int  # ours minus the reference
    same_bytes: bool  # equal sha256 (only known for the previous build's files)

    @property
    def percent(self) -> float:
        return 100 * self.delta / self.size if self.size else 0.0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def step_seconds(manifest: Manifest) -> dict[str, float]:
    """The manifest's ``build_times_s`` in the order the steps ran, ``total`` left out.

    manifest.json is written with sorted keys, so its own order is alphabetical; the run order is
    ``driver.STEPS``'s (a plan runs a subset of it, in that order). Names STEPS does not know (a
    manifest from another ortdist version) follow, in the manifest's order."""
    times = manifest.get("build_times_s")
    if not isinstance(times, Mapping):
        return {}
    numbers = {str(k): float(v) for k, v in times.items() if _number(v) and k != "total"}
    order = [s for s in STEPS if s in numbers] + [s for s in numbers if s not in STEPS]
    return {name: numbers[name] for name in order}


def total_seconds(manifest: Manifest | None) -> float | None:
    """The build's whole wall time (``build_times_s.total``: the steps, and waiting for the lock)."""
    times = manifest.get("build_times_s") if manifest is not None else None
    total = times.get("total") if isinstance(times, Mapping) else None
    return float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None


def compiler_cache(manifest: Manifest) -> CacheStats | None:
    """The build's compiler-cache counters: hits are every counter named ``*_hit`` (ccache:
    direct_cache_hit and preprocessed_cache_hit; sccache: cache_hit), misses ``cache_miss``.
    None when the manifest has no counters (a build without a compiler cache)."""
    cache = manifest.get("compiler_cache") or manifest.get("ccache")
    if not isinstance(cache, Mapping):
        return None
    counters = {str(k): int(v) for k, v in cache.items() if isinstance(v, int) and not isinstance(v, bool)}
    hit_kinds = {k: v for k, v in counters.items() if k.endswith("_hit")}
    if not hit_kinds and "cache_miss" not in counters:
        return None
    name = str(cache.get("name", "ccache"))
    return CacheStats(
        name=name, hits=sum(hit_kinds.values()), misses=counters.get("cache_miss", 0), hit_kinds=hit_kinds
    )


def _record(manifest: Manifest, step: str, key: str) -> bool | None:
    """A step's own yes/no record under its name in the manifest (``{"build": {"ninja_no_work": true}}``)."""
    record = manifest.get(step)
    value = record.get(key) if isinstance(record, Mapping) else None
    return value if isinstance(value, bool) else None


def reuse(step: str, seconds: float, manifest: Manifest) -> Reuse | None:
    """Whether ``step`` reused earlier work instead of doing real work (None: real work).

    The rule reads what the step itself recorded in the manifest; how long the step took enters
    only in the last case:

    - a step in ``reused_steps``: its inputs were unchanged and its recorded outputs were taken
      (pipeline/reuse.py): no-op.

    - build and binding: ``<step>.ninja_no_work``, ninja's own "no work to do" (every output up
      to date, no command run): no-op.
    - build, when ninja did run commands: the compiler cache's counters for this build. Any miss
      is real work, however short the step; hits and no miss mean every compile came from the
      cache: cached (the links after them still ran). No compile at all means ninja only linked
      or ran other commands: work. (A manifest from before ``build.ninja_no_work`` cannot tell
      that from an up-to-date tree, so there no compile at all counts as a no-op.)
    - configure: ``configure.reconfigured`` false means CMake did not run because the configure
      command was unchanged: no-op; except in a reduced build (``reduced_ops``), where this step
      regenerates the kernel registrations every time, which is work.
    - a step with no such record (the others, or an older manifest) is a no-op only when the
      manifest records it as 0.0 s, too short to show at the manifest's 0.1 s resolution: the one
      place time enters the rule, and it is the manifest's own rounding, not a chosen threshold.
      Any other step is real work however short it was.
    """
    reused = manifest.get("reused_steps", {}).get(step)
    if isinstance(reused, dict):
        return Reuse("no-op", f"inputs unchanged: the outputs of {reused.get('recorded_at', 'an earlier run')} reused")
    if step in ("build", "binding") and _record(manifest, step, "ninja_no_work"):
        return Reuse("no-op", "ninja: no work to do")
    if step == "build" and (cache := compiler_cache(manifest)) is not None:
        if cache.misses:
            return None
        if cache.hits:
            return Reuse("cached", f"every compile from {cache.name}: {cache.hits:,} hits, no miss")
        if _record(manifest, step, "ninja_no_work") is None:
            return Reuse("no-op", f"nothing compiled: {cache.name} counted no compile")
        return None
    reconfigured = _record(manifest, step, "reconfigured") if step == "configure" else None
    if reconfigured is not None:
        if reconfigured or "reduced_ops" in manifest:
            return None
        return Reuse("no-op", "CMake not re-run: the configure command was unchanged")
    if seconds == 0 and _record(manifest, step, "ninja_no_work") is None:
        return Reuse("no-op", "0.0 s: nothing measurable at the manifest's 0.1 s resolution")
    return None


def timeline(manifest: Manifest, previous: Manifest | None = None) -> list[Step]:
    """The steps in the order they ran, each starting where the ones before it ended."""
    before = step_seconds(previous) if previous is not None else {}
    steps: list[Step] = []
    start = 0.0
    for name, seconds in step_seconds(manifest).items():
        steps.append(Step(name, seconds, start, reuse(name, seconds, manifest), before.get(name)))
        start += seconds
    return steps


def _artifacts(manifest: Manifest | None) -> list[Mapping[str, Any]]:
    found = manifest.get("artifacts", []) if manifest is not None else []
    return [a for a in found if isinstance(a, Mapping)] if isinstance(found, list) else []


def _slot(artifact: Mapping[str, Any]) -> tuple[Any, ...]:
    return (artifact.get("kind"), artifact.get("distribution"), artifact.get("python"))


def previous_artifact(artifact: Mapping[str, Any], previous: Manifest | None) -> Mapping[str, Any] | None:
    """The previous build's artifact this one follows: the same file name, else the only one of
    the same kind (for a wheel: of the same distribution and CPython), so a version bump that
    renames the files still compares. None when there is no such artifact."""
    entries = _artifacts(previous)
    same_name = [a for a in entries if a.get("path") == artifact.get("path")]
    same_slot = [a for a in entries if _slot(a) == _slot(artifact)]
    for candidates in (same_name, same_slot):
        if len(candidates) == 1:
            return candidates[0]
    return None


def dropped(manifest: Manifest, previous: Manifest | None) -> list[str]:
    """The previous build's artifacts that no artifact of this build follows."""
    followed = [previous_artifact(a, previous) for a in _artifacts(manifest)]
    return [str(a.get("path")) for a in _artifacts(previous) if not any(a is f for f in followed)]


def versus_previous(artifact: Mapping[str, Any], previous: Manifest | None) -> Versus | None:
    prior = previous_artifact(artifact, previous)
    if prior is None or not _number(prior.get("size")) or not _number(artifact.get("size")):
        return None
    return Versus(
        reference=str(prior.get("path")),
        size=int(prior["size"]),
        delta=int(artifact["size"]) - int(prior["size"]),
        same_bytes=bool(prior.get("sha256")) and prior.get("sha256") == artifact.get("sha256"),
    )


def pypi_reference(
    artifact: Mapping[str, Any], manifest: Manifest, wheels: Iterable[PypiWheel] | None = None
) -> PypiWheel | None:
    """PyPI's wheel for the same distribution, version, CPython tag and target as this wheel of
    ours; or, where PyPI's wheel names the recipes it stands against, for this recipe's wheel of the
    same distribution and CPython tag (whatever the versions)."""
    ours = wheel_name(str(artifact.get("path", ""))) if artifact.get("kind") == "wheel" else None
    if ours is None:
        return None
    recipe = manifest.get("recipe")

    def matches(w: PypiWheel) -> bool:
        theirs = wheel_name(w.file)
        if theirs is None or w.target != manifest.get("target"):
            return False
        if w.recipes:
            return recipe in w.recipes and (theirs[0], theirs[2]) == (ours[0], ours[2])
        return theirs == ours

    return next((w for w in (pypi_wheels() if wheels is None else wheels) if matches(w)), None)


def versus_pypi(artifact: Mapping[str, Any], reference: PypiWheel) -> Versus | None:
    if not _number(artifact.get("size")):
        return None
    return Versus(reference.file, reference.size, int(artifact["size"]) - reference.size, same_bytes=False)
