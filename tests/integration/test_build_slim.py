"""Slim builds end to end: recipes/slim-linux.toml (x86_64, with a slim wheel),
recipes/slim-linux-aarch64.toml (cross-compiled, run under qemu) and
recipes/slim-c-linux-aarch64.toml (the same for the C API alone, for size): the reduced operator config,
the ORT-format models, the slim shared library, ONE static archive a C program links alone, the
size report, and the smoke suite on the slim wheel (the models it was cut for pass, a model
outside its operators is refused with NOT_IMPLEMENTED)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortdist import sources
from ortdist.recipe import load_recipe
from ortdist.smoke.models import BUILDERS, tolerances
from ortdist.toolchains import Bind, load_toolchain, make_toolchain

from . import build_recipe, scratch_cache

SLIM_C_GOAL_BYTES = 653_112  # issue 37: half of ORT 1.21.0's 1,306,224 B empty Android arm64 cap
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]
PROJECT = Path(__file__).resolve().parents[2]
C_RUNTIME = ("libc.so", "libm.so", "ld-linux")


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(r, id=r, marks=pytest.mark.recipe_tree(r))
        for r in ("slim-linux", "slim-linux-aarch64", "slim-c-linux-aarch64")
    ],
)
def slim(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    ci_python: Callable[[str], tuple[str, ...] | None],
) -> tuple[Path, dict[str, Any]]:
    return build_recipe(request.param, tmp_path_factory.mktemp("dist"), ci_python(request.param))


def artifact(out: Path, manifest: dict[str, Any], kind: str) -> Path:
    (entry,) = [a for a in manifest["artifacts"] if a["kind"] == kind]
    return out / str(entry["path"])


def test_config_and_ort_models_ship_with_the_build(slim: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = slim
    config = artifact(out, manifest, "ops-config").read_text()
    # The extended optimizations fuse Conv+BatchNormalization+Relu: the config has what ORT runs.
    assert "com.microsoft;1;FusedConv" in config
    assert 'Conv{"inputs": {"0": ["float"]}}' in config
    assert "BatchNormalization" not in config
    model = artifact(out, manifest, "ort-model")
    assert model.name == "cnn.ort" and model.read_bytes()[4:8] == b"ORTM"
    assert "com.microsoft:FusedConv" in manifest["reduced_ops"]["operators"]


def test_one_static_archive_with_headers_and_pkg_config(slim: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = slim
    with tarfile.open(artifact(out, manifest, "static-library")) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert [n for n in names if n.endswith(".a")] == ["lib/libonnxruntime.a"]
    assert "include/onnxruntime/onnxruntime_c_api.h" in names
    assert "lib/pkgconfig/libonnxruntime.pc" in names
    assert "share/doc/onnxruntime/ortdist.cdx.json" in names
    merged = manifest["static_library"]["archives_merged"]
    assert "ort:session" in merged and "ort:mlas" in merged and "abseil" in merged  # from the link graph


def test_builds_c_smoke_ran_the_model(slim: tuple[Path, dict[str, Any]]) -> None:
    _, manifest = slim
    smoke = manifest["c_smoke"]
    assert smoke["needed"] and all(lib.startswith(C_RUNTIME) for lib in smoke["needed"]), smoke["needed"]
    (case,) = smoke["models"]
    assert case["model"] == "cnn.ort" and case["max_abs_err"] <= tolerances()["cnn"].atol


def c_program_case(out: Path, manifest: dict[str, Any], kind: str, work: Path) -> np.ndarray:
    """``work``: the artifact ``kind`` unpacked as ort/, the C smoke program as prog.c, the ORT-format
    model and its input; returns the reference output the program's out_0.bin must match."""
    with tarfile.open(artifact(out, manifest, kind)) as tar:
        sources.extract_all(tar, work, kind)
    (top,) = work.iterdir()
    top.rename(work / "ort")
    shutil.copyfile(PROJECT / "src" / "ortdist" / "data" / "c_smoke" / "ort_smoke.c", work / "prog.c")
    shutil.copyfile(artifact(out, manifest, "ort-model"), work / "cnn.ort")
    ref = BUILDERS["cnn"]()
    (work / "in_0.bin").write_bytes(next(iter(ref.inputs.values())).astype(np.float32).tobytes())
    expected: np.ndarray = next(iter(ref.expected.values())).ravel()
    return expected


