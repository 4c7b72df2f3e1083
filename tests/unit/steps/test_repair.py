"""The repair step: auditwheel with the plan's excludes (a cross target's libraries and strip
from its sysroot), CUDA RUNPATHs verified to survive it, and the SBOM added to each wheel."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.errors import PackageError
from ortdist.pipeline.runner import Command
from ortdist.pipeline.state import PerPython, Wheels
from ortdist.pipeline.steps import repair

from ..test_elf import shared_object
from .conftest import MakeEnv
from .helpers import StepEnv, arg_after, host_of, make_wheel

GRAFT = "onnxruntime.libs/libgomp-a34b3233.so.1"
CUDA = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
BINDING = "onnxruntime/capi/onnxruntime_pybind11_state.so"
# What auditwheel gives a wheel built against glibc 2.17 (portable-glibc2.17), and one built
# against a newer glibc (debian-trixie's 2.41 allows up to manylinux_2_41).
PORTABLE_TAG = "manylinux_2_17_x86_64.manylinux2014_x86_64"
NEWER_TAG = "manylinux_2_39_x86_64"


def ready(env: StepEnv, members: dict[str, bytes] | None = None, platform: str | None = None) -> StepEnv:
    """Raw wheels for every Python of the plan; auditwheel gives them ``platform``, by default the
    tag a build with the plan's toolchain gets."""
    env.put_roots()
    env.put_source()
    dist = env.plan.distribution.replace("-", "_")
    raw = {}
    for version in env.plan.python:
        sfx = "" if version == env.plan.python[0] else f"-{version}"
        tag = f"cp{version.replace('.', '')}"
        arch = env.plan.target.arch
        raw[version] = make_wheel(
            env.layout.work.host / "wheel" / f"raw{sfx}",
            f"{dist}-1.21.0-{tag}-{tag}-linux_{arch}.whl",
            members or {"onnxruntime/__init__.py": b""},
        )
    env.state.put(Wheels(raw=raw, times=PerPython("wheel_s", {}, timed=False)))
    platform = platform or (PORTABLE_TAG if env.plan.toolchain.glibc == "2.17" else NEWER_TAG)
    env.runner.on("auditwheel repair", auditwheel(platform.replace("x86_64", env.plan.target.arch)))
    return env


def auditwheel(platform: str, graft: bool = True) -> Callable[[Command], None]:
    """Gives the wheel the ``platform`` tag, like auditwheel repair, grafting a system library
    into it (``graft``) or nothing (a wheel that needs none: cpu-linux's)."""

    def repair_wheel(cmd: Command) -> None:
        raw = host_of(cmd, cmd.argv[-1])
        with zipfile.ZipFile(raw) as zf:
            members = {n: zf.read(n) for n in zf.namelist() if ".dist-info/" not in n}
        stem = raw.name.rpartition("-linux_")[0]
        grafted = {GRAFT: b"gomp"} if graft else {}
        make_wheel(host_of(cmd, arg_after(cmd, "--wheel-dir")), f"{stem}-{platform}.whl", {**members, **grafted})

    return repair_wheel


