"""The wheel step: the package ORT laid out, staged per CPython (extra versions with their own
binding), provider RUNPATHs set, built by scikit-build-core in the root and re-tagged."""

from __future__ import annotations

import json
import re
import tomllib
import zipfile

import pytest

from ortdist.checks.interface import imports
from ortdist.elffile import read_needs
from ortdist.errors import PackageError
from ortdist.pipeline.runner import Command
from ortdist.pipeline.state import Bindings, PerPython
from ortdist.pipeline.steps import wheel
from ortdist.wheel.record import record_line

from ..test_elf import shared_object
from .conftest import MakeEnv
from .helpers import StepEnv, arg_after, host_of, make_wheel

# A binding as the linker makes it with patch 0017: it needs libonnxruntime by its soname.
LINKED = ("libonnxruntime.so.1", "libstdc++.so.6", "libc.so.6")
MARK = b"|binding for "
# What a binding imports: from ONNX Runtime (the library exports it), libstdc++ and Python.
CREATE = "_ZN11onnxruntime11Environment6CreateEv"
IMPORTS = (CREATE, "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE7reserveEm", "PyErr_Occurred")


def binding(python: str, needed: tuple[str, ...] = LINKED) -> bytes:
    return shared_object(needed, imports=IMPORTS) + MARK + python.encode()


def runtime(exports: tuple[str, ...] = ("OrtGetApiBase", CREATE)) -> bytes:
    return shared_object(("libc.so.6",), soname="libonnxruntime.so.1", exports=exports)


def replace_needed(cmd: Command) -> None:
    """patchelf --replace-needed OLD NEW FILE on the test's ELF: the same file needing NEW."""
    old, new, path = cmd.argv[-3:]
    module = host_of(cmd, path)
    data = module.read_bytes()
    needed = tuple(new if n == old else n for n in read_needs(data).needed)
    module.write_bytes(shared_object(needed, imports=tuple(sorted(imports(data)))) + MARK + data.split(MARK)[1])


def ready(
    env: StepEnv, providers: tuple[str, ...] = (), needed: tuple[str, ...] = LINKED, library: bytes = runtime()
) -> StepEnv:
    env.put_roots()
    env.put_source()
    capi = env.layout.build.host / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (capi.parent / "__init__.py").write_text("")
    (capi / "onnxruntime_pybind11_state.so").write_bytes(binding("3.13", needed))
    (capi / "libonnxruntime.so.1.21.0").write_bytes(library)
    for name in providers:
        (capi / name).write_bytes(b"provider")
    env.layout.work.host.mkdir(parents=True, exist_ok=True)
    env.runner.on("/bin/pip wheel", scikit_build_core)
    env.runner.on("patchelf --replace-needed", replace_needed)
    return env


def scikit_build_core(cmd: Command) -> None:
    """Packs the directory the generated project points at, tagged for the root's own CPython."""
    project = host_of(cmd, cmd.argv[-1])
    package_dir = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["scikit-build"]["cmake"]["define"][
        "ORTDIST_PACKAGE_DIR"
    ]
    package = host_of(cmd, package_dir)
    members = {f"onnxruntime/{p.relative_to(package)}": p.read_bytes() for p in package.rglob("*") if p.is_file()}
    dist = re.search(r'^name = "(.+)"$', (project / "pyproject.toml").read_text(), re.M)
    assert dist is not None
    make_wheel(
        host_of(cmd, arg_after(cmd, "--wheel-dir")),
        f"{dist[1].replace('-', '_')}-1.21.0-cp313-cp313-linux_x86_64.whl",
        members,
    )


def with_extra_binding(env: StepEnv) -> StepEnv:
    module = env.layout.work.host / "binding-3.11" / "onnxruntime_pybind11_state.so"
    module.parent.mkdir(parents=True)
    module.write_bytes(binding("3.11"))
    env.state.put(Bindings(modules={"3.11": module}, times=PerPython("binding_s", {"3.11": 1.0}, timed=True)))
    return env


