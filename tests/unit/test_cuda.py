"""The CUDA path without a GPU: toolchain inheritance, [cuda] recipes, the plan, GPU-wheel
packaging (extras, RUNPATH), and the smoke suite's device probe and "skipped: no GPU" verdicts."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.errors import RecipeError
from ortdist.paths import Cache
from ortdist.pipeline.steps.configure import reduce_kernels_argv
from ortdist.plan import make_plan
from ortdist.project import plan_for
from ortdist.recipe import Recipe
from ortdist.smoke.suite import device_probes, judge, judge_case, node_test_outcomes
from ortdist.smoke.wheelinfo import read_wheel
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian import DebianSysroot
from ortdist.toolchains.debian.wheels import download_ep_wheels
from ortdist.wheel import assemble

CUDA_PROVIDER = "CUDAExecutionProvider"


# --- toolchain ------------------------------------------------------------------------------------
def test_cuda12_extends_the_portable_toolchain(project: Path) -> None:
    base = load_toolchain(project, "portable-glibc2.17")
    cuda = load_toolchain(project, "cuda12")
    assert cuda.extends == "portable-glibc2.17" and cuda.glibc == base.glibc == "2.17"
    assert cuda.deps_from_source and cuda.compiler == base.compiler
    assert set(base.packages) <= set(cuda.all_packages())
    assert "nvidia-cuda-toolkit" in cuda.all_packages()  # its programs only (linked into {wheels}/cuda)
    assert cuda.components == ("main", "contrib", "non-free") and base.components == ("main",)
    # Inherited tables merge: the parent's defines stay, the child's EP defines join them.
    assert cuda.cmake["CMAKE_CXX_COMPILER"] == base.cmake["CMAKE_CXX_COMPILER"]
    assert set(cuda.ep_cmake) == {"cuda"}
    assert cuda.ep_cmake["cuda"]["CMAKE_CUDA_HOST_COMPILER"] == "{compiler}/bin/x86_64-linux-gnu-g++"
    assert "cuda" in cuda.available_eps and "cuda" not in base.available_eps
    assert cuda.targets == ("x86_64-unknown-linux-gnu",) and cuda.cross_targets == {}
    assert set(cuda.shims) == {"cudnn_frontend_src"}
    wheels = cuda.all_wheels()
    assert {w.version for d, w in wheels.items() if d.startswith("nvidia-cuda-")} == {
        "12.4.131",
        "12.4.127",
        "12.4.127.post1",
    }
    # The toolkit's wheels share one tree, each from its own nvidia/<component>/ directory.
    merged = {d: w.subdir for d, w in wheels.items() if w.into == "cuda"}
    assert merged["nvidia-cuda-runtime-cu12"] == "nvidia/cuda_runtime" and len(merged) == 7
    assert all(subdir.startswith("nvidia/") for subdir in merged.values())
    assert cuda.ep_links["cuda"]["cuda/bin/nvcc"] == "/usr/lib/nvidia-cuda-toolkit/bin/nvcc"
    assert "-I$(TOP)/include" in cuda.ep_files["cuda"]["cuda/bin/nvcc.profile"]
    assert cuda.root_digest != base.root_digest
    cache = Cache(Path("/nonexistent"))
    assert DebianSysroot(cuda).build_root_path(cache) != DebianSysroot(base).build_root_path(cache)


def _copy_toolchains(project: Path, tmp_path: Path) -> Path:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    return tmp_path / "toolchains"


def test_a_child_change_leaves_the_parent_root_alone(project: Path, tmp_path: Path) -> None:
    toolchains = _copy_toolchains(project, tmp_path)
    base, cuda = load_toolchain(tmp_path, "portable-glibc2.17"), load_toolchain(tmp_path, "cuda12")
    child = toolchains / "cuda12.toml"
    child.write_text(
        child.read_text().replace('cuda = ["nvidia-cuda-toolkit"]', 'cuda = ["nvidia-cuda-toolkit", "less"]')
    )
    assert load_toolchain(tmp_path, "portable-glibc2.17").root_digest == base.root_digest
    assert load_toolchain(tmp_path, "cuda12").root_digest != cuda.root_digest
    # ...and so does the profile it writes into the toolkit tree...
    child.write_text(child.read_text().replace("PTXAS_FLAGS     +=", "PTXAS_FLAGS     += -v"))
    assert load_toolchain(tmp_path, "cuda12").root_digest != cuda.root_digest
    # ...while the parent's packages re-make the child's root too.
    parent = toolchains / "portable-glibc2.17.toml"
    parent.write_text(parent.read_text().replace('"ccache",', '"ccache", "less",'))
    assert load_toolchain(tmp_path, "cuda12").root_digest != cuda.root_digest


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('extends = "portable-glibc2.17"', 'extends = "portable-glibc2.71"'), "did you mean 'portable-glibc2.17'"),
        (('subdir = "nvidia/cublas"', 'subdir = "../cublas"'), "subdir '../cublas' must be a relative path"),
        (('"cuda/bin/bin2c" = "/usr/bin/bin2c"', '"cuda/bin/bin2c" = "../bin2c"'), "a name beside it or an absolute"),
        (('"cuda/bin/nvcc.profile"', '"/etc/nvcc.profile"'), "ep_files.cuda\\] '/etc/nvcc.profile': a path must be"),
        (("6d011159a158f3cf", "6d011159"), "sha256 \\(64 lowercase hex digits\\)"),
        (("6d011159a158f3cf", "6D011159A158F3CF"), "sha256 \\(64 lowercase hex digits\\)"),
        (('python = "3.12"', 'pyhton = "3.12"'), "unknown key 'pyhton'"),
        (('version = "1.7.0"', "version = 1.7"), "must be a string"),
        (('sha256 = "cb90', '# sha256 = "cb90'), "missing required key\\(s\\) \\['sha256'\\]"),
        (("[ep_cmake.cuda]", "[ep_cmake.cudaa]"), "\\[ep_cmake.cudaa\\] names an EP"),
    ],
)
def test_bad_toolchains_are_refused(project: Path, tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    toolchains = _copy_toolchains(project, tmp_path)
    child = toolchains / "cuda12.toml"
    text = child.read_text()
    assert edit[0] in text
    child.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(RecipeError, match=message):
        load_toolchain(tmp_path, "cuda12")


def test_toolchains_that_extend_each_other_are_refused(project: Path, tmp_path: Path) -> None:
    toolchains = _copy_toolchains(project, tmp_path)
    parent = toolchains / "portable-glibc2.17.toml"
    parent.write_text('extends = "cuda12-tensorrt"\n' + parent.read_text())
    with pytest.raises(RecipeError, match=r"cycle: cuda12 -> portable-glibc2\.17 -> cuda12-tensorrt -> cuda12"):
        load_toolchain(tmp_path, "cuda12")


def test_a_misspelt_parent_is_reported_where_it_is_named(project: Path, tmp_path: Path) -> None:
    child = _copy_toolchains(project, tmp_path) / "cuda12.toml"
    child.write_text(child.read_text().replace('extends = "portable-glibc2.17"', 'extends = "portable-glibc2.71"'))
    with pytest.raises(RecipeError) as err:
        load_toolchain(tmp_path, "cuda12")
    assert err.value.where == f"{child} key 'extends'"


def test_a_child_adds_to_its_parents_ep_tables(project: Path) -> None:
    """cuda12-tensorrt's [ep_cmake.tensorrt] joins cuda12's [ep_cmake.cuda], which stays whole."""
    cuda, trt = load_toolchain(project, "cuda12"), load_toolchain(project, "cuda12-tensorrt")
    assert trt.ep_cmake["cuda"] == cuda.ep_cmake["cuda"]
    assert trt.ep_cmake["tensorrt"] == {"onnxruntime_TENSORRT_HOME": "/opt/tensorrt"}
    assert trt.ep_wheels == cuda.ep_wheels


def test_a_child_table_of_the_same_ep_merges_key_by_key(project: Path, tmp_path: Path) -> None:
    toolchains = _copy_toolchains(project, tmp_path)
    (toolchains / "cuda-extra.toml").write_text(
        'extends = "cuda12"\n[ep_cmake.cuda]\nonnxruntime_NVCC_THREADS = "2"\n'
        '[ep_wheels.cuda.nvidia-cutlass]\nversion = "3.5.1.0"\nsha256 = "' + "0" * 64 + '"\n'
    )
    spec = load_toolchain(tmp_path, "cuda-extra")
    assert spec.ep_cmake["cuda"]["onnxruntime_NVCC_THREADS"] == "2"
    assert spec.ep_cmake["cuda"]["CMAKE_CUDA_HOST_COMPILER"] == "{compiler}/bin/x86_64-linux-gnu-g++"  # kept
    assert spec.declaring("ep_cmake.cuda", "onnxruntime_NVCC_THREADS") == "cuda-extra"
    assert spec.declaring("ep_cmake.cuda", "CMAKE_CUDA_HOST_COMPILER") == "cuda12"
    assert spec.declaring("cmake", "CMAKE_CXX_COMPILER") == "portable-glibc2.17"
    assert spec.ep_wheels["cuda"]["nvidia-cutlass"].sha256 == "0" * 64
    assert "nvidia-cudnn-cu12" in spec.ep_wheels["cuda"]


def test_ep_wheels_are_downloaded_hash_pinned(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip gets --require-hashes with the pinned sha256; a file that does not match is refused."""
    from ortdist import run
    from ortdist.errors import ToolchainError

    spec = load_toolchain(project, "cuda12")
    calls: list[list[str]] = []

    def fake_capture(argv: list[str], **_kw: object) -> None:
        calls.append(argv)
        dest = Path(argv[argv.index("--dest") + 1])
        (dest / "nvidia_cutlass-3.5.1.0-py3-none-any.whl").write_bytes(b"not the pinned file")

    monkeypatch.setattr(run, "capture", fake_capture)
    only_cutlass = {"cuda": {"nvidia-cutlass": spec.ep_wheels["cuda"]["nvidia-cutlass"]}}
    sysroot = DebianSysroot(dataclasses.replace(spec, ep_wheels=only_cutlass))
    with pytest.raises(ToolchainError, match="does not match the pinned sha256"):
        download_ep_wheels(sysroot.spec, Cache(tmp_path))
    (argv,) = calls
    assert "--require-hashes" in argv and "--no-deps" in argv
    requirement = Path(argv[argv.index("-r") + 1])
    assert not requirement.exists()  # the mismatching download was removed with its directory


