"""The size step: strip and nm over the library (relinked with symbols when the build strips at
link time), symbols attributed to the link graph's archives, compared with the full CPU build."""

from __future__ import annotations

import dataclasses
import json

from ortdist.manifest import Artifact
from ortdist.pipeline.runner import Command
from ortdist.pipeline.state import CLibrary
from ortdist.pipeline.steps import size

from .conftest import MakeEnv
from .helpers import StepEnv, host_of, libraries, write_reply

CONV = "_ZNK11onnxruntime4ConvIfE7ComputeEPNS_15OpKernelContextE"
LINK = ": && /usr/bin/c++ -Os {strip}-shared -o libonnxruntime.so.1.21.0 a.o libonnxruntime_providers.a && :"


def ready(env: StepEnv, strip: bool) -> StepEnv:
    env.put_roots()
    env.put_source()
    build = env.layout.build.host
    write_reply(build, libraries("libonnxruntime_providers.a", "-lm"))
    (build / "libonnxruntime.so.1.21.0").write_bytes(b"L" * 2000)
    (build / "onnxruntime" / "capi").mkdir(parents=True)
    (build / "onnxruntime" / "capi" / "onnxruntime_pybind11_state.so").write_bytes(b"P" * 900)
    env.layout.work.host.mkdir(parents=True)
    env.runner.on(
        "-t commands libonnxruntime.so.1.21.0", stdout="c++ -c a.cc\n" + LINK.format(strip="-s " if strip else "")
    )
    env.runner.on("/bin/sh -ec", measures)
    return env


def measures(cmd: Command) -> None:
    """What strip and nm write into work/size."""
    out = host_of(cmd, "/ortdist/work/size")
    (out / "lib.stripped").write_bytes(b"s" * 500)
    (out / "pybind.stripped").write_bytes(b"p" * 200)
    (out / "lib.nm").write_text(
        f"0000000000001000 0000000000000100 T {CONV}\n0000000000002000 0000000000000040 T OrtGetApiBase\n"
    )
    (out / "lib.demangled.nm").write_text(
        "0000000000001000 0000000000000100 T onnxruntime::Conv<float>::Compute(onnxruntime::OpKernelContext*) const\n"
        "0000000000002000 0000000000000040 T OrtGetApiBase\n"
    )
    (out / "archive-0.nm").write_text(f"conv.o:\n0000000000000000 T {CONV}\n                 U OrtGetApiBase\n")


def test_a_slim_build_is_measured_against_the_full_cpu_build(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"), strip=True)
    archive = env.layout.out.host / "c.tar.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"t" * 300)
    env.state.put(CLibrary(archive=archive, artifacts=(Artifact(archive, "c-library"),)))
    baseline = env.layout.dist.parent / "cpu-linux" / "manifest.json"
    baseline.parent.mkdir(parents=True)
    full = {
        "recipe": "cpu-linux",
        "target": "x86_64-unknown-linux-gnu",
        "shared_library": {"stripped_bytes": 10000, "other_bytes": 100, "by_component": []},
    }
    baseline.write_text(json.dumps({"ort_version": "1.21.0", "size": full}))
    out = size.run(env.ctx, env.state)
    script = env.only("/bin/sh -ec").argv[2]
    relink = "cd /ortdist/build && : && /usr/bin/c++ -Os -shared -o /ortdist/work/size/lib.unstripped a.o"
    assert relink in script  # MinSizeRel links with -s: relinked without it for the symbols
    assert "nm -S --defined-only /ortdist/work/size/lib.unstripped > lib.nm" in script
    assert "strip --strip-all -o lib.stripped /ortdist/build/libonnxruntime.so.1.21.0" in script
    assert (
        "strip --strip-all -o pybind.stripped /ortdist/build/onnxruntime/capi/onnxruntime_pybind11_state.so" in script
    )
    assert "nm --defined-only /ortdist/build/libonnxruntime_providers.a > archive-0.nm" in script
    lib = out.report["shared_library"]
    assert (lib["bytes"], lib["stripped_bytes"], lib["symbol_bytes"], lib["other_bytes"]) == (2000, 500, 320, 180)
    assert lib["by_component"] == [
        {"component": "ort:providers", "bytes": 256},
        {"component": "unattributed", "bytes": 64},
    ]
    assert lib["largest_kernels"] == [{"kernel": "onnxruntime::Conv<float>", "bytes": 256}]
    assert out.report["artifacts"] == [
        {"name": "libonnxruntime.so.1.21.0", "bytes": 2000, "stripped_bytes": 500},
        {"name": "onnxruntime_pybind11_state.so", "bytes": 900, "stripped_bytes": 200},
        {"name": "c.tar.gz", "bytes": 300, "stripped_bytes": None},
    ]
    assert out.report["baseline"] == {"recipe": "cpu-linux", "stripped_bytes": 10000}
    table = env.layout.out.host / "slim-linux.size.md"
    assert "this one is 5.0% of it" in table.read_text()
    assert [(a.source, a.kind) for a in out.artifacts] == [(table, "size-report")]
    assert not (env.layout.work.host / "size").exists()
    assert out.manifest()["size"]["recipe"] == "slim-linux"


def test_a_build_that_keeps_symbols_is_measured_as_built(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"), strip=False)
    out = size.run(env.ctx, env.state)
    script = env.only("/bin/sh -ec").argv[2]
    assert "lib.unstripped" not in script
    assert "nm -S --defined-only /ortdist/build/libonnxruntime.so.1.21.0 > lib.nm" in script
    assert "baseline" not in out.report  # the full CPU build is the baseline itself


def test_a_static_only_build_says_its_library_is_not_shipped(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux", strip=False), strip=False)
    static = dataclasses.replace(env.plan, recipe=dataclasses.replace(env.plan.recipe, linkage="static"))
    ctx = dataclasses.replace(env.ctx, plan=static)
    out = size.run(ctx, env.state)
    assert out.report["artifacts"][0]["name"] == "libonnxruntime.so.1.21.0 (linked for the report; not shipped)"
