"""Slim builds without building: recipe fields, plans (mobile included), the bundler's link-graph
reading and the size breakdown, all pure."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import bundle, size
from ortdist.cli import main
from ortdist.errors import BuildError, RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.project import plan_for
from ortdist.recipe import Recipe
from ortdist.toolchains import make_toolchain

# The mobile recipes' [reduce]/[features]: an extended minimal build cut to the reference model.
MOBILE_FEATURES = {
    "onnxruntime_MINIMAL_BUILD": "ON",
    "onnxruntime_EXTENDED_MINIMAL_BUILD": "ON",
    "onnxruntime_REDUCED_OPS_BUILD": "ON",
    "onnxruntime_DISABLE_ML_OPS": "ON",
    "onnxruntime_DISABLE_EXCEPTIONS": "ON",
    "onnxruntime_DISABLE_RTTI": "ON",
    "onnxruntime_ENABLE_LTO": "ON",
    "onnxruntime_ENABLE_CPUINFO": "ON",
}


@pytest.mark.parametrize(
    ("recipe", "eps"), [("android-arm64", ["cpu", "xnnpack", "nnapi"]), ("ios-arm64", ["cpu", "coreml"])]
)
def test_mobile_plans(project: Path, recipe: str, eps: list[str]) -> None:
    """What the recipes ask for; what makes their plans run on the NDK's and Xcode's machines is
    checked by property, with the other plan-only recipes', in test_plan_only.py."""
    plan = plan_for(recipe, project)[0]
    assert [ep.name for ep in plan.providers] == eps
    assert {k: plan.cmake_defines[k] for k in MOBILE_FEATURES} == MOBILE_FEATURES
    assert plan.cmake_defines["CMAKE_BUILD_TYPE"] == "MinSizeRel"
    assert plan.cmake_defines["onnxruntime_ENABLE_PYTHON"] == "OFF"
    # Reduced to the models' operators, bundled into one static archive; no wheel, no shared library.
    assert plan.steps[:5] == ("toolchain", "source", "models", "configure", "build") and "bundle" in plan.steps
    assert not {"install", "wheel", "repair", "check"} & set(plan.steps)
    assert plan.toolchain.plan_only and not plan.builds_wheel
    # The platform's own defines (NDK toolchain file, iOS SDK), as the toolchain file states them.
    argv = plan.configure_argv()
    assert [d for d in (f"-D{k}={v}" for k, v in plan.toolchain.cmake.items()) if d not in argv] == []


