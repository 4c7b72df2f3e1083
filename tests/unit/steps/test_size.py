"""The size step: strip and nm over the library (relinked with symbols when the build strips at
link time), symbols attributed to the link graph's archives, compared with the full CPU build."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

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
    (out / "lib.sections").write_text(SECTIONS)


# readelf -SW of the stripped library (500 bytes): 0x100 + 0x40 + 0x20 in sections, .bss in none.
SECTIONS = """\
  [Nr] Name              Type            Address          Off    Size   ES Flg Lk Inf Al
  [ 0]                   NULL            0000000000000000 000000 000000 00      0   0  0
  [ 1] .text             PROGBITS        0000000000001000 001000 000100 00  AX  0   0 16
  [ 2] .eh_frame         PROGBITS        0000000000002000 002000 000040 00   A  0   0  8
  [ 3] .dynsym           DYNSYM          0000000000002040 002040 000020 18   A  4   1  8
  [ 4] .bss              NOBITS          0000000000003000 003000 004000 00  WA  0   0 32
"""


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
    baseline.write_text(json.dumps({"ort_version": "1.21.0", "artifacts": [], "size": full}))
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
    assert "readelf -SW lib.stripped > lib.sections" in script
    lib = out.report["shared_library"]
    assert lib["sections"] == [
        {"section": ".text", "bytes": 0x100},
        {"section": ".eh_frame", "bytes": 0x40},
        {"section": ".dynsym", "bytes": 0x20},
        {"section": "(ELF headers, alignment padding)", "bytes": 500 - 0x160},
    ]
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


def test_a_recipe_compares_its_sections_with_the_build_it_names(make_env: MakeEnv) -> None:
    """slim-c-linux-aarch64 names slim-linux-aarch64 ([size] compare_with): every byte it saves is
    found in a section of the table, and the saved column adds up to the whole difference."""
    env = ready(make_env("slim-c-linux-aarch64"), strip=True)
    assert env.plan.recipe.size.compare_with == "slim-linux-aarch64"
    baseline = env.layout.dist.parent / "slim-linux-aarch64" / "manifest.json"
    baseline.parent.mkdir(parents=True)
    with_exceptions = {
        "recipe": "slim-linux-aarch64",
        "target": "aarch64-unknown-linux-gnu",
        "shared_library": {
            "stripped_bytes": 1000,
            "other_bytes": 300,
            "by_component": [],
            "sections": [
                {"section": ".text", "bytes": 0x180},
                {"section": ".eh_frame", "bytes": 0x100},
                {"section": ".gcc_except_table", "bytes": 0x30},
                {"section": ".dynsym", "bytes": 0x20},
                {"section": "(ELF headers, alignment padding)", "bytes": 1000 - 0x2D0},
            ],
        },
    }
    baseline.write_text(json.dumps({"ort_version": "1.21.0", "artifacts": [], "size": with_exceptions}))
    out = size.run(env.ctx, env.state)
    assert "aarch64-linux-gnu-readelf -SW lib.stripped > lib.sections" in env.only("/bin/sh -ec").argv[2]
    assert out.report["baseline"] == {"recipe": "slim-linux-aarch64", "stripped_bytes": 1000}
    table = (env.layout.out.host / "slim-c-linux-aarch64.size.md").read_text()
    assert "| section | bytes | slim-linux-aarch64 | saved |" in table
    assert "| .eh_frame | 64 | 256 | 192 |" in table
    assert "| .gcc_except_table | 0 | 48 | 48 |" in table  # gone entirely: still has its row
    assert "| .dynsym | 32 | 32 | 0 |" in table
    assert "| **total** | 500 | 1,000 | 500 |" in table
    rows = [line for line in table.splitlines() if line.startswith("| .")]
    assert rows[0].startswith("| .eh_frame |")  # the largest saving first


def test_a_missing_comparison_build_leaves_the_report_without_one(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-c-linux-aarch64"), strip=True)
    out = size.run(env.ctx, env.state)
    assert "baseline" not in out.report
    table = (env.layout.out.host / "slim-c-linux-aarch64.size.md").read_text()
    assert "| .text | 256 | - | - |" in table
    rows = [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| .")]
    assert rows == ["| .text", "| .eh_frame", "| .dynsym"]  # largest first when nothing is compared


def test_what_the_compilers_own_archives_give_the_library_is_one_component(make_env: MakeEnv) -> None:
    """A toolchain that links libstdc++ statically (portable-glibc2.17): the library's std:: code is
    counted as the C++ runtime, read from the archives the toolchain's compiler names, after the link
    graph's own (a template ORT instantiates itself stays ORT's)."""
    env = ready(make_env("slim-linux"), strip=True)
    string_ctor = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC1EPKcRKS3_"

    def with_runtime(cmd: Command) -> None:
        measures(cmd)
        out = host_of(cmd, "/ortdist/work/size")
        nm = (out / "lib.nm").read_text()
        (out / "lib.nm").write_text(nm + f"0000000000003000 0000000000000030 W {string_ctor}\n")
        (out / "lib.demangled.nm").write_text((out / "lib.demangled.nm").read_text() + "0 30 W std::string ctor\n")
        (out / "runtime-0.nm").write_text(f"string-inst.o:\n0000000000000000 W {string_ctor}\n0 T {CONV}\n")

    env.runner.on("/bin/sh -ec", with_runtime)
    out = size.run(env.ctx, env.state)
    script = env.only("/bin/sh -ec").argv[2]
    cxx = env.plan.cmake_defines["CMAKE_CXX_COMPILER"]
    assert f'nm --defined-only "$({cxx} -print-file-name=libstdc++.a)" > runtime-0.nm' in script
    assert f'"$({cxx} -print-file-name=libgcc.a)" > runtime-2.nm' in script
    assert out.report["shared_library"]["by_component"] == [
        {"component": "ort:providers", "bytes": 256},  # defined by ORT's archive first: ORT's
        {"component": "unattributed", "bytes": 64},
        {"component": size.RUNTIME_COMPONENT, "bytes": 48},
    ]


def test_a_clang_cross_compiler_is_asked_for_the_targets_runtime_archives(make_env: MakeEnv) -> None:
    """clang finds the aarch64 libstdc++.a it linked only with the build's target, sysroot and
    --gcc-toolchain; a GCC (cpu-linux) is asked as before, so its size step's command is unchanged."""
    env = ready(make_env("cpu-linux-aarch64"), strip=True)
    env.runner.on("/bin/sh -ec", measures)
    size.run(env.ctx, env.state)
    script = env.only("/bin/sh -ec").argv[2]
    query = (
        "/usr/bin/clang++ --target=aarch64-linux-gnu --sysroot=/opt/ortdist-compiler/aarch64-linux-gnu/sysroot "
        "--gcc-toolchain=/opt/ortdist-compiler -idirafter /opt/ortdist-compiler/python-multiarch"
    )
    assert f'"$({query} -print-file-name=libstdc++.a)" > runtime-0.nm' in script
    assert "aarch64-linux-gnu-strip --strip-all" in script


def test_the_measuring_lanes_run_at_once_and_a_failing_one_fails_the_script(tmp_path: Path) -> None:
    import subprocess
    import time

    from ortdist.pipeline.steps.size import side_by_side

    def run(*lanes: list[str]) -> tuple[int, float]:
        start = time.monotonic()
        code = subprocess.run(["/bin/sh", "-ec", side_by_side(*lanes)], cwd=tmp_path, check=False).returncode
        return code, time.monotonic() - start

    code, seconds = run(["sleep 0.4", "echo a > a"], ["sleep 0.4", "echo b > b"])
    assert code == 0 and (tmp_path / "a").read_text() == "a\n" and (tmp_path / "b").read_text() == "b\n"
    assert seconds < 0.75  # at once, not one after the other
    for lanes in (["false"], ["true"]), (["true"], ["sleep 0.2", "false"]):
        code, _ = run(*lanes)
        assert code != 0
    # A lane stops at its first failure; the other still runs to its end before the script fails.
    code, _ = run(["false", "echo no > no"], ["sleep 0.2", "echo yes > yes"])
    assert code != 0 and not (tmp_path / "no").exists() and (tmp_path / "yes").is_file()
