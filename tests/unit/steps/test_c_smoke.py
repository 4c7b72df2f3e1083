"""The C smoke step: a C program linked against nothing but libonnxruntime.a, its DT_NEEDED
checked, run on the recipe's models in the clean root (or under the emulator), outputs compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortdist.errors import CheckError
from ortdist.pipeline.runner import Command, Effect, Result
from ortdist.pipeline.state import StaticLibrary
from ortdist.pipeline.steps import c_smoke
from ortdist.smoke.models import BUILDERS
from ortdist.toolchains import Bind

from .conftest import MakeEnv
from .helpers import StepEnv, host_of

NEEDED = " 0x1 (NEEDED)  Shared library: [libm.so.6]\n 0x1 (NEEDED)  Shared library: [libc.so.6]\n"


def ready(env: StepEnv, needed: str = NEEDED) -> StepEnv:
    env.put_roots()
    env.put_source()
    stage = env.layout.work.host / "static"
    (stage / "lib").mkdir(parents=True, exist_ok=True)
    (stage / "lib" / "libonnxruntime.a").write_bytes(b"!<arch>\n")
    env.state.put(StaticLibrary(stage=stage, system_libs=("m",), archives_merged={}, bytes=8))
    ort = env.layout.models.host / "ort"
    ort.mkdir(parents=True, exist_ok=True)
    (ort / "cnn.ort").write_bytes(b"ORTM")  # the reduced build's model, as the models step left it

    def links(cmd: Command) -> None:
        smoke = host_of(cmd, "/ortdist/work/c-smoke")
        (smoke / "needed.txt").write_text(needed)
        (smoke / "ort_smoke").write_bytes(b"\x7fELF" + b"\0" * 60)

    env.runner.on("readelf -d ort_smoke", links)
    return env


def runs(outputs: list[np.ndarray[Any, Any]], returncode: int = 0, stderr: str = "") -> Effect:
    """The program: reads its case directory (through the command's binds) and writes out_<i>.bin."""

    def effect(cmd: Command) -> Result:
        case = host_of(cmd, cmd.argv[cmd.argv.index("/ortdist/c-smoke/ort_smoke") + 2])
        assert (case / "cnn.ort").read_bytes() == b"ORTM" and (case / "in_0.bin").is_file()
        for i, array in enumerate(outputs):
            (case / f"out_{i}.bin").write_bytes(np.asarray(array, dtype=np.float32).tobytes())
        return Result(returncode, "", stderr)

    return effect


def reference_logits() -> list[np.ndarray[Any, Any]]:
    return [np.asarray(a, dtype=np.float32) for a in BUILDERS["cnn"]().expected.values()]


def test_the_program_runs_the_models_in_the_clean_root(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"))
    env.runner.on("/ortdist/c-smoke/ort_smoke", runs(reference_logits()))
    out = c_smoke.run(env.ctx, env.state)
    compile_, run = env.runner.commands
    script = compile_.argv[2]
    assert compile_.root == env.state.roots.build
    assert "gcc -O2 -c ort_smoke.c -I/ortdist/work/static/include" in script
    assert "/ortdist/work/static/lib/libonnxruntime.a -static-libstdc++ -static-libgcc" in script
    assert "PKG_CONFIG_PATH=/ortdist/work/static/lib/pkgconfig pkg-config --static" in script
    clean = env.toolchain.base / "clean-root"
    smoke = env.layout.work.host / "c-smoke"
    assert run.root == clean and run.binds == (Bind(smoke, Path("/ortdist/c-smoke")),)  # nothing of the build
    assert run.argv == (
        "/ortdist/c-smoke/ort_smoke",
        "/ortdist/c-smoke/cases/cnn/cnn.ort",
        "/ortdist/c-smoke/cases/cnn",
    )
    assert out.needed == ("libm.so.6", "libc.so.6")
    assert out.binary_bytes == 64
    assert out.models == ({"model": "cnn.ort", "ran": True, "max_abs_err": 0.0},)
    assert not (smoke / "cases").exists()
    assert out.manifest()["c_smoke"]["needed"] == ["libm.so.6", "libc.so.6"]


def test_a_program_that_still_needs_a_shared_library_fails(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"), needed=NEEDED + " 0x1 (NEEDED)  Shared library: [libstdc++.so.6]\n")
    with pytest.raises(CheckError, match=r"still needs libstdc\+\+\.so\.6"):
        c_smoke.run(env.ctx, env.state)
    assert len(env.runner.commands) == 1  # never run


def test_wrong_outputs_and_crashes_fail(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"))
    env.runner.on("/ortdist/c-smoke/ort_smoke", runs([a + 1 for a in reference_logits()]))
    with pytest.raises(CheckError, match="differs from the reference"):
        c_smoke.run(env.ctx, env.state)
    env = ready(make_env("slim-linux"))
    env.runner.on("/ortdist/c-smoke/ort_smoke", runs([], returncode=134, stderr="terminate called\nAborted"))
    with pytest.raises(CheckError, match=r"failed on cnn\.ort \(exit 134\):\n    terminate called\n    Aborted"):
        c_smoke.run(env.ctx, env.state)


def test_a_cross_program_runs_under_the_emulator_in_the_build_root(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux-aarch64"))
    env.runner.on("/ortdist/c-smoke/ort_smoke", runs(reference_logits()))
    c_smoke.run(env.ctx, env.state)
    compile_, run = env.runner.commands
    assert "aarch64-linux-gnu-gcc --sysroot=/ortdist/target -O2" in compile_.argv[2]
    assert "aarch64-linux-gnu-readelf -d ort_smoke" in compile_.argv[2]
    assert run.argv[:3] == ("qemu-aarch64", "-L", "/ortdist/target")
    assert run.root == env.state.roots.build
    binds = {str(b.inside): b.host for b in run.binds}
    assert binds["/ortdist/target"] == env.state.roots.target
    assert binds["/ortdist/c-smoke"] == env.layout.work.host / "c-smoke"
    assert ("clean",) not in env.toolchain.calls
