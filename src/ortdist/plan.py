"""Recipe -> BuildPlan: every decision about a build, made without touching the disk or network.

The plan is the heart of the unit tests: given a recipe, the registry, a toolchain spec and the
patch series, it fixes the CMake defines, the steps, the artifacts and the names, so a reviewer
can read what a build will do (``ortdist plan RECIPE``) before spending half an hour on it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any

from . import registry
from .compiler_cache import CACHES, NO_CACHE, CompilerCache
from .defines import PACKED_RELOCATIONS_GLIBC, Trees, cmake_defines, selected_deps, source_eps, trees_for
from .errors import RecipeError
from .fsutil import sha256_text
from .patches import Patch
from .recipe import Recipe
from .recipe.load import validate_cuda
from .registry import DependencySource, ExecutionProvider, OrtVersion, Target
from .toolchains.spec import ToolchainSpec
from .workers import WHERE as WORKERS_WHERE
from .workers import Worker

STRIPPED_BUILD_TYPES = frozenset({"Release", "MinSizeRel"})


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    recipe: Recipe
    version: OrtVersion
    target: Target
    providers: tuple[ExecutionProvider, ...]
    toolchain: ToolchainSpec
    patches: tuple[Patch, ...]
    source_key: str
    cmake_defines: dict[str, str]
    steps: tuple[str, ...]
    distribution: str
    python: tuple[str, ...]
    repair_excludes: tuple[str, ...]
    strip: bool
    compiler_cache: CompilerCache
    # distcc workers the compile sends compiler-cache misses to (--workers; none: all local). Not in
    # the summary: where compiles run changes nothing built (the probe holds workers to this
    # machine's bytes), so the digest, step reuse and CI's cache keys stay; the manifest says.
    workers: tuple[Worker, ...] = ()
    # The dependency sources this build compiles (ort_versions.toml [deps], as the toolchain and EPs select).
    deps: tuple[DependencySource, ...] = ()
    # Versions of the recipe's [wheel] python that the command line's --python left out (the host
    # lacks them, say): recorded in the manifest, so a subset is never mistaken for the release.
    python_not_built: tuple[str, ...] = ()
    # The recipe's own [cuda] architectures where the command line's --cuda-architectures replaced
    # them (a build to iterate on): recorded, and `ortdist publish` refuses such a build.
    cuda_recipe_architectures: tuple[str, ...] = ()
    # Define -> where its value comes from ("recipe [cmake_defines]", "toolchain debian-trixie [cmake]",
    # "ep xnnpack", ...), for `ortdist plan`; nothing built reads it.
    define_sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def builds_shared_library(self) -> bool:
        return self.recipe.linkage in ("shared", "both")

    @property
    def builds_static_library(self) -> bool:
        return self.recipe.linkage in ("static", "both")

    @property
    def builds_cuda(self) -> bool:
        """Whether nvcc compiles device code for it (an EP of registry.cuda_eps())."""
        return bool(registry.cuda_eps() & {ep.name for ep in self.providers})

    @property
    def ep_bundle(self) -> dict[str, tuple[str, ...]]:
        """Its EPs whose vendor runtime the package carries (the toolchain's [ep_bundle]): EP -> files
        under {wheels}, each shipped under its own name beside the provider library."""
        return {
            ep.name: self.toolchain.ep_bundle[ep.name] for ep in self.providers if ep.name in self.toolchain.ep_bundle
        }

    @property
    def extra_python(self) -> tuple[str, ...]:
        """Versions besides the root's own Python: their binding is compiled in step `binding`."""
        return tuple(v for v in self.python if v not in self.toolchain.python)

    @property
    def python_not_run(self) -> tuple[str, ...]:
        """Versions whose wheel no interpreter here can run: a cross target's CPython that no
        reachable archive ships, compiled against the host's headers (toolchains/debian/overlays.py);
        their wheels are checked from their ELF files, and the manifest says they were not run."""
        if not self.toolchain.python_target:
            return ()
        return tuple(v for v in self.extra_python if v not in self.toolchain.emulated_python)

    @property
    def reduced(self) -> bool:
        return self.recipe.reduce.enabled

    @property
    def minimal(self) -> bool:
        return self.recipe.features.minimal_build != "off"

    @property
    def builds_wheel(self) -> bool:
        return self.recipe.wheel.enabled

    @property
    def wheel_repair(self) -> str:
        """The target's wheel repair tool (targets.toml: auditwheel, delocate, delvewheel); '' without a wheel."""
        return self.target.wheel_repair if self.builds_wheel else ""

    @property
    def trees(self) -> Trees:
        """The trees as the plan's commands name them: in the root, or relative to the work directory."""
        return trees_for(self.toolchain)

    def configure_argv(self) -> list[str]:
        return [
            "cmake",
            "-G",
            "Ninja",
            "-S",
            str(self.trees.source / "cmake"),
            "-B",
            str(self.trees.build),
            *(f"-D{k}={v}" for k, v in self.cmake_defines.items()),
        ]

    def build_argv(self, jobs: int, keep_going: bool = False, manifest: str | None = None) -> list[str]:
        """The compile; ``keep_going`` lets ninja run every command it can past a failing one (-k 0);
        ``manifest``: a ninja file in the build tree over CMake's graph and more (the bindings)."""
        keep = ["-k", "0"] if keep_going else []
        if manifest is not None:
            return ["ninja", "-C", str(self.trees.build), "-f", manifest, "-j", str(jobs), *keep]
        return ["cmake", "--build", str(self.trees.build), "--parallel", str(jobs), *(["--", *keep] if keep else [])]

    def configure_digest(self) -> str:
        """Changes whenever the configure command would change: a reason to re-run CMake."""
        return sha256_text(*self.configure_argv())

    def tree_identity(self) -> str:
        """What the objects in a build tree were compiled from: patched source and sysroot. When it
        changes the tree is discarded (mtimes cannot be trusted across source trees; ccache keeps
        the rebuild cheap)."""
        return sha256_text(self.version.version, self.source_key, self.toolchain.digest)

    def digest(self) -> str:
        """Everything the plan decides (its summary: defines, steps, Pythons, patches, ...) and what
        its trees are made of (source, toolchain files and shims, dependency pins): equal digests,
        equal builds. CI keys the compiler cache of a recipe's job by it (ci/cache.py)."""
        return sha256_text(
            json.dumps(self.summary(), sort_keys=True),
            self.tree_identity(),
            *(f"{dep.name}={dep.version}:{dep.sha256}" for dep in self.deps),
        )

    def summary(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe.name,
            "ort_version": self.version.version,
            "target": self.target.triple,
            "execution_providers": [ep.name for ep in self.providers],
            "provider_names": [ep.provider for ep in self.providers],
            "linkage": self.recipe.linkage,
            "reduce": {
                "models": list(self.recipe.reduce.models),
                "config": self.recipe.reduce.config or None,
                "types": self.recipe.reduce.types,
                "optimization_level": self.recipe.reduce.optimization_level,
            }
            if self.reduced
            else None,
            "minimal_build": self.recipe.features.minimal_build,
            "build_type": self.recipe.build_type,
            "toolchain": self.toolchain.name,
            "plan_only": self.toolchain.plan_only,
            "patches": [{"name": p.name, "sha256": p.sha256} for p in self.patches],
            "source_key": self.source_key,
            "steps": list(self.steps),
            "distribution": self.distribution if self.builds_wheel else None,
            "python": list(self.python),
            # Only when --python chose a subset: an unchanged plan keeps its digest (and its reuse).
            **({"python_not_built": list(self.python_not_built)} if self.python_not_built else {}),
            **({"python_not_run": list(self.python_not_run)} if self.python_not_run else {}),
            **(
                {"cuda_recipe_architectures": list(self.cuda_recipe_architectures)}
                if self.cuda_recipe_architectures
                else {}
            ),
            "wheel_repair": self.wheel_repair or None,
            "repair_excludes": list(self.repair_excludes),
            "strip": self.strip,
            "compiler_cache": self.compiler_cache.name,
            "cmake_configure": self.configure_argv(),
            "cmake_defines": {
                key: {"value": value, "from": self.define_sources.get(key, "")}
                for key, value in self.cmake_defines.items()
            },
        }


def distribution_name(providers: tuple[ExecutionProvider, ...]) -> str:
    """'onnxruntime' plus the registry suffixes of the non-CPU EPs, deduplicated, in registry order."""
    suffixes = list(dict.fromkeys(ep.wheel_suffix for ep in providers if ep.wheel_suffix))
    return "-".join(["onnxruntime", *suffixes])


def resolve_providers(recipe: Recipe, toolchain: ToolchainSpec | None = None) -> tuple[ExecutionProvider, ...]:
    """The recipe's EPs from the registry; a toolchain's [ep_pip.<ep>] replaces that EP's pip extras
    and their library directories (which CUDA major's wheels a wheel depends on)."""
    table = registry.providers()
    wanted = {"cpu", *recipe.execution_providers}
    pip = toolchain.ep_pip if toolchain is not None else {}
    return tuple(
        dataclasses.replace(ep, pip_extras=dict(pip[name].extras), pip_library_dirs=pip[name].library_dirs)
        if name in pip
        else ep
        for name, ep in table.items()
        if name in wanted
    )


def source_key(recipe: Recipe, version: OrtVersion, patches: tuple[Patch, ...]) -> str:
    src = recipe.source
    identity = {
        "debian": (src.sha256 or version.source.sha256,),
        "git": (src.url, src.tag, src.commit),
        "path": (src.path,),
    }[src.kind]
    return sha256_text(src.kind, *identity, *(p.sha256 for p in patches))[:16]


def select_python(recipe: Recipe, selection: Sequence[str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The Pythons to build and those of the recipe left out: ``selection`` (from --python) must
    name versions the recipe lists; the recipe's order is kept."""
    listed = recipe.wheel.python if recipe.wheel.enabled else ()
    if selection is None:
        return tuple(listed), ()
    if not recipe.wheel.enabled:
        raise RecipeError(
            f"--python chooses wheels, and recipe {recipe.name} builds none",
            where=f"--python {','.join(selection)}",
            fix="leave out --python for this recipe",
        )
    unknown = [v for v in selection if v not in listed]
    if unknown or not selection:
        raise RecipeError(
            f"Python {', '.join(unknown) or '(none)'} is not one the recipe {recipe.name} builds",
            where=f"--python {','.join(selection)}",
            fix=f"choose from its [wheel] python: {','.join(listed)}",
        )
    return tuple(v for v in listed if v in selection), tuple(v for v in listed if v not in selection)


CUDA_ARCHITECTURES_WHERE = "--cuda-architectures"


def narrow_cuda(recipe: Recipe, architectures: tuple[str, ...]) -> tuple[Recipe, tuple[str, ...], str]:
    """The recipe with the command line's CUDA architectures, its own list, and where an error
    about them points; refused for a recipe that compiles no CUDA code."""
    if not registry.cuda_eps() & set(recipe.execution_providers):
        raise RecipeError(
            f"recipe {recipe.name} compiles no CUDA code",
            where=CUDA_ARCHITECTURES_WHERE,
            fix="drop --cuda-architectures, or build a recipe with the cuda EP",
        )
    narrowed = dataclasses.replace(recipe, cuda=dataclasses.replace(recipe.cuda, architectures=architectures))
    validate_cuda(narrowed, f"recipe {recipe.name}", CUDA_ARCHITECTURES_WHERE)
    return narrowed, recipe.cuda.architectures, CUDA_ARCHITECTURES_WHERE


def check_nvcc(recipe: Recipe, toolchain: ToolchainSpec, where: str) -> None:
    """The recipe's CUDA architectures and compression are ones the toolchain's nvcc has ([nvcc])."""
    nvcc = toolchain.nvcc
    if nvcc is None or not registry.cuda_eps() & set(recipe.execution_providers):
        return
    unknown = [a for a in recipe.cuda.architectures if a.split("-")[0].rstrip("af") not in nvcc.architectures]
    if unknown:
        raise RecipeError(
            f"toolchain {toolchain.name!r} cannot compile CUDA code for {', '.join(unknown)}",
            where=where,
            fix=f"its nvcc compiles for {', '.join(nvcc.architectures)} (toolchains/{toolchain.name}.toml [nvcc]); "
            "a newer GPU runs the PTX of the newest listed one (an entry without '-real')",
        )
    mode = recipe.cuda.compression
    if mode and mode not in nvcc.compress_modes:
        raise RecipeError(
            f"toolchain {toolchain.name!r} has no fatbin compression mode {mode!r}",
            where=f"recipe {recipe.name} [cuda] key 'compression'",
            fix=f"use one of {list(nvcc.compress_modes)}"
            if nvcc.compress_modes
            else "drop it: this nvcc compresses with ORT's -Xfatbin=-compress-all only (--compress-mode came in "
            "CUDA 12.8)",
        )


def make_plan(
    recipe: Recipe,
    toolchain: ToolchainSpec,
    patches: tuple[Patch, ...],
    compiler_cache: CompilerCache = CACHES["ccache"],
    python: Sequence[str] | None = None,
    workers: tuple[Worker, ...] = (),
    cuda_architectures: Sequence[str] | None = None,
) -> BuildPlan:
    """``python``: the command line's selection from the recipe's [wheel] python (None: all of them);
    ``workers``: distcc workers for the compile (--workers); ``cuda_architectures``: the command line's
    replacement for the recipe's [cuda] architectures (None: the recipe's), a build for iterating."""
    cuda_where = f"recipe {recipe.name} [cuda] key 'architectures'"
    cuda_narrowed: tuple[str, ...] = ()
    if cuda_architectures is not None:
        recipe, cuda_narrowed, cuda_where = narrow_cuda(recipe, tuple(cuda_architectures))
    version = registry.ort_versions()[recipe.ort_version]
    target = registry.targets()[recipe.target]
    providers = resolve_providers(recipe, toolchain)
    if not toolchain.has_root:
        compiler_cache = NO_CACHE  # ortdist's caches live at in-root paths: none where there is no root

    if recipe.target not in toolchain.targets:
        raise RecipeError(
            f"toolchain {toolchain.name!r} cannot build for {recipe.target!r}",
            where=f"recipe {recipe.name} key 'target'",
            fix=f"{toolchain.name} builds for: {', '.join(toolchain.targets)}",
        )
    if toolchain.is_cross(recipe.target) and any(ep.name != "cpu" for ep in providers):
        raise RecipeError(
            f"toolchain {toolchain.name!r} cross-builds only the CPU EP for {recipe.target!r} (its EP packages and "
            "defines are the host's)",
            where=f"recipe {recipe.name} key 'execution_providers'",
            fix='use execution_providers = ["cpu"] for this target',
        )
    # A toolchain that compiles its dependencies also provides each EP with pinned sources of its own.
    from_source = source_eps(version, toolchain.has_openmp) if toolchain.deps_from_source else ()
    offered = tuple(dict.fromkeys((*toolchain.available_eps, *from_source)))
    missing = [ep.name for ep in providers if ep.name not in offered]
    if missing:
        without_openmp = [ep for ep in missing if toolchain.deps_from_source and ep in source_eps(version)]
        raise RecipeError(
            f"toolchain {toolchain.name!r} has no libraries for execution provider(s) {', '.join(missing)}"
            + (
                f" ({', '.join(without_openmp)}: its pinned sources need an OpenMP runtime, and the toolchain's "
                "[compiler] has none)"
                if without_openmp
                else ""
            ),
            where=f"recipe {recipe.name} key 'execution_providers'",
            fix=f"{toolchain.name} provides: {', '.join(offered)}; or pick a toolchain that provides the EP"
            + (" (one with [openmp], such as portable-glibc2.17-openmp)" if without_openmp else ""),
        )
    check_nvcc(recipe, toolchain, cuda_where)
    glibc = toolchain.glibc_for(recipe.target)
    if recipe.features.packed_relocations and glibc and tuple(map(int, glibc.split("."))) < PACKED_RELOCATIONS_GLIBC:
        raise RecipeError(
            f"packed_relocations needs glibc 2.36 or newer at run time; toolchain {toolchain.name!r} builds for "
            f"glibc {glibc} and newer",
            where=f"recipe {recipe.name} [features] key 'packed_relocations'",
            fix="set packed_relocations = false, or use a toolchain whose glibc is 2.36 or newer",
        )
    if workers and compiler_cache.name != "ccache":
        raise RecipeError(
            f"--workers sends ccache's misses to distcc; this build uses {compiler_cache.name!r}"
            + ("" if toolchain.has_root else f" (toolchain {toolchain.name} builds without a root, so no cache)"),
            where=WORKERS_WHERE,
            fix="build with --compiler-cache ccache (the default), or drop --workers"
            if toolchain.has_root
            else "drop --workers: distcc workers serve the Debian-rooted toolchains",
        )
    python, not_built = select_python(recipe, python)
    where = "--python" if not_built else f"recipe {recipe.name} [wheel] key 'python'"
    unsupported = [v for v in python if v not in toolchain.python_versions]
    if unsupported:
        raise RecipeError(
            f"Python {', '.join(unsupported)} is not available in toolchain {toolchain.name!r}",
            where=where,
            fix=f"use one of {list(toolchain.python_versions)}, or provide it: a [{unsupported[0]!r}] table in "
            f"toolchains/{toolchain.name}/pythons.toml, from a Debian suite that has it or from this host",
        )
    extra = [v for v in python if v not in toolchain.python]
    if extra and not any(v in toolchain.python for v in python):
        raise RecipeError(
            f"Python {', '.join(extra)} needs the root's own CPython in the list too: the core build "
            "compiles the binding for it, the others are recompiled against that core",
            where=where,
            fix=f"add {toolchain.python[0]!r}" + (" to --python" if not_built else ""),
        )
    if extra and toolchain.is_cross(recipe.target) and toolchain.python_target != recipe.target:
        raise RecipeError(
            f"Python {', '.join(extra)} is unpacked for the build machine only; a cross target gets the "
            f"root's own ({', '.join(toolchain.python)}), unless its toolchain builds for that target alone",
            where=where,
            fix=f"use python = {list(toolchain.python)}",
        )
    # The root's own CPython first: its wheel comes from the main build tree as before.
    python = tuple(sorted(python, key=lambda v: v not in toolchain.python))

    defines, sources = cmake_defines(recipe, version, toolchain, providers, compiler_cache)

    steps = ["toolchain", "source"]
    if recipe.reduce.enabled:
        steps.append("models")
    steps += ["configure", "build"]
    if any(v not in toolchain.python for v in python):
        steps.append("binding")
    if recipe.linkage in ("shared", "both"):
        steps.append("install")
    if recipe.linkage in ("static", "both"):
        steps += ["bundle", "c_smoke"]
    if recipe.linkage == "wasm":
        steps += ["web_package", "web_smoke"]
    if recipe.wheel.enabled:
        steps += ["wheel", "repair", "check"]
    if toolchain.compat_roots("system") and target.os == "linux" and target.arch == "x86_64":
        steps.append("compat")  # the toolchain's older Debian roots (x86_64 debootstraps)
    steps += ["publish"] if recipe.linkage == "wasm" else ["size", "publish"]  # web_package sizes the module

    carried = [PurePosixPath(f).name for ep in providers for f in toolchain.ep_bundle.get(ep.name, ())]
    return BuildPlan(
        recipe=recipe,
        version=version,
        target=target,
        providers=providers,
        toolchain=toolchain,
        patches=patches,
        source_key=source_key(recipe, version, patches),
        cmake_defines=defines,
        define_sources=MappingProxyType(sources),
        steps=tuple(steps),
        distribution=recipe.wheel.distribution or distribution_name(providers),
        python=tuple(python),
        python_not_built=not_built,
        cuda_recipe_architectures=cuda_narrowed,
        # The EPs' runtimes a user installs, and those the package carries ([ep_bundle]): grafted by neither.
        repair_excludes=tuple(dict.fromkeys([*(lib for ep in providers for lib in ep.runtime_libs), *carried])),
        # Release artifacts ship without symbols, like the official wheels; builds that ask for
        # debug info keep it.
        strip=recipe.build_type in STRIPPED_BUILD_TYPES,
        compiler_cache=compiler_cache,
        workers=workers,
        deps=selected_deps(recipe, version, toolchain, providers),
    )
