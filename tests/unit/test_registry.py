from __future__ import annotations

import copy
import tomllib
from importlib import resources
from typing import Any

import pytest

from ortdist import registry
from ortdist.errors import DataError

# Every EP in ORT's own list (include/onnxruntime/core/graph/constants.h, 1.21.0), by provider name.
ORT_PROVIDERS = {
    "CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider", "DmlExecutionProvider",
    "CoreMLExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "XnnpackExecutionProvider", "QNNExecutionProvider", "CANNExecutionProvider",
    "NnapiExecutionProvider", "ACLExecutionProvider", "ArmNNExecutionProvider", "VitisAIExecutionProvider",
    "AzureExecutionProvider", "RknpuExecutionProvider", "WebGpuExecutionProvider", "JsExecutionProvider",
    "WebNNExecutionProvider", "VSINPUExecutionProvider",
}  # fmt: skip


def raw_providers() -> dict[str, Any]:
    text = resources.files("ortdist.data").joinpath("providers.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def test_registry_covers_every_ort_ep() -> None:
    assert {ep.provider for ep in registry.providers().values()} == ORT_PROVIDERS


def test_facts_of_known_eps() -> None:
    eps = registry.providers()
    assert eps["cpu"].cmake == {}
    assert eps["cuda"].cmake == {"onnxruntime_USE_CUDA": "ON"}
    assert eps["cuda"].wheel_suffix == "gpu"
    assert not eps["cuda"].static_link
    assert "libcudart.so.*" in eps["cuda"].runtime_libs
    assert eps["nnapi"].targets == ("aarch64-linux-android",)
    assert eps["dnnl"].wheel_suffix == "dnnl"


def test_every_ep_target_is_a_known_target() -> None:
    targets = registry.targets()
    for ep in registry.providers().values():
        assert set(ep.targets) <= set(targets), ep.name


@pytest.mark.parametrize(
    ("mutate", "key", "message"),
    [
        (lambda d: d["cuda"].update(targets=["x86_64-pc-linux-musl"]), "cuda.targets", "unknown target"),
        (lambda d: d["cuda"].update(provider="CPUExecutionProvider"), "cuda.provider", "already used by [cpu]"),
        (lambda d: d["cuda"].update(cmake={"USE_CUDA": "ON"}), "cuda.cmake", "is not an onnxruntime_* define"),
        (
            lambda d: d["cuda"].update(cmake={"onnxruntime_USE_CUDA": True}),
            "cuda.cmake.onnxruntime_USE_CUDA",
            "must be a string",
        ),
        (lambda d: d["cuda"].update(provider="Cuda"), "cuda.provider", "must end in 'ExecutionProvider'"),
        (lambda d: d["cuda"].update(colour="green"), "cuda.colour", "unknown key 'colour'"),
        (lambda d: d["cuda"].update(static_link="no"), "cuda.static_link", "must be true or false"),
        (lambda d: d["cuda"].pop("static_link"), "cuda", "missing required key(s) ['static_link']"),
        (lambda d: d["cuda"].update(provider_library=""), "cuda.pip_library_dirs", "needs a provider_library"),
        (lambda d: d.pop("cpu"), "", "[cpu] must exist"),
        (lambda d: d["cpu"].update(cmake={"onnxruntime_USE_CPU": "ON"}), "", "[cpu] must exist"),
    ],
)
def test_invariants_are_checked_at_load(mutate: Any, key: str, message: str) -> None:
    data = copy.deepcopy(raw_providers())
    mutate(data)
    with pytest.raises(DataError) as info:
        registry.parse_providers(data, registry.targets())
    assert message in info.value.message
    assert info.value.where == "ortdist/data/providers.toml" + (f" key '{key}'" if key else "")
    assert info.value.fix


def test_targets_table() -> None:
    linux = registry.targets()["x86_64-unknown-linux-gnu"]
    assert linux.supports_wheels and linux.wheel_repair == "auditwheel"
    assert registry.targets()["arm64-apple-darwin"].wheel_repair == "delocate"
    assert registry.targets()["x86_64-pc-windows-msvc"].wheel_repair == "delvewheel"
    assert not registry.targets()["arm64-apple-ios"].supports_wheels


def test_ort_version_pins() -> None:
    v = registry.ort_versions()["1.21.0"]
    assert v.source.orig_tarball == "onnxruntime_1.21.0+dfsg.orig.tar.xz"
    assert v.source.pool_path == "pool/main/o/onnxruntime/onnxruntime_1.21.0+dfsg.orig.tar.xz"
    assert v.source.sha256 == "32df1f82bd6b07b18372c0f387133214905cbde7a586b3ad83f0ed0075f80273"
    deps = {d.name: d for d in v.deps}
    assert v.deps[0].name == "onnx"  # file order: the one every toolchain builds comes first
    onnx = deps["onnx"]
    assert (onnx.filename, onnx.project, onnx.always, onnx.is_deb) == ("onnx-1.17.0.tar.gz", "onnx", True, False)
    assert [d.name for d in v.deps if d.always] == ["onnx"]
    # utf8_range is a directory of protobuf's own tarball, not a second download.
    protobuf, utf8 = deps["protobuf"], deps["utf8_range"]
    assert (utf8.filename, utf8.sha256) == (protobuf.filename, protobuf.sha256)
    assert (protobuf.subdir, utf8.subdir) == ("", "third_party/utf8_range")
    assert protobuf.pool_path == "pool/main/p/protobuf/protobuf_3.21.12.orig.tar.gz"
    assert deps["mp11"].subdir == "libs/mp11"
    safeint = deps["safeint"]
    assert safeint.is_deb and safeint.subdir == "usr/include/safeint"
    assert safeint.pool_path == "pool/main/s/safeint/libsafeint-dev_3.0.28a+dfsg-4_all.deb"
    pybind11 = deps["pybind11"]
    assert (pybind11.filename, pybind11.fetchcontent) == ("pybind11-2.13.6.tar.gz", False)
    assert all(d.fetchcontent for d in v.deps if d.name != "pybind11")
    xnnpack_family = {"googlexnnpack", "pthreadpool", "fxdiv", "fp16", "psimd"}
    assert {d.name for d in v.deps if d.eps} == xnnpack_family | {"onednn"}
    assert all(d.eps == ("xnnpack",) for d in v.deps if d.eps and d.name != "onednn")
    # oneDNN (the DNNL EP): Debian's 3.7.2 orig, built on the compiler's OpenMP runtime.
    assert deps["onednn"].eps == ("dnnl",) and deps["onednn"].openmp
    assert [d.name for d in v.deps if d.openmp] == ["onednn"]
    # Every Debian pin names the suite whose index lists it (the SBOM's purl says which).
    assert all(d.suite in {"trixie", "forky"} for d in v.deps if d.debian)


def test_debian_pool_path_for_lib_packages() -> None:
    src = registry.DebianSource(package="libfoo", version="1.0", sha256="0" * 64)
    assert src.pool_path == "pool/main/libf/libfoo/libfoo_1.0.orig.tar.xz"


@pytest.mark.parametrize(
    ("mutate", "key", "message"),
    [
        (lambda d: d["1.21.0"]["source"].update(sha256="ABC"), '"1.21.0".source.sha256', "is not a lowercase sha256"),
        (lambda d: d["1.21.0"]["deps"]["onnx"].update(sha256="0"), '"1.21.0".deps.onnx.sha256', "lowercase sha256"),
        (lambda d: d["1.21.0"]["source"].update(kind="git"), '"1.21.0".source.kind', "'git' is not one of 'debian'"),
        (lambda d: d["1.21.0"]["deps"]["onnx"].pop("pypi_sdist"), '"1.21.0".deps.onnx', "exactly one place"),
        (lambda d: d["1.21.0"]["deps"]["onnx"].pop("version"), '"1.21.0".deps.onnx', "['version']"),
        (lambda d: d["1.21.0"].update(python_require=[]), '"1.21.0".python_require', "did you mean"),
    ],
)
def test_ort_version_pins_are_checked(mutate: Any, key: str, message: str) -> None:
    data = copy.deepcopy(registry.load_data("ort_versions.toml"))
    mutate(data)
    with pytest.raises(DataError) as info:
        registry.parse_ort_versions(data)
    assert message in str(info.value)
    assert info.value.where == f"ortdist/data/ort_versions.toml key '{key}'"


@pytest.mark.parametrize(
    "dep",
    [
        {"pypi_sdist": "onnx", "debian": "onnx", "file": "onnx_1.17.0.orig.tar.gz"},
        {},
        {"debian": "abseil"},
    ],
    ids=["both-places", "neither-place", "debian-without-file"],
)
def test_a_dependency_comes_from_exactly_one_place(dep: dict[str, str]) -> None:
    """A dependency with two origins (or none) would fetch one file and record the other in the SBOM;
    a Debian one without ``file`` has no URL at all."""
    data = copy.deepcopy(registry.load_data("ort_versions.toml"))
    data["1.21.0"]["deps"]["extra"] = {"version": "1.0", "sha256": "0" * 64, **dep}
    with pytest.raises(DataError, match="'extra' must come from exactly one place") as info:
        registry.parse_ort_versions(data)
    assert info.value.where == "ortdist/data/ort_versions.toml key '\"1.21.0\".deps.extra'"
    assert "pypi_sdist" in (info.value.fix or "") and "file" in (info.value.fix or "")


def test_a_debian_dependency_names_its_suite() -> None:
    """The suite says which Sources index vouches for the pinned sha256 (and goes into the SBOM)."""
    data = copy.deepcopy(registry.load_data("ort_versions.toml"))
    data["1.21.0"]["deps"]["extra"] = {"version": "1.0", "sha256": "0" * 64, "debian": "x", "file": "x_1.0.orig.tar.gz"}
    with pytest.raises(DataError, match="'extra' names no Debian suite") as info:
        registry.parse_ort_versions(data)
    assert info.value.where == "ortdist/data/ort_versions.toml key '\"1.21.0\".deps.extra'"


@pytest.mark.parametrize(
    "dep",
    [
        {"pypi_sdist": "onnx"},
        {"debian": "abseil", "file": "abseil_1.0.orig.tar.gz", "suite": "trixie"},
    ],
)
def test_a_dependency_from_one_place_loads(dep: dict[str, str]) -> None:
    """The check refuses only the ambiguous: either origin alone is accepted."""
    data = copy.deepcopy(registry.load_data("ort_versions.toml"))
    data["1.21.0"]["deps"]["extra"] = {"version": "1.0", "sha256": "0" * 64, **dep}
    extra = registry.parse_ort_versions(data)["1.21.0"].deps[-1]
    assert extra.name == "extra" and extra.project == next(iter(dep.values()))


def test_debian_pool_dir_matches_debians_layout() -> None:
    """lib* packages get their own four-letter pool directory; a dependency's pool path follows it."""
    assert registry.debian_pool_dir("re2") == "pool/main/r/re2"
    assert registry.debian_pool_dir("libsafeint") == "pool/main/libs/libsafeint"
    dep = registry.DependencySource(name="x", version="1", sha256="0" * 64, debian="libx", file="libx_1_all.deb")
    assert dep.pool_path == "pool/main/libx/libx/libx_1_all.deb" and dep.is_deb and dep.project == "libx"


def test_a_target_states_both_wheel_facts_or_neither() -> None:
    data = copy.deepcopy(registry.load_data("targets.toml"))
    data["arm64-apple-darwin"]["wheel_platform"] = ""
    with pytest.raises(DataError, match="both set or both empty") as info:
        registry.parse_targets(data)
    assert info.value.where == "ortdist/data/targets.toml key 'arm64-apple-darwin'"
    data["arm64-apple-darwin"]["triple"] = "x"
    with pytest.raises(DataError, match="unknown key 'triple'"):  # the name is the table's, not a key
        registry.parse_targets(data)


def test_toolchain_kinds_say_whether_builds_have_a_root() -> None:
    kinds = registry.toolchain_kinds()
    assert {name: kind.root for name, kind in kinds.items()} == {
        "debian-sysroot": True,
        "xcode": False,
        "msvc": False,
        "android-ndk": False,
    }
    with pytest.raises(DataError, match="must be true or false") as info:
        registry.parse_toolchain_kinds({"xcode": {"root": "no"}})
    assert info.value.where == "ortdist/data/toolchain_kinds.toml key 'xcode.root'"
