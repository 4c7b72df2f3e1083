"""The typed TOML converter every recipe, toolchain and data file is read with."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import pytest

from ortdist import ci, config, registry
from ortdist.errors import DataError, RecipeError
from ortdist.recipe import load_recipe
from ortdist.reduce import analyze
from ortdist.smoke import suite
from ortdist.toolchains import load_toolchain


@dataclass(frozen=True, kw_only=True)
class Inner:
    size: int
    ratio: float = 1.0
    mode: Literal["fast", "small"] = "fast"


@dataclass(frozen=True, kw_only=True)
class Named:
    name: str = field(metadata=config.KEY)
    url: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Outer:
    title: str
    enabled: bool = True
    inner: Inner = field(default_factory=lambda: Inner(size=1))
    optional: Inner | None = None
    defines: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    plain: dict[str, tuple[int, ...]] = field(default_factory=dict)
    by_name: Mapping[str, Named] = field(default_factory=lambda: MappingProxyType({}))
    in_order: tuple[Named, ...] = ()


def outer(text: str, error: type[RecipeError] | type[DataError] = DataError) -> Outer:
    return config.convert(Outer, tomllib.loads(text), origin="f.toml", error=error)


def test_a_full_table_converts_to_frozen_typed_values() -> None:
    got = outer(
        'title = "t"\nenabled = false\n[inner]\nsize = 3\nratio = 2\nmode = "small"\n[optional]\nsize = 4\n'
        '[defines]\nA = "1"\n[plain]\nx = [1, 2]\n[by_name.one]\nurl = "u1"\ntags = ["a"]\n'
        '[in_order.b]\nurl = "ub"\n[in_order.a]\nurl = "ua"\n'
    )
    assert got.inner == Inner(size=3, ratio=2.0, mode="small") and isinstance(got.inner.ratio, float)
    assert got.optional == Inner(size=4)
    assert isinstance(got.defines, MappingProxyType) and dict(got.defines) == {"A": "1"}
    assert type(got.plain) is dict and got.plain == {"x": (1, 2)}
    assert got.by_name["one"] == Named(name="one", url="u1", tags=("a",))
    assert [n.name for n in got.in_order] == ["b", "a"]  # file order


def test_defaults_fill_what_the_file_leaves_out() -> None:
    got = outer('title = "t"\n')
    assert (got.enabled, got.inner, got.optional, dict(got.defines)) == (True, Inner(size=1), None, {})


@pytest.mark.parametrize(
    ("text", "where", "message", "fix"),
    [
        ('title = "t"\ntitel = "u"\n', "key 'titel'", "unknown key 'titel'", "did you mean 'title'?"),
        ('title = "t"\nzzz = 1\n', "key 'zzz'", "unknown key 'zzz'", "allowed keys: by_name, defines, enabled"),
        ('title = "t"\n[inner]\nsize = 1\nsise = 2\n', "key 'inner.sise'", "unknown key", "did you mean 'size'?"),
        ("enabled = true\n", "f.toml", "missing required key(s) ['title']", 'add title = "..." at the top'),
        ('title = "t"\n[inner]\nratio = 2.0\n', "key 'inner'", "['size']", "add size = 1 under [inner]"),
        ('title = "t"\n[by_name.x]\ntags = []\n', "key 'by_name.x'", "['url']", "under [by_name.x]"),
        ('title = "t"\n[by_name.x]\nname = "y"\nurl = "u"\n', "by_name.x.name", "unknown key 'name'", "url"),
        ("title = 5\n", "key 'title'", "must be a string, got an integer 5", 'quote it: title = "5"'),
        ('title = ["t"]\n', "key 'title'", "must be a string, got a list", 'write a string: title = "..."'),
        ('title = "t"\nenabled = "yes"\n', "key 'enabled'", "must be true or false", "enabled = true or false"),
        ('title = "t"\n[inner]\nsize = true\n', "key 'inner.size'", "must be a whole number", "size = 1"),
        ('title = "t"\n[inner]\nsize = 1\nratio = "2"\n', "key 'inner.ratio'", "must be a number", "ratio = 0.5"),
        ('title = "t"\n[inner]\nsize = 1\nmode = "fats"\n', "key 'inner.mode'", "is not one of", "'fast'?"),
        ('title = "t"\n[inner]\nsize = 1\nmode = "x"\n', "inner.mode", "'x' is not one of", "['fast', 'small']"),
        ('title = "t"\ninner = 3\n', "key 'inner'", "must be a table, got an integer 3", "[inner]"),
        ('title = "t"\n[defines]\nA = true\n', "key 'defines.A'", "got a boolean true", 'quote it: A = "TRUE"'),
        ('title = "t"\n[defines]\n"1.0" = 1\n', "key 'defines.\"1.0\"'", "must be a string", 'quote it: "1.0" = "1"'),
        ('title = "t"\n[plain]\nx = 1\n', "key 'plain.x'", "must be a list", "x = [...]"),
        ('title = "t"\n[plain]\nx = [1, "2"]\n', "key 'plain.x[1]'", "must be a whole number", "it without quotes: 1"),
        ('title = "t"\n[[in_order]]\nurl = "u"\n', "key 'in_order'", "table of named entries", "[in_order.<name>]"),
    ],
)
def test_errors_name_the_file_the_dotted_key_and_a_fix(text: str, where: str, message: str, fix: str) -> None:
    with pytest.raises(DataError) as info:
        outer(text)
    err = info.value
    assert err.where is not None and err.where.startswith("f.toml") and where in err.where
    assert message in err.message
    assert err.fix is not None and fix in err.fix


def test_the_callers_error_class_is_raised() -> None:
    with pytest.raises(RecipeError) as info:
        outer("titel = 1\n", RecipeError)
    assert info.value.exit_code == 2


def test_a_table_of_named_entries() -> None:
    table = config.convert_table(
        Named, tomllib.loads('[b]\nurl = "1"\n["a.b"]\nurl = "2"\n'), origin="n.toml", error=DataError
    )
    assert list(table) == ["b", "a.b"] and table["a.b"].name == "a.b"
    with pytest.raises(DataError) as info:
        config.convert_table(Named, {"1.21.0": {"url": 1}}, origin="n.toml", error=DataError)
    assert info.value.where == "n.toml key '\"1.21.0\".url'"


def test_convert_fields_checks_only_what_is_there() -> None:
    assert config.convert_fields(Outer, {"enabled": False}, origin="f.toml", error=DataError) == {"enabled": False}
    with pytest.raises(DataError, match="did you mean 'enabled'"):
        config.convert_fields(Outer, {"enabld": False}, origin="f.toml", error=DataError)


@pytest.mark.parametrize(
    ("raw", "message", "fix"),
    [
        (b'title = "caf\xe9"\n', "not UTF-8 text (byte 12", "re-save the file as UTF-8"),
        (b'title = "t"\n[inner\n', "not valid TOML", "fix the TOML syntax"),
        (b'title = "t"\ntitle = "u"\n', "not valid TOML", "fix the TOML syntax"),
    ],
)
def test_unreadable_files_are_the_callers_error(tmp_path: Path, raw: bytes, message: str, fix: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(raw)
    with pytest.raises(RecipeError) as info:
        config.load(path, Outer, RecipeError)
    assert info.value.where == str(path)
    assert message in info.value.message and fix in str(info.value.fix)


def test_a_missing_file_is_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read the file") as info:
        config.read_toml(tmp_path / "none.toml", DataError, unreadable_fix="create it")
    assert info.value.fix == "create it"


def test_unsupported_annotations_are_a_programming_error() -> None:
    @dataclass(frozen=True)
    class Bad:
        x: set[str]

    with pytest.raises(TypeError, match="no TOML conversion"):
        config.convert(Bad, {"x": []}, origin="f", error=DataError)


def test_did_you_mean() -> None:
    assert config.did_you_mean("xnnpak", ["xnnpack", "cuda"]) == "did you mean 'xnnpack'?"
    assert config.did_you_mean("zzz", ["xnnpack"]) == ""


def test_every_toml_file_of_the_project_loads(project: Path) -> None:
    """Each data file, toolchain (with its pythons.toml) and recipe, read afresh through the converter."""
    targets = registry.parse_targets(registry.load_data("targets.toml"))
    eps = registry.parse_providers(registry.load_data("providers.toml"), targets)
    assert registry.parse_ort_versions(registry.load_data("ort_versions.toml"))["1.21.0"].deps[0].name == "onnx"
    kinds = registry.parse_toolchain_kinds(registry.load_data("toolchain_kinds.toml"))
    assert kinds["debian-sysroot"].root and not kinds["xcode"].root
    assert set(ci.parse_runner_facts(registry.load_data("runners.toml"), targets, eps).targets) == set(targets)
    assert "cnn" in suite.parse_smoke_facts(registry.load_data("smoke.toml")).models
    assert "ai.onnx:Cast" in analyze.parse_type_tracking(registry.load_data("type_tracking.toml"))
    toolchains = sorted(p.stem for p in (project / "toolchains").glob("*.toml"))
    assert all(load_toolchain(project, name).name == name for name in toolchains)
    recipes = sorted((project / "recipes").glob("*.toml"))
    assert len(recipes) > 10 and all(load_recipe(path).name == path.stem for path in recipes)
