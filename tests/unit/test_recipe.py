from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.errors import RecipeError
from ortdist.recipe import Recipe, load_recipe


def error_of(recipe_from: Callable[..., Recipe], body: str) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        recipe_from(body)
    return info.value


def test_cpu_linux_recipe_loads(project: Path) -> None:
    recipe = load_recipe(project / "recipes" / "cpu-linux.toml")
    assert recipe.name == "cpu-linux"
    assert recipe.ort_version == "1.21.0"
    assert recipe.execution_providers == ("cpu",)
    assert recipe.linkage == "shared"
    assert recipe.wheel.enabled and recipe.wheel.python == ("3.13", "3.10", "3.11", "3.12", "3.14")
    assert recipe.source.kind == "debian"
    assert recipe.patch_series == "1.21.0"


def test_defaults_fill_missing_sections(recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from("")
    assert recipe.target == "x86_64-unknown-linux-gnu"
    assert recipe.build_type == "Release"
    assert dict(recipe.cmake_defines) == {}


def test_unknown_top_level_key_names_file_key_and_suggestion(
    recipe_from: Callable[..., Recipe], write_recipe: Callable[..., Path]
) -> None:
    err = error_of(recipe_from, 'execution_provider = ["cpu"]\n')
    text = str(err)
    assert "r.toml" in text
    assert "unknown key 'execution_provider'" in text
    assert "did you mean 'execution_providers'?" in text
    assert err.exit_code == 2


def test_unknown_nested_key_is_named_with_its_table(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, '[wheel]\npyton = ["3.13"]\n'))
    assert "wheel.pyton" in text
    assert "did you mean 'python'?" in text


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("linkage = 3\n", "is not one of"),
        ('build_type = "release"\n', "did you mean 'Release'?"),
        ('[wheel]\nenabled = "yes"\n', "must be true or false"),
        ('execution_providers = "cpu"\n', "must be a list"),
        ("description = 5\n[x]\n", "not valid TOML"),
        ("[cmake_defines]\nFOO = true\n", 'quote it: FOO = "TRUE"'),
        ('wheel = "yes"\n', "must be a table"),
    ],
)
def test_wrong_types_are_refused(recipe_from: Callable[..., Recipe], body: str, expected: str) -> None:
    assert expected in str(error_of(recipe_from, body))


def test_unknown_ep_suggests_registry_name(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, 'execution_providers = ["xnnpak"]\n'))
    assert "unknown execution provider 'xnnpak'" in text
    assert "execution_providers[0]" in text
    assert "did you mean 'xnnpack'?" in text


def test_provider_class_name_maps_to_registry_name(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, 'execution_providers = ["CUDAExecutionProvider"]\n'))
    assert "did you mean 'cuda'?" in text


def test_ep_not_available_on_target(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, 'execution_providers = ["coreml"]\n'))
    assert "'coreml' does not exist for target 'x86_64-unknown-linux-gnu'" in text
    assert "arm64-apple-darwin" in text


def test_unknown_target_suggests_close_triple(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, 'target = "x86_64-unknown-linux-gun"\n'))
    assert "did you mean 'x86_64-unknown-linux-gnu'?" in text


def test_name_must_match_file(write_recipe: Callable[..., Path], tmp_path: Path) -> None:
    path = write_recipe("")
    path.rename(tmp_path / "other.toml")
    with pytest.raises(RecipeError, match="differs from the file name 'other'"):
        load_recipe(tmp_path / "other.toml")


def test_ep_switch_in_cmake_defines_is_refused(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, '[cmake_defines]\nonnxruntime_USE_CUDA = "ON"\n'))
    assert "is an EP switch" in text


def test_duplicate_ep_is_refused(recipe_from: Callable[..., Recipe]) -> None:
    assert "listed twice" in str(error_of(recipe_from, 'execution_providers = ["cpu", "cpu"]\n'))


def test_static_linkage_refuses_eps_that_cannot_link_statically(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, 'linkage = "static"\nexecution_providers = ["cuda"]\n'))
    assert "cannot be linked statically" in text


def test_git_source_needs_url_and_tag(recipe_from: Callable[..., Recipe]) -> None:
    assert "needs url and tag" in str(error_of(recipe_from, '[source]\nkind = "git"\nurl = "https://x"\n'))


def test_wheel_on_target_without_wheels(recipe_from: Callable[..., Recipe]) -> None:
    text = str(error_of(recipe_from, 'target = "aarch64-linux-android"\n'))
    assert "has no Python wheels" in text


def test_missing_required_key(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('name = "r"\n', encoding="utf-8")
    with pytest.raises(RecipeError, match="missing required key"):
        load_recipe(path)


def test_recipe_is_frozen(recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from('[cmake_defines]\nFOO = "1"\n')
    with pytest.raises(AttributeError):
        recipe.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        recipe.cmake_defines["FOO"] = "2"  # type: ignore[index]
