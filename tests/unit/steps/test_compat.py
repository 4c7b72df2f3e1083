"""The compat step: in each older Debian root of the toolchain's [compat.*], offline, the root's gcc
compiles the C program against the shipped C library (ldd and outputs judged), and the root's
CPython installs the build's wheel and runs the reference models; failures name the root and log."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import shutil
import tarfile
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pytest

from ortdist.checks.compat import c_build_script, glibc_version, ldd_lines, ldd_problems, parse_facts
from ortdist.errors import CheckError, ToolchainError
from ortdist.fsutil import deterministic_tarball
from ortdist.paths import Cache
from ortdist.pipeline.runner import Command, Effect, Result
from ortdist.pipeline.state import CLibrary, PerPython, Repaired
from ortdist.pipeline.steps import compat
from ortdist.smoke.models import BUILDERS
from ortdist.toolchains.spec import CompatRoot

from .conftest import MakeEnv
from .helpers import FakeToolchain, StepEnv, host_of, make_wheel

GCC = "gcc (Debian 10.2.1-6) 10.2.1 20210110"
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd2b5f2000)
\tlibonnxruntime.so.1 => /ortdist/library/lib/libonnxruntime.so.1 (0x00007f0e5c000000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e5be2b000)
\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f0e5bc5e000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e5e9e2000)
"""


RESOLVE = compat.mirror_endpoint  # the real one; the fixture below stands in for it in the step
MIRROR = ("192.0.2.7", 80)  # TEST-NET-1: what the host resolved the toolchain's mirror to


@pytest.fixture(autouse=True)
def _mirror_resolved_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "mirror_endpoint", lambda url: MIRROR if url.startswith("http") else None)


def ready(env: StepEnv, ldd: str = LDD, wheels: tuple[str, ...] = ("3.13", "3.11")) -> StepEnv:
    """What earlier steps left: the C library archive as install made it, the repaired wheels."""
    env.put_roots()
    env.put_source()
    tree = env.layout.work.host / "install"
    shutil.rmtree(tree, ignore_errors=True)  # a test may make a second env over the same tmp_path
    (tree / "include" / "onnxruntime").mkdir(parents=True)
    (tree / "include" / "onnxruntime" / "onnxruntime_c_api.h").write_text("/* C API */\n")
    (tree / "lib").mkdir()
    (tree / "lib" / "libonnxruntime.so.1.21.0").write_bytes(b"\x7fELF")
    (tree / "lib" / "libonnxruntime.so.1").symlink_to("libonnxruntime.so.1.21.0")
    (tree / "lib" / "libonnxruntime.so").symlink_to("libonnxruntime.so.1")
    archive = env.layout.out.host / "onnxruntime-cpu-linux-1.21.0.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    deterministic_tarball(tree, archive, "onnxruntime-cpu-linux-1.21.0", 1_700_000_000)
    env.state.put(CLibrary(archive=archive))
    repaired = {}
    for version in wheels:
        tag = f"cp{version.replace('.', '')}"
        name = f"onnxruntime-1.21.0-{tag}-{tag}-manylinux_2_17_x86_64.whl"
        repaired[version] = make_wheel(env.layout.work.host / "wheel" / f"repaired-{version}", name, {})
    env.state.put(Repaired(wheels=repaired, times=PerPython("repair_s", {}, timed=False)))
    env.runner.on("gcc --version", stdout=f"ortdist-fact gcc {GCC}\nortdist-fact glibc glibc 2.31\n")
    env.runner.on("python3.11 --version", stdout="ortdist-fact python Python 3.11.2\nortdist-fact glibc glibc 2.36\n")
    env.runner.on("ldd /ortdist/compat/ort_smoke", stdout=ldd)
    env.runner.on("/dev/tcp/", stdout="bash: connect: Network is unreachable\n")
    env.runner.on("cases/cnn/cnn.onnx", program(reference_outputs()))
    env.runner.on("runner.py plan.json result.json", smoke_runner())
    return env


