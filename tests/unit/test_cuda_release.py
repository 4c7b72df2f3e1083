"""What the CUDA recipes promise a release engineer: every GPU generation of PyPI's wheel and more,
only what the toolchain's nvcc can compile, a one-architecture build to iterate on that can never be
published as the release."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ortdist import upload
from ortdist.checks import fatbin
from ortdist.errors import PublishError, RecipeError
from ortdist.plan import make_plan
from ortdist.project import load_patches, plan_for
from ortdist.recipe import load_recipe
from ortdist.toolchains import load_toolchain

# PyPI's onnxruntime-gpu as read from its provider's fatbin (docs/cuda.md): 1.21.0 (CUDA 12) and
# 1.31.1 (CUDA 13, arch-specific sm_90a/sm_120a counted as their base).
PYPI_1_21_0 = {"sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"}
PYPI_1_31_1 = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_120"}


@pytest.mark.parametrize(
    ("recipe", "pypi", "more"),
    [
        ("cuda-linux", PYPI_1_21_0, {"sm_89"}),
        ("cuda13-linux", PYPI_1_31_1, {"sm_100", "compute_90"}),
    ],
)
def test_each_release_recipe_covers_pypis_gpus_and_more(
    project: Path, recipe: str, pypi: set[str], more: set[str]
) -> None:
    plan, _ = plan_for(recipe, project)
    promised = set(fatbin.promised(plan.recipe.cuda.architectures))
    assert pypi | more <= promised, sorted(pypi | more - promised)
    assert plan.cmake_defines["CMAKE_CUDA_ARCHITECTURES"] == ";".join(plan.recipe.cuda.architectures)
    assert not plan.cuda_recipe_architectures


def test_cuda13_compresses_at_its_smallest_and_cuda12_as_ort_does(project: Path) -> None:
    assert plan_for("cuda13-linux", project)[0].cmake_defines["CMAKE_CUDA_FLAGS"] == "--compress-mode=size"
    assert "CMAKE_CUDA_FLAGS" not in plan_for("cuda-linux", project)[0].cmake_defines


def _plan(project: Path, name: str, **cuda: Any) -> None:
    recipe = load_recipe(project / "recipes" / f"{name}.toml")
    recipe = dataclasses.replace(recipe, cuda=dataclasses.replace(recipe.cuda, **cuda))
    make_plan(recipe, load_toolchain(project, recipe.toolchain), load_patches(recipe, project))


@pytest.mark.parametrize(
    ("name", "cuda", "message", "fix"),
    [
        ("cuda-linux", {"architectures": ("90", "100-real")}, "cannot compile CUDA code for 100-real", "50, 52"),
        ("cuda-linux", {"architectures": ("120a",)}, "cannot compile CUDA code for 120a", "cuda12.toml [nvcc]"),
        ("cuda13-linux", {"architectures": ("70-real", "90")}, "cannot compile CUDA code for 70-real", "75, 80"),
        ("cuda-linux", {"compression": "size"}, "no fatbin compression mode 'size'", "12.8"),
        ("cuda13-linux", {"compression": "tiny"}, "no fatbin compression mode 'tiny'", "'balance'"),
    ],
)
def test_what_the_toolchains_nvcc_cannot_do_is_refused_while_planning(
    project: Path, name: str, cuda: dict[str, Any], message: str, fix: str
) -> None:
    with pytest.raises(RecipeError, match=message) as e:
        _plan(project, name, **cuda)
    assert fix in (e.value.fix or "")


def test_an_arch_specific_variant_of_a_listed_architecture_is_allowed(project: Path) -> None:
    _plan(project, "cuda13-linux", architectures=("90a", "120a-real"))


def test_one_architecture_to_iterate_on_is_recorded_and_changes_the_digest(project: Path) -> None:
    release, _ = plan_for("cuda13-linux", project)
    quick, _ = plan_for("cuda13-linux", project, cuda_architectures=["90"])
    assert quick.cmake_defines["CMAKE_CUDA_ARCHITECTURES"] == "90"
    assert quick.cuda_recipe_architectures == release.recipe.cuda.architectures
    assert quick.summary()["cuda_recipe_architectures"] == list(release.recipe.cuda.architectures)
    assert quick.digest() != release.digest()


@pytest.mark.parametrize(
    ("recipe", "arches", "message"),
    [
        ("cpu-linux", ["90"], "compiles no CUDA code"),
        ("cuda13-linux", ["native"], "'native' is not a CUDA architecture"),
        ("cuda-linux", ["100"], "cannot compile CUDA code for 100"),
    ],
)
def test_a_bad_cuda_architectures_option_names_the_option(
    project: Path, recipe: str, arches: list[str], message: str
) -> None:
    with pytest.raises(RecipeError, match=message) as e:
        plan_for(recipe, project, cuda_architectures=arches)
    assert e.value.where == "--cuda-architectures"


def test_publish_refuses_a_build_for_fewer_architectures_than_the_recipe(tmp_path: Path) -> None:
    dist = tmp_path / "cuda13-linux"
    dist.mkdir()
    manifest = {"artifacts": [], "cuda_architectures": ["90"], "cuda_recipe_architectures": ["75-real", "90"]}
    (dist / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(PublishError, match="covers 90 only") as e:
        upload.release_wheels(dist)
    assert "without --cuda-architectures" in (e.value.fix or "")
