"""TOML -> Recipe: the typed conversion (config.py) refuses unknown or mistyped keys; the checks here
need the registry or several fields at once."""

from __future__ import annotations

import re
from pathlib import Path

from .. import registry
from ..config import convert, did_you_mean, parse_toml, read_toml
from ..errors import RecipeError
from .model import KERNEL_CUTS, REFERENCE_MODELS, REFERENCE_PREFIX, Recipe

__all__ = ["did_you_mean", "is_plain_name", "load_recipe", "load_recipe_text", "validate"]


def _fix(hint: str, fallback: str) -> str:
    return hint if hint else fallback


def _load(data: dict[str, object], origin: Path) -> Recipe:
    recipe = convert(Recipe, data, origin=str(origin), error=RecipeError)
    validate(recipe, origin)
    if "cuda" in data and not registry.cuda_eps() & set(recipe.execution_providers):
        # Even a [cuda] table that states the defaults: it says the author expects CUDA kernels.
        raise RecipeError(
            "[cuda] is set but no execution provider compiles CUDA kernels",
            where=f"{origin} [cuda]",
            fix=f"add one of {sorted(registry.cuda_eps())} to execution_providers, or drop [cuda]",
        )
    return recipe


def load_recipe_text(text: str, origin: Path) -> Recipe:
    """Parse and validate a recipe; ``origin`` names the file in every error."""
    return _load(parse_toml(text, str(origin), RecipeError), origin)


def load_recipe(path: Path) -> Recipe:
    return _load(read_toml(path, RecipeError, unreadable_fix="pass a path to recipes/<name>.toml"), path)


def validate(recipe: Recipe, origin: Path) -> None:
    """Cross-field checks that need the registry: names, versions, EPs on the target."""
    where = str(origin)
    if not is_plain_name(recipe.name):
        raise RecipeError(
            f"name {recipe.name!r} is not a plain recipe name (it names dist/<name>/ and the cache's work/<name>/)",
            where=f"{where} key 'name'",
            fix="use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. cpu-linux)",
        )
    if recipe.name != origin.stem:  # whatever the extension: dist/ and CI find a recipe by its file name
        raise RecipeError(
            f"name {recipe.name!r} differs from the file name {origin.stem!r}",
            where=f"{where} key 'name'",
            fix=f'set name = "{origin.stem}" or rename the file to {recipe.name}{origin.suffix or ".toml"}',
        )
    versions = registry.ort_versions()
    if recipe.ort_version not in versions:
        raise RecipeError(
            f"unknown ORT version {recipe.ort_version!r}",
            where=f"{where} key 'ort_version'",
            fix=_fix(did_you_mean(recipe.ort_version, versions), f"supported: {', '.join(versions)}"),
        )
    targets = registry.targets()
    if recipe.target not in targets:
        raise RecipeError(
            f"unknown target triple {recipe.target!r}",
            where=f"{where} key 'target'",
            fix=_fix(did_you_mean(recipe.target, targets), f"known: {', '.join(targets)}"),
        )
    web = targets[recipe.target].os == "wasm"
    if web != (recipe.linkage == "wasm") or (web and recipe.wheel.enabled):
        raise RecipeError(
            f"target {recipe.target!r} with linkage {recipe.linkage!r}"
            + (" and a wheel" if web and recipe.wheel.enabled else "")
            + ": a WebAssembly target builds only the module onnxruntime-web loads",
            where=f"{where} keys 'target', 'linkage', [wheel] enabled",
            fix='for wasm32-unknown-emscripten: linkage = "wasm" and [wheel] enabled = false; other targets: '
            "shared, static or both",
        )
    eps = registry.providers()
    by_provider = {ep.provider.lower(): ep.name for ep in eps.values()}
    seen: set[str] = set()
    for i, name in enumerate(recipe.execution_providers):
        key = f"{where} key 'execution_providers[{i}]'"
        if name not in eps:
            alias = by_provider.get(name.lower())
            hint = f"did you mean '{alias}'? (recipes use registry names)" if alias else did_you_mean(name, eps)
            raise RecipeError(
                f"unknown execution provider {name!r}",
                where=key,
                fix=_fix(hint, "run `ortdist providers` for the list"),
            )
        if name in seen:
            raise RecipeError(f"execution provider {name!r} listed twice", where=key, fix="remove the duplicate")
        seen.add(name)
        ep = eps[name]
        if recipe.target not in ep.targets:
            raise RecipeError(
                f"execution provider {name!r} does not exist for target {recipe.target!r}",
                where=key,
                fix=f"{name} is available for: {', '.join(ep.targets)}",
            )
        if recipe.linkage != "shared" and not ep.static_link:
            raise RecipeError(
                f"execution provider {name!r} cannot be linked statically (linkage = {recipe.linkage!r})",
                where=key,
                fix='use linkage = "shared" or drop the EP',
            )
    # Defines the recipe's own fields decide: define -> (what decides it, how to set it instead).
    reserved = {
        k: ("an EP switch; it is derived from execution_providers", "list the EP in execution_providers instead")
        for ep in eps.values()
        for k in ep.cmake
    }
    reserved |= {
        k: (
            "derived from the recipe's [reduce]/[features] tables",
            "set it through [features] (see recipes/recipe.schema.json)",
        )
        for k in FEATURE_SWITCHES
    }
    reserved |= {
        k: ("derived from the recipe's [cuda] table", "set it through [cuda] (architectures, attention_kernels)")
        for k in CUDA_SWITCHES
    }
    for define in recipe.cmake_defines:
        if define in reserved:
            reason, fix = reserved[define]
            raise RecipeError(f"{define} is {reason}", where=f"{where} [cmake_defines]", fix=fix)
    src = recipe.source
    if src.kind == "git" and not (src.url and src.tag):
        raise RecipeError(
            "a git source needs url and tag",
            where=f"{where} [source]",
            fix='add url = "https://..." and tag = "v1.21.0"',
        )
    if src.kind == "path" and not src.path:
        raise RecipeError(
            "a path source needs path", where=f"{where} [source]", fix='add path = "/path/to/onnxruntime"'
        )
    if recipe.wheel.enabled and not targets[recipe.target].supports_wheels:
        raise RecipeError(
            f"target {recipe.target!r} has no Python wheels",
            where=f"{where} [wheel] key 'enabled'",
            fix="set enabled = false under [wheel]",
        )
    validate_reduction(recipe, where)
    validate_cuda(recipe, where)
    validate_named_files(recipe, origin)
    validate_size_baseline(recipe, origin)


