"""Recipes: declarative TOML descriptions of an ONNX Runtime distribution."""

from __future__ import annotations

from .load import load_recipe, load_recipe_text
from .model import Recipe, SourceSettings, WheelSettings

__all__ = ["Recipe", "SourceSettings", "WheelSettings", "load_recipe", "load_recipe_text"]
