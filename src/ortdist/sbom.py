"""Software bill of materials: what went into an artifact, as CycloneDX 1.6 JSON.

Every wheel carries one in ``<dist-info>/sboms/`` (PEP 770) and every C library archive in
``share/doc/onnxruntime/``: the ORT source and its hash, each patch, each package of the sysroot
that compiled it, the toolchain and Python tools, the recipe itself, and the system libraries
the repair step bundled (with the Debian package each came from). The document is a pure
function of its inputs, with no wall-clock time and a serial number derived from the content,
so two builds of the same recipe give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
import uuid
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import __version__
from .errors import CheckError
from .plan import BuildPlan
from .registry import DependencySource

SBOM_NAME = "ortdist.cdx.json"
SPEC_VERSION = "1.6"
FROM_PACKAGE = "ortdist:from-package"
# auditwheel renames grafted libraries to libfoo-<8 hex>.so.N; this recovers libfoo.so.N.
_GRAFTED = re.compile(r"^(?P<stem>.+?)-[0-9a-f]{8}(?P<ext>\.so.*)$")


@dataclass(frozen=True, kw_only=True)
class BundledFile:
    """A shared library inside the artifact that ORT's build did not produce (grafted by repair)."""

    path: str
    sha256: str
    package: str | None = None  # the Debian package that installed it in the sysroot
    package_version: str | None = None


@dataclass(frozen=True, kw_only=True)
class SbomInputs:
    plan: BuildPlan
    recipe_path: str
    recipe_text: str
    recipe_sha256: str
    source: Mapping[str, str]  # kind, file, url, sha256 (from the source step)
    root_packages: Mapping[str, str]  # package -> version installed in the build sysroot
    source_date_epoch: int
    bundled: Sequence[BundledFile] = field(default_factory=tuple)
    # A cross build's target sysroot: package -> version, and its Debian architecture.
    target_packages: Mapping[str, str] = field(default_factory=dict)
    target_arch: str = ""


def original_soname(grafted_name: str) -> str:
    m = _GRAFTED.match(grafted_name)
    return f"{m['stem']}{m['ext']}" if m else grafted_name


def _deb_purl(name: str, version: str, suite: str, arch: str = "amd64") -> str:
    return f"pkg:deb/debian/{name}@{quote(version, safe='')}?arch={arch}&distro={suite}"


def _dependency_purl(dep: DependencySource) -> str:
    if dep.pypi_sdist:
        return f"pkg:pypi/{dep.pypi_sdist}@{dep.version}"
    if dep.is_deb:  # a binary package: the purl names it (<package>_<version>_<arch>.deb), not its source
        return _deb_purl(dep.filename.split("_", 1)[0], dep.version, dep.suite, "all")
    return _deb_purl(dep.debian, dep.version, dep.suite, "source")


def _hash(sha256: str) -> list[dict[str, str]]:
    return [{"alg": "SHA-256", "content": sha256}] if sha256 else []