def validate_size_baseline(recipe: Recipe, origin: Path) -> None:
    """[size] compare_with names a recipe beside this one, other than itself."""
    wanted = recipe.size.compare_with
    if not wanted:
        return
    siblings = sorted(p.stem for p in origin.parent.glob("*.toml") if p.stem != recipe.name)
    if wanted not in siblings:
        raise RecipeError(
            f"compare_with = {wanted!r} is not another recipe in {origin.parent}",
            where=f"{origin} [size] key 'compare_with'",
            fix=_fix(did_you_mean(wanted, siblings), "name a recipe of the same target, e.g. the one this cut is from"),
        )


def validate_named_files(recipe: Recipe, origin: Path) -> None:
    """Files the recipe names (relative to it) exist, and its models are ONNX models: checked at load
    time, so `validate` and `plan` refuse them, not the models step after the toolchain and source."""
    from .onnxfile import onnx_problem

    where = str(origin)
    named = [("config", recipe.reduce.config)] if recipe.reduce.config else []
    named += [(f"models[{i}]", m) for i, m in enumerate(recipe.reduce.models) if not m.startswith(REFERENCE_PREFIX)]
    for key, rel in named:
        path = origin.parent / rel
        if not path.is_file():
            raise RecipeError(
                f"{rel!r} "
                + ("is a directory" if path.is_dir() else "does not exist")
                + " (paths are relative to the recipe)",
                where=f"{where} [reduce] key '{key}'",
                fix=f"put the file at {path} or fix the path",
            )
        problem = onnx_problem(path) if key != "config" else None
        if problem:
            raise RecipeError(
                f"{rel!r} {problem}",
                where=f"{where} [reduce] key '{key}'",
                fix=f"list ONNX model files; re-export or re-download {path}",
            )


# A recipe's name: it becomes a directory name under dist/ and the cache, so no '/' and not only dots.
_PLAIN_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def is_plain_name(name: str) -> bool:
    return bool(_PLAIN_NAME.match(name))


# CMake switches derived from [cuda]; a recipe may not set them in cmake_defines.
CUDA_SWITCHES = frozenset(
    {
        "CMAKE_CUDA_ARCHITECTURES",
        "onnxruntime_USE_FLASH_ATTENTION",
        "onnxruntime_USE_MEMORY_EFFICIENT_ATTENTION",
        "onnxruntime_USE_LEAN_ATTENTION",
    }
)
# One CMake CUDA architecture: a number, an optional 'a'/'f' family suffix, optional -real/-virtual.
_CUDA_ARCH = re.compile(r"^[1-9][0-9]{1,2}[af]?(-real|-virtual)?$")
# CMake switches derived from [reduce] / [features]; a recipe may not set them in cmake_defines.
FEATURE_SWITCHES = frozenset(
    {
        "onnxruntime_MINIMAL_BUILD",
        "onnxruntime_EXTENDED_MINIMAL_BUILD",
        "onnxruntime_REDUCED_OPS_BUILD",
        "onnxruntime_DISABLE_ML_OPS",
        "onnxruntime_DISABLE_EXCEPTIONS",
        "onnxruntime_DISABLE_RTTI",
        "onnxruntime_ENABLE_LTO",
        "onnxruntime_ENABLE_CPUINFO",
    }
)