def sbom_of(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/sboms/ortdist.cdx.json")]
        document: dict[str, object] = json.loads(zf.read(name))
        return document


def test_each_wheel_is_repaired_and_gets_an_sbom_naming_its_grafts(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    out = repair.run(env.ctx, env.state)
    # side by side: each version's repair, whatever order they ran in
    repairs = sorted(env.matching("auditwheel repair"), key=lambda c: "-3.11/" in c.argv[-1])
    assert [c.argv for c in repairs] == [
        (
            "/opt/ortdist-tools/bin/auditwheel",
            "repair",
            "--zip-compression-level",
            "0",
            "--wheel-dir",
            f"/ortdist/work/wheel/repaired{sfx}",
            "--strip",
            f"/ortdist/work/wheel/raw{sfx}/onnxruntime-1.21.0-{tag}-{tag}-linux_x86_64.whl",
        )
        for sfx, tag in (("", "cp313"), ("-3.11", "cp311"))
    ]
    assert all(c.root == env.state.roots.build for c in repairs)
    assert not env.matching("auditwheel show")  # a second ELF analysis only when a tag needs explaining
    assert out.wheels["3.11"] == env.layout.work.host / "wheel" / "repaired-3.11" / (
        f"onnxruntime-1.21.0-cp311-cp311-{PORTABLE_TAG}.whl"
    )
    text = json.dumps(sbom_of(out.wheels["3.13"]))
    assert GRAFT in text and "libgomp1" in text and "14.2.0-19" in text  # the package and version it came from
    (first, second) = out.artifacts
    assert (first.kind, first.tag) == ("wheel", f"cp313-cp313-{PORTABLE_TAG}")
    assert first.extra == {
        "execution_providers": ["cpu"],
        "provider_names": ["CPUExecutionProvider"],
        "distribution": "onnxruntime",
        "python": "3.13",
    }
    assert second.extra["python"] == "3.11"
    assert out.times.key == "repair_s" and out.times.timed


def test_a_wheel_tagged_for_a_newer_glibc_than_the_toolchain_promises_is_refused(make_env: MakeEnv) -> None:
    """portable-glibc2.17 promises glibc 2.17: a manylinux_2_39 tag means something linked a newer
    symbol than its sysroot has, so the wheel is refused before it gets an SBOM or is published."""
    env = ready(make_env("cpu-linux", python=("3.13",)), platform=NEWER_TAG)
    with pytest.raises(
        PackageError, match=r"for glibc 2\.39, newer than the 2\.17 toolchain portable-glibc2\.17"
    ) as info:
        repair.run(env.ctx, env.state)
    assert info.value.where == f"onnxruntime-1.21.0-cp313-cp313-{NEWER_TAG}.whl"
    assert "auditwheel show" in (info.value.fix or "")
    # The log the fix points to has auditwheel's account of the symbol versions.
    assert env.only("auditwheel show").argv[-1].endswith("/raw/onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl")
    (repaired,) = (env.layout.work.host / "wheel" / "repaired").iterdir()
    with zipfile.ZipFile(repaired) as zf:
        assert not [n for n in zf.namelist() if n.endswith(".cdx.json")]


def test_a_debian_trixie_wheel_may_need_its_roots_glibc(make_env: MakeEnv) -> None:
    """debian-trixie promises only its own glibc 2.41: manylinux_2_39 is what its wheels get."""
    env = ready(make_env("cpu-linux-gcc14-lto"), platform=NEWER_TAG)
    assert env.plan.toolchain.glibc == "2.41"
    out = repair.run(env.ctx, env.state)
    assert out.wheels["3.13"].name == f"onnxruntime-1.21.0-cp313-cp313-{NEWER_TAG}.whl"
    env = ready(make_env("cpu-linux-gcc14-lto"), platform="manylinux_2_42_x86_64")
    with pytest.raises(PackageError, match=r"glibc 2\.42, newer than the 2\.41 toolchain debian-trixie"):
        repair.run(env.ctx, env.state)


def test_a_cross_wheel_is_held_to_its_targets_glibc(make_env: MakeEnv) -> None:
    """A cross target's sysroot has its own glibc: that one, not the build root's, bounds the tag."""
    base = make_env("slim-linux-aarch64")
    triple = base.plan.target.triple
    cross = dataclasses.replace(base.plan.toolchain.cross_targets[triple], glibc="2.36")
    toolchain = dataclasses.replace(base.plan.toolchain, cross_targets={triple: cross})
    assert toolchain.glibc == "2.41"
    env = ready(make_env("slim-linux-aarch64", toolchain=toolchain), platform="manylinux_2_39_x86_64")
    with pytest.raises(PackageError, match=r"glibc 2\.39, newer than the 2\.36 toolchain debian-trixie"):
        repair.run(env.ctx, env.state)


def cuda_provider(needed: tuple[str, ...] = ("libcudart.so.12", "libc.so.6"), code: bytes | None = None) -> bytes:
    """A CUDA provider library: its needs, and device code (default: SASS for every architecture
    either CUDA recipe ships, sm_60 to sm_120, and compute_90)."""
    from ..test_elf import shared_object
    from ..test_fatbin import container

    release = container([*((2, arch, b"s" * 8) for arch in (60, 70, 75, 80, 86, 89, 90, 100, 120)), (1, 90, b"p" * 8)])
    return shared_object(needed, named={".nv_fatbin": release if code is None else code})


def test_cuda_wheels_exclude_the_vendor_runtime_and_keep_their_runpath(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux", python=("3.13",)), {CUDA: cuda_provider()})
    full = next(ep for ep in env.plan.providers if ep.name == "cuda").pip_library_dirs
    runpath = ":".join(["$ORIGIN", *(f"$ORIGIN/../../{d}" for d in full), "$ORIGIN/../../onnxruntime_gpu.libs"])
    assert runpath.startswith("$ORIGIN:$ORIGIN/../../nvidia/cuda_runtime/lib:")
    env.runner.on("--print-rpath", stdout=runpath + "\n")
    out = repair.run(env.ctx, env.state)
    argv = env.only("auditwheel repair").argv
    excluded = [argv[i + 1] for i, a in enumerate(argv) if a == "--exclude"]
    assert excluded == list(env.plan.repair_excludes) and "libcudart.so.*" in excluded
    probe = env.only("--print-rpath")
    assert probe.argv == ("patchelf", "--print-rpath", "/ortdist/work/wheel/runpath/libonnxruntime_providers_cuda.so")
    assert not (env.layout.work.host / "wheel" / "runpath").exists()
    assert out.artifacts[0].extra["distribution"] == "onnxruntime-gpu"


def test_a_wheel_whose_runpath_lost_entries_is_refused(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux", python=("3.13",)), {CUDA: cuda_provider()})
    env.runner.on("--print-rpath", stdout="$ORIGIN:$ORIGIN/../../onnxruntime_gpu.libs\n")
    with pytest.raises(PackageError, match=r"libonnxruntime_providers_cuda\.so in the repaired wheel .* lost entries"):
        repair.run(env.ctx, env.state)


def test_a_repaired_wheel_without_the_provider_is_refused(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux", python=("3.13",)))
    with pytest.raises(PackageError, match=f"the repaired wheel has no {CUDA}"):
        repair.run(env.ctx, env.state)


def test_a_cross_wheel_is_repaired_with_the_targets_libraries_and_strip(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux-aarch64"))
    repair.run(env.ctx, env.state)
    argv = env.only("auditwheel repair").argv
    assert argv[:3] == (
        "env",
        "LD_LIBRARY_PATH=/ortdist/target/usr/lib/aarch64-linux-gnu",
        "PATH=/ortdist/work/target-tools:/usr/sbin:/usr/bin:/sbin:/bin",
    )
    assert argv[3:5] == ("/opt/ortdist-tools/bin/auditwheel", "repair")
    strip = env.layout.work.host / "target-tools" / "strip"
    assert strip.is_symlink() and str(strip.readlink()) == "/usr/bin/aarch64-linux-gnu-strip"


def test_a_cross_wheel_with_nothing_to_graft_still_gets_the_targets_strip(make_env: MakeEnv) -> None:
    """cpu-linux-aarch64 links everything in (no library_path): auditwheel --strip must still run
    aarch64-linux-gnu-strip, not the root's x86_64 strip ("Unable to recognise the format")."""
    env = ready(make_env("cpu-linux-aarch64", python=("3.13",)))
    repair.run(env.ctx, env.state)
    argv = env.only("auditwheel repair").argv
    assert argv[:2] == ("env", "PATH=/ortdist/work/target-tools:/usr/sbin:/usr/bin:/sbin:/bin")
    assert not [a for a in argv if a.startswith("LD_LIBRARY_PATH=")]
    strip = env.layout.work.host / "target-tools" / "strip"
    assert str(strip.readlink()) == "/usr/bin/aarch64-linux-gnu-strip"
    native = ready(make_env("cpu-linux", python=("3.13",)))
    repair.run(native.ctx, native.state)
    assert native.only("auditwheel repair").argv[0] == "/opt/ortdist-tools/bin/auditwheel"


def test_a_wheel_whose_module_asks_for_an_executable_stack_is_refused(make_env: MakeEnv) -> None:
    """glibc 2.41 will not dlopen it: the repair step refuses it before the clean-root check."""
    from ..test_executable_stack import PF_R, PF_W, PF_X, PT_GNU_STACK, elf64

    module = "onnxruntime/capi/onnxruntime_pybind11_state.so"
    env = ready(make_env("cpu-linux", python=("3.13",)), {module: elf64((PT_GNU_STACK, PF_R | PF_W | PF_X))})
    with pytest.raises(PackageError, match=r"onnxruntime_pybind11_state\.so ask"):
        repair.run(env.ctx, env.state)
    env = ready(make_env("cpu-linux", python=("3.13",)), {module: elf64((PT_GNU_STACK, PF_R | PF_W))})
    repair.run(env.ctx, env.state)


def test_a_wheel_whose_libraries_need_more_than_its_tag_promises_is_refused(make_env: MakeEnv) -> None:
    """The tag says manylinux_2_17; the libraries' own needs decide (read from their bytes)."""
    from ..test_elf import shared_object

    module = "onnxruntime/capi/onnxruntime_pybind11_state.so"
    newer = shared_object(versions={"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.28")})
    env = ready(make_env("cpu-linux", python=("3.13",)), {module: newer})
    with pytest.raises(
        PackageError, match=r"onnxruntime_pybind11_state\.so: needs GLIBC_2\.28 from libc\.so\.6"
    ) as info:
        repair.run(env.ctx, env.state)
    assert info.value.where == f"onnxruntime-1.21.0-cp313-cp313-{PORTABLE_TAG}.whl"
    env = ready(make_env("cpu-linux", python=("3.13",)), {module: shared_object()})
    repair.run(env.ctx, env.state)


def test_a_cuda_wheel_may_need_libgcc_s_and_the_cuda_runtime(make_env: MakeEnv) -> None:
    provider = cuda_provider(("libcudart.so.13", "libcublasLt.so.13", "libgcc_s.so.1", "libc.so.6"))
    env = ready(make_env("cuda13-linux", python=("3.13",)), {CUDA: provider})
    dirs = next(ep for ep in env.plan.providers if ep.name == "cuda").pip_library_dirs
    env.runner.on("--print-rpath", stdout=":".join(["$ORIGIN", *(f"$ORIGIN/../../{d}" for d in dirs)]) + "\n")
    repair.run(env.ctx, env.state)
    env = ready(make_env("cpu-linux", python=("3.13",)), {CUDA: provider})
    with pytest.raises(PackageError, match=r"needs libcudart\.so\.13") as info:
        repair.run(env.ctx, env.state)
    assert "needs libgcc_s.so.1" in str(info.value)  # cpu-linux links libgcc statically


def test_auditwheel_runs_once_when_it_only_retags_and_every_binding_needs_the_same(make_env: MakeEnv) -> None:
    """cpu-linux grafts nothing: auditwheel repairs the first version's wheel, the others are that
    repair applied to their own files, each still checked against the promise and given an SBOM."""
    env = ready(make_env("cpu-linux", python=("3.13", "3.11", "3.12")), members={BINDING: shared_object()})
    env.runner.on("auditwheel repair", auditwheel(PORTABLE_TAG, graft=False))
    out = repair.run(env.ctx, env.state)
    (only,) = env.matching("auditwheel repair")
    assert only.argv[-1] == "/ortdist/work/wheel/raw/onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl"
    assert out.manifest() == {"repair": {"3.13": "auditwheel", "3.11": "derived", "3.12": "derived"}}
    for version, wheel in out.wheels.items():
        tag = f"cp{version.replace('.', '')}"
        assert wheel.name == f"onnxruntime-1.21.0-{tag}-{tag}-{PORTABLE_TAG}.whl"
        assert sbom_of(wheel)["metadata"]["component"]["description"] == f"wheel {wheel.name}"  # type: ignore[index]


def test_a_version_whose_binding_needs_more_is_repaired_by_auditwheel(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")), members={BINDING: shared_object()})
    newer = shared_object(versions={"libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.17"), "libm.so.6": ("GLIBC_2.2.5",)})
    other = env.state.get(Wheels).raw["3.11"]
    other.unlink()
    make_wheel(other.parent, other.name, {BINDING: newer})
    env.runner.on("auditwheel repair", auditwheel(PORTABLE_TAG, graft=False))
    out = repair.run(env.ctx, env.state)
    assert len(env.matching("auditwheel repair")) == 2
    assert out.manifest() == {"repair": {"3.13": "auditwheel", "3.11": "auditwheel"}}


def test_the_kept_repair_serves_a_rebuild_but_not_one_asked_to_reuse_nothing(make_env: MakeEnv) -> None:
    """A raw wheel like the last one is derived from the kept repair (the patch loop); --no-reuse
    (ctx.reuse false) runs auditwheel again, so a test of the repair sees auditwheel's own work."""
    import dataclasses

    env = ready(make_env("cpu-linux", python=("3.13",)))
    env.runner.on("auditwheel repair", auditwheel(PORTABLE_TAG, graft=False))
    assert repair.run(env.ctx, env.state).how == {"3.13": "auditwheel"}
    assert repair.run(env.ctx, env.state).how == {"3.13": "derived-kept"}
    assert len(env.matching("auditwheel repair")) == 1
    fresh = dataclasses.replace(env.ctx, reuse=False)
    assert repair.run(fresh, env.state).how == {"3.13": "auditwheel"}
    assert len(env.matching("auditwheel repair")) == 2


def test_a_cuda_wheel_without_code_for_a_promised_architecture_is_refused(make_env: MakeEnv) -> None:
    """cuda13-linux promises SASS from sm_75 to sm_120 and compute_90: a provider built for sm_80 and
    sm_86 alone, or with no device code at all, is refused, naming what it lacks."""
    from ..test_fatbin import container

    dirs = next(ep for ep in make_env("cuda13-linux").plan.providers if ep.name == "cuda").pip_library_dirs
    runpath = ":".join(["$ORIGIN", *(f"$ORIGIN/../../{d}" for d in dirs)]) + "\n"
    ampere = cuda_provider(("libcudart.so.13", "libc.so.6"), container([(2, 80, b"s" * 8), (2, 86, b"s" * 8)]))
    env = ready(make_env("cuda13-linux", python=("3.13",)), {CUDA: ampere})
    env.runner.on("--print-rpath", stdout=runpath)
    with pytest.raises(PackageError, match="lacks architectures the recipe promises") as info:
        repair.run(env.ctx, env.state)
    assert f"{CUDA}: no sm_75, sm_89, sm_90, compute_90, sm_100, sm_120" in str(
        info.value
    ) and info.value.where.endswith(".whl")
    env = ready(make_env("cuda13-linux", python=("3.13",)), {CUDA: cuda_provider(("libc.so.6",), b"")})
    env.runner.on("--print-rpath", stdout=runpath)
    with pytest.raises(PackageError, match="no library in it carries CUDA device code"):
        repair.run(env.ctx, env.state)


OPENVINO = "onnxruntime/capi/libonnxruntime_providers_openvino.so"


def openvino_members(env: StepEnv, leave_out: str = "") -> dict[str, bytes]:
    carried = [f.rsplit("/", 1)[1] for f in env.plan.toolchain.ep_bundle["openvino"]]
    vendor = {f"onnxruntime/capi/{name}": shared_object(["libc.so.6"]) for name in carried if name != leave_out}
    return {OPENVINO: shared_object(["libopenvino.so.2500", "libstdc++.so.6", "libc.so.6"]), **vendor}


def test_the_carried_openvino_runtime_is_not_grafted_and_must_survive_the_repair(make_env: MakeEnv) -> None:
    env = make_env("openvino-linux", python=("3.13",))
    ready(env, openvino_members(env))
    env.runner.on("--print-rpath", stdout="$ORIGIN\n")
    repair.run(env.ctx, env.state)
    argv = env.only("auditwheel repair").argv
    excluded = [argv[i + 1] for i, a in enumerate(argv) if a == "--exclude"]
    assert {"libopenvino.so.2500", "libtbb.so.12", "libopenvino_intel_cpu_plugin.so"} <= set(excluded)
    assert env.only("--print-rpath").argv[-1].endswith("/libonnxruntime_providers_openvino.so")


def test_a_repaired_wheel_that_lost_a_carried_library_is_refused(make_env: MakeEnv) -> None:
    env = make_env("openvino-linux", python=("3.13",))
    ready(env, openvino_members(env, leave_out="libtbb.so.12"))
    env.runner.on("--print-rpath", stdout="$ORIGIN\n")
    with pytest.raises(PackageError, match=r"lacks libtbb.so.12 of \[ep_bundle.openvino\]"):
        repair.run(env.ctx, env.state)
