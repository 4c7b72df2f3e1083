from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.errors import RecipeError
from ortdist.patches import Patch, read_series
from ortdist.plan import BuildPlan, make_plan
from ortdist.recipe import Recipe, load_recipe
from ortdist.toolchains import load_toolchain


def plan_of(project: Path, recipe: Recipe, patches: tuple[Patch, ...] | None = None) -> BuildPlan:
    series = (
        read_series(project / "patches" / "1.21.0", {"cpu", *recipe.execution_providers}, target=recipe.target)
        if patches is None
        else patches
    )
    return make_plan(recipe, load_toolchain(project, recipe.toolchain), series)


def test_cpu_linux_plan(project: Path) -> None:
    plan = plan_of(project, load_recipe(project / "recipes" / "cpu-linux.toml"))
    d = plan.cmake_defines
    assert d["CMAKE_BUILD_TYPE"] == "Release"
    assert d["onnxruntime_BUILD_SHARED_LIB"] == "ON"
    assert d["onnxruntime_ENABLE_PYTHON"] == "ON"
    assert d["onnxruntime_BUILD_UNIT_TESTS"] == "OFF"
    assert d["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert plan.toolchain.name == "portable-glibc2.17"
    # Every dependency from its pinned source: each one's tree (or the subdir of it CMake wants).
    assert [dep.name for dep in plan.deps] == [
        "onnx", "abseil_cpp", "protobuf", "utf8_range", "re2", "flatbuffers", "eigen", "date",
        "nlohmann_json", "gsl", "dlpack", "pytorch_cpuinfo", "safeint", "mp11", "pybind11",
    ]  # fmt: skip
    for dep in plan.deps:
        key = f"FETCHCONTENT_SOURCE_DIR_{dep.name.upper()}"
        if not dep.fetchcontent:
            assert key not in d, dep.name
            continue
        assert d[key] == "/".join(filter(None, ("/ortdist/deps", dep.name, dep.subdir))), dep.name
        assert plan.define_sources[key] == "version 1.21.0 [deps]"
    assert d["FETCHCONTENT_SOURCE_DIR_UTF8_RANGE"] == "/ortdist/deps/utf8_range/third_party/utf8_range"
    assert d["FETCHCONTENT_SOURCE_DIR_SAFEINT"] == "/ortdist/deps/safeint/usr/include/safeint"
    assert d["FETCHCONTENT_SOURCE_DIR_MP11"] == "/ortdist/deps/mp11/libs/mp11"
    # pybind11's sdist has no CMakeLists.txt: its CMake package is found through the find root.
    assert "FETCHCONTENT_SOURCE_DIR_PYBIND11" not in d
    assert d["CMAKE_FIND_ROOT_PATH"] == "/ortdist/deps/pybind11/pybind11"  # {deps} substituted
    assert d["CMAKE_CXX_COMPILER"] == "/opt/ortdist-compiler/bin/x86_64-linux-gnu-g++"  # {compiler} substituted
    assert d["CMAKE_SYSROOT"] == "/opt/ortdist-compiler/x86_64-linux-gnu/sysroot"
    assert not [k for k, v in d.items() if "{" in v], "every placeholder substituted"
    # Nothing from the root's -dev packages: no shims, no find_package before FetchContent.
    assert "FETCHCONTENT_TRY_FIND_PACKAGE_MODE" not in d
    assert not [k for k, v in d.items() if "/ortdist/shims" in v]
    assert not plan.toolchain.shims
    assert not [k for k in d if k.startswith("onnxruntime_USE_")]
    assert plan.steps == (
        "toolchain",
        "source",
        "configure",
        "build",
        "binding",
        "install",
        "wheel",
        "repair",
        "check",
        "compat",
        "size",
        "publish",
    )
    assert plan.distribution == "onnxruntime"
    assert plan.python == ("3.13", "3.10", "3.11", "3.12", "3.14")
    assert plan.extra_python == ("3.10", "3.11", "3.12", "3.14")
    assert plan.repair_excludes == ()
    assert plan.strip
    assert [p.name for p in plan.patches] == [
        "0001-eigen-3.4.0-nan-propagating-min-max.patch",
        "0002-python-datasets-without-sample-models.patch",
        "0003-dnnl-use-installed-onednn.patch",
        "0004-dnnl-layernorm-keeps-its-input.patch",
        "0005-python-binding-in-minimal-builds.patch",
        "0017-python-binding-links-the-shared-library.patch",
    ]
    argv = plan.configure_argv()
    assert argv[:7] == ["cmake", "-G", "Ninja", "-S", "/ortdist/source/cmake", "-B", "/ortdist/build"]
    assert "-Donnxruntime_ENABLE_PYTHON=ON" in argv
    # one runtime per wheel: the binding links libonnxruntime (patch 0017)
    assert "-Donnxruntime_PYBIND_USE_SHARED_LIB=ON" in argv
    assert plan.build_argv(2) == ["cmake", "--build", "/ortdist/build", "--parallel", "2"]


def test_a_debian_trixie_plan_takes_the_roots_libraries(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    """debian-trixie links the root's -dev packages: only onnx (``always``) comes from source, and
    CMake finds the rest through find_package and the shims."""
    plan = plan_of(project, recipe_from(""))
    d = plan.cmake_defines
    assert plan.toolchain.name == "debian-trixie" and not plan.toolchain.deps_from_source
    assert [dep.name for dep in plan.deps] == ["onnx"]
    assert d["FETCHCONTENT_TRY_FIND_PACKAGE_MODE"] == "ALWAYS"
    assert d["FETCHCONTENT_SOURCE_DIR_ONNX"] == "/ortdist/deps/onnx"
    assert d["FETCHCONTENT_SOURCE_DIR_SAFEINT"] == "/usr/include/safeint"  # the toolchain's, not a dep's
    source_dirs = {k for k in d if k.startswith("FETCHCONTENT_SOURCE_DIR_")}
    assert source_dirs == {"FETCHCONTENT_SOURCE_DIR_ONNX", "FETCHCONTENT_SOURCE_DIR_SAFEINT"}
    assert d["re2_DIR"] == "/ortdist/shims/re2"  # {shims} substituted
    assert "CMAKE_CXX_COMPILER" not in d and "CMAKE_SYSROOT" not in d  # the root's own g++


def test_selected_deps_follow_toolchain_and_eps(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    """A deps_from_source toolchain compiles every dependency but an EP's, which only builds with
    that EP need; other root toolchains only the ``always`` ones; rootless ones none (ORT fetches)."""
    from ortdist.defines import selected_deps
    from ortdist.registry import ort_versions, providers

    recipe = recipe_from("")
    version, eps = ort_versions()["1.21.0"], providers()
    portable, trixie = load_toolchain(project, "portable-glibc2.17"), load_toolchain(project, "debian-trixie")
    xnnpack_family = {"googlexnnpack", "pthreadpool", "fxdiv", "fp16", "psimd"}
    cpu_only = {d.name for d in selected_deps(recipe, version, portable, (eps["cpu"],))}
    assert len(cpu_only) == len(version.deps) - len(xnnpack_family) - 1  # and oneDNN
    assert not cpu_only & xnnpack_family and {"onnx", "protobuf", "mp11", "pybind11"} <= cpu_only
    with_xnnpack = {d.name for d in selected_deps(recipe, version, portable, (eps["cpu"], eps["xnnpack"]))}
    assert with_xnnpack == cpu_only | xnnpack_family
    with_dnnl = {d.name for d in selected_deps(recipe, version, portable, (eps["cpu"], eps["dnnl"]))}
    assert with_dnnl == cpu_only | {"onednn"}  # whether the toolchain can build it is the plan's check
    # debian-trixie: only `always`, whatever the EPs.
    assert [d.name for d in selected_deps(recipe, version, trixie, (eps["cpu"], eps["xnnpack"]))] == ["onnx"]
    xcode = load_toolchain(project, "macos-xcode")
    assert not xcode.has_root
    assert selected_deps(recipe, version, xcode, (eps["cpu"],)) == ()
    # An EP dependency that is also `always` still waits for its EP.
    (psimd,) = [d for d in version.deps if d.name == "psimd"]
    always_ep = dataclasses.replace(psimd, always=True)
    assert always_ep.eps == ("xnnpack",)
    forced = dataclasses.replace(version, deps=tuple(always_ep if d is psimd else d for d in version.deps))
    assert always_ep not in selected_deps(recipe, forced, trixie, (eps["cpu"],))
    assert always_ep in selected_deps(recipe, forced, trixie, (eps["cpu"], eps["xnnpack"]))


def test_in_root_substitutes_every_placeholder() -> None:
    """A toolchain define names the root's trees by placeholder; each one, however often it occurs."""
    from ortdist.paths import in_root

    assert in_root("-B{compiler}/newer-binutils/ -idirafter {compiler}/python-multiarch") == (
        "-B/opt/ortdist-compiler/newer-binutils/ -idirafter /opt/ortdist-compiler/python-multiarch"
    )
    assert in_root("{deps}/pybind11/pybind11;{shims}/re2;{wheels}/nvidia-cudnn-cu12") == (
        "/ortdist/deps/pybind11/pybind11;/ortdist/shims/re2;/opt/ortdist-wheels/nvidia-cudnn-cu12"
    )
    assert in_root("{target}/usr") == "{target}/usr"  # a cross target's: substituted elsewhere


def test_an_xnnpack_plan_on_trixie_gets_its_shims_not_its_sources(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    """On debian-trixie XNNPACK and oneDNN are Debian's libraries, found through the shims and
    oneDNN's CMake package: no source trees."""
    plan = plan_of(project, recipe_from('execution_providers = ["cpu", "xnnpack", "dnnl"]\n'))
    assert plan.toolchain.name == "debian-trixie"
    assert [dep.name for dep in plan.deps] == ["onnx"]
    assert plan.cmake_defines["googlexnnpack_DIR"] == "/ortdist/shims/xnnpack"
    assert plan.cmake_defines["dnnl_DIR"] == "/usr/lib/x86_64-linux-gnu/cmake/dnnl"
    assert not {"FETCHCONTENT_SOURCE_DIR_GOOGLEXNNPACK", "FETCHCONTENT_SOURCE_DIR_ONEDNN"} & set(plan.cmake_defines)


def test_an_xnnpack_plan_on_the_portable_toolchain_compiles_xnnpack_from_its_pinned_sources(project: Path) -> None:
    """portable-glibc2.17 has no EP packages: XNNPACK and its dependencies are ort_versions.toml's
    sources with eps = ["xnnpack"], compiled in through ORT's FetchContent (nothing to graft)."""
    plan = plan_of(project, load_recipe(project / "recipes" / "xnnpack-linux.toml"))
    assert plan.toolchain.name == "portable-glibc2.17"
    ep_deps = {"googlexnnpack", "pthreadpool", "fxdiv", "fp16", "psimd"}
    assert ep_deps <= {dep.name for dep in plan.deps}
    for name in ep_deps:
        assert plan.cmake_defines[f"FETCHCONTENT_SOURCE_DIR_{name.upper()}"] == f"/ortdist/deps/{name}"
    assert "googlexnnpack_DIR" not in plan.cmake_defines
    cpu = plan_of(project, load_recipe(project / "recipes" / "cpu-linux.toml"))
    assert not ep_deps & {dep.name for dep in cpu.deps}  # only builds with the EP take them


def test_ep_switches_and_distribution_come_from_the_registry(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    plan = plan_of(project, recipe_from('execution_providers = ["xnnpack", "dnnl"]\n'))
    assert plan.cmake_defines["onnxruntime_USE_XNNPACK"] == "ON"
    assert plan.cmake_defines["onnxruntime_USE_DNNL"] == "ON"
    assert [ep.name for ep in plan.providers] == ["cpu", "dnnl", "xnnpack"]  # registry order
    assert plan.distribution == "onnxruntime-dnnl-xnnpack"
    # The toolchain's per-EP defines come along only with their EP.
    assert plan.cmake_defines["googlexnnpack_DIR"] == "/ortdist/shims/xnnpack"
    assert plan.cmake_defines["dnnl_DIR"] == "/usr/lib/x86_64-linux-gnu/cmake/dnnl"


def test_ep_recipes_plan_their_ep_alone(project: Path) -> None:
    for name, ep, define, dist in (
        ("xnnpack-linux", "xnnpack", "FETCHCONTENT_SOURCE_DIR_PTHREADPOOL", "onnxruntime-xnnpack"),
        ("dnnl-linux", "dnnl", "FETCHCONTENT_SOURCE_DIR_ONEDNN", "onnxruntime-dnnl"),
    ):
        plan = plan_of(project, load_recipe(project / "recipes" / f"{name}.toml"))
        assert [p.name for p in plan.providers] == ["cpu", ep]
        assert define in plan.cmake_defines
        assert plan.distribution == dist
        others = {
            "xnnpack": ("dnnl_DIR", "FETCHCONTENT_SOURCE_DIR_ONEDNN"),
            "dnnl": ("dnnl_DIR", "googlexnnpack_DIR", "FETCHCONTENT_SOURCE_DIR_PTHREADPOOL"),
        }[ep]
        assert not set(others) & set(plan.cmake_defines)


def test_an_ep_the_toolchain_cannot_provide_is_refused(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    with pytest.raises(RecipeError, match="has no libraries for execution provider") as err:
        plan_of(project, recipe_from('execution_providers = ["openvino"]\n'))
    assert "debian-trixie provides: cpu, xnnpack, dnnl" in str(err.value.fix)


def test_cuda_and_tensorrt_share_one_suffix_and_exclude_vendor_libs(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    recipe = recipe_from('execution_providers = ["cuda", "tensorrt"]\n')
    trixie = load_toolchain(project, recipe.toolchain)
    gpu_toolchain = dataclasses.replace(trixie, ep_packages={"cuda": ("cuda-toolkit",), "tensorrt": ("tensorrt",)})
    plan = make_plan(recipe, gpu_toolchain, read_series(project / "patches" / "1.21.0"))
    assert plan.distribution == "onnxruntime-gpu"
    assert "libcudart.so.*" in plan.repair_excludes
    assert "libnvinfer.so.*" in plan.repair_excludes
    assert len(plan.repair_excludes) == len(set(plan.repair_excludes))


def test_recipe_defines_come_last_and_distribution_can_be_overridden(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    plan = plan_of(
        project,
        recipe_from('[cmake_defines]\nCMAKE_BUILD_TYPE = "MinSizeRel"\nFOO = "1"\n[wheel]\ndistribution = "my-ort"\n'),
    )
    assert plan.cmake_defines["CMAKE_BUILD_TYPE"] == "MinSizeRel"
    assert list(plan.cmake_defines)[-1] == "FOO"
    assert plan.distribution == "my-ort"


def test_debug_info_builds_keep_symbols(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    assert not plan_of(project, recipe_from('build_type = "RelWithDebInfo"\n')).strip


def test_no_wheel_drops_wheel_steps(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    plan = plan_of(project, recipe_from("[wheel]\nenabled = false\n"))
    assert plan.cmake_defines["onnxruntime_ENABLE_PYTHON"] == "OFF"
    assert "wheel" not in plan.steps and "check" not in plan.steps
    assert plan.python == ()


def test_static_linkage_bundles_from_the_shared_library_link_graph(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    plan = plan_of(project, recipe_from('linkage = "static"\n[wheel]\nenabled = false\n'))
    assert "bundle" in plan.steps and "install" not in plan.steps
    # The shared library is still linked: its link line is what the bundler reads.
    assert plan.cmake_defines["onnxruntime_BUILD_SHARED_LIB"] == "ON"
    both = plan_of(project, recipe_from('linkage = "both"\n'))
    assert both.steps.index("install") < both.steps.index("bundle") < both.steps.index("wheel")


def test_python_version_must_exist_in_toolchain(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    with pytest.raises(RecipeError, match=r"Python 3\.9 is not available in toolchain 'debian-trixie'"):
        plan_of(project, recipe_from('[wheel]\npython = ["3.9"]\n'))


def test_toolchain_must_build_for_target(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from('target = "arm64-apple-darwin"\n[wheel]\nenabled = false\n')
    with pytest.raises(RecipeError, match="cannot build for 'arm64-apple-darwin'"):
        plan_of(project, recipe)


def test_unknown_toolchain_suggests(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from('toolchain = "debian-trixy"\n')
    with pytest.raises(RecipeError, match="did you mean 'debian-trixie'"):
        plan_of(project, recipe)


def test_configure_digest_and_source_key_track_their_inputs(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    base = plan_of(project, recipe_from(""))
    changed = plan_of(project, recipe_from('[cmake_defines]\nFOO = "1"\n'))
    assert base.configure_digest() != changed.configure_digest()
    assert base.source_key == changed.source_key  # defines don't change the patched source
    fewer = plan_of(project, recipe_from(""), patches=base.patches[:1])
    assert fewer.source_key != base.source_key


def test_summary_is_json_ready(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    import json

    summary = plan_of(project, recipe_from("")).summary()
    assert json.loads(json.dumps(summary))["cmake_configure"][0] == "cmake"


def test_tree_identity_follows_source_patches_and_toolchain(
    project: Path, recipe_from: Callable[..., Recipe], tmp_path: Path
) -> None:
    import shutil

    base = plan_of(project, recipe_from(""))
    assert plan_of(project, recipe_from('[cmake_defines]\nFOO = "1"\n')).tree_identity() == base.tree_identity()
    assert plan_of(project, recipe_from(""), patches=base.patches[:1]).tree_identity() != base.tree_identity()
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    toml = tmp_path / "toolchains" / "debian-trixie.toml"
    toml.write_text(toml.read_text().replace('"file",', '"file", "zstd",'))
    other = make_plan(recipe_from(""), load_toolchain(tmp_path, "debian-trixie"), base.patches)
    assert other.tree_identity() != base.tree_identity()


def test_compiler_cache_is_a_plan_choice(project: Path) -> None:
    from ortdist.compiler_cache import CACHES

    recipe = load_recipe(project / "recipes" / "cpu-linux.toml")
    series = read_series(project / "patches" / "1.21.0")
    default = make_plan(recipe, load_toolchain(project, recipe.toolchain), series)
    shared = make_plan(recipe, load_toolchain(project, recipe.toolchain), series, CACHES["sccache"])
    assert default.cmake_defines["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert "-DCMAKE_C_COMPILER_LAUNCHER=/ortdist/tools/sccache" in shared.configure_argv()
    assert shared.summary()["compiler_cache"] == "sccache"
    # Switching caches re-runs CMake but keeps the build tree (same sources, same sysroot).
    assert shared.configure_digest() != default.configure_digest()
    assert shared.tree_identity() == default.tree_identity()


def test_each_define_says_where_it_came_from(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from(
        'execution_providers = ["xnnpack"]\n[cmake_defines]\nPython_EXECUTABLE = "/opt/py"\nEXTRA = "1"\n'
    )
    plan = plan_of(project, recipe, ())
    src = plan.define_sources
    assert list(src) == list(plan.cmake_defines)
    assert src["CMAKE_BUILD_TYPE"] == "recipe build_type"
    assert src["CMAKE_INSTALL_PREFIX"] == "ortdist"
    assert src["CMAKE_CXX_COMPILER_LAUNCHER"] == "compiler cache ccache"
    assert src["onnxruntime_DISABLE_RTTI"] == "recipe [features]"
    assert src["onnxruntime_REDUCED_OPS_BUILD"] == "recipe [reduce]"
    assert src["FETCHCONTENT_SOURCE_DIR_ONNX"] == "version 1.21.0 [deps]"
    assert src["eigen_DIR"] == "toolchain debian-trixie [cmake]"
    assert src["onnxruntime_USE_XNNPACK"] == "ep xnnpack"
    assert src["googlexnnpack_DIR"] == "toolchain debian-trixie [ep_cmake.xnnpack]"
    # The recipe overrides the toolchain's Python: its value and source, in the toolchain's place.
    names = list(plan.cmake_defines)
    assert plan.cmake_defines["Python_EXECUTABLE"] == "/opt/py"
    assert src["Python_EXECUTABLE"] == "recipe [cmake_defines]"
    assert names.index("Python_EXECUTABLE") < names.index("onnxruntime_USE_XNNPACK")
    shown = plan.summary()["cmake_defines"]
    assert list(shown) == names
    assert shown["EXTRA"] == {"value": "1", "from": "recipe [cmake_defines]"}


def test_inherited_and_cross_defines_name_the_toolchain_file_that_states_them(project: Path) -> None:
    trt = plan_of(project, load_recipe(project / "recipes" / "tensorrt-linux.toml")).define_sources
    assert trt["CMAKE_CUDA_HOST_COMPILER"] == "toolchain cuda12 [ep_cmake.cuda]"  # through extends
    assert trt["onnxruntime_TENSORRT_HOME"] == "toolchain cuda12-tensorrt [ep_cmake.tensorrt]"
    assert trt["CMAKE_CXX_COMPILER"] == "toolchain portable-glibc2.17 [cmake]"
    assert trt["onnxruntime_USE_CUDA"] == "ep tensorrt"  # cuda's too; the last to set it
    assert trt["CMAKE_CUDA_COMPILER_LAUNCHER"] == "compiler cache ccache (ep tensorrt)"
    assert trt["CMAKE_CUDA_ARCHITECTURES"] == "recipe [cuda]"
    arm = plan_of(project, load_recipe(project / "recipes" / "slim-linux-aarch64.toml")).define_sources
    assert arm["CMAKE_SYSROOT"] == "toolchain debian-trixie [cross.aarch64-unknown-linux-gnu.cmake]"
