"""What the report shows, read from dist/: each recipe's manifest, smoke report, wheel breakdown,
SBOM, previous build, publish record and device proof."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import records, registry, sbom
from ..errors import CheckError
from ..manifest import MANIFEST, PREVIOUS_MANIFEST
from ..smoke.device_proof import FILED as DEVICE_PROOF
from ..upload import PUBLISH_RECORD
from . import release

# Wheel members grouped by what they are, in display order (first match wins).
_GROUPS: list[tuple[str, re.Pattern[str]]] = [
    ("Python binding (ORT core linked in)", re.compile(r"onnxruntime/capi/onnxruntime_pybind11_state.*\.so$")),
    ("libonnxruntime (C API)", re.compile(r"onnxruntime/capi/libonnxruntime\.so")),
    ("EP provider libraries", re.compile(r"onnxruntime/capi/libonnxruntime_providers_.*\.so$")),
    ("bundled system libraries", re.compile(r"^[^/]+\.libs/")),
    ("Python code and data", re.compile(r"\.(py|pyi|json|txt|onnx|pb)$")),
]


@dataclass(frozen=True, kw_only=True)
class RecipeReport:
    recipe: str
    manifest: dict[str, Any]
    smoke: list[dict[str, Any]] = field(default_factory=list)
    space: dict[str, int] = field(default_factory=dict)  # group -> uncompressed bytes in the wheel
    largest: list[tuple[str, int]] = field(default_factory=list)
    sbom: dict[str, Any] | None = None
    previous: dict[str, Any] | None = None  # the manifest of the build published before this one
    pypi: dict[str, registry.PypiWheel] = field(default_factory=dict)  # our wheel's file -> PyPI's
    published: dict[str, Any] | None = None  # publish.json: where the wheels went, proven installed back
    device_proof: dict[str, Any] | None = None  # device-proof/device-proof.json: the wheel on a real GPU


def wheel_space(wheel: Path) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """Uncompressed bytes per group, and the ten largest members."""
    groups: dict[str, int] = {name: 0 for name, _ in _GROUPS}
    groups["other"] = 0
    members: list[tuple[str, int]] = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            members.append((info.filename, info.file_size))
            group = next((name for name, pattern in _GROUPS if pattern.search(info.filename)), "other")
            groups[group] += info.file_size
    members.sort(key=lambda m: (-m[1], m[0]))
    return {k: v for k, v in groups.items() if v}, members[:10]


_DAMAGED = "delete it, or rebuild the recipe (ortdist build <recipe>) to write it again"


# The artifacts that carry an SBOM (models, configs, reports and screenshots do not).
SBOM_KINDS = frozenset({"wheel", "c-library", "static-library", "npm-package"})


def collect(dist: Path, require: bool = True) -> list[RecipeReport]:
    """Every dist/<recipe>/ with a manifest, with its smoke reports, wheel breakdown, SBOM, the
    previous build's manifest and PyPI's wheels to compare with.
    ``require``: an empty dist/ is an error (not when there is something else to show)."""
    reports: list[RecipeReport] = []
    if dist.exists() and not dist.is_dir():
        raise CheckError("not a directory", where=str(dist), fix="pass the dist/ directory builds publish into")
    for manifest_file in sorted(dist.glob(f"*/{MANIFEST}")):
        manifest = records.load(manifest_file, records.MANIFEST, CheckError)
        out = manifest_file.parent
        artifacts = manifest.get("artifacts", [])
        if not isinstance(artifacts, list) or not all(
            isinstance(a, dict) and isinstance(a.get("path"), str) and isinstance(a.get("kind"), str) for a in artifacts
        ):
            raise CheckError(
                "'artifacts' is not a list of {path, kind} entries",
                where=f"{manifest_file} key 'artifacts'",
                fix=_DAMAGED,
            )
        wheel = next((out / a["path"] for a in artifacts if a["kind"] == "wheel"), None)
        # The smoke report of the wheel this manifest lists; reports of older wheels are stale.
        report_file = out / "smoke" / f"{wheel.stem}.json" if wheel else None
        smoke = (
            [records.load(report_file, records.SMOKE_REPORT, CheckError)]
            if report_file and report_file.is_file()
            else []
        )
        try:
            space, largest = wheel_space(wheel) if wheel and wheel.is_file() else ({}, [])
        except zipfile.BadZipFile as exc:
            raise CheckError(f"not a readable wheel: {exc}", where=str(wheel), fix=_DAMAGED) from exc
        document = None
        artifact = wheel or next((out / a["path"] for a in artifacts if a["kind"] in SBOM_KINDS), None)
        if artifact and artifact.is_file():
            try:
                document = sbom.summary(sbom.read_artifact_sbom(artifact))
            except sbom.NoSbomError:
                document = None  # built before SBOMs, or by another tool: the page says so
        previous_file = out / PREVIOUS_MANIFEST
        published_file = out / PUBLISH_RECORD
        proof_file = out / DEVICE_PROOF
        pypi = {a["path"]: ref for a in artifacts if (ref := release.pypi_reference(a, manifest))}
        reports.append(
            RecipeReport(
                recipe=str(manifest.get("recipe", out.name)),
                manifest=manifest,
                smoke=smoke,
                space=space,
                largest=largest,
                sbom=document,
                previous=records.load(previous_file, records.MANIFEST, CheckError) if previous_file.is_file() else None,
                pypi=pypi,
                published=records.load(published_file, records.PUBLISH_RECORD, CheckError)
                if published_file.is_file()
                else None,
                device_proof=records.load(proof_file, records.DEVICE_PROOF, CheckError)
                if proof_file.is_file()
                else None,
            )
        )
    if not reports and require:
        raise CheckError(
            f"no builds to report on in {dist}", where=str(dist), fix="build a recipe first: nox -s build-cpu-linux"
        )
    return reports


def input_files(dist: Path) -> list[Path]:
    """The files a report of ``dist`` reads (its output must not replace one of them)."""
    files = [dist / "bench" / "results.md"]
    for manifest_file in sorted(dist.glob(f"*/{MANIFEST}")):
        files += [manifest_file, manifest_file.parent / PREVIOUS_MANIFEST]
        files += sorted(manifest_file.parent.glob("*.whl")) + sorted(manifest_file.parent.glob("*.tar.gz"))
        files += [*sorted((manifest_file.parent / "smoke").glob("*.json")), manifest_file.parent / PUBLISH_RECORD]
        files.append(manifest_file.parent / DEVICE_PROOF)
    return files