def test_a_c_program_of_ours_links_the_archive_alone(slim: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Independently of the build: extract the archive, compile a C program against it in the
    build root, check what it links, run it (clean root, or qemu for arm64), compare outputs."""
    out, manifest = slim
    spec = load_toolchain(PROJECT, "debian-trixie")
    toolchain = make_toolchain(spec)
    cache = scratch_cache()  # trixie's roots: the user's where made, else the tests' own
    triple = manifest["target"]
    cross = spec.is_cross(triple)
    with (tmp_path / "log.txt").open("w") as log:
        root = toolchain.ensure_build_root(cache, log)
        target_root = toolchain.ensure_target_root(cache, root, triple, log) if cross else None
        clean = None if cross else toolchain.ensure_clean_root(cache, log)
    prefix = spec.tool_prefix(triple)
    work = tmp_path / "work"
    want = c_program_case(out, manifest, "static-library", work)
    binds = [Bind(work, Path("/t"))]
    sysroot = ""
    if target_root is not None:
        binds.append(Bind(target_root, Path("/ortdist/target"), read_only=True))
        sysroot = "--sysroot=/ortdist/target"
    script = (
        f"cd /t && {prefix}gcc {sysroot} -c prog.c -I ort/include && "
        f"{prefix}g++ {sysroot} -o prog prog.o ort/lib/libonnxruntime.a -static-libstdc++ -static-libgcc -lm && "
        f"{prefix}readelf -d prog > dynamic.txt"
    )
    subprocess.run(toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds), check=True)
    needed = [
        line.split("[")[1].rstrip("]") for line in (work / "dynamic.txt").read_text().splitlines() if "NEEDED" in line
    ]
    assert needed and all(lib.startswith(C_RUNTIME) for lib in needed), needed
    if cross:
        run_argv = toolchain.wrap(
            root,
            [spec.cross_targets[triple].emulator, "-L", "/ortdist/target", "/t/prog", "/t/cnn.ort", "/t"],
            binds=binds,
        )
    else:
        assert clean is not None
        run_argv = toolchain.wrap(clean, ["/t/prog", "/t/cnn.ort", "/t"], binds=binds)
    proc = subprocess.run(run_argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "onnxruntime 1.21.0" in proc.stdout
    got = np.frombuffer((work / "out_0.bin").read_bytes(), dtype=np.float32)
    assert np.max(np.abs(got - want)) <= tolerances()["cnn"].atol


def test_size_report(slim: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = slim
    report = manifest["size"]
    lib = report["shared_library"]
    # MinSizeRel links with -s: the breakdown comes from a relink that keeps the symbols.
    assert 0 < lib["stripped_bytes"] <= lib["bytes"] and lib["symbol_bytes"] > 0
    components = {row["component"]: row["bytes"] for row in lib["by_component"]}
    assert components["ort:mlas"] > 0 and components["ort:providers"] > 0
    assert lib["largest_kernels"], "the CPU kernels' component must be broken down"
    table = artifact(out, manifest, "size-report").read_text()
    assert "| component |" in table and "ort:providers" in table


# indirect parametrization replaces the fixture's params, and their marks with them: mark it again.
@pytest.mark.parametrize(
    "slim", [pytest.param("slim-linux-aarch64", marks=pytest.mark.recipe_tree("slim-linux-aarch64"))], indirect=True
)
def test_aarch64_slim_library_is_under_the_upstream_empty_baseline(
    slim: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Measured on what users download: the library in the shipped archive, which must be stripped."""
    out, manifest = slim
    assert manifest["target"].startswith("aarch64")
    with tarfile.open(artifact(out, manifest, "c-library")) as tar:
        (member,) = [m for m in tar.getmembers() if m.isfile() and m.name.endswith("/lib/libonnxruntime.so.1.21.0")]
        sources.extract_all(tar, tmp_path, "c-library", members=[member])
    library = tmp_path / member.name
    sections = subprocess.run(["readelf", "-SW", str(library)], text=True, capture_output=True, check=True).stdout
    assert "AArch64" in subprocess.run(["readelf", "-h", str(library)], text=True, capture_output=True).stdout
    assert ".symtab" not in sections, "the shipped library is not stripped: its size is not what users load"
    # ORT's own CI caps an Android arm64 minimal build with NO operators at this size.
    assert member.size == library.stat().st_size < 1_595_392


def shipped_library(out: Path, manifest: dict[str, Any], tmp_path: Path) -> Path:
    with tarfile.open(artifact(out, manifest, "c-library")) as tar:
        (member,) = [m for m in tar.getmembers() if m.isfile() and m.name.endswith("/lib/libonnxruntime.so.1.21.0")]
        sources.extract_all(tar, tmp_path, "c-library", members=[member])
    return tmp_path / member.name


@pytest.mark.parametrize(
    "slim", [pytest.param("slim-c-linux-aarch64", marks=pytest.mark.recipe_tree("slim-c-linux-aarch64"))], indirect=True
)
def test_the_c_only_arm64_library_carries_no_exception_machinery(
    slim: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """No unwind tables, no exception tables, no C++ personality; relative relocations packed; and
    smaller than ORT 1.21.0's own cap for an Android arm64 build with no operators at all."""
    out, manifest = slim
    library = shipped_library(out, manifest, tmp_path)
    sections = {row["section"]: row["bytes"] for row in manifest["size"]["shared_library"]["sections"]}
    assert ".gcc_except_table" not in sections
    assert sections.get(".eh_frame", 0) < 1024, sections  # what is left comes from the C runtime's objects
    dynamic = subprocess.run(["readelf", "-dW", str(library)], text=True, capture_output=True, check=True).stdout
    assert "(RELR)" in dynamic  # DT_RELR: glibc 2.36+ loads it, and the C smoke program ran it under qemu
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(library)], text=True, capture_output=True).stdout
    assert "__gxx_personality_v0" not in symbols and "__cxa_throw" not in symbols
    # RELRO ends on a 4 KiB page (common_page_size) with no file padding up to the 64 KiB one, and
    # every segment keeps its 64 KiB alignment (the library maps on 64 KiB-page kernels too).
    headers = subprocess.run(["readelf", "-lW", str(library)], text=True, capture_output=True, check=True).stdout
    loads = [line.split() for line in headers.splitlines() if line.split()[:1] == ["LOAD"]]
    (relro,) = [line.split() for line in headers.splitlines() if line.split()[:1] == ["GNU_RELRO"]]
    assert all(
        int(load[-1], 16) == 0x10000 and int(load[1], 16) % 0x10000 == int(load[2], 16) % 0x10000 for load in loads
    )
    first_end = int(loads[0][1], 16) + int(loads[0][4], 16)
    assert 0 <= int(loads[1][1], 16) - first_end < 2 * 4096, headers
    assert (int(relro[2], 16) + int(relro[5], 16)) % 4096 == 0, headers
    size = library.stat().st_size
    # The goal: half of the 1,306,224 B ORT 1.21.0's binary-size pipeline allows its Android arm64
    # minimal build with no operators (measured: 616,824 B).
    assert size == manifest["size"]["shared_library"]["stripped_bytes"] <= SLIM_C_GOAL_BYTES


