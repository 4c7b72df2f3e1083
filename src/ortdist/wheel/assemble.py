"""Assemble the ONNX Runtime Python package into a wheel with scikit-build-core.

ORT's own CMake lays the package out in the build tree (``<build>/onnxruntime``). We stage a
copy, add ORT's ``build_and_package_info.py`` and our build record, and hand scikit-build-core
a two-line CMake project whose install rule places the staged package in the wheel's platlib.
scikit-build-core then owns what it is good at: metadata, tags, RECORD. Compiling ORT stays
with ortdist's CMake driver (progress, logs, resume), and is shared by every Python version.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import PackageError
from ..fsutil import remove_tree
from ..plan import BuildPlan

RECORD_NAME = "ortdist_build.json"

_CMAKELISTS = """\
cmake_minimum_required(VERSION 3.25)
project(ortdist_wheel LANGUAGES NONE)
# The package was compiled and laid out by ONNX Runtime's own build; install it as is.
install(DIRECTORY "${ORTDIST_PACKAGE_DIR}/" DESTINATION "${SKBUILD_PLATLIB_DIR}/onnxruntime"
        USE_SOURCE_PERMISSIONS)
"""


def build_record(
    plan: BuildPlan, recipe_sha256: str, source_sha256: str, operators: list[str] | None = None
) -> dict[str, Any]:
    """What the wheel claims: the smoke suite reads the EP list (and, for a reduced build, the
    models it was cut for and its operators) from here."""
    reduced = (
        {
            "models": list(plan.recipe.reduce.models),
            "optimization_level": plan.recipe.reduce.optimization_level,
            "minimal_build": plan.recipe.features.minimal_build,
            "types": plan.recipe.reduce.types,
            "operators": operators or [],
        }
        if plan.reduced
        else None
    )
    return {
        "reduced": reduced,
        "schema": 1,
        "ortdist_version": __version__,
        "recipe": plan.recipe.name,
        "recipe_sha256": recipe_sha256,
        "ort_version": plan.version.version,
        "target": plan.target.triple,
        "build_type": plan.recipe.build_type,
        "execution_providers": [{"name": ep.name, "provider": ep.provider} for ep in plan.providers],
        "distribution": plan.distribution,
        "toolchain": {"name": plan.toolchain.name, "digest": plan.toolchain.digest},
        "source": {"kind": plan.recipe.source.kind, "sha256": source_sha256},
        "patches": [{"name": p.name, "sha256": p.sha256} for p in plan.patches],
    }


# Where the package's compiled libraries sit inside the wheel (site-packages relative).
CAPI_DIR = "onnxruntime/capi"


def provider_runpath(library_dirs: tuple[str, ...]) -> str:
    """Search path of a provider library in ``onnxruntime/capi``: its own directory (the shared
    provider bridge), then the site-packages directories NVIDIA's wheels install their libraries
    into; without those wheels the loader goes on to LD_LIBRARY_PATH and the system's CUDA.
    (auditwheel, when it grafts a library into the provider, keeps these entries, adds its
    ``.libs`` directory and stores the list as DT_RPATH, which is searched before
    LD_LIBRARY_PATH: the NVIDIA wheels, when installed, win over a system CUDA.)"""
    up = "/".join(".." for _ in CAPI_DIR.split("/"))
    return ":".join(["$ORIGIN", *(f"$ORIGIN/{up}/{d}" for d in library_dirs)])


def search_path_keeps(found: str, expected: str) -> bool:
    """Whether ``found`` (a library's RPATH/RUNPATH after repair) still holds every entry of
    ``expected``, in order; entries a repair tool added in between or after are fine."""
    entries = iter(found.split(":"))
    return all(any(entry == want for entry in entries) for want in expected.split(":"))


def optional_dependencies(plan: BuildPlan) -> dict[str, tuple[str, ...]]:
    """The EPs' pip extras (e.g. onnxruntime-gpu[cuda,cudnn]), merged in registry order."""
    extras: dict[str, tuple[str, ...]] = {}
    for ep in plan.providers:
        for extra, requirements in ep.pip_extras.items():
            extras[extra] = tuple(dict.fromkeys((*extras.get(extra, ()), *requirements)))
    return extras


def pyproject_text(plan: BuildPlan, package_dir: str) -> str:
    deps = ", ".join(json.dumps(r) for r in plan.version.python_requires)
    extras = "".join(
        f"{name} = [{', '.join(json.dumps(r) for r in reqs)}]\n" for name, reqs in optional_dependencies(plan).items()
    )
    extras_table = f"\n[project.optional-dependencies]\n{extras}" if extras else ""
    eps = ", ".join(ep.name for ep in plan.providers)
    return f"""\
[build-system]
requires = ["scikit-build-core"]
build-backend = "scikit_build_core.build"

[project]
name = "{plan.distribution}"
version = "{plan.version.version}"
description = "ONNX Runtime {plan.version.version} ({eps}) built by ortdist from recipe {plan.recipe.name}"
readme = {{text = "ONNX Runtime built from source by ortdist, recipe {plan.recipe.name}.", content-type = "text/plain"}}
license = "MIT"
license-files = ["LICENSE", "ThirdPartyNotices.txt"]
requires-python = ">=3.10"
dependencies = [{deps}]
{extras_table}
[project.scripts]
onnxruntime_test = "onnxruntime.tools.onnxruntime_test:main"

[tool.scikit-build]
minimum-version = "0.10"
wheel.packages = []
cmake.define.ORTDIST_PACKAGE_DIR = "{package_dir}"
"""


def stage_package(build_package: Path, stage: Path, plan: BuildPlan, record: dict[str, Any]) -> Path:
    """Copy the package ORT's build laid out and add the package info files setup.py would write."""
    if not (build_package / "__init__.py").is_file():
        raise PackageError(
            "the ORT build did not lay out the Python package (no __init__.py)",
            where=str(build_package),
            fix="check logs/build.log: the pybind post-build step lays out the package",
        )
    target = stage / "onnxruntime"
    remove_tree(stage)
    shutil.copytree(build_package, target, symlinks=False)
    (target / "capi" / "build_and_package_info.py").write_text(
        f"package_name = {plan.distribution!r}\n__version__ = {plan.version.version!r}\n", encoding="utf-8"
    )
    (target / RECORD_NAME).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return target


def write_project(project: Path, plan: BuildPlan, source_tree: Path, package_dir_in_root: str) -> None:
    remove_tree(project)
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(pyproject_text(plan, package_dir_in_root), encoding="utf-8")
    (project / "CMakeLists.txt").write_text(_CMAKELISTS, encoding="utf-8")
    for name in ("LICENSE", "ThirdPartyNotices.txt"):
        shutil.copyfile(source_tree / name, project / name)