def validate_cuda(recipe: Recipe, where: str, place: str = "") -> None:
    """[cuda] only with an EP nvcc compiles for, and architectures CMake understands, explicitly.
    ``place``: where the architectures came from, when not the recipe file (a command-line option)."""
    cuda = recipe.cuda
    place = place or f"{where} [cuda] key 'architectures'"
    if not registry.cuda_eps() & set(recipe.execution_providers):
        return  # a [cuda] table there is refused by load_recipe_text, which sees the raw tables
    if not cuda.architectures:
        raise RecipeError(
            "no CUDA architecture to compile for",
            where=place,
            fix='list the GPUs you ship to, e.g. architectures = ["90"] (H100/H200), ["80", "90"]',
        )
    for arch in cuda.architectures:
        if not _CUDA_ARCH.match(arch):
            raise RecipeError(
                f"{arch!r} is not a CUDA architecture",
                where=place,
                fix="use CMake's form: '90', '90a', '120', '86-real', '80-virtual' (no 'native' or 'all': the build "
                "machine may have no GPU, and the list must say what the artifact runs on)",
            )


def validate_reduction(recipe: Recipe, where: str) -> None:
    features, reduce = recipe.features, recipe.reduce
    if not features.exceptions and features.minimal_build == "off":
        raise RecipeError(
            "exceptions = false needs a minimal build (ORT supports it only there)",
            where=f"{where} [features] key 'exceptions'",
            fix='set minimal_build = "plain" or "extended", or keep exceptions',
        )
    size = features.common_page_size
    if size and not (4096 <= size <= 65536 and size & (size - 1) == 0):
        raise RecipeError(
            f"common_page_size = {size} is not a page size",
            where=f"{where} [features] key 'common_page_size'",
            fix="use 4096, 16384 or 65536 (a power of two from 4 KiB to 64 KiB), or 0 for the linker's default",
        )
    if features.smallest_code and recipe.build_type != "MinSizeRel":
        raise RecipeError(
            f"smallest_code = true replaces MinSizeRel's -Os, but build_type is {recipe.build_type!r}",
            where=f"{where} [features] key 'smallest_code'",
            fix='set build_type = "MinSizeRel", or drop smallest_code',
        )
    arm64 = registry.targets()[recipe.target].arch == "aarch64"
    for cut in KERNEL_CUTS:
        if not getattr(features, cut.key) and (not arm64 or not reduce.types):
            raise RecipeError(
                f"{cut.key} = false needs an arm64 target and reduce.types = true (patch {cut.patch} changes "
                f"MLAS's arm64 dispatch only, and the build checks the models' types for {', '.join(cut.types)})",
                where=f"{where} [features] key '{cut.key}'",
                fix="use an aarch64-* target with [reduce] types = true and models or a config, or keep the kernels",
            )
    if len(set(features.disabled_types)) != len(features.disabled_types):
        raise RecipeError(
            f"disabled_types lists a type twice: {list(features.disabled_types)}",
            where=f"{where} [features] key 'disabled_types'",
            fix="name each type once",
        )
    if not features.unwind_tables and features.exceptions:
        raise RecipeError(
            "unwind_tables = false needs exceptions = false (a C++ exception unwinds through those tables)",
            where=f"{where} [features] key 'unwind_tables'",
            fix="set exceptions = false (and minimal_build), or keep unwind_tables",
        )
    for key, value in (("exceptions", features.exceptions), ("rtti", features.rtti)):
        if not value and recipe.wheel.enabled:
            raise RecipeError(
                f"{key} = false cannot build the Python binding (pybind11 needs C++ {key})",
                where=f"{where} [features] key '{key}'",
                fix="set enabled = false under [wheel], or keep " + key,
            )
    if reduce.types and not reduce.enabled:
        raise RecipeError(
            "types = true needs models or a config to take the types from",
            where=f"{where} [reduce] key 'types'",
            fix='add models = ["reference:cnn"] or config = "ops.config" under [reduce]',
        )
    for i, model in enumerate(reduce.models):
        if model.startswith(REFERENCE_PREFIX) and model.removeprefix(REFERENCE_PREFIX) not in REFERENCE_MODELS:
            name = model.removeprefix(REFERENCE_PREFIX)
            raise RecipeError(
                f"unknown reference model {name!r}",
                where=f"{where} [reduce] key 'models[{i}]'",
                fix=_fix(did_you_mean(name, REFERENCE_MODELS), f"reference models: {', '.join(REFERENCE_MODELS)}"),
            )
        if not model.startswith(REFERENCE_PREFIX) and not model.lower().endswith(".onnx"):
            raise RecipeError(
                f"{model!r} is not an ONNX model path",
                where=f"{where} [reduce] key 'models[{i}]'",
                fix="list .onnx files (relative to the recipe) or 'reference:<name>'",
            )
    if features.minimal_build != "off" and not reduce.models:
        raise RecipeError(
            "a minimal build runs ORT-format models only, and ortdist converts them from the recipe's models",
            where=f"{where} [reduce] key 'models'",
            fix='list the models the build is for, e.g. models = ["reference:cnn"] under [reduce]',
        )
    if reduce.enabled and recipe.wheel.enabled and not any(m.startswith(REFERENCE_PREFIX) for m in reduce.models):
        raise RecipeError(
            "a reduced wheel is checked (and smoke-tested) with a reference model it was cut for, and none is listed",
            where=f"{where} [reduce] key 'models'",
            fix='add "reference:cnn" (or another reference model) to models',
        )
