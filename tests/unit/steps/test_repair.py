"""The repair step: auditwheel with the plan's excludes (a cross target's libraries and strip
from its sysroot), CUDA RUNPATHs verified to survive it, and the SBOM added to each wheel."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from ortdist.errors import PackageError
from ortdist.pipeline.runner import Command
from ortdist.pipeline.state import PerPython, Wheels
from ortdist.pipeline.steps import repair

from .conftest import MakeEnv
from .helpers import StepEnv, arg_after, host_of, make_wheel

GRAFT = "onnxruntime.libs/libgomp-a34b3233.so.1"
CUDA = "onnxruntime/capi/libonnxruntime_providers_cuda.so"


def ready(env: StepEnv, members: dict[str, bytes] | None = None) -> StepEnv:
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
    env.runner.on("auditwheel repair", auditwheel)
    return env


def auditwheel(cmd: Command) -> None:
    """Grafts a system library and gives the wheel its manylinux tag, like auditwheel repair."""
    raw = host_of(cmd, cmd.argv[-1])
    with zipfile.ZipFile(raw) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if ".dist-info/" not in n}
    name = raw.name.replace("linux_", "manylinux_2_39_")
    make_wheel(host_of(cmd, arg_after(cmd, "--wheel-dir")), name, {**members, GRAFT: b"gomp"})


def sbom_of(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/sboms/ortdist.cdx.json")]
        document: dict[str, object] = json.loads(zf.read(name))
        return document


def test_each_wheel_is_repaired_and_gets_an_sbom_naming_its_grafts(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    out = repair.run(env.ctx, env.state)
    repairs = env.matching("auditwheel repair")
    assert [c.argv for c in repairs] == [
        (
            "/opt/ortdist-tools/bin/auditwheel",
            "repair",
            "--wheel-dir",
            f"/ortdist/work/wheel/repaired{sfx}",
            "--strip",
            f"/ortdist/work/wheel/raw{sfx}/onnxruntime-1.21.0-{tag}-{tag}-linux_x86_64.whl",
        )
        for sfx, tag in (("", "cp313"), ("-3.11", "cp311"))
    ]
    assert all(c.root == env.state.roots.build for c in repairs)
    assert len(env.matching("auditwheel show")) == 2
    assert out.wheels["3.11"] == env.layout.work.host / "wheel" / "repaired-3.11" / (
        "onnxruntime-1.21.0-cp311-cp311-manylinux_2_39_x86_64.whl"
    )
    text = json.dumps(sbom_of(out.wheels["3.13"]))
    assert GRAFT in text and "libgomp1" in text and "14.2.0-19" in text  # the package and version it came from
    (first, second) = out.artifacts
    assert (first.kind, first.tag) == ("wheel", "cp313-cp313-manylinux_2_39_x86_64")
    assert first.extra == {
        "execution_providers": ["cpu"],
        "provider_names": ["CPUExecutionProvider"],
        "distribution": "onnxruntime",
        "python": "3.13",
    }
    assert second.extra["python"] == "3.11"
    assert out.times.key == "repair_s" and out.times.timed


def test_cuda_wheels_exclude_the_vendor_runtime_and_keep_their_runpath(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux"), {CUDA: b"provider"})
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
    env = ready(make_env("cuda-linux"), {CUDA: b"provider"})
    env.runner.on("--print-rpath", stdout="$ORIGIN:$ORIGIN/../../onnxruntime_gpu.libs\n")
    with pytest.raises(PackageError, match=r"libonnxruntime_providers_cuda\.so in the repaired wheel .* lost entries"):
        repair.run(env.ctx, env.state)


def test_a_repaired_wheel_without_the_provider_is_refused(make_env: MakeEnv) -> None:
    env = ready(make_env("cuda-linux"))
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
    assert env.only("auditwheel show").argv[0] == "env"