def reference_outputs() -> list[np.ndarray[Any, Any]]:
    return [np.asarray(a, dtype=np.float32) for a in BUILDERS["cnn"]().expected.values()]


def program(outputs: list[np.ndarray[Any, Any]], returncode: int = 0) -> Effect:
    """ort_smoke in the root: reads its case directory through the binds, writes out_<i>.bin."""

    def effect(cmd: Command) -> Result:
        case = host_of(cmd, shlex.split(cmd.argv[-1])[-1])
        assert (case / "cnn.onnx").is_file() and (case / "in_0.bin").is_file()
        for i, array in enumerate(outputs):
            (case / f"out_{i}.bin").write_bytes(np.asarray(array, dtype=np.float32).tobytes())
        return Result(returncode, "onnxruntime 1.21.0\n")

    return effect


def smoke_runner(status: str = "ok", outputs_ok: bool = True, import_error: str = "") -> Effect:
    """The smoke runner in the venv: every case of the plan.json it was given, run as told."""

    def effect(cmd: Command) -> Result:
        work = host_of(cmd, "/ortdist/compat")
        plan = json.loads((work / "plan.json").read_text())
        if import_error:
            (work / "result.json").write_text(json.dumps({"cases": [], "import_error": import_error}))
            return Result(1, import_error)
        cases = [
            {k: case[k] for k in ("suite", "name", "provider", "must_take", "expect_error", "refused_ops")}
            | {"status": status, "outputs_ok": outputs_ok, "max_abs_err": 0.0 if outputs_ok else 0.5}
            | {"placement": {"n0": case["provider"]}, "share": 1.0, "seconds": 0.01, "error": "boom"}
            for case in plan["cases"]
        ]
        result = {"version": "1.21.0", "available_providers": ["CPUExecutionProvider"], "cases": cases}
        (work / "result.json").write_text(json.dumps(result))
        return Result(0)

    return effect


def script(cmd: Command) -> str:
    assert cmd.argv[:5] == ("unshare", "--net", "--", "/bin/sh", "-c"), cmd.argv  # offline, always
    return cmd.argv[-1]