def test_one_wheel_per_python_each_with_its_own_binding(make_env: MakeEnv) -> None:
    """scikit-build-core packs the first version's stage; the other version's wheel is that wheel
    with its own binding, stripped the same way, and its own tag: one pip run for five wheels."""
    env = with_extra_binding(ready(make_env("cpu-linux", python=("3.13", "3.11"))))
    out = wheel.run(env.ctx, env.state)
    commands = env.runner.commands
    (main,) = [c for c in commands if c.argv[1:2] == ("wheel",)]
    strips = {c.argv[-1]: commands.index(c) for c in commands if c.argv[:2] == ("strip", "-s")}
    # stripped as auditwheel --strip would, before scikit-build-core packs it
    staged = "/ortdist/work/stage/onnxruntime/capi/onnxruntime_pybind11_state.so"
    assert strips.keys() == {staged, "/ortdist/work/wheel/binding-3.11/onnxruntime_pybind11_state.so"}
    assert strips[staged] < commands.index(main)
    assert main.argv[1:] == (
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--no-cache-dir",
        "--wheel-dir",
        "/ortdist/work/wheel/raw",
        "/ortdist/work/wheelproj",
    )
    assert main.argv[0] == "/opt/ortdist-tools/bin/pip" and main.root == env.state.roots.build
    assert out.raw["3.13"].name == "onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl"
    assert out.raw["3.11"] == env.layout.work.host / "wheel" / "raw-3.11" / (
        "onnxruntime-1.21.0-cp311-cp311-linux_x86_64.whl"
    )
    with zipfile.ZipFile(out.raw["3.13"]) as zf:
        packed = zf.read("onnxruntime/capi/onnxruntime_pybind11_state.so")
        assert packed.endswith(MARK + b"3.13")
        # one runtime per wheel: the binding names the library under the file name the wheel has
        assert read_needs(packed).needed == ("libonnxruntime.so.1.21.0", "libstdc++.so.6", "libc.so.6")
        record = json.loads(zf.read("onnxruntime/ortdist_build.json"))
        info = zf.read("onnxruntime/capi/build_and_package_info.py").decode()
        first = {n: zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(out.raw["3.11"]) as zf:
        other = {n: zf.read(n) for n in zf.namelist()}
    swapped = other["onnxruntime/capi/onnxruntime_pybind11_state.so"]
    assert swapped.endswith(MARK + b"3.11") and "libonnxruntime.so.1.21.0" in read_needs(swapped).needed
    assert "Tag: cp311-cp311-linux_x86_64" in other["onnxruntime-1.21.0.dist-info/WHEEL"].decode()
    changed = {n for n in first if first[n] != other[n]}
    assert changed == {"onnxruntime/capi/onnxruntime_pybind11_state.so"} | {
        f"onnxruntime-1.21.0.dist-info/{n}" for n in ("WHEEL", "RECORD")
    }
    assert record_line("onnxruntime/capi/onnxruntime_pybind11_state.so", swapped) in (
        other["onnxruntime-1.21.0.dist-info/RECORD"].decode().splitlines()
    )
    assert record["recipe"] == "cpu-linux" and record["recipe_sha256"] == env.ctx.recipe_sha256
    assert record["source"] == {"kind": "debian", "sha256": "ab" * 32}  # the source step's sha256
    assert "package_name = 'onnxruntime'" in info
    assert (env.layout.work.host / "wheelproj" / "LICENSE").read_text() == "LICENSE text\n"
    assert out.times.key == "wheel_s" and out.times.timed and set(out.times.seconds) == {"3.13", "3.11"}
    assert out.manifest() == {"wheel_swapped_binding": ["3.11"]}


def test_a_binding_that_carries_its_own_runtime_is_refused(make_env: MakeEnv) -> None:
    """With one runtime per wheel the binding must need the library beside it; one linked the old
    way (all of ONNX Runtime inside, no libonnxruntime in DT_NEEDED) is refused, naming why."""
    env = ready(make_env("cpu-linux", python=("3.13",)), needed=("libstdc++.so.6", "libc.so.6"))
    with pytest.raises(PackageError) as info:
        wheel.run(env.ctx, env.state)
    assert "onnxruntime_pybind11_state.so does not link libonnxruntime.so.1.21.0" in str(info.value)
    assert "onnxruntime_PYBIND_USE_SHARED_LIB=ON" in info.value.fix


def test_a_binding_importing_what_the_library_does_not_export_is_refused(make_env: MakeEnv) -> None:
    """It would fail only when Python loads it: an aarch64 CPython's binding, checked from its ELF
    files alone, would ship that way. libstdc++'s and Python's imports are not the library's."""
    env = ready(make_env("cpu-linux", python=("3.13",)), library=runtime(exports=("OrtGetApiBase",)))
    with pytest.raises(PackageError) as info:
        wheel.run(env.ctx, env.state)
    assert f"imports 1 ONNX Runtime symbol(s) libonnxruntime.so.1.21.0 does not export ({CREATE})" in str(info.value)


def test_a_recipe_that_keeps_two_runtimes_leaves_the_binding_as_linked(make_env: MakeEnv) -> None:
    """cpu-linux-gcc14-lto links the binding as PyPI's is (a whole-program optimization with the
    runtime): no define, no patchelf, and a binding without the library is what it should be."""
    env = ready(make_env("cpu-linux-gcc14-lto", python=("3.13",)), needed=("libstdc++.so.6", "libc.so.6"))
    assert "onnxruntime_PYBIND_USE_SHARED_LIB" not in env.ctx.plan.cmake_defines
    wheel.run(env.ctx, env.state)
    assert not [c for c in env.runner.commands if c.argv[:2] == ("patchelf", "--replace-needed")]


def test_a_binding_not_packed_as_staged_gets_its_own_wheel_build(make_env: MakeEnv) -> None:
    """Should scikit-build-core change the binding it packs, swapping another one in would not make
    the wheel it makes: each version is then staged and built on its own, as before."""
    env = with_extra_binding(ready(make_env("cpu-linux", python=("3.13", "3.11"))))

    def changes_the_binding(cmd: Command) -> None:
        scikit_build_core(cmd)
        raw = host_of(cmd, arg_after(cmd, "--wheel-dir"))
        (whl,) = raw.glob("*.whl")
        members = {}
        with zipfile.ZipFile(whl) as zf:
            members = {n: zf.read(n) for n in zf.namelist() if not n.startswith("onnxruntime-1.21.0.dist-info/")}
        whl.unlink()
        members["onnxruntime/capi/onnxruntime_pybind11_state.so"] += b" (changed)"
        make_wheel(raw, whl.name, members)

    env.runner.on("/bin/pip wheel", changes_the_binding)
    out = wheel.run(env.ctx, env.state)
    builds = sorted(c.argv[-1] for c in env.runner.commands if c.argv[1:2] == ("wheel",))
    assert builds == ["/ortdist/work/wheelproj", "/ortdist/work/wheelproj-3.11"]
    with zipfile.ZipFile(out.raw["3.11"]) as zf:
        assert zf.read("onnxruntime/capi/onnxruntime_pybind11_state.so").endswith(MARK + b"3.11 (changed)")
        assert "Tag: cp311-cp311-linux_x86_64" in zf.read("onnxruntime-1.21.0.dist-info/WHEEL").decode()
    assert out.manifest() == {}


def test_a_build_without_the_package_layout_is_refused(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux", python=("3.13",))
    env.put_roots()
    env.put_source()
    with pytest.raises(PackageError, match="pybind post-build step lays out the package"):
        wheel.run(env.ctx, env.state)
    assert env.runner.commands == []


def test_the_cuda_provider_gets_a_runpath_into_nvidias_wheels(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux", python=("3.13",)), providers=("libonnxruntime_providers_cuda.so",))
    out = wheel.run(env.ctx, env.state)
    patchelf, named, strip, build = env.runner.commands
    assert patchelf.argv[:2] == ("patchelf", "--set-rpath")
    assert named.argv[:-1] == ("patchelf", "--replace-needed", "libonnxruntime.so.1", "libonnxruntime.so.1.21.0")
    assert strip.argv[:2] == ("strip", "-s") and patchelf.argv[3] in strip.argv  # after its RUNPATH is set
    runpath = patchelf.argv[2].split(":")
    assert runpath[0] == "$ORIGIN" and "$ORIGIN/../../nvidia/cudnn/lib" in runpath
    assert "$ORIGIN/../../nvidia/cuda_runtime/lib" in runpath
    assert patchelf.argv[3] == "/ortdist/work/stage/onnxruntime/capi/libonnxruntime_providers_cuda.so"
    assert host_of(patchelf, patchelf.argv[3]).is_file()  # the staged copy, not the build tree's
    assert build.argv[1] == "wheel"
    assert out.raw["3.13"].name.startswith("onnxruntime_gpu-1.21.0-cp313")
    assert out.times.timed is False  # one Python: nothing to compare
    pyproject = (env.layout.work.host / "wheelproj" / "pyproject.toml").read_text()
    assert 'name = "onnxruntime-gpu"' in pyproject and "nvidia-cudnn-cu12" in pyproject


def test_a_missing_provider_library_is_refused_before_the_wheel_build(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux", python=("3.13",)))
    with pytest.raises(PackageError, match=r"libonnxruntime_providers_cuda\.so is not in the package"):
        wheel.run(env.ctx, env.state)
    assert env.runner.commands == []


def test_the_kept_wheel_serves_an_unchanged_stage_but_not_a_build_asked_to_reuse_nothing(make_env: MakeEnv) -> None:
    """The last scikit-build-core wheel is reused for a stage it packed the same (the patch loop);
    --no-reuse (ctx.reuse false) runs scikit-build-core again."""
    import dataclasses

    env = ready(make_env("cpu-linux", python=("3.13",)))
    pip_runs = lambda: len([c for c in env.runner.commands if c.argv[1:2] == ("wheel",)])  # noqa: E731
    wheel.run(env.ctx, env.state)
    wheel.run(env.ctx, env.state)
    assert pip_runs() == 1
    wheel.run(dataclasses.replace(env.ctx, reuse=False), env.state)
    assert pip_runs() == 2


def test_the_openvino_runtime_is_carried_beside_the_provider_unrenamed(make_env: MakeEnv) -> None:
    """[ep_bundle] files come from the root's unpacked wheels into capi/ under their own names, and
    the provider gets a RUNPATH of its own directory to find them."""
    env = ready(make_env("openvino-linux", python=("3.13",)), providers=("libonnxruntime_providers_openvino.so",))
    files = env.plan.toolchain.ep_bundle["openvino"]
    for relative in files:
        source = env.ctx.layout.host_path(f"/opt/ortdist-wheels/{relative}", env.state.roots)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(f"vendor {relative}".encode())
    out = wheel.run(env.ctx, env.state)
    patchelf = env.runner.commands[0]
    assert patchelf.argv == (
        "patchelf",
        "--set-rpath",
        "$ORIGIN",
        "/ortdist/work/stage/onnxruntime/capi/libonnxruntime_providers_openvino.so",
    )
    with zipfile.ZipFile(out.raw["3.13"]) as zf:
        assert zf.read("onnxruntime/capi/libopenvino.so.2500") == b"vendor openvino/openvino/libs/libopenvino.so.2500"
        assert {f"onnxruntime/capi/{r.rsplit('/', 1)[1]}" for r in files} <= set(zf.namelist())
    assert out.raw["3.13"].name.startswith("onnxruntime_openvino-1.21.0-cp313")


def test_a_bundled_file_missing_from_the_root_is_refused_before_the_wheel_build(make_env: MakeEnv) -> None:
    env = ready(make_env("openvino-linux", python=("3.13",)), providers=("libonnxruntime_providers_openvino.so",))
    with pytest.raises(PackageError, match=r"\[ep_bundle.openvino\] openvino/openvino/libs/libopenvino.so.2500 is not"):
        wheel.run(env.ctx, env.state)
    assert env.runner.commands == []


def test_a_library_with_its_own_copy_of_libstdcxxs_state_is_refused_before_it_is_stripped(make_env: MakeEnv) -> None:
    """On a [libstdcxx] toolchain each staged library of ours is read for libstdc++'s data of its own
    (the first OpenVINO build's libonnxruntime.so had the old ABI's empty string), before strip."""
    from ..test_cxx_state import OURS, SECTIONS, STUB

    env = ready(make_env("openvino-linux", python=("3.13",)), providers=("libonnxruntime_providers_openvino.so",))
    for relative in env.plan.toolchain.ep_bundle["openvino"]:
        source = env.ctx.layout.host_path(f"/opt/ortdist-wheels/{relative}", env.state.roots)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(b"vendor")
    env.runner.on("readelf --dyn-syms", stdout=STUB)
    env.runner.on("readelf -SW", stdout=SECTIONS)
    env.runner.on("readelf -sW /ortdist/work/stage/onnxruntime/capi/libonnxruntime_providers_openvino.so", stdout=OURS)
    with pytest.raises(PackageError, match=r"libonnxruntime_providers_openvino\.so hold their own copy") as err:
        wheel.run(env.ctx, env.state)
    assert "_ZNSs4_Rep20_S_empty_rep_storageE" in err.value.message
    assert not env.matching("strip -s") and not env.matching(
        "readelf -sW /ortdist/work/stage/onnxruntime/capi/libopenvino"
    )