def make_sbom(inputs: SbomInputs, subject: Mapping[str, str]) -> dict[str, Any]:
    """The CycloneDX document for one artifact. ``subject``: name, version, purl, kind of it."""
    plan = inputs.plan
    suite = plan.toolchain.suite
    ort = plan.version
    patches = [
        {
            "type": "unofficial",
            "diff": {"url": f"patches/{ort.version}/{p.name}"},
            "resolves": [{"type": "defect", "name": p.name}],
        }
        for p in plan.patches
    ]
    source_component: dict[str, Any] = {
        "type": "library",
        "bom-ref": "source:onnxruntime",
        "name": "onnxruntime",
        "version": ort.version,
        "description": f"ONNX Runtime source ({inputs.source.get('kind', '')}: {inputs.source.get('file', '')})",
        "hashes": _hash(inputs.source.get("sha256", "")),
        "externalReferences": [{"type": "distribution", "url": inputs.source["url"]}]
        if inputs.source.get("url")
        else [],
        "pedigree": {"patches": patches},
    }
    components: list[dict[str, Any]] = [source_component]
    components += [
        {
            "type": "file",
            "bom-ref": f"patch:{p.name}",
            "name": f"patches/{ort.version}/{p.name}",
            "hashes": _hash(p.sha256),
        }
        for p in plan.patches
    ]
    components += [
        {
            "type": "library",
            "bom-ref": f"source:{dep.name}",
            "name": dep.project,
            "version": dep.version,
            "purl": _dependency_purl(dep),
            "description": f"C++ sources compiled into ONNX Runtime ({dep.name} from {dep.filename}"
            + (f"; ORT pins {dep.ort_pins}" if dep.ort_pins else "")
            + ")",
            "hashes": _hash(dep.sha256),
        }
        for dep in plan.deps
    ]
    components.append(
        {
            "type": "file",
            "bom-ref": "recipe",
            "name": inputs.recipe_path,
            "hashes": _hash(inputs.recipe_sha256),
            "properties": [{"name": "ortdist:recipe-toml", "value": inputs.recipe_text}],
        }
    )
    components += [
        {
            "type": "application",
            "bom-ref": f"tool:{name}",
            "name": name,
            "version": version,
            "purl": f"pkg:pypi/{name}@{version}",
        }
        for name, version in sorted(plan.toolchain.python_tools.items())
    ]
    compiler = plan.toolchain.compiler
    if compiler is not None:
        components.append(
            {
                "type": "application",
                "bom-ref": f"compiler:{compiler.wheel}",
                "name": compiler.wheel,
                "version": compiler.version,
                "purl": f"pkg:pypi/{compiler.wheel}@{compiler.version}",
                "description": f"{compiler.description}; its glibc {compiler.glibc} sysroot is what the "
                "binaries link against",
                "hashes": _hash(compiler.sha256),
            }
        )
    openmp = plan.toolchain.openmp
    if openmp is not None and any(dep.openmp for dep in plan.deps):  # linked in where a dependency needs it
        components.append(
            {
                "type": "library",
                "bom-ref": "source:libgomp",
                "name": "libgomp",
                "version": openmp.version,
                "purl": _deb_purl(openmp.debian, openmp.version, openmp.suite, "source"),
                "description": f"GCC's OpenMP runtime, built from {openmp.member} of {openmp.file} (Debian "
                f"{openmp.suite}) into the compiler, linked statically into what needs it (oneDNN's EP library)",
                "hashes": _hash(openmp.sha256),
            }
        )
    used = {ep.name for ep in plan.providers}
    components += [
        {
            "type": "library",
            "bom-ref": f"sdk:{dist}",
            "name": dist,
            "version": facts.version,
            "purl": f"pkg:pypi/{dist}@{facts.version}",
            "description": f"{ep} SDK from PyPI: headers and libraries built against, not shipped",
            "hashes": _hash(facts.sha256),
        }
        for ep, wheels in sorted(plan.toolchain.ep_wheels.items())
        if ep in used
        for dist, facts in sorted(wheels.items())
    ]
    components.append(
        {
            "type": "platform",
            "bom-ref": f"toolchain:{plan.toolchain.name}",
            "name": plan.toolchain.name,
            "version": plan.toolchain.root_digest[:12],
            "description": f"Debian {suite} sysroot ({len(inputs.root_packages)} packages)",
            "components": [
                {
                    "type": "library",
                    "bom-ref": f"deb:{name}",
                    "name": name,
                    "version": version,
                    "purl": _deb_purl(name, version, suite),
                }
                for name, version in sorted(inputs.root_packages.items())
            ],
        }
    )
    if inputs.target_packages:
        arch = inputs.target_arch
        components.append(
            {
                "type": "platform",
                "bom-ref": f"target-sysroot:{plan.target.triple}",
                "name": f"{plan.toolchain.name}-{arch}-target",
                "version": arch,
                "description": f"Debian {suite} {arch} target sysroot ({len(inputs.target_packages)} packages)",
                "components": [
                    {
                        "type": "library",
                        "bom-ref": f"deb-{arch}:{name}",
                        "name": name,
                        "version": version,
                        "purl": _deb_purl(name, version, suite, arch),
                    }
                    for name, version in sorted(inputs.target_packages.items())
                ],
            }
        )
    for f in sorted(inputs.bundled, key=lambda b: b.path):
        entry: dict[str, Any] = {
            "type": "file",
            "bom-ref": f"bundled:{f.path}",
            "name": f.path,
            "hashes": _hash(f.sha256),
        }
        if f.package:
            entry["properties"] = [{"name": FROM_PACKAGE, "value": f"{f.package} {f.package_version or ''}"}]
            entry["pedigree"] = {"ancestors": [{"type": "library", "name": f.package, "version": f.package_version}]}
        components.append(entry)

    properties = [
        {"name": "ortdist:recipe", "value": plan.recipe.name},
        {"name": "ortdist:target", "value": plan.target.triple},
        {"name": "ortdist:build-type", "value": plan.recipe.build_type},
        {"name": "ortdist:execution-providers", "value": ",".join(ep.name for ep in plan.providers)},
        {"name": "ortdist:toolchain-digest", "value": plan.toolchain.digest},
    ]
    properties += [{"name": f"ortdist:cmake:{k}", "value": v} for k, v in plan.cmake_defines.items()]
    document: dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "timestamp": datetime.fromtimestamp(inputs.source_date_epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "ortdist", "version": __version__}]},
            "component": {
                "type": "library",
                "bom-ref": "subject",
                "name": subject["name"],
                "version": subject["version"],
                **({"purl": subject["purl"]} if subject.get("purl") else {}),
                "description": subject.get("description", ""),
            },
            "properties": properties,
        },
        "components": components,
        "dependencies": [
            {
                "ref": "subject",
                "dependsOn": [
                    "source:onnxruntime",
                    *(f"source:{d.name}" for d in plan.deps),
                    *(f"bundled:{f.path}" for f in sorted(inputs.bundled, key=lambda b: b.path)),
                ],
            }
        ],
    }
    # Same content -> same serial number: reproducible, yet unique per distinct build.
    content = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
    document["serialNumber"] = f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'ortdist:{content}')}"
    return document


