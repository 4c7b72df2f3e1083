"""The recipe model: frozen, documented dataclasses.

Every field carries a ``help`` text in its metadata. The loader uses the field types to check
input, and ``schema.py`` turns the same fields into the JSON schema committed in ``recipes/``,
so documentation, validation and schema cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Linkage = Literal["shared", "static", "both", "wasm"]
BuildType = Literal["Release", "RelWithDebInfo", "MinSizeRel", "Debug"]
SourceKind = Literal["debian", "git", "path"]
MinimalBuild = Literal["off", "plain", "extended"]
OptimizationLevel = Literal["disabled", "basic", "extended", "all"]
DisabledType = Literal["float8", "optional", "sparsetensor"]


def _help(text: str) -> dict[str, str]:
    return {"help": text}


# A [reduce] models entry naming one of ortdist's reference models (smoke/models.py) instead of a file.
REFERENCE_PREFIX = "reference:"
# The reference models a recipe may name after the prefix: the smoke suite's catalogue
# (smoke/models.py BUILDERS, held equal to this by a unit test), named here so a recipe is checked
# without importing the layer above that builds them.
REFERENCE_MODELS = (
    "cnn",
    "transformer",
    "control_flow",
    "qdq_cnn",
    "fp16_mlp",
    "if_conv",
    "loop_conv",
    "qdq_control_flow",
)


@dataclass(frozen=True, kw_only=True)
class SourceSettings:
    """Where the ONNX Runtime source comes from. The default is the pinned Debian orig tarball."""

    kind: SourceKind = field(
        default="debian",
        metadata=_help(
            "'debian': the orig tarball of the ORT version from Debian's pool (offline-friendly, "
            "pinned in ortdist's data); 'git': a git URL and tag; 'path': a local source tree."
        ),
    )
    sha256: str = field(
        default="",
        metadata=_help("debian only: override the pinned sha256 of the orig tarball (lowercase hex)."),
    )
    url: str = field(default="", metadata=_help("git only: repository URL to clone."))
    tag: str = field(default="", metadata=_help("git only: tag (or branch) to check out, e.g. 'v1.21.0'."))
    commit: str = field(
        default="", metadata=_help("git only: full commit hash the tag must resolve to (verified when set).")
    )
    path: str = field(
        default="", metadata=_help("path only: ORT source tree; relative paths are resolved from the recipe.")
    )


@dataclass(frozen=True, kw_only=True)
class WheelSettings:
    """The Python wheel built from the recipe."""

    enabled: bool = field(default=True, metadata=_help("Build a Python wheel."))
    distribution: str = field(
        default="",
        metadata=_help(
            "Distribution name of the wheel. Empty: 'onnxruntime', plus '-<suffix>' from the EP registry "
            "for the recipe's non-CPU EPs with a suffix (several suffixes are joined with '-' in registry order)."
        ),
    )
    python: tuple[str, ...] = field(
        default=("3.13",), metadata=_help("CPython versions to build the binding for, e.g. ['3.13'].")
    )


@dataclass(frozen=True, kw_only=True)
class ReduceSettings:
    """Cut the build down to the operators (and element types) some models need."""

    models: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "Models the build is cut for: ONNX files (paths relative to the recipe) or 'reference:<name>' for "
            "one of ortdist's reference models. They are converted to ORT format at `optimization_level`, the "
            "ORT-format files are analysed and shipped next to the artifacts."
        ),
    )
    config: str = field(
        default="",
        metadata=_help("An ORT reduced-build operator config (relative to the recipe), merged with the models'."),
    )
    types: bool = field(
        default=False,
        metadata=_help("Also reduce the element types each operator's kernels are built for (per-operator)."),
    )
    optimization_level: OptimizationLevel = field(
        default="extended",
        metadata=_help(
            "Graph optimization level the runtime will use; models are converted to ORT format at this level so "
            "the operators the optimizers insert are kept. 'all' adds x86-only layout transforms."
        ),
    )

    @property
    def enabled(self) -> bool:
        return bool(self.models or self.config)


@dataclass(frozen=True)
class KernelCut:
    """A [features] key whose false value leaves an arm64 kernel family out by a patch, and the
    element types a model then may not use (the build checks its models for them)."""

    key: str
    patch: str
    types: tuple[str, ...]  # ORT's type names, as the operator config writes them
    kernels: str


KERNEL_CUTS = (
    KernelCut("fp16_and_nbit_kernels", "0008", ("MLFloat16",), "MLAS's fp16 kernels and the CPU EP's fp16 kernels"),
    KernelCut("int8_kernels", "0014", ("int8_t", "uint8_t"), "MLAS's 8-bit GEMM and convolution kernels"),
)


@dataclass(frozen=True, kw_only=True)
class FeatureSettings:
    """What else to leave out of (or add to) the runtime, for size."""

    minimal_build: MinimalBuild = field(
        default="off",
        metadata=_help(
            "'plain': ORT-format models only, no graph optimizers at run time; 'extended': also EPs that compile "
            "and runtime optimizations; 'off': a full build."
        ),
    )
    ml_ops: bool = field(default=True, metadata=_help("Keep the traditional ML operators (ai.onnx.ml)."))
    exceptions: bool = field(
        default=True, metadata=_help("C++ exceptions; false needs a minimal build without a Python wheel.")
    )
    rtti: bool = field(default=True, metadata=_help("C++ RTTI; false needs a build without a Python wheel."))
    unwind_tables: bool = field(
        default=True,
        metadata=_help(
            "Unwind tables (.eh_frame) in C and C++ code; false needs exceptions = false. ORT drops them from "
            "its C++ alone when exceptions are off; false drops them from the C code (MLAS, dependencies) too."
        ),
    )
    packed_relocations: bool = field(
        default=False,
        metadata=_help(
            "Link with -z pack-relative-relocs (DT_RELR): the relative relocations of vtables and pointer tables "
            "take a few bytes each instead of 24. The library then needs glibc 2.36 or newer at run time."
        ),
    )
    common_page_size: int = field(
        default=0,
        metadata=_help(
            "Bytes the linker aligns the end of RELRO to (-z common-page-size); 0: the linker's default. arm64 "
            "binutils pads to 64 KiB; 4096 keeps RELRO whole on 4 KiB-page kernels and the library still loads "
            "on 16 and 64 KiB ones (the segments keep their 64 KiB alignment). GNU ld 2.39+ ignores it for RELRO: "
            "its shared library links with the linker's default script, RELRO's end aligned to this page."
        ),
    )
    disabled_types: tuple[DisabledType, ...] = field(
        default=(),
        metadata=_help(
            "Value types left out of the runtime, as build.py's --disable_types: 'float8' (the four float8 "
            "element types), 'optional' (optional values), 'sparsetensor' (sparse tensors). A model using one "
            "then fails to load."
        ),
    )
    smallest_code: bool = field(
        default=False,
        metadata=_help(
            "Compile and link-time-optimize at -Oz instead of MinSizeRel's -Os: smaller and slower code. Needs "
            'build_type = "MinSizeRel" and GCC 12 or newer (debian-trixie\'s GCC 14).'
        ),
    )
    fp16_and_nbit_kernels: bool = field(
        default=True,
        metadata=_help(
            "MLAS's arm64 fp16 GEMM, fp16 softmax, rotary and n-bit weight GEMM (MatMulNBits) kernels, which "
            "its dispatch tables keep in every build whatever the operators, and the CPU EP's fp16 kernels, "
            "whose registrations type reduction leaves in; false leaves them out (patch 0008; MatMulNBits then "
            "dequantizes and runs SGEMM). Needs an arm64 target and reduce.types = true; the build refuses "
            "models that use float16."
        ),
    )
    int8_kernels: bool = field(
        default=True,
        metadata=_help(
            "MLAS's arm64 8-bit GEMM, symmetric QGEMM and 8-bit depthwise convolution kernels, which its "
            "dispatch tables keep in every build whatever the operators; false leaves them out (patch 0014; "
            "the quantized operators then report their format unsupported). Needs an arm64 target and "
            "reduce.types = true; the build refuses models that use int8 or uint8 values."
        ),
    )
    lto: bool = field(default=False, metadata=_help("Link-time optimization (smaller, slower to link)."))
    cpuinfo: bool = field(
        default=True,
        metadata=_help("Use pytorch/cpuinfo for CPU feature detection (false: the OS's own, e.g. getauxval)."),
    )


@dataclass(frozen=True, kw_only=True)
class SizeSettings:
    """What the size report compares the library with."""

    compare_with: str = field(
        default="",
        metadata=_help(
            "A recipe of the same target whose built library (dist/<recipe>/manifest.json) the report compares "
            "this one's with, section by section and by component; default: cpu-linux for reduced or minimal "
            "builds."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class CudaSettings:
    """How the CUDA kernels are compiled (recipes with the cuda or tensorrt EP)."""

    architectures: tuple[str, ...] = field(
        default=("90",),
        metadata=_help(
            "CMAKE_CUDA_ARCHITECTURES, explicitly: each entry is one GPU architecture the kernels are compiled "
            "for ('90' = Hopper, '89' = Ada, '80' = Ampere; a suffix '-real' or '-virtual' as in CMake). Every "
            "architecture adds its own full compile of every kernel, so list only the GPUs you ship to."
        ),
    )
    compression: str = field(
        default="",
        metadata=_help(
            "nvcc's --compress-mode for the fatbins ('size', 'speed', 'balance', 'default', 'none'; CUDA 12.8 "
            "and later, as the toolchain's [nvcc] compress_modes list). Empty: ORT's own -Xfatbin=-compress-all "
            "with the toolkit's default mode."
        ),
    )
    attention_kernels: bool = field(
        default=True,
        metadata=_help(
            "Flash, memory-efficient and lean attention kernels (contrib Attention/MultiHeadAttention fast "
            "paths, CUTLASS-heavy: the bulk of a CUDA build's compile time). false keeps the ops on their "
            "unfused kernels."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """One ONNX Runtime distribution: what to build, for which target, with which EPs."""

    name: str = field(
        metadata=_help(
            "Recipe name: lower-case letters, digits, '.', '_', '-' (no '/', not only dots), equal to the "
            "file's name without its extension."
        )
    )
    description: str = field(metadata=_help("One line shown by `nox -l` and in the manifest."))
    ort_version: str = field(default="1.21.0", metadata=_help("ONNX Runtime version (a key of ort_versions.toml)."))
    source: SourceSettings = field(default_factory=SourceSettings, metadata=_help("Source of ORT."))
    target: str = field(default="x86_64-unknown-linux-gnu", metadata=_help("Target triple (a key of targets.toml)."))
    execution_providers: tuple[str, ...] = field(
        default=("cpu",),
        metadata=_help("Execution providers to build, by registry name (see `ortdist providers`); 'cpu' is implied."),
    )
    linkage: Linkage = field(
        default="shared",
        metadata=_help(
            "'shared': libonnxruntime.so; 'static': one monolithic static library; 'both'; 'wasm': the "
            "WebAssembly module (.wasm + .mjs) onnxruntime-web loads, as an npm package (wasm32 targets)."
        ),
    )
    build_type: BuildType = field(default="Release", metadata=_help("CMAKE_BUILD_TYPE."))
    toolchain: str = field(
        default="debian-trixie", metadata=_help("Toolchain: a file toolchains/<name>.toml in the project.")
    )
    patches: str = field(
        default="",
        metadata=_help("Patch series directory under patches/ (default: the ORT version); 'none' applies none."),
    )
    wheel: WheelSettings = field(default_factory=WheelSettings, metadata=_help("Python wheel settings."))
    reduce: ReduceSettings = field(
        default_factory=ReduceSettings, metadata=_help("Operator (and type) reduction from models or a config.")
    )
    features: FeatureSettings = field(
        default_factory=FeatureSettings, metadata=_help("Minimal build, ML ops, exceptions, RTTI, LTO, cpuinfo.")
    )
    size: SizeSettings = field(
        default_factory=SizeSettings, metadata=_help("What the size report compares the library with.")
    )
    cuda: CudaSettings = field(
        default_factory=CudaSettings, metadata=_help("CUDA architectures and kernel families (cuda/tensorrt EPs).")
    )
    cmake_defines: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}),
        metadata=_help("Extra CMake defines passed last (NAME = 'value'); EP switches belong in execution_providers."),
    )

    @property
    def patch_series(self) -> str:
        return self.patches or self.ort_version