@pytest.mark.parametrize(("recipe", "needs"), [("android-arm64", "ANDROID_NDK_HOME"), ("ios-arm64", "Xcode")])
def test_mobile_builds_say_what_they_need(
    project: Path, tmp_path: Path, recipe: str, needs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_for(recipe, project)[0]
    with pytest.raises(ToolchainError, match=needs):
        make_toolchain(plan.toolchain).ensure_build_root(Cache(tmp_path), open(tmp_path / "log", "w"))  # noqa: SIM115
    assert main(["build", recipe, "--dist", str(tmp_path / "dist")]) == ToolchainError.exit_code
    assert needs in capsys.readouterr().err
    assert not (tmp_path / "dist").exists(), "a plan-only build must leave nothing in dist/"


def test_slim_linux_plan(project: Path) -> None:
    plan = plan_for("slim-linux", project)[0]
    d = plan.cmake_defines
    assert d["onnxruntime_MINIMAL_BUILD"] == "ON" and d["onnxruntime_REDUCED_OPS_BUILD"] == "ON"
    assert d["onnxruntime_ENABLE_CPUINFO"] == "OFF"  # for size: ORT's own CPUID code serves MLAS
    assert d["CMAKE_BUILD_TYPE"] == "MinSizeRel"
    assert plan.steps == (
        "toolchain",
        "source",
        "models",
        "configure",
        "build",
        "binding",  # cp310-cp314 on the portable toolchain
        "install",
        "bundle",
        "c_smoke",
        "wheel",
        "repair",
        "check",
        "compat",
        "size",
        "publish",
    )
    assert plan.summary()["reduce"] == {
        "models": ["reference:cnn"],
        "config": None,
        "types": True,
        "optimization_level": "extended",
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[features]\nexceptions = false\n[wheel]\nenabled = false\n", "needs a minimal build"),
        ('[features]\nminimal_build = "plain"\nexceptions = false\n', "pybind11 needs C\\+\\+ exceptions"),
        ("[features]\nrtti = false\n", "pybind11 needs C\\+\\+ rtti"),
        ("[reduce]\ntypes = true\n", "needs models or a config"),
        ('[reduce]\nmodels = ["reference:cnnn"]\n', "did you mean 'cnn'"),
        ('[reduce]\nmodels = ["model.pb"]\n', "not an ONNX model path"),
        ('[features]\nminimal_build = "tiny"\n', "'tiny' is not one of"),
        ('[cmake_defines]\nonnxruntime_MINIMAL_BUILD = "ON"\n', "derived from the recipe's"),
        ("[reduce]\nmodel = []\n", "did you mean 'models'"),
        ('[features]\nminimal_build = "plain"\n', "runs ORT-format models only"),
        ('[reduce]\nconfig = "x.config"\n', "reduced wheel is checked"),
        ("[features]\nunwind_tables = false\n", "unwind_tables = false needs exceptions = false"),
        ("[features]\ncommon_page_size = 5000\n", "5000 is not a page size"),
        ("[features]\ncommon_page_size = 1024\n", "1024 is not a page size"),
        ('[size]\ncompare_with = "r"\n', "not another recipe"),
        ('[features]\ndisabled_types = ["float16"]\n', "'float16' is not one of"),
        ("[features]\nfp16_and_nbit_kernels = false\n", "needs an arm64 target and reduce.types"),
        ("[features]\nint8_kernels = false\n", "int8_kernels = false needs an arm64 target and reduce.types"),
        ('[features]\ndisabled_types = ["float8", "float8"]\n', "lists a type twice"),
        ('build_type = "Release"\n[features]\nsmallest_code = true\n', "replaces MinSizeRel's -Os"),
    ],
)
def test_bad_slim_recipes_are_refused(recipe_from: Callable[..., Recipe], body: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        recipe_from(body)


def test_no_wheel_build_keeps_rtti_explicitly(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    from ortdist.plan import make_plan
    from ortdist.toolchains import load_toolchain

    recipe = recipe_from("[wheel]\nenabled = false\n")
    plan = make_plan(recipe, load_toolchain(project, "debian-trixie"), ())
    # ORT would switch RTTI off by itself in a build without Python; the recipe did not ask for that.
    assert plan.cmake_defines["onnxruntime_DISABLE_RTTI"] == "OFF"


# --- the bundler ---------------------------------------------------------------------------------------

FRAGMENTS = [
    {"fragment": "-Wl,--version-script=/ortdist/build/onnxruntime.lds", "role": "flags"},
    {"fragment": "libonnxruntime_session.a", "role": "libraries"},
    {"fragment": "libonnxruntime_providers.a", "role": "libraries"},
    {"fragment": "/usr/lib/x86_64-linux-gnu/libabsl_base.so.20240722.0.0", "role": "libraries"},
    {"fragment": "/usr/lib/x86_64-linux-gnu/libprotobuf-lite.a", "role": "libraries"},
    {"fragment": "libonnxruntime_session.a", "role": "libraries"},  # CMake repeats for cycles
    {"fragment": "-ldl", "role": "libraries"},
    {"fragment": "-Wl,--whole-archive", "role": "libraries"},
    {"fragment": "/usr/lib/x86_64-linux-gnu/libpthread.so", "role": "libraries"},
]


def test_link_graph_swaps_shared_dependencies_for_their_archives() -> None:
    exists = {"/usr/lib/x86_64-linux-gnu/libabsl_base.a"}.__contains__
    graph = bundle.link_graph(FRAGMENTS, "/ortdist/build", exists)
    assert graph.archives == (
        "/ortdist/build/libonnxruntime_session.a",
        "/ortdist/build/libonnxruntime_providers.a",
        "/usr/lib/x86_64-linux-gnu/libabsl_base.a",
        "/usr/lib/x86_64-linux-gnu/libprotobuf-lite.a",
    )
    assert graph.system_libs == ("dl", "pthread")
    assert graph.unresolved == ()


def test_link_graph_reports_shared_only_dependencies() -> None:
    fragments = [{"fragment": "/usr/lib/x86_64-linux-gnu/libcpuinfo.so.0", "role": "libraries"}]
    graph = bundle.link_graph(fragments, "/ortdist/build", lambda _p: False)
    assert graph.unresolved == ("/usr/lib/x86_64-linux-gnu/libcpuinfo.so.0",)


def test_reply_reading(tmp_path: Path) -> None:
    reply = tmp_path / "reply"
    reply.mkdir()
    (reply / "index-1.json").write_text(json.dumps({"objects": [{"kind": "codemodel", "jsonFile": "cm.json"}]}))
    (reply / "cm.json").write_text(
        json.dumps({"configurations": [{"targets": [{"name": "onnxruntime", "jsonFile": "t.json"}]}]})
    )
    (reply / "t.json").write_text(json.dumps({"link": {"commandFragments": FRAGMENTS}}))

    def read(name: str) -> str:
        return "\n".join(p.name for p in reply.iterdir()) if not name else (reply / name).read_text()

    assert bundle.read_reply(read) == FRAGMENTS
    with pytest.raises(BuildError, match="no target 'other'"):
        bundle.read_reply(read, "other")
    with pytest.raises(BuildError, match="no file-API reply"):
        bundle.read_reply(lambda _n: "")


def test_mri_script_and_pkg_config() -> None:
    script = bundle.mri_script("/o/libonnxruntime.a", ["/b/liba.a", "/b/libb.a"])
    assert script == "CREATE /o/libonnxruntime.a\nADDLIB /b/liba.a\nADDLIB /b/libb.a\nSAVE\nEND\n"
    with pytest.raises(BuildError, match="MRI"):
        bundle.mri_script("/o/lib onnxruntime.a", [])
    pc = bundle.pkg_config("onnxruntime", "1.21.0", ["dl", "pthread"], "d")
    assert "Libs: -L${libdir} -lonnxruntime\n" in pc
    assert "Libs.private: -lstdc++ -ldl -lpthread\n" in pc


def test_component_names() -> None:
    assert bundle.component_of("/b/libonnxruntime_providers.a") == "ort:providers"
    assert bundle.component_of("/usr/lib/x/libabsl_raw_hash_set.a") == "abseil"
    assert bundle.component_of("/usr/lib/x/libprotobuf-lite.a") == "protobuf"
    assert bundle.component_of("/b/libonnx_proto.a") == "onnx"


# --- size -----------------------------------------------------------------------------------------------


def test_size_breakdown_attributes_symbols_to_their_archive() -> None:
    nm = "\n".join(
        [
            "0000000000001000 0000000000000100 T _ZN11onnxruntime4ConvIfE7ComputeEv",
            "0000000000002000 0000000000000040 T _ZN11onnxruntime4ConvIfE5ShapeEv",
            "0000000000003000 0000000000000200 T MlasSgemmKernel",
            "0000000000004000 0000000000000010 t local_helper",
            "0000000000005000 T no_size_symbol",
        ]
    )
    symbols = size.parse_nm_sizes(nm)
    assert [s.size for s in symbols] == [0x100, 0x40, 0x200, 0x10]
    owners = size.attribute(
        symbols,
        [
            ("ort:providers", {"_ZN11onnxruntime4ConvIfE7ComputeEv", "_ZN11onnxruntime4ConvIfE5ShapeEv"}),
            ("ort:mlas", {"MlasSgemmKernel", "_ZN11onnxruntime4ConvIfE7ComputeEv"}),
        ],
    )
    assert owners["_ZN11onnxruntime4ConvIfE7ComputeEv"] == "ort:providers"  # first definer wins
    assert owners["local_helper"] == "unattributed"
    demangled = {
        "_ZN11onnxruntime4ConvIfE7ComputeEv": "onnxruntime::Conv<float>::Compute() const",
        "_ZN11onnxruntime4ConvIfE5ShapeEv": "onnxruntime::Conv<float>::Shape()",
    }
    report = size.breakdown(symbols, owners, demangled, stripped_bytes=0x1000)
    assert report["by_component"][0] == {"component": "ort:mlas", "bytes": 0x200}
    assert report["largest_kernels"] == [{"kernel": "onnxruntime::Conv<float>", "bytes": 0x140}]
    assert report["other_bytes"] == 0x1000 - 0x350


def test_kernel_key_keeps_template_arguments() -> None:
    assert size.kernel_key("onnxruntime::Pool<float, onnxruntime::MaxPool<1>>::Compute(x) const") == (
        "onnxruntime::Pool<float, onnxruntime::MaxPool<1>>"
    )
    assert size.kernel_key("MlasGemm") == "MlasGemm"


def test_kernel_key_drops_return_types_and_keeps_free_functions() -> None:
    assert size.kernel_key("onnxruntime::common::Status onnxruntime::MaxPoolV8<float>(int) const") == (
        "onnxruntime::MaxPoolV8<float>"
    )
    assert size.kernel_key("onnxruntime::detail::MakeString(char const*)") == "onnxruntime::detail::MakeString"


def test_unstripped_link_command() -> None:
    commands = "\n".join(
        [
            "ccache c++ -c a.cc -o a.o",
            ": && /usr/bin/c++ -fPIC -Os -s -Wl,--gc-sections -shared -o libonnxruntime.so.1.21.0 x.o lib.a && :",
        ]
    )
    relink = bundle.unstripped_link_command(commands, "libonnxruntime.so.1.21.0", "/w/lib.unstripped")
    assert " -s " not in relink and "-o /w/lib.unstripped" in relink and "-Wl,--gc-sections" in relink
    assert bundle.unstripped_link_command(commands.replace(" -s", ""), "libonnxruntime.so.1.21.0", "/w/x") == ""
    with pytest.raises(BuildError, match="no link command"):
        bundle.unstripped_link_command("nothing", "libonnxruntime.so.1.21.0", "/w/x")


def test_system_archives_are_left_to_the_consumer() -> None:
    fragments = [
        {"fragment": "/usr/lib/x86_64-linux-gnu/librt.a", "role": "libraries"},
        {"fragment": "-latomic", "role": "libraries"},
    ]
    graph = bundle.link_graph(fragments, "/ortdist/build", lambda _p: True)
    assert graph.archives == () and graph.system_libs == ("rt", "atomic")


def test_lto_clones_are_attributed_to_their_origin() -> None:
    symbols = size.parse_nm_sizes("0000000000001000 0000000000000100 t _ZN11onnxruntime4ConvIfE7ComputeEv.lto_priv.0")
    owners = size.attribute(symbols, [("ort:providers", {"_ZN11onnxruntime4ConvIfE7ComputeEv"})])
    assert owners == {"_ZN11onnxruntime4ConvIfE7ComputeEv.lto_priv.0": "ort:providers"}


def test_reduce_files_must_exist(write_recipe: Callable[..., Path]) -> None:
    from ortdist.recipe import load_recipe

    with pytest.raises(RecipeError, match=r"'ops\.config' does not exist"):
        load_recipe(write_recipe('[wheel]\nenabled = false\n[reduce]\nconfig = "ops.config"\n'))
    path = write_recipe('[wheel]\nenabled = false\n[reduce]\nmodels = ["m.onnx"]\n')
    with pytest.raises(RecipeError, match=r"'m\.onnx' does not exist"):
        load_recipe(path)
    (path.parent / "m.onnx").write_bytes(b"x")  # exists, but is no ONNX model: refused at load time
    with pytest.raises(RecipeError, match=r"'m\.onnx' is not an ONNX model"):
        load_recipe(path)
    from ortdist.smoke.models import BUILDERS

    (path.parent / "m.onnx").write_bytes(BUILDERS["cnn"]().model)
    assert load_recipe(path).reduce.models == ("m.onnx",)


def test_kernel_key_of_lambdas_and_anonymous_namespaces() -> None:
    handler = "std::_Function_handler<void (long), onnxruntime::Foo<float>::Compute()::{lambda(long)#1}>"
    assert size.kernel_key(handler + "::_M_invoke(std::_Any_data const&, long&&)") == handler
    assert size.kernel_key("onnxruntime::contrib::(anonymous namespace)::Impl<float>::Run(int)") == (
        "onnxruntime::contrib::{anonymous}::Impl<float>"
    )


# --- helpers of the slim and cross builds -----------------------------------------------------------


def test_sync_tree_rewrites_only_what_changed(tmp_path: Path) -> None:
    import os

    from ortdist.fsutil import sync_tree

    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "a").mkdir(parents=True)
    (src / "a" / "same.cc").write_text("same")
    (src / "new.cc").write_text("new")
    (dest / "a").mkdir(parents=True)
    (dest / "a" / "same.cc").write_text("same")
    (dest / "stale.cc").write_text("old")
    os.utime(dest / "a" / "same.cc", (1, 1))
    assert sync_tree(src, dest) == 1
    assert (dest / "a" / "same.cc").stat().st_mtime == 1  # untouched: ninja will not recompile it
    assert (dest / "new.cc").read_text() == "new" and not (dest / "stale.cc").exists()


def test_emulated_venv_commands_start_every_process_through_the_emulator() -> None:
    from ortdist.inroot import venv_commands

    native = venv_commands("python3.13", "/v")
    assert native.create == "python3.13 -m venv /v" and native.python == "/v/bin/python"
    emulated = venv_commands("python3.13", "/v", "qemu-aarch64", "/t")
    assert emulated.create == "qemu-aarch64 -L /t /t/usr/bin/python3.13 -m venv --without-pip /v"
    assert emulated.pip.startswith("qemu-aarch64 -L /t /v/bin/python $(ls /t/usr/share/python-wheels/pip-")
    assert emulated.python == "qemu-aarch64 -L /t /v/bin/python"


def test_a_foreign_wheel_is_emulated_or_refused(tmp_path: Path) -> None:
    from ortdist.errors import CheckError
    from ortdist.smoke.env import HOST_ARCH, choose
    from ortdist.smoke.wheelinfo import WheelInfo, wheel_arch

    assert wheel_arch("manylinux_2_39_aarch64") == "aarch64" and wheel_arch("linux_x86_64") == "x86_64"
    other = "aarch64" if HOST_ARCH != "aarch64" else "x86_64"
    info = WheelInfo(path=tmp_path / "w.whl", python="3.13", glibc=(2, 39), requires=(), record=None, arch=other)
    choice = choose(info, ("3.13",), (2, 41), (2, 36), None, {other: f"{other}-unknown-linux-gnu"})
    assert choice.kind == "emulated" and choice.triple == f"{other}-unknown-linux-gnu"
    with pytest.raises(CheckError, match=f"is for {other}"):
        choose(info, ("3.13",), (2, 41), (2, 36), None, {})


def test_a_refusal_is_expected_only_for_want_of_a_kernel_the_build_lacks() -> None:
    from ortdist.smoke.suite import judge_case

    base = {"suite": "model", "name": "transformer", "provider": "CPUExecutionProvider", "must_take": "all"}
    said = "NotImplemented: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for "
    refused = {
        **base,
        "expect_error": "NOT_IMPLEMENTED",
        "refused_ops": ["Erf", "LayerNormalization"],
        "status": "error",
        "error": said + "LayerNormalization(17) node with name 'ln1'",
    }
    verdict = judge_case(refused)
    assert verdict.passed and verdict.message.startswith("refused as expected: no kernel for LayerNormalization")
    # NOT_IMPLEMENTED for something else (an op the build has, an unsupported attribute): a failure.
    kept_op = {**refused, "error": said + "MatMul(13) node with name 'q_proj'"}
    assert not judge_case(kept_op).passed
    vague = {**refused, "error": "NotImplemented: [ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : x"}
    assert not judge_case(vague).passed
    other = {**refused, "error": "Fail: [ONNXRuntimeError] : 1 : FAIL : broken"}
    assert "not for want of a kernel for Erf or LayerNormalization" in judge_case(other).message
    ran = {**base, "expect_error": "NOT_IMPLEMENTED", "status": "ok", "outputs_ok": True, "placement": {}}
    assert "outside the reduced operator set ran" in judge_case(ran).message


def test_without_unwind_tables_c_and_cxx_are_compiled_without_them(project: Path) -> None:
    """ORT drops the tables from its C++ alone when exceptions are off; the C code (MLAS and the
    dependencies) loses them only through the recipe's unwind_tables = false."""
    from ortdist.defines import NO_UNWIND_TABLES
    from ortdist.plan import make_plan
    from ortdist.recipe import load_recipe
    from ortdist.toolchains import load_toolchain

    recipe = load_recipe(project / "recipes" / "slim-c-linux-aarch64.toml")
    plan = make_plan(recipe, load_toolchain(project, "debian-trixie"), ())
    assert plan.cmake_defines["onnxruntime_DISABLE_EXCEPTIONS"] == "ON"
    assert plan.cmake_defines["CMAKE_C_FLAGS"] == plan.cmake_defines["CMAKE_CXX_FLAGS"] == NO_UNWIND_TABLES
    assert plan.define_sources["CMAKE_C_FLAGS"] == "recipe [features]"
    # Appended to a toolchain's own flags, never in their place.
    unpacked = dataclasses.replace(recipe.features, packed_relocations=False)  # DT_RELR needs glibc 2.36
    portable = make_plan(
        dataclasses.replace(
            recipe, target="x86_64-unknown-linux-gnu", toolchain="portable-glibc2.17", features=unpacked
        ),
        load_toolchain(project, "portable-glibc2.17"),
        (),
    )
    flags = portable.cmake_defines["CMAKE_C_FLAGS"]
    assert flags.startswith("-B/") and flags.endswith(" " + NO_UNWIND_TABLES)


def test_the_size_comparison_names_a_recipe_beside_it(write_recipe: Callable[..., Path]) -> None:
    from ortdist.recipe import load_recipe

    write_recipe("", "slim-linux-aarch64")
    with pytest.raises(RecipeError, match="did you mean 'slim-linux-aarch64'") as info:
        load_recipe(write_recipe('[size]\ncompare_with = "slim-linux-aarch"\n'))
    assert info.value.where.endswith("r.toml [size] key 'compare_with'")
    assert load_recipe(write_recipe('[size]\ncompare_with = "slim-linux-aarch64"\n')).size.compare_with


def test_link_size_features_reach_every_linker_flag_and_need_their_glibc(project: Path) -> None:
    from ortdist.defines import LINKER_FLAGS, PACKED_RELOCATIONS, SHARED_LINKER_FLAGS
    from ortdist.plan import make_plan
    from ortdist.recipe import load_recipe
    from ortdist.toolchains import load_toolchain

    recipe = load_recipe(project / "recipes" / "slim-c-linux-aarch64.toml")
    features = dataclasses.replace(recipe.features, packed_relocations=True, common_page_size=4096)
    packed = dataclasses.replace(recipe, features=features)
    plan = make_plan(packed, load_toolchain(project, "debian-trixie"), ())
    common = f"{PACKED_RELOCATIONS} -Wl,-z,common-page-size=4096"
    for key in LINKER_FLAGS[1:]:
        assert plan.cmake_defines[key] == common
    # GNU ld 2.39+ ends RELRO on the 64 KiB page whatever the common page: the library links with
    # the script the configure step writes into the build tree.
    assert plan.cmake_defines[SHARED_LINKER_FLAGS] == f"{common} -Wl,-T,/ortdist/build/ortdist-relro.ld"
    # DT_RELR loads only on glibc 2.36+: a toolchain that promises 2.17 cannot use it.
    portable = dataclasses.replace(packed, target="x86_64-unknown-linux-gnu", toolchain="portable-glibc2.17")
    with pytest.raises(RecipeError, match=r"needs glibc 2\.36 or newer at run time.*glibc 2\.17") as info:
        make_plan(portable, load_toolchain(project, "portable-glibc2.17"), ())
    assert "packed_relocations" in (info.value.where or "")
    plain = make_plan(
        dataclasses.replace(
            recipe, features=dataclasses.replace(features, packed_relocations=False, common_page_size=0)
        ),
        load_toolchain(project, "debian-trixie"),
        (),
    )
    assert not any(key in plain.cmake_defines for key in LINKER_FLAGS)


def test_left_out_types_and_smallest_code_reach_cmake(project: Path) -> None:
    from ortdist.defines import SMALLEST_CODE
    from ortdist.plan import make_plan
    from ortdist.recipe import load_recipe
    from ortdist.toolchains import load_toolchain

    trixie = load_toolchain(project, "debian-trixie")
    recipe = load_recipe(project / "recipes" / "slim-c-linux-aarch64.toml")
    plan = make_plan(recipe, trixie, ())
    for define in ("FLOAT8_TYPES", "OPTIONAL_TYPE", "SPARSE_TENSORS"):
        assert plan.cmake_defines[f"onnxruntime_DISABLE_{define}"] == "ON"
    for language in ("C", "CXX"):
        assert plan.cmake_defines[f"CMAKE_{language}_FLAGS_MINSIZEREL"] == SMALLEST_CODE
    # Left alone, every type is kept, explicitly, and MinSizeRel keeps CMake's own -Os.
    defaults = dataclasses.replace(recipe.features, disabled_types=("optional",), smallest_code=False)
    plain = make_plan(dataclasses.replace(recipe, features=defaults), trixie, ())
    assert plain.cmake_defines["onnxruntime_DISABLE_OPTIONAL_TYPE"] == "ON"
    assert plain.cmake_defines["onnxruntime_DISABLE_FLOAT8_TYPES"] == "OFF"
    assert plain.cmake_defines["onnxruntime_DISABLE_SPARSE_TENSORS"] == "OFF"
    assert "CMAKE_CXX_FLAGS_MINSIZEREL" not in plain.cmake_defines