@pytest.mark.parametrize(
    "slim", [pytest.param("slim-c-linux-aarch64", marks=pytest.mark.recipe_tree("slim-c-linux-aarch64"))], indirect=True
)
def test_a_c_program_runs_the_model_on_the_shipped_shared_library(
    slim: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The build's C smoke program links the static archive; the size goal is the shared library's,
    so it must load (DT_RELR: the target's glibc 2.41 under qemu) and run the model too."""
    out, manifest = slim
    spec = load_toolchain(PROJECT, "debian-trixie")
    toolchain = make_toolchain(spec)
    cache = scratch_cache()  # trixie's roots: the user's where made, else the tests' own
    with (tmp_path / "log.txt").open("w") as log:
        root = toolchain.ensure_build_root(cache, log)
        target_root = toolchain.ensure_target_root(cache, root, manifest["target"], log)
    work = tmp_path / "work"
    want = c_program_case(out, manifest, "c-library", work)
    binds = [Bind(work, Path("/t")), Bind(target_root, Path("/ortdist/target"), read_only=True)]
    emulator = spec.cross_targets[manifest["target"]].emulator
    script = (
        "cd /t && aarch64-linux-gnu-gcc --sysroot=/ortdist/target -o prog prog.c -I ort/include -L ort/lib "
        f"-lonnxruntime && {emulator} -L /ortdist/target -E LD_LIBRARY_PATH=/t/ort/lib /t/prog /t/cnn.ort /t"
    )
    proc = subprocess.run(
        toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "onnxruntime 1.21.0" in proc.stdout
    got = np.frombuffer((work / "out_0.bin").read_bytes(), dtype=np.float32)
    assert np.max(np.abs(got - want)) <= tolerances()["cnn"].atol


@pytest.mark.parametrize(
    "slim",
    [pytest.param(r, marks=pytest.mark.recipe_tree(r)) for r in ("slim-linux", "slim-linux-aarch64")],
    indirect=True,
)
def test_smoke_suite_on_the_slim_wheel(slim: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, manifest = slim
    from ortdist.smoke.run_suite import smoke_wheel

    toolchain = make_toolchain(load_toolchain(PROJECT, manifest["toolchain"]["name"]))
    (cp313,) = [out / a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel" and "-cp313-" in a["path"]]
    report, verdicts = smoke_wheel(cp313, tmp_path, scratch_cache(), toolchain)
    assert report["passed"], [v.message for v in verdicts if not v.passed]
    assert report["reduced"] and report["node_tests"] == {}
    by_model = {v.name: v for v in verdicts if v.suite == "model"}
    assert by_model["cnn"].passed and by_model["cnn"].share == 1.0
    (refused,) = [v for v in verdicts if v.message.startswith("refused as expected")]
    assert refused.name == "transformer" and "no kernel for LayerNormalization" in refused.message


@pytest.mark.parametrize(
    "slim", [pytest.param("slim-linux", marks=pytest.mark.recipe_tree("slim-linux"))], indirect=True
)
def test_slim_wheels_are_portable_for_every_python(
    slim: tuple[Path, dict[str, Any]], ci_python: Callable[[str], tuple[str, ...] | None]
) -> None:
    """slim-linux is on the portable toolchain: manylinux_2_17 wheels for cp310-cp314, nothing grafted,
    every shipped ELF (the wheels', the shared library archive's) within glibc 2.17, and the static
    archive's tarball ships no ELF file that could need more (its objects link into the user's program)."""
    from ortdist.checks import elf
    from ortdist.checks.elf import wheel_libraries
    from ortdist.wheelnames import required_glibc

    out, manifest = slim
    wheels = [a for a in manifest["artifacts"] if a["kind"] == "wheel"]
    every = ("3.10", "3.11", "3.12", "3.13", "3.14")
    built = ci_python("slim-linux") or every  # fewer only where CI's time built fewer, and then said so
    assert sorted(a["path"].split("-")[2] for a in wheels) == sorted(f"cp{v.replace('.', '')}" for v in built)
    assert manifest.get("python_not_built", []) == [
        v for v in load_recipe(PROJECT / "recipes" / "slim-linux.toml").wheel.python if v not in built
    ]
    policy = elf.policy((2, 17), load_toolchain(PROJECT, "portable-glibc2.17").system_libraries)
    checked = []
    for art in manifest["artifacts"]:
        path = out / art["path"]
        if art["kind"] == "wheel":
            assert required_glibc(path.name) == (2, 17), path.name
            members = wheel_libraries(path)
            assert not [name for name, _ in members if ".libs/" in name], path.name
        elif art["kind"] == "c-library":
            members = elf.artifact_libraries(path)
        elif art["kind"] == "static-library":
            assert elf.artifact_libraries(path) == [], path.name
            checked.append(art["kind"])
            continue
        else:
            continue
        assert members and elf.violations(members, policy) == [], path.name
        checked.append(art["kind"])
    assert checked.count("wheel") == len(wheels) and "static-library" in checked, checked
