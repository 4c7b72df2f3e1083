"""The CMake defines a plan passes, and where each comes from: ortdist's own and the recipe's
[features], the ORT version, the toolchain (with its in-root placeholders), each EP, [cuda], and
the recipe's [cmake_defines], later sources overriding earlier ones. Pure, like the plan."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from . import registry, relro
from .compiler_cache import CompilerCache
from .config import dotted
from .errors import RecipeError
from .paths import (
    IN_ROOT,
    IN_ROOT_BUILD,
    IN_ROOT_COMPILER,
    IN_ROOT_DEPS,
    IN_ROOT_EP_WHEELS,
    IN_ROOT_SOURCE,
    IN_ROOT_TOOLS_VENV,
    IN_ROOT_WORK,
    in_root,
)
from .recipe import Recipe
from .registry import DependencySource, ExecutionProvider, OrtVersion
from .toolchains.spec import ToolchainSpec


@dataclass(frozen=True, kw_only=True)
class Trees:
    """Where the configure and build commands find ORT's source, the build tree and the work tree
    (the install prefix is ``work/install``)."""

    source: PurePosixPath
    build: PurePosixPath
    work: PurePosixPath


# In a root: the fixed mount points, so compile lines, and compiler-cache keys, are the same everywhere.
IN_ROOT_TREES = Trees(
    source=PurePosixPath(IN_ROOT_SOURCE), build=PurePosixPath(IN_ROOT_BUILD), work=PurePosixPath(IN_ROOT_WORK)
)
# Without a root the commands run on the runner from the recipe's work directory (<cache>/work/<recipe>,
# where build/ and work/ already are, and source/ is the patched tree): CMake makes the paths absolute.
WORK_DIR_TREES = Trees(source=PurePosixPath("source"), build=PurePosixPath("build"), work=PurePosixPath("work"))


def trees_for(toolchain: ToolchainSpec) -> Trees:
    return IN_ROOT_TREES if toolchain.has_root else WORK_DIR_TREES


# A path inside a root: /ortdist/... or the root's own tool and SDK-wheel directories.
_IN_ROOT_PATH = re.compile(
    "|".join(
        rf"{re.escape(str(p))}(?![\w.-])" for p in (IN_ROOT, IN_ROOT_TOOLS_VENV, IN_ROOT_EP_WHEELS, IN_ROOT_COMPILER)
    )
)


def feature_defines(recipe: Recipe) -> dict[str, str]:
    """The [reduce]/[features] switches, all explicit: ORT's own defaults depend on other options
    (RTTI and exceptions switch off silently in builds without Python), so nothing is left to them."""
    features, on_off = recipe.features, {True: "ON", False: "OFF"}
    return {
        "onnxruntime_MINIMAL_BUILD": on_off[features.minimal_build != "off"],
        "onnxruntime_EXTENDED_MINIMAL_BUILD": on_off[features.minimal_build == "extended"],
        "onnxruntime_REDUCED_OPS_BUILD": on_off[recipe.reduce.enabled],
        "onnxruntime_DISABLE_ML_OPS": on_off[not features.ml_ops],
        "onnxruntime_DISABLE_EXCEPTIONS": on_off[not features.exceptions],
        "onnxruntime_DISABLE_RTTI": on_off[not features.rtti],
        "onnxruntime_ENABLE_LTO": on_off[features.lto],
        "onnxruntime_ENABLE_CPUINFO": on_off[features.cpuinfo],
        "onnxruntime_DISABLE_FLOAT8_TYPES": on_off["float8" in features.disabled_types],
        "onnxruntime_DISABLE_OPTIONAL_TYPE": on_off["optional" in features.disabled_types],
        "onnxruntime_DISABLE_SPARSE_TENSORS": on_off["sparsetensor" in features.disabled_types],
    }


# What [features] add to the compile and link flags; appended to the toolchain's own.
NO_UNWIND_TABLES = "-fno-unwind-tables -fno-asynchronous-unwind-tables"
PACKED_RELOCATIONS = "-Wl,-z,pack-relative-relocs"
# glibc learned DT_RELR in 2.36; a library linked with it refuses to load on an older one.
PACKED_RELOCATIONS_GLIBC = (2, 36)
SHARED_LINKER_FLAGS = "CMAKE_SHARED_LINKER_FLAGS"
LINKER_FLAGS = (SHARED_LINKER_FLAGS, "CMAKE_MODULE_LINKER_FLAGS", "CMAKE_EXE_LINKER_FLAGS")
# MinSizeRel's flags with -Oz for -Os; with LTO they are also the link's, where the code is made.
SMALLEST_CODE = "-Oz -DNDEBUG"


def feature_flags(recipe: Recipe, relro_script: PurePosixPath | None = None) -> dict[str, str]:
    """Compiler and linker flags no ORT option sets: with exceptions off ORT drops the unwind
    tables from its C++ only, so the C code (MLAS kernels, dependencies) would keep its .eh_frame;
    packed relocations and the RELRO page size are the linker's. ``relro_script``: the build tree
    a GNU ld links in (the shared library then links with relro.py's script; lld needs none)."""
    features, flags = recipe.features, {}
    if not features.unwind_tables:
        flags = {"CMAKE_C_FLAGS": NO_UNWIND_TABLES, "CMAKE_CXX_FLAGS": NO_UNWIND_TABLES}
    if features.smallest_code:
        flags |= {"CMAKE_C_FLAGS_MINSIZEREL": SMALLEST_CODE, "CMAKE_CXX_FLAGS_MINSIZEREL": SMALLEST_CODE}
    link = [PACKED_RELOCATIONS] if features.packed_relocations else []
    link += [f"-Wl,-z,common-page-size={features.common_page_size}"] if features.common_page_size else []
    if link:
        flags |= dict.fromkeys(LINKER_FLAGS, " ".join(link))
    if features.common_page_size and relro_script is not None:
        flags[SHARED_LINKER_FLAGS] += " " + relro.link_flag(relro_script)
    return flags


def gnu_ld_build(defines: dict[str, str], toolchain: ToolchainSpec) -> PurePosixPath | None:
    """The build tree when the shared library links with GNU ld (no -fuse-ld=lld) in a root."""
    lld = "-fuse-ld=lld" in defines.get(SHARED_LINKER_FLAGS, "")
    return None if lld or not toolchain.has_root else trees_for(toolchain).build


def cuda_defines(recipe: Recipe) -> dict[str, str]:
    """[cuda]: the architectures, explicitly (ORT's default list compiles five of them), the fatbin
    compression and the attention kernel families."""
    attention = "ON" if recipe.cuda.attention_kernels else "OFF"
    mode = recipe.cuda.compression
    return {
        "CMAKE_CUDA_ARCHITECTURES": ";".join(recipe.cuda.architectures),
        # ORT appends -Xfatbin=-compress-all to whatever CMAKE_CUDA_FLAGS starts as.
        **({"CMAKE_CUDA_FLAGS": f"--compress-mode={mode}"} if mode else {}),
        "onnxruntime_USE_FLASH_ATTENTION": attention,
        "onnxruntime_USE_MEMORY_EFFICIENT_ATTENTION": attention,
        "onnxruntime_USE_LEAN_ATTENTION": attention,
    }


def source_eps(version: OrtVersion, openmp: bool = True) -> tuple[str, ...]:
    """EPs whose libraries a toolchain with deps_from_source compiles from pinned sources: those
    with dependency sources of their own in ort_versions.toml (`eps`); without ``openmp`` (a
    compiler with no OpenMP runtime) not those whose sources need one."""
    needing = {ep for dep in version.deps if dep.openmp and not openmp for ep in dep.eps}
    return tuple(dict.fromkeys(ep for dep in version.deps for ep in dep.eps if ep not in needing))


def selected_deps(
    recipe: Recipe, version: OrtVersion, toolchain: ToolchainSpec, providers: tuple[ExecutionProvider, ...]
) -> tuple[DependencySource, ...]:
    """The dependency sources a build compiles: those every toolchain takes from source, and the
    rest when the toolchain builds its dependencies from source; an EP's only with that EP."""
    if not toolchain.has_root:
        return ()  # without a root, ORT's CMake fetches its own (pinned by its cmake/deps.txt)
    eps = {ep.name for ep in providers}
    return tuple(
        dep
        for dep in version.deps
        if (dep.always or toolchain.deps_from_source) and (not dep.eps or eps & set(dep.eps))
    )


def toolchain_define(toolchain: ToolchainSpec, table: str, key: str, value: str) -> str:
    """A toolchain define's value in the plan; one naming a path inside a root ({shims}, {wheels},
    {target} or a literal one) is refused for a toolchain whose builds have no root."""
    seen = in_root(value)
    if not toolchain.has_root and _IN_ROOT_PATH.search(seen):
        raise RecipeError(
            f"{key} = {value!r} is a path inside a root, but {toolchain.kind} builds run on the runner itself",
            where=f"toolchains/{toolchain.declaring(table, key)}.toml key '{dotted(table, key)}'",
            fix=f"name a path the runner has ({registry.data_origin('toolchain_kinds.toml')} says which "
            "toolchain kinds build in a root)",
        )
    return seen


# Patch 0017's switch: the Python binding links libonnxruntime instead of the static libraries.
PYBIND_USES_LIBRARY = "onnxruntime_PYBIND_USE_SHARED_LIB"


def cmake_defines(
    recipe: Recipe,
    version: OrtVersion,
    toolchain: ToolchainSpec,
    providers: tuple[ExecutionProvider, ...],
    compiler_cache: CompilerCache,
) -> tuple[dict[str, str], dict[str, str]]:
    """The configure defines in the order they are passed, and where each one's value comes from
    (the last source to set it: later sources override earlier ones, in this order)."""
    defines: dict[str, str] = {}
    sources: dict[str, str] = {}

    def put(key: str, value: str, source: str) -> None:
        defines[key] = value  # an override keeps the define's first place in the argv
        sources[key] = source

    launcher, cache_source = compiler_cache.launcher, f"compiler cache {compiler_cache.name}"
    put("CMAKE_BUILD_TYPE", recipe.build_type, "recipe build_type")
    put("CMAKE_INSTALL_PREFIX", str(trees_for(toolchain).work / "install"), "ortdist")
    for language in ("C", "CXX") if launcher else ():  # no compiler cache, no launcher
        put(f"CMAKE_{language}_COMPILER_LAUNCHER", launcher, cache_source)
    # A static-only recipe still links the shared library: its link line is the CMake link
    # graph the monolithic archive is bundled from (the .so itself is not published).
    web = recipe.linkage == "wasm"  # the module is ORT's own executable target: no shared library
    put("onnxruntime_BUILD_SHARED_LIB", "OFF" if web else "ON", "ortdist")
    if web:
        exceptions = "ON" if recipe.features.exceptions else "OFF"
        put("onnxruntime_ENABLE_WEBASSEMBLY_EXCEPTION_CATCHING", exceptions, "recipe [features] exceptions")
    put("onnxruntime_ENABLE_PYTHON", "ON" if recipe.wheel.enabled else "OFF", "recipe [wheel] enabled")
    if recipe.wheel.enabled and not recipe.features.lto:
        # One ONNX Runtime per wheel: the binding links the libonnxruntime shipped beside it (patch
        # 0017) rather than a second static copy of the runtime. A link-time optimized build keeps
        # PyPI's layout: there the binding is one whole-program optimization with the runtime.
        put(PYBIND_USES_LIBRARY, "ON", "ortdist (one runtime per wheel)")
    put("onnxruntime_BUILD_UNIT_TESTS", "OFF", "ortdist")
    for key, value in feature_defines(recipe).items():
        put(key, value, "recipe [reduce]" if key == "onnxruntime_REDUCED_OPS_BUILD" else "recipe [features]")
    # The dependency sources are unpacked into the root; without one ORT's CMake fetches its own
    # (pinned by its cmake/deps.txt).
    for dep in selected_deps(recipe, version, toolchain, providers):
        if dep.fetchcontent:
            inside = IN_ROOT_DEPS / dep.name / dep.subdir if dep.subdir else IN_ROOT_DEPS / dep.name
            put(f"FETCHCONTENT_SOURCE_DIR_{dep.name.upper()}", str(inside), f"version {version.version} [deps]")
    for key, value in toolchain.cmake.items():
        put(
            key,
            toolchain_define(toolchain, "cmake", key, value),
            f"toolchain {toolchain.declaring('cmake', key)} [cmake]",
        )
    cross = dotted("cross", recipe.target)
    for key, value in toolchain.cross_facts(recipe.target, "cmake").items():
        put(
            key,
            toolchain_define(toolchain, f"{cross}.cmake", key, value),
            f"toolchain {toolchain.declaring('cross', recipe.target)} [{cross}.cmake]",
        )
    for ep in providers:
        for key, value in ep.cmake.items():
            put(key, value, f"ep {ep.name}")
        table = dotted("ep_cmake", ep.name)
        for key, value in toolchain.ep_cmake.get(ep.name, {}).items():
            put(
                key,
                toolchain_define(toolchain, table, key, value),
                f"toolchain {toolchain.declaring(table, key)} [{table}]",
            )
        for language in ep.compile_languages if launcher else ():
            put(f"CMAKE_{language}_COMPILER_LAUNCHER", launcher, f"{cache_source} (ep {ep.name})")
    for key, flags in feature_flags(recipe, gnu_ld_build(defines, toolchain)).items():
        put(key, " ".join(part for part in (defines.get(key, ""), flags) if part), "recipe [features]")
    if registry.cuda_eps() & {ep.name for ep in providers}:
        for key, value in cuda_defines(recipe).items():
            put(key, value, "recipe [cuda]")
    for key, value in recipe.cmake_defines.items():
        put(key, value, "recipe [cmake_defines]")
    return defines, {key: sources[key] for key in defines}