def test_both_roots_prove_the_build_offline(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    assert env.plan.steps[env.plan.steps.index("check") + 1] == "compat"
    out = compat.run(env.ctx, env.state)
    assert env.toolchain.calls == [("compat", "bullseye-c", "bullseye"), ("compat", "bookworm-wheel", "bookworm")]
    bullseye, bookworm = env.toolchain.base / "compat-bullseye-c", env.toolchain.base / "compat-bookworm-wheel"
    in_root = [c for c in env.runner.commands if c.root is not None]
    assert {c.root for c in in_root} == {bullseye, bookworm}  # nothing in the build or clean root
    assert all(script(c) for c in in_root)

    # check "c": the root's gcc against the shipped library, bound read-only, found through the RUNPATH
    build = env.only("gcc -O2")
    assert build.root == bullseye
    assert script(build) == (
        "cd /ortdist/compat && gcc -O2 -o ort_smoke ort_smoke.c -I/ortdist/library/include "
        "-L/ortdist/library/lib -lonnxruntime -Wl,-rpath,/ortdist/library/lib"
    )
    binds = {str(b.inside): b for b in build.binds}
    assert set(binds) == {"/ortdist/compat", "/ortdist/library"}  # nothing of the build tree or its root
    library = binds["/ortdist/library"]
    assert library.read_only and (library.host / "lib" / "libonnxruntime.so").resolve().name == (
        "libonnxruntime.so.1.21.0"
    )  # the archive this build ships, unpacked
    assert (library.host / "include" / "onnxruntime" / "onnxruntime_c_api.h").is_file()
    assert (host_of(build, "/ortdist/compat") / "ort_smoke.c").read_text().startswith("/* ortdist's C smoke program")
    run_cnn = env.only("cases/cnn/cnn.onnx")
    assert script(run_cnn) == "/ortdist/compat/ort_smoke /ortdist/compat/cases/cnn/cnn.onnx /ortdist/compat/cases/cnn"
    assert "LD_LIBRARY_PATH" not in script(run_cnn) and not run_cnn.env

    # check "wheel": bookworm's own CPython, the cp311 wheel, --no-index from the wheelhouse
    install = env.only("-m venv")
    assert install.root == bookworm
    assert script(install) == (
        "/usr/bin/python3.11 -m venv /ortdist/venv && /ortdist/venv/bin/python -m pip install --quiet --no-compile "
        "--no-index --find-links /ortdist/wheelhouse "
        "/ortdist/wheel/onnxruntime-1.21.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    )
    binds = {str(b.inside): b for b in install.binds}
    assert binds["/ortdist/wheel"].host == env.state.get(Repaired).wheels["3.11"].parent
    assert binds["/ortdist/wheel"].read_only and binds["/ortdist/wheelhouse"].read_only
    assert binds["/ortdist/wheelhouse"].host == env.ctx.cache.wheelhouse("3.11")
    assert install.env == {"PYTHONDONTWRITEBYTECODE": "1"}
    (download,) = [c for c in env.matching("pip download") if "--no-index" in c.argv]
    assert download.root is None and "--python-version" in download.argv and "3.11" in download.argv
    plan = json.loads((env.layout.work.host / "compat" / "bookworm-wheel" / "files" / "plan.json").read_text())
    assert {c["suite"] for c in plan["cases"]} == {"model"}  # reference models only, no node tests
    assert sorted({c["name"] for c in plan["cases"]}) == sorted(BUILDERS)
    assert {c["provider"] for c in plan["cases"]} == {"CPUExecutionProvider"}
    assert not (env.layout.recipe_work / "compat-venv-bookworm-wheel").exists()

    (c_result, wheel_result) = out.manifest()["compat"]
    assert c_result["name"] == "bullseye-c" and c_result["suite"] == "bullseye" and c_result["check"] == "c"
    assert c_result["ok"] is True and c_result["glibc"] == "2.31" and isinstance(c_result["seconds"], float)
    assert c_result["details"]["network"] == "unreachable from the root: bash: connect: Network is unreachable"
    assert c_result["root"] == "compat-bullseye-c"
    assert c_result["details"]["gcc"] == GCC
    assert "libonnxruntime.so.1 => /ortdist/library/lib/libonnxruntime.so.1" in c_result["details"]["ldd"]
    assert c_result["details"]["models"] == [{"model": "cnn.onnx", "ran": True, "max_abs_err": 0.0}]
    assert wheel_result["name"] == "bookworm-wheel" and wheel_result["glibc"] == "2.36"
    details = wheel_result["details"]
    assert details["python"] == "Python 3.11.2" and details["available_providers"] == ["CPUExecutionProvider"]
    assert details["wheel"].startswith("onnxruntime-1.21.0-cp311-")
    assert {m["name"] for m in details["models"]} == set(BUILDERS) and all(m["passed"] for m in details["models"])


def test_a_recipe_without_the_wheel_or_library_is_refused_before_any_root_is_made(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13",)), wheels=("3.13",))
    with pytest.raises(CheckError) as info:
        compat.run(env.ctx, env.state)
    message = str(info.value)
    assert "compat root 'bookworm-wheel' (Debian bookworm): the recipe ships no cp311 wheel" in message
    assert "its wheels: cp313" in message and "[wheel] key 'python'" in message
    assert 'add "3.11" to [wheel] python' in message
    assert env.toolchain.calls == [] and env.runner.commands == []
    env = make_env("cpu-linux")
    env.put_roots()
    env.state.put(Repaired(wheels={}, times=PerPython("repair_s", {}, timed=False)))
    with pytest.raises(CheckError, match=r"key 'linkage'.*'bullseye-c'.*ships no shared C library"):
        compat.run(env.ctx, env.state)
    assert env.toolchain.calls == []


def failure(env: StepEnv) -> str:
    with pytest.raises(CheckError) as info:
        compat.run(env.ctx, env.state)
    message = str(info.value)
    assert str(env.toolchain.base / "compat-bullseye-c") in message or "compat-bookworm-wheel" in message
    assert "full log: " + str(env.ctx.log_path("compat-bullseye-c")) in message or "compat-bookworm-wheel.log" in (
        message
    )
    return message


def test_a_python_that_build_python_left_out_is_said_not_run(make_env: MakeEnv) -> None:
    """`ortdist build cpu-linux --python 3.13` (one wheel while iterating): bookworm runs the cp311
    wheel, which was not built, so that root is not run and the manifest says why; the C check runs."""
    env = ready(make_env("cpu-linux", python=("3.13",), python_not_built=("3.10", "3.11")), wheels=("3.13",))
    out = compat.run(env.ctx, env.state)
    assert env.toolchain.calls == [("compat", "bullseye-c", "bullseye")]
    by_name = {r["name"]: r for r in out.manifest()["compat"]}
    assert by_name["bullseye-c"]["ok"] is True
    assert by_name["bookworm-wheel"]["ok"] is None
    assert "build --python left out CPython 3.11" in by_name["bookworm-wheel"]["not_run"]
    assert compat.checked_interface(env.ctx, env.state)  # keyed by the C library alone


def test_a_library_resolved_elsewhere_fails_naming_the_root(make_env: MakeEnv) -> None:
    leaked = LDD.replace("/ortdist/library/lib/libonnxruntime.so.1", "/usr/lib/libonnxruntime.so.1")
    message = failure(ready(make_env("cpu-linux"), ldd=leaked))
    assert "compat root 'bullseye-c' (Debian bullseye): the program does not load the shipped library" in message
    assert "libonnxruntime.so.1 resolves to /usr/lib/libonnxruntime.so.1, not to the shipped library" in message
    missing = LDD.replace("/lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f0e5bc5e000)", "not found")
    assert "not found: libstdc++.so.6 => not found" in failure(ready(make_env("cpu-linux"), ldd=missing))


def test_a_compile_failure_names_the_roots_gcc(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("gcc -O2", stdout="ort_smoke.c:14:10: fatal error: onnxruntime_c_api.h: missing\n", returncode=1)
    message = failure(env)
    assert f"its gcc ({GCC}) could not compile and link ort_smoke.c" in message
    assert "fatal error: onnxruntime_c_api.h: missing" in message
    assert not env.matching("-m venv")  # the first failing root ends the step


def test_outputs_off_the_reference_fail(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("cases/cnn/cnn.onnx", program([o + 1.0 for o in reference_outputs()]))
    assert "output 0 of cnn.onnx differs from the reference" in failure(env)
    env = ready(make_env("cpu-linux"))
    env.runner.on("cases/cnn/cnn.onnx", stdout="ort_smoke: CreateSession failed: [code 1] bad", returncode=2)
    assert "the C program failed on cnn.onnx (exit 2)" in failure(env)


def test_the_wheel_must_import_and_pass_the_reference_models(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("runner.py plan.json", smoke_runner(import_error="Traceback\nImportError: GLIBC_2.38 not found"))
    message = failure(env)
    assert "compat root 'bookworm-wheel' (Debian bookworm): onnxruntime-1.21.0-cp311-" in message
    assert "ImportError: GLIBC_2.38 not found" in message
    env = ready(make_env("cpu-linux"))
    env.runner.on("runner.py plan.json", smoke_runner(outputs_ok=False))
    message = failure(env)
    assert "the smoke suite failed with onnxruntime-1.21.0-cp311-" in message
    assert "CPUExecutionProvider cnn: outputs differ from the reference: max abs err 0.5" in message
    env = ready(make_env("cpu-linux"))
    env.runner.on("-m venv", stdout="ERROR: ...whl is not a supported wheel on this platform.", returncode=1)
    message = failure(env)
    assert "Python 3.11.2 could not install onnxruntime-1.21.0-cp311-" in message
    assert "not a supported wheel on this platform" in message and "(glibc 2.36)" in message


def test_a_root_that_cannot_be_made_is_named(make_env: MakeEnv) -> None:
    class Offline(FakeToolchain):
        def ensure_compat_root(self, cache: Cache, compat: CompatRoot, log: TextIO) -> Path:
            raise ToolchainError("debootstrap failed with exit code 1", fix="check the mirror")

    env = ready(make_env("cpu-linux"))
    broken = Offline(env.plan.toolchain, env.toolchain.base)
    env = StepEnv(dataclasses.replace(env.ctx, toolchain=broken), env.state, env.runner, broken)
    with pytest.raises(ToolchainError) as info:
        compat.run(env.ctx, env.state)
    message = str(info.value)
    assert "compat root 'bullseye-c' (Debian bullseye): the root could not be made: debootstrap failed" in message
    assert "check the mirror; full log: " + str(env.ctx.log_path("compat-bullseye-c")) in message


# --- the pure parts --------------------------------------------------------------------------------
def test_ldd_lines_drop_addresses_and_problems_are_named() -> None:
    lines = ldd_lines(LDD)
    assert lines[:3] == [
        "linux-vdso.so.1",
        "libonnxruntime.so.1 => /ortdist/library/lib/libonnxruntime.so.1",
        "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6",
    ]
    assert ldd_problems(lines) == []
    assert ldd_problems([line for line in lines if "onnxruntime" not in line]) == [
        "ldd lists no libonnxruntime.so: the program was not linked against the shipped library"
    ]
    own_libc = [line.replace("/lib/x86_64-linux-gnu/libc.so.6", "/ortdist/library/lib/libc.so.6") for line in lines]
    assert ldd_problems(own_libc) == [
        "libc.so.6 resolves to /ortdist/library/lib/libc.so.6, not to the root's own C library"
    ]


def test_facts_and_glibc_versions() -> None:
    assert parse_facts(f"noise\nortdist-fact gcc {GCC}\nortdist-fact glibc glibc 2.31\n") == {
        "gcc": GCC,
        "glibc": "glibc 2.31",
    }
    assert glibc_version("glibc 2.31\n") == "2.31" and glibc_version("musl 1.2") == ""
    assert c_build_script("p.c", "p").endswith("-lonnxruntime -Wl,-rpath,/ortdist/library/lib")


def test_the_archive_is_read_as_shipped(make_env: MakeEnv, tmp_path: Path) -> None:
    """A C library archive without the shared library is named (not a gcc error later)."""
    env = ready(make_env("cpu-linux"))
    archive = env.state.get(CLibrary).archive
    with tarfile.open(archive, "w:gz") as tar:
        data = b"/* C API */\n"
        info = tarfile.TarInfo("top/include/onnxruntime/onnxruntime_c_api.h")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    message = failure(env)
    assert "the C library archive onnxruntime-cpu-linux-1.21.0.tar.gz has no lib/libonnxruntime.so" in message
    assert not env.matching("gcc -O2")


def test_each_check_first_proves_its_root_has_no_network(make_env: MakeEnv) -> None:
    """A connection to the mirror the roots came from (which the host reaches) must fail inside."""
    env = ready(make_env("cpu-linux"))
    compat.run(env.ctx, env.state)
    probes = env.matching("/dev/tcp/")
    assert len(probes) == 2 and all(p.argv[:3] == ("unshare", "--net", "--") for p in probes)
    assert "/dev/tcp/192.0.2.7/80" in probes[0].argv[-1] and probes[0].root is not None


def test_a_root_that_reaches_the_network_fails_the_check(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("/dev/tcp/", stdout="ortdist-network-reached\n")
    with pytest.raises(CheckError, match=r"reached 192\.0\.2\.7:80 from inside the root") as info:
        compat.run(env.ctx, env.state)
    assert "unshare --net" in (info.value.fix or "")
    assert not env.matching("gcc --version")  # nothing was checked on a root that is not offline


def test_the_mirror_is_resolved_to_an_address_and_port() -> None:
    assert RESOLVE("http://nonexistent.invalid/debian") is None
    assert RESOLVE("http://127.0.0.1:8080/debian") == ("127.0.0.1", 8080)
    assert RESOLVE("https://127.0.0.1/debian") == ("127.0.0.1", 443)