# --- recipe and plan -----------------------------------------------------------------------------
CUDA_RECIPE = 'execution_providers = ["cuda"]\ntoolchain = "cuda12"\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[cuda]\narchitectures = ["90"]\n', "no execution provider compiles CUDA kernels"),
        (CUDA_RECIPE + "[cuda]\narchitectures = []\n", "no CUDA architecture"),
        (CUDA_RECIPE + '[cuda]\narchitectures = ["native"]\n', "'native' is not a CUDA architecture"),
        (CUDA_RECIPE + '[cuda]\narchitectures = ["sm_90"]\n', "'sm_90' is not a CUDA architecture"),
        (CUDA_RECIPE + '[cuda]\narchitecture = ["90"]\n', "did you mean 'architectures'"),
        (CUDA_RECIPE + '[cmake_defines]\nCMAKE_CUDA_ARCHITECTURES = "80"\n', "derived from the recipe's \\[cuda\\]"),
        (CUDA_RECIPE + 'linkage = "static"\n', "cannot be linked statically"),
    ],
)
def test_bad_cuda_recipes_are_refused(recipe_from: Callable[..., Recipe], body: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        recipe_from(body)


def test_good_architectures_are_accepted(recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from(CUDA_RECIPE + '[cuda]\narchitectures = ["80", "86-real", "90a", "90-virtual", "120"]\n')
    assert recipe.cuda.architectures == ("80", "86-real", "90a", "90-virtual", "120")


def test_cuda_linux_plan(project: Path) -> None:
    plan, _ = plan_for("cuda-linux", project)
    defines = plan.cmake_defines
    assert plan.distribution == "onnxruntime-gpu"
    assert [ep.name for ep in plan.providers] == ["cpu", "cuda"]
    assert defines["onnxruntime_USE_CUDA"] == "ON"
    assert defines["CMAKE_CUDA_ARCHITECTURES"] == "60-real;70-real;75-real;80-real;86-real;89-real;90"
    assert defines["CMAKE_CUDA_COMPILER_LAUNCHER"] == defines["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert defines["CMAKE_CUDA_HOST_COMPILER"] == "/opt/ortdist-compiler/bin/x86_64-linux-gnu-g++"  # GCC 11.2
    assert defines["CMAKE_CUDA_COMPILER"] == "/opt/ortdist-wheels/cuda/bin/nvcc"  # beside its own nvcc.profile
    for switch in ("FLASH", "MEMORY_EFFICIENT", "LEAN"):
        assert defines[f"onnxruntime_USE_{switch}_ATTENTION"] == "OFF"
    assert defines["onnxruntime_CUDNN_HOME"] == "/opt/ortdist-wheels/nvidia-cudnn-cu12/nvidia/cudnn"
    assert defines["FETCHCONTENT_SOURCE_DIR_CUTLASS"].startswith("/opt/ortdist-wheels/nvidia-cutlass/")
    assert defines["FETCHCONTENT_SOURCE_DIR_CUDNN_FRONTEND"] == "/ortdist/shims/cudnn_frontend_src"
    assert not any("{" in v for v in defines.values())
    # The vendor runtime is never bundled: auditwheel excludes it, the extras provide it.
    for lib in ("libcudart.so.*", "libcublas.so.*", "libcublasLt.so.*", "libcudnn*.so.*", "libcuda.so.*"):
        assert lib in plan.repair_excludes
    # five Pythons: the extra bindings; a portable toolchain: the older systems (compat)
    assert plan.steps[-8:] == ("binding", "install", "wheel", "repair", "check", "compat", "size", "publish")


def test_multi_arch_and_attention_kernels(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    from ortdist.project import load_patches

    recipe = recipe_from(CUDA_RECIPE + '[cuda]\narchitectures = ["80", "90"]\nattention_kernels = true\n')
    plan = make_plan(recipe, load_toolchain(project, "cuda12"), load_patches(recipe, project))
    assert plan.cmake_defines["CMAKE_CUDA_ARCHITECTURES"] == "80;90"
    assert plan.cmake_defines["onnxruntime_USE_FLASH_ATTENTION"] == "ON"


def test_cpu_plans_carry_no_cuda_defines(project: Path) -> None:
    plan, _ = plan_for("cpu-linux", project)
    assert not any("CUDA" in key or "ATTENTION" in key for key in plan.cmake_defines)


def test_the_cpu_toolchain_cannot_build_cuda(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    from ortdist.project import load_patches

    recipe = recipe_from('execution_providers = ["cuda"]\n')
    with pytest.raises(RecipeError, match="has no libraries for execution provider\\(s\\) cuda"):
        make_plan(recipe, load_toolchain(project, "debian-trixie"), load_patches(recipe, project))


def test_reduced_cuda_builds_reduce_the_cuda_kernels(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    from ortdist.project import load_patches

    recipe = recipe_from(CUDA_RECIPE + '[reduce]\nmodels = ["reference:cnn"]\n')
    plan = make_plan(recipe, load_toolchain(project, "cuda12"), load_patches(recipe, project))
    assert plan.cmake_defines["onnxruntime_REDUCED_OPS_BUILD"] == "ON"
    assert "--use_cuda" in reduce_kernels_argv(plan, "/b", "/c")
    cpu, _ = plan_for("slim-linux", project)
    assert "--use_cuda" not in reduce_kernels_argv(cpu, "/b", "/c")


# --- packaging -----------------------------------------------------------------------------------
def test_gpu_wheel_metadata_declares_the_nvidia_extras(project: Path) -> None:
    plan, _ = plan_for("cuda-linux", project)
    text = assemble.pyproject_text(plan, "/stage")
    project_table = tomllib.loads(text)["project"]
    assert project_table["name"] == "onnxruntime-gpu"
    extras = project_table["optional-dependencies"]
    assert set(extras) == {"cuda", "cudnn"}
    assert any(r.startswith("nvidia-cublas-cu12") for r in extras["cuda"])
    assert any(r.startswith("nvidia-cudnn-cu12") for r in extras["cudnn"])
    cpu, _ = plan_for("cpu-linux", project)
    assert "optional-dependencies" not in tomllib.loads(assemble.pyproject_text(cpu, "/stage"))["project"]


def test_a_repair_may_add_to_the_search_path_but_not_drop_from_it() -> None:
    expected = assemble.provider_runpath(("nvidia/cublas/lib", "nvidia/cudnn/lib"))
    assert assemble.search_path_keeps(expected, expected)
    # auditwheel appends its .libs directory when it grafts a library into the provider
    assert assemble.search_path_keeps(expected + ":$ORIGIN/../../onnxruntime_gpu.libs", expected)
    assert assemble.search_path_keeps("$ORIGIN/../../x.libs:" + expected, expected)
    assert not assemble.search_path_keeps("$ORIGIN:$ORIGIN/../../onnxruntime_gpu.libs", expected)
    reordered = ":".join(reversed(expected.split(":")))
    assert not assemble.search_path_keeps(reordered, expected)
    assert not assemble.search_path_keeps("", expected)


def test_provider_runpath_reaches_the_nvidia_wheels() -> None:
    runpath = assemble.provider_runpath(("nvidia/cublas/lib", "nvidia/cudnn/lib"))
    assert runpath == "$ORIGIN:$ORIGIN/../../nvidia/cublas/lib:$ORIGIN/../../nvidia/cudnn/lib"
    # $ORIGIN is onnxruntime/capi inside site-packages: two levels up is site-packages.
    site = Path("/site-packages")
    origin = site / assemble.CAPI_DIR
    resolved = (origin / runpath.split(":")[1].replace("$ORIGIN/", "")).resolve()
    assert resolved == site / "nvidia" / "cublas" / "lib"


def _wheel_with_metadata(tmp_path: Path, metadata: str) -> Path:
    wheel = tmp_path / "onnxruntime_gpu-1.21.0-cp313-cp313-manylinux_2_39_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("onnxruntime_gpu-1.21.0.dist-info/METADATA", metadata)
        zf.writestr("onnxruntime_gpu-1.21.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    return wheel


def test_wheelinfo_reads_extras(tmp_path: Path) -> None:
    wheel = _wheel_with_metadata(
        tmp_path,
        "Metadata-Version: 2.4\nName: onnxruntime-gpu\nVersion: 1.21.0\n"
        "Requires-Dist: numpy>=1.21.6\n"
        "Provides-Extra: cuda\n"
        'Requires-Dist: nvidia-cuda-runtime-cu12<13,>=12.4; extra == "cuda"\n'
        'Requires-Dist: nvidia-cublas-cu12<13,>=12.4; extra == "cuda"\n'
        "Provides-Extra: cudnn\n"
        "Requires-Dist: nvidia-cudnn-cu12<10,>=9.7; extra == 'cudnn'\n",
    )
    info = read_wheel(wheel)
    assert info.requires == ("numpy>=1.21.6",)
    assert info.extras == {
        "cuda": ("nvidia-cuda-runtime-cu12<13,>=12.4", "nvidia-cublas-cu12<13,>=12.4"),
        "cudnn": ("nvidia-cudnn-cu12<10,>=9.7",),
    }
    assert info.install_spec == f"{wheel.name}[cuda,cudnn]"
    assert info.all_requirements[0] == "numpy>=1.21.6" and len(info.all_requirements) == 4


def test_a_wheel_without_extras_installs_plain(tmp_path: Path) -> None:
    info = read_wheel(_wheel_with_metadata(tmp_path, "Metadata-Version: 2.1\nName: x\nVersion: 1\n"))
    assert info.extras == {} and info.install_spec == info.path.name


# --- smoke suite: judging --------------------------------------------------------------------------
def _case(status: str, suite: str = "model", **extra: object) -> dict[str, object]:
    return {"suite": suite, "name": "cnn", "provider": CUDA_PROVIDER, "must_take": "all", "status": status, **extra}


def test_no_device_is_skipped_never_passed() -> None:
    verdict = judge_case(_case("no_device", reason="no GPU (cudaGetDeviceCount: 35, insufficient driver)"))
    assert verdict.skipped and verdict.message.startswith("skipped: no GPU")
    from ortdist.smoke.report import junit_xml, table

    assert 'skipped message="skipped: no GPU' in junit_xml("w", [verdict], {}, {})
    assert "SKIP: no GPU" in table([("w", verdict)]) and "PASS" not in table([("w", verdict)])


def test_a_gpu_runner_without_a_gpu_fails() -> None:
    verdict = judge_case(_case("no_device", reason="no GPU (cudaGetDeviceCount: 35, x)"), require_devices=True)
    assert not verdict.passed and not verdict.skipped and "must have one" in verdict.message


def test_gpu_jobs_require_the_device_in_ci(project: Path) -> None:
    from ortdist import ci

    facts = ci.runner_facts()
    cuda, _ = plan_for("cuda-linux", project)
    cpu, _ = plan_for("cpu-linux", project)
    # (both smoke tests run in their build's toolchain's roots: test_ci_cache.py)
    assert ci.matrix_entry(cuda, facts)["smoke_args"] == "--toolchain cuda12 --require-device"
    assert ci.matrix_entry(cpu, facts)["smoke_args"] == "--toolchain portable-glibc2.17"


def test_a_provider_that_cannot_load_fails_even_without_a_gpu() -> None:
    verdict = judge_case(_case("error", error="cannot load libonnxruntime_providers_cuda.so: libcublasLt.so.12: x"))
    assert not verdict.passed and not verdict.skipped


def test_a_silent_cpu_fallback_on_a_gpu_machine_fails() -> None:
    case = _case("ok", outputs_ok=True, max_abs_err=0.0, placement={"conv": "CPUExecutionProvider"})
    assert not judge_case(case).passed


def test_node_tests_without_a_device_are_not_counted() -> None:
    result = {
        "cases": [_case("no_device", suite="node", reason="no GPU"), _case("ok", suite="node", outputs_ok=True)],
        "available_providers": [CUDA_PROVIDER, "CPUExecutionProvider"],
    }
    assert node_test_outcomes(result) == {CUDA_PROVIDER: {"cnn": True}}
    verdicts = judge(
        {"cases": [_case("no_device", reason="no GPU")], "available_providers": [CUDA_PROVIDER]}, [CUDA_PROVIDER], []
    )
    assert [v.skipped for v in verdicts] == [True]


def test_device_probes_come_from_the_data() -> None:
    probes = device_probes([CUDA_PROVIDER, "CPUExecutionProvider"])
    assert probes == {
        CUDA_PROVIDER: {
            "library": "libonnxruntime_providers_cuda.so",
            "label": "GPU",
            "runtime": ("libcudart.so.13", "libcudart.so.12"),
            "count": "cudaGetDeviceCount",
            "error_string": "cudaGetErrorString",
        }
    }


# --- smoke suite: the runner's probe, against real shared libraries ------------------------------
FAKE_RUNTIME = r"""
#include <stdlib.h>
int fakeGetDeviceCount(int *count) {
    const char *env = getenv("FAKE_DEVICES");
    *count = env ? atoi(env) : 0;
    return *count > 0 ? 0 : 100;
}
const char *fakeGetErrorString(int status) { return status == 100 ? "no CUDA-capable device is detected" : "?"; }
"""


@pytest.fixture
def fake_package(tmp_path: Path) -> Path:
    """onnxruntime/capi with a provider library that needs a runtime found through its RUNPATH."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    capi = tmp_path / "onnxruntime" / "capi"
    libs = tmp_path / "vendor" / "lib"
    capi.mkdir(parents=True)
    libs.mkdir(parents=True)
    (tmp_path / "runtime.c").write_text(FAKE_RUNTIME)
    (tmp_path / "provider.c").write_text(
        "int fakeGetDeviceCount(int *);\nint provider(void) { int n; return fakeGetDeviceCount(&n); }\n"
    )
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", libs / "libfakert.so.1", "-Wl,-soname,libfakert.so.1", tmp_path / "runtime.c"],
        check=True,
    )
    subprocess.run(
        [
            "cc", "-shared", "-fPIC", "-o", capi / "libprovider.so", tmp_path / "provider.c",
            "-L", libs, "-l:libfakert.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../vendor/lib",
        ],
        check=True,
    )  # fmt: skip
    (tmp_path / "onnxruntime" / "__init__.py").write_text("")
    return tmp_path


FACTS = {
    "library": "libprovider.so",
    "label": "GPU",
    # the first soname is absent: the probe goes on to the next, as on a CUDA 12-only machine
    "runtime": ["libortdist-absent-runtime.so.13", "libfakert.so.1"],
    "count": "fakeGetDeviceCount",
    "error_string": "fakeGetErrorString",
}


def _probe(package: Path, facts: dict[str, str], devices: str) -> dict[str, str]:
    """The runner's probe in a fresh interpreter (a loaded library stays loaded for the process)."""
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / 'src' / 'ortdist' / 'smoke')!r})\n"
        "import runner\n"
        f"ort = type('ort', (), {{'__file__': {str(package / 'onnxruntime' / '__init__.py')!r}}})\n"
        f"print(json.dumps(runner.probe_device(ort, {facts!r})))\n"
    )
    import json
    import os

    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "FAKE_DEVICES": devices},
    )
    result: dict[str, str] = json.loads(out.stdout)
    return result


def test_probe_reports_an_absent_device(fake_package: Path) -> None:
    result = _probe(fake_package, FACTS, "0")
    assert result == {
        "status": "absent",
        "reason": "no GPU (fakeGetDeviceCount: 100, no CUDA-capable device is detected)",
    }


def test_probe_reports_a_present_device(fake_package: Path) -> None:
    assert _probe(fake_package, FACTS, "2") == {"status": "present", "reason": "2 device(s)"}


def test_probe_names_a_runtime_without_the_expected_symbols(fake_package: Path) -> None:
    result = _probe(fake_package, {**FACTS, "count": "cudaGetDeviceCount"}, "1")
    assert result["status"] == "load_error"
    assert result["reason"].startswith("libprovider.so loaded, but its runtime did not:")
    assert "cudaGetDeviceCount" in result["reason"]


def test_probe_fails_when_the_runtime_is_not_where_the_runpath_points(fake_package: Path) -> None:
    shutil.rmtree(fake_package / "vendor")
    result = _probe(fake_package, FACTS, "1")
    assert result["status"] == "load_error"
    assert "cannot load libprovider.so" in result["reason"] and "libfakert.so.1" in result["reason"]


@pytest.mark.parametrize(("broken", "status"), [(False, "no_device"), (True, "error")])
def test_runner_marks_cases_by_device_status(fake_package: Path, tmp_path: Path, broken: bool, status: str) -> None:
    """The runner, end to end against a stand-in onnxruntime: no device -> no_device (judged
    skipped); a provider whose runtime cannot load -> error (judged failed). No case runs."""
    import json
    import os

    (fake_package / "onnxruntime" / "__init__.py").write_text(
        "__version__ = '0'\n"
        "def get_available_providers():\n    return ['CUDAExecutionProvider', 'CPUExecutionProvider']\n"
    )
    if broken:
        shutil.rmtree(fake_package / "vendor")
    work = tmp_path / "run"
    work.mkdir()
    smoke = Path(__file__).resolve().parents[2] / "src" / "ortdist" / "smoke"
    for name in ("runner.py", "proof.py"):
        shutil.copyfile(smoke / name, work / name)
    case = {"suite": "model", "name": "cnn", "model": "m.onnx", "data": "d.npz", "atol": 0, "rtol": 0}
    plan = {"cases": [case | {"provider": CUDA_PROVIDER, "must_take": "all"}], "devices": {CUDA_PROVIDER: FACTS}}
    (work / "plan.json").write_text(json.dumps(plan))
    subprocess.run(
        [sys.executable, "runner.py", "plan.json", "result.json"],
        cwd=work,
        check=True,
        env={**os.environ, "PYTHONPATH": str(fake_package), "FAKE_DEVICES": "0"},
    )
    result = json.loads((work / "result.json").read_text())
    (got,) = result["cases"]
    assert got["status"] == status
    verdict = judge_case(got)
    assert verdict.skipped == (not broken) and verdict.passed == (not broken)


def test_tensorrt_is_planned_but_not_built_here(project: Path) -> None:
    from ortdist.errors import ToolchainError
    from ortdist.toolchains import make_toolchain

    plan, _ = plan_for("tensorrt-linux", project)
    assert plan.toolchain.plan_only and plan.toolchain.extends == "cuda12"
    assert [ep.name for ep in plan.providers] == ["cpu", "cuda", "tensorrt"]
    assert plan.distribution == "onnxruntime-gpu"
    assert plan.cmake_defines["onnxruntime_USE_TENSORRT"] == "ON"
    assert plan.cmake_defines["onnxruntime_TENSORRT_HOME"] == "/opt/tensorrt"
    assert plan.cmake_defines["CMAKE_CUDA_ARCHITECTURES"] == "90"
    assert "libnvinfer.so.*" in plan.repair_excludes and "libcudnn*.so.*" in plan.repair_excludes
    with pytest.raises(ToolchainError, match="NVIDIA TensorRT 10"):
        make_toolchain(plan.toolchain).ensure_build_root(Cache(Path("/nonexistent")), sys.stderr)


def test_the_sbom_names_the_sdk_wheels_built_against(project: Path) -> None:
    from ortdist import sbom

    plan, _ = plan_for("cuda-linux", project)
    inputs = sbom.SbomInputs(
        plan=plan,
        recipe_path="recipes/cuda-linux.toml",
        recipe_text="",
        recipe_sha256="0" * 64,
        source={"kind": "debian", "sha256": "0" * 64},
        root_packages={"nvidia-cuda-toolkit": "12.4.131~12.4.1-2"},
        source_date_epoch=0,
    )
    document = sbom.make_sbom(inputs, {"name": "w", "version": "1"})
    sdks = {c["name"]: c for c in document["components"] if c["bom-ref"].startswith("sdk:")}
    assert set(sdks) == {"nvidia-cudnn-cu12", "nvidia-cudnn-frontend", "nvidia-cutlass"} | {
        f"nvidia-{c}-cu12" for c in ("cuda-nvcc", "cuda-runtime", "cuda-cccl", "cublas", "cufft", "curand", "cusparse")
    }
    assert sdks["nvidia-cudnn-cu12"]["purl"] == "pkg:pypi/nvidia-cudnn-cu12@9.7.1.26"
    assert sdks["nvidia-cudnn-cu12"]["hashes"][0]["content"].startswith("6d011159")
    cpu, _ = plan_for("cpu-linux", project)
    cpu_doc = sbom.make_sbom(dataclasses.replace(inputs, plan=cpu), {"name": "w", "version": "1"})
    assert not [c for c in cpu_doc["components"] if c["bom-ref"].startswith("sdk:")]