def dumps(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def summary(document: Mapping[str, Any]) -> dict[str, Any]:
    """The facts `ortdist inspect` prints, read back from an SBOM."""
    meta = document.get("metadata", {})
    props = {p["name"]: p["value"] for p in meta.get("properties", [])}
    comps = document.get("components", [])
    source: dict[str, Any] = next((c for c in comps if c.get("bom-ref") == "source:onnxruntime"), {})
    platform: dict[str, Any] = next((c for c in comps if c.get("type") == "platform"), {})
    packages = len(platform.get("components", []))
    compiler: dict[str, Any] = next((c for c in comps if str(c.get("bom-ref", "")).startswith("compiler:")), {})
    return {
        "subject": f"{meta.get('component', {}).get('name')} {meta.get('component', {}).get('version')}",
        "recipe": props.get("ortdist:recipe"),
        "target": props.get("ortdist:target"),
        "execution_providers": (props.get("ortdist:execution-providers") or "").split(","),
        "source": {
            "version": source.get("version"),
            "sha256": next((h["content"] for h in source.get("hashes", [])), None),
            "patches": [p["diff"]["url"] for p in source.get("pedigree", {}).get("patches", [])],
        },
        "toolchain": f"{platform.get('name')} {platform.get('version')} ({packages} packages)",
        "compiler": f"{compiler['name']} {compiler['version']}: {compiler.get('description', '')}" if compiler else "",
        "bundled": [
            {
                "file": c["name"],
                "from": next(
                    (p["value"] for p in c.get("properties", []) if p["name"] == "ortdist:from-package"), None
                ),
            }
            for c in comps
            if str(c.get("bom-ref", "")).startswith("bundled:")
        ],
        "deps": [
            f"{c['name']} {c['version']}"
            for c in comps
            if str(c.get("bom-ref", "")).startswith("source:") and c.get("bom-ref") != "source:onnxruntime"
        ],
    }


def sysroot_packages(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    platform: dict[str, Any] = next((c for c in document.get("components", []) if c.get("type") == "platform"), {})
    return [(c["name"], c["version"]) for c in platform.get("components", [])]


class NoSbomError(CheckError):
    """The artifact is readable but carries no ortdist SBOM (built by another tool or an older ortdist)."""


def read_artifact_sbom(path: Path) -> dict[str, Any]:
    """The SBOM inside a wheel (PEP 770 location), a C library archive or an npm package built by ortdist; a corrupt
    archive, invalid JSON or a document without the fields `inspect` prints is a CheckError naming it."""
    if not path.is_file():
        raise CheckError(
            "is a directory, not a wheel or archive" if path.is_dir() else "no such file",
            where=str(path),
            fix="pass a wheel or archive from dist/<recipe>/",
        )
    rebuild = "the file is damaged: delete it and rebuild the recipe (or download it again)"
    found: bytes | None = None
    try:
        if path.name.endswith(".whl"):
            with zipfile.ZipFile(path) as zf:
                names = [n for n in zf.namelist() if n.endswith(f".dist-info/sboms/{SBOM_NAME}")]
                found = zf.read(names[0]) if names else None
        elif path.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(path) as tar:
                # a C library archive's, or an npm package's (package/sboms/)
                member = next(
                    (
                        m
                        for m in tar.getmembers()
                        if m.name.endswith(f"/share/doc/onnxruntime/{SBOM_NAME}")
                        or m.name == f"package/sboms/{SBOM_NAME}"
                    ),
                    None,
                )
                extracted = tar.extractfile(member) if member else None
                found = extracted.read() if extracted else None
        else:
            raise CheckError(
                f"{path.name} is neither a wheel nor a .tar.gz archive",
                where=str(path),
                fix="pass a .whl or .tar.gz from dist/<recipe>/",
            )
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
        raise CheckError(f"not a readable archive: {exc or type(exc).__name__}", where=str(path), fix=rebuild) from exc
    if found is None:
        raise NoSbomError(
            f"{path.name} carries no ortdist SBOM ({SBOM_NAME})",
            where=str(path),
            fix="only artifacts built by this version of ortdist carry one; rebuild the recipe",
        )
    where = f"{path} ({SBOM_NAME})"
    try:
        document = json.loads(found)
    except ValueError as exc:  # UnicodeDecodeError is one
        raise CheckError(f"the SBOM is not valid JSON: {exc}", where=where, fix=rebuild) from exc
    missing = missing_fields(document)
    if missing:
        raise CheckError(f"the SBOM lacks {', '.join(missing)}", where=where, fix=rebuild)
    try:
        summary(document)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise CheckError(f"the SBOM is malformed ({type(exc).__name__}: {exc})", where=where, fix=rebuild) from exc
    checked: dict[str, Any] = document
    return checked


def missing_fields(document: object) -> list[str]:
    """The fields `ortdist inspect` and the report read that ``document`` lacks (empty: all there)."""
    if not isinstance(document, dict):
        return ["a JSON object at the top (it is a " + type(document).__name__ + ")"]
    missing = [k for k in ("bomFormat", "specVersion", "metadata", "components") if k not in document]
    meta = document.get("metadata")
    component = meta.get("component") if isinstance(meta, dict) else None
    if not isinstance(component, dict) or not component.get("name") or not component.get("version"):
        missing.append("metadata.component.name/version")
    props = meta.get("properties") if isinstance(meta, dict) else None
    names = {p.get("name") for p in props if isinstance(p, dict)} if isinstance(props, list) else set()
    missing += [f"metadata.properties {k}" for k in ("ortdist:recipe", "ortdist:target") if k not in names]
    comps = document.get("components")
    if not isinstance(comps, list) or not any(
        isinstance(c, dict) and c.get("bom-ref") == "source:onnxruntime" for c in comps
    ):
        missing.append("the source:onnxruntime component")
    return missing
