"""The project checkout's recipes, toolchains and patch series, turned into a BuildPlan.

Below the CLI, so the CLI, the bench and the CI generator share one way to plan a recipe.
"""

from __future__ import annotations

from pathlib import Path

from .compiler_cache import compiler_cache
from .patches import Patch, read_series
from .plan import BuildPlan, make_plan
from .recipe import Recipe, load_recipe
from .toolchains import load_toolchain


def resolve_recipe_path(arg: str, project: Path) -> Path:
    """A path as given, or a bare name looked up as recipes/<name>.toml."""
    path = Path(arg)
    if not path.suffix and not path.exists():
        path = project / "recipes" / f"{arg}.toml"
    return path


def load_patches(recipe: Recipe, project: Path) -> tuple[Patch, ...]:
    if recipe.patch_series == "none":
        return ()
    return read_series(project / "patches" / recipe.patch_series, {"cpu", *recipe.execution_providers})


def plan_for(recipe_arg: str, project: Path, cache_name: str | None = None) -> tuple[BuildPlan, Path]:
    path = resolve_recipe_path(recipe_arg, project)
    recipe = load_recipe(path)
    toolchain = load_toolchain(project, recipe.toolchain)
    return make_plan(recipe, toolchain, load_patches(recipe, project), compiler_cache(cache_name)), path
