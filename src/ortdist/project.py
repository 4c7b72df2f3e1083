"""The project checkout's recipes, toolchains and patch series, turned into a BuildPlan.

Below the CLI, so the CLI, the bench and the CI generator share one way to plan a recipe.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from .compiler_cache import compiler_cache
from .errors import RecipeError
from .patches import Patch, read_series
from .plan import BuildPlan, make_plan
from .recipe import Recipe, load_recipe
from .recipe.load import is_plain_name
from .recipe.model import FeatureSettings
from .toolchains import load_toolchain
from .workers import parse_workers


def resolve_recipe_path(arg: str, project: Path) -> Path:
    """A path as given, or a bare name looked up as recipes/<name>.toml (a name that is not a plain
    name, like '../x' or '..', is refused: it would reach outside recipes/)."""
    path = Path(arg)
    if path.is_file():
        return path
    if is_plain_name(arg) and not arg.endswith(".toml"):
        named = project / "recipes" / f"{arg}.toml"
        if named.exists() or not path.suffix:
            return named
    if path.suffix:
        return path  # a file's path: load_recipe says it is missing
    raise RecipeError(
        "not a plain recipe name (one without '/' that is not only dots), nor a recipe file",
        where=arg or repr(arg),
        fix="pass a recipe name from recipes/ (e.g. cpu-linux) or the path of a .toml file",
    )


def load_patches(recipe: Recipe, project: Path) -> tuple[Patch, ...]:
    if recipe.patch_series == "none":
        return ()
    defaults = FeatureSettings()
    changed = [f.name for f in fields(defaults) if getattr(recipe.features, f.name) != getattr(defaults, f.name)]
    return read_series(
        project / "patches" / recipe.patch_series, {"cpu", *recipe.execution_providers}, changed, recipe.target
    )


def plan_for(
    recipe_arg: str,
    project: Path,
    cache_name: str | None = None,
    python: Sequence[str] | None = None,
    workers: str | None = None,
    cuda_architectures: Sequence[str] | None = None,
) -> tuple[BuildPlan, Path]:
    """``python``: the command line's choice of the recipe's Pythons (None: every one it lists);
    ``workers``: distcc workers as HOST[:PORT][/SLOTS] items (None: $ORTDIST_WORKERS, else none);
    ``cuda_architectures``: the command line's instead of the recipe's [cuda] list (None: the recipe's)."""
    path = resolve_recipe_path(recipe_arg, project)
    recipe = load_recipe(path)
    toolchain = load_toolchain(project, recipe.toolchain)
    chosen = parse_workers(os.environ.get("ORTDIST_WORKERS", "") if workers is None else workers)
    cache = compiler_cache(cache_name)
    plan = make_plan(recipe, toolchain, load_patches(recipe, project), cache, python, chosen, cuda_architectures)
    return plan, path
