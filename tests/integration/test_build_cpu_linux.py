"""The real thing: build recipes/cpu-linux.toml end to end (sysroot, ORT compile, wheel, repair,
clean-root check) into a temp dist/. Cold, this takes ~30 min on 2 cores; with the cache from an
earlier build (ccache, build tree) it is minutes. Needs root, debootstrap and Debian/PyPI access.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortdist.smoke.models import BUILDERS
from smoke_helpers import expected_smoke_environment

from . import PROJECT, free_port, local_server, record_built, scratch_cache

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]


def ortdist(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ortdist", *args], cwd=project, text=True, capture_output=True, check=False
    )


# recipes/cpu-linux.toml's toolchain: GCC 11 and a glibc 2.17 sysroot, every dependency from source.
TOOLCHAIN = "portable-glibc2.17"
PORTABLE_GLIBC = (2, 17)
# The reference the cp313 wheel is held to: PyPI's onnxruntime-1.21.0-cp313-cp313-manylinux_2_27_x86_64.
# manylinux_2_28_x86_64.whl, whose size is a published fact (pip download shows it), not our output.
PYPI_CP313_WHEEL_BYTES = 16_018_947


@pytest.fixture(scope="module")
def pythons(ci_python: Callable[[str], tuple[str, ...] | None]) -> tuple[str, ...]:
    """The Pythons this run builds wheels for, the core's first: every one the recipe lists, or the
    core's and 3.11 alone where CI on a slow machine had time for those only (the claims table says)."""
    from ortdist.recipe import load_recipe

    listed = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / "cpu-linux.toml").wheel.python
    chosen = ci_python("cpu-linux")
    return listed if chosen is None else tuple(v for v in listed if v in chosen)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, pythons: tuple[str, ...]) -> tuple[Path, dict[str, Any], str]:
    project = Path(__file__).resolve().parents[2]
    dist = tmp_path_factory.mktemp("dist")
    # --no-reuse: every packaging step really runs (and checks) here, even on a machine whose
    # cache holds records of an identical earlier build; test_rebuild_... checks the reuse.
    proc = ortdist(project, "build", "cpu-linux", "--dist", str(dist), "--no-reuse", "--python", ",".join(pythons))
    print(proc.stderr[-5000:], file=sys.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    out = dist / "cpu-linux"
    manifest = json.loads((out / "manifest.json").read_text())
    record_built("cpu-linux", manifest)
    return out, manifest, proc.stderr


def test_manifest_lists_verified_artifacts(built: tuple[Path, dict[str, Any], str], pythons: tuple[str, ...]) -> None:
    out, manifest, _ = built
    assert manifest["recipe"] == "cpu-linux"
    assert manifest["ort_version"] == "1.21.0"
    assert manifest["provider_names"] == ["CPUExecutionProvider"]
    kinds = {a["kind"]: a for a in manifest["artifacts"]}
    assert set(kinds) == {"wheel", "c-library", "size-report"}
    for art in manifest["artifacts"]:
        data = (out / art["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == art["sha256"]
        assert len(data) == art["size"]
    wheels = [a for a in manifest["artifacts"] if a["kind"] == "wheel"]
    assert pythons[0] == "3.13" and set(pythons) <= {"3.10", "3.11", "3.12", "3.13", "3.14"}
    assert ["-".join(w["tag"].split("-")[:2]) for w in wheels] == [
        f"cp{v.replace('.', '')}-cp{v.replace('.', '')}" for v in pythons
    ]
    assert all(w["path"].startswith("onnxruntime-1.21.0-") for w in wheels)
    times = manifest["build_times_s"]
    steps = ("toolchain", "source", "configure", "build", "binding", "install", "wheel", "repair", "check", "compat")
    assert set(steps) <= set(times), sorted(times)
    # --no-reuse: every packaging step really ran, and the total covers the steps it is made of.
    assert all(times[step] > 0 for step in ("install", "wheel", "repair", "check", "compat")), times
    assert times["total"] >= sum(v for k, v in times.items() if k != "total") - 1.0, times
    assert manifest["build_tree_compile_s"] > 0
    assert (out / "logs" / "build.log").is_file()


def test_wheel_carries_build_record_and_native_module(built: tuple[Path, dict[str, Any], str]) -> None:
    out, manifest, _ = built
    wheel = next(a for a in manifest["artifacts"] if a["kind"] == "wheel")
    with zipfile.ZipFile(out / wheel["path"]) as zf:
        names = zf.namelist()
        record = json.loads(zf.read("onnxruntime/ortdist_build.json"))
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert record["execution_providers"] == [{"name": "cpu", "provider": "CPUExecutionProvider"}]
    assert record["recipe"] == "cpu-linux"
    assert any(n.startswith("onnxruntime/capi/onnxruntime_pybind11_state") and n.endswith(".so") for n in names)
    assert "onnxruntime/capi/libonnxruntime_providers_shared.so" in names
    assert "Name: onnxruntime" in metadata and "Version: 1.21.0" in metadata


def test_clean_root_check_ran_on_cpu(built: tuple[Path, dict[str, Any], str]) -> None:
    _, manifest, _ = built
    check = manifest["clean_root_check"]
    assert check["ok"]
    assert "CPUExecutionProvider" in check["available_providers"]
    assert set(check["node_providers"].values()) == {"CPUExecutionProvider"}
    assert check["outputs"]["max"]["nan_pattern_matches"]  # the Eigen patch kept NaN propagation


def test_c_library_archive(built: tuple[Path, dict[str, Any], str]) -> None:
    out, manifest, _ = built
    lib = next(a for a in manifest["artifacts"] if a["kind"] == "c-library")
    with tarfile.open(out / lib["path"]) as tar:
        names = tar.getnames()
    top = lib["path"].removesuffix(".tar.gz")
    assert f"{top}/include/onnxruntime/onnxruntime_c_api.h" in names
    assert any(n.startswith(f"{top}/lib/libonnxruntime.so") for n in names)


def test_older_systems_run_the_build_offline(built: tuple[Path, dict[str, Any], str]) -> None:
    """The compat step, in the portable toolchain's [compat] roots, without a network: bullseye's own
    gcc (Debian 10, glibc 2.31) compiled the C program against the shipped C library, which ldd
    resolved from /ortdist/library (libc from bullseye), and it ran the reference model; bookworm's
    CPython 3.11 installed the cp311 wheel from the wheelhouse and ran every reference model."""
    _, manifest, _ = built
    assert manifest["build_times_s"]["compat"] > 0
    compat = {entry["name"]: entry for entry in manifest["compat"]}
    assert set(compat) == {"bullseye-c", "bookworm-wheel"}
    c = compat["bullseye-c"]
    assert (c["ok"], c["suite"], c["glibc"], c["check"]) == (True, "bullseye", "2.31", "c")
    assert c["details"]["gcc"].startswith("gcc (Debian 10."), c["details"]["gcc"]
    ldd = c["details"]["ldd"]
    assert "libonnxruntime.so.1 => /ortdist/library/lib/libonnxruntime.so.1" in ldd, ldd
    assert "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6" in ldd, ldd
    (model,) = c["details"]["models"]
    assert model["model"] == "cnn.onnx" and model["max_abs_err"] < 1e-5, model  # measured: 8.9e-08
    # Offline, observed: the mirror the roots came from answers the host, and not the roots.
    from ortdist import mirrors
    from ortdist.checks.compat import REACHED, network_probe
    from ortdist.pipeline.steps.compat import mirror_endpoint
    from ortdist.toolchains import load_toolchain

    endpoint = mirror_endpoint(mirrors.debian_archive(load_toolchain(PROJECT, "portable-glibc2.17").mirror).url)
    assert endpoint is not None
    host = subprocess.run(["/bin/sh", "-c", network_probe(*endpoint)], text=True, capture_output=True, check=True)
    assert REACHED in host.stdout, host.stdout + host.stderr
    for entry in compat.values():
        assert entry["details"]["network"].startswith("unreachable from the root: "), entry["details"]["network"]
        assert "Network is unreachable" in entry["details"]["network"], entry["details"]["network"]
    wheel = compat["bookworm-wheel"]
    assert (wheel["ok"], wheel["suite"], wheel["glibc"], wheel["check"]) == (True, "bookworm", "2.36", "wheel")
    assert wheel["details"]["available_providers"] == ["CPUExecutionProvider"]
    assert wheel["details"]["python"].startswith("Python 3.11."), wheel["details"]["python"]
    assert wheel["details"]["wheel"].startswith("onnxruntime-1.21.0-cp311-cp311-"), wheel["details"]["wheel"]
    assert "manylinux_2_17_x86_64" in wheel["details"]["wheel"]
    models = wheel["details"]["models"]
    assert {m["name"] for m in models} == set(BUILDERS) and all(m["passed"] for m in models), models


def test_rebuild_resumes_instead_of_starting_over(
    built: tuple[Path, dict[str, Any], str], tmp_path: Path, pythons: tuple[str, ...]
) -> None:
    """Nothing changed: CMake is not re-run, ninja has no work, and every packaging step takes its
    recorded outputs; the artifacts are the first build's bytes."""
    project = Path(__file__).resolve().parents[2]
    _, first, _ = built
    proc = ortdist(project, "build", "cpu-linux", "--dist", str(tmp_path), "--python", ",".join(pythons))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "configure is up to date" in proc.stderr
    build_log = (tmp_path / "cpu-linux" / "logs" / "build.log").read_text()
    assert "ninja: no work to do." in build_log
    again = json.loads((tmp_path / "cpu-linux" / "manifest.json").read_text())
    # cpu-linux's packaging steps (docs/build.md: the steps after the compile), stated here, not
    # taken from the code under test.
    packaging = ["check", "compat", "install", "repair", "size", "wheel"]
    assert sorted(again["reused_steps"]) == packaging
    # compat is keyed by what it checks (docs/build.md), the others by everything before them
    said = {step: "what it checks is unchanged" if step == "compat" else "inputs unchanged" for step in packaging}
    assert all(f"{step}: {said[step]} since" in proc.stderr for step in packaging)
    assert {a["path"]: a["sha256"] for a in again["artifacts"]} == {a["path"]: a["sha256"] for a in first["artifacts"]}


def test_patch_series_applies_to_the_pinned_source() -> None:
    project = Path(__file__).resolve().parents[2]
    proc = ortdist(project, "patches", "check", "1.21.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from ortdist.patches import read_series

    count = len(read_series(project / "patches" / "1.21.0"))
    assert f"{count} patch(es) apply cleanly" in proc.stdout


@pytest.fixture(scope="module")
def official_smoke(
    tmp_path_factory: pytest.TempPathFactory, download_official_wheel: Callable[..., Path]
) -> dict[str, Any]:
    """PyPI's cp313 wheel through the smoke suite: the node-test baseline."""
    from ortdist.smoke.run_suite import smoke_wheel
    from ortdist.toolchains import load_toolchain, make_toolchain

    project = Path(__file__).resolve().parents[2]
    official = download_official_wheel(tmp_path_factory.mktemp("official"), python="3.13")
    toolchain = make_toolchain(load_toolchain(project, TOOLCHAIN))
    report, _ = smoke_wheel(official, tmp_path_factory.mktemp("base"), scratch_cache(), toolchain)
    assert report["passed"]
    return report


@pytest.fixture(scope="module")
def our_smoke(
    built: tuple[Path, dict[str, Any], str], official_smoke: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[dict[str, Any], list[Any]]]:
    """Every wheel of ours through the whole suite (node tests included), PyPI's as the baseline."""
    from ortdist.smoke.run_suite import smoke_wheel
    from ortdist.toolchains import load_toolchain, make_toolchain

    project = Path(__file__).resolve().parents[2]
    toolchain = make_toolchain(load_toolchain(project, TOOLCHAIN))
    out, manifest, _ = built
    results = {}
    for art in (a for a in manifest["artifacts"] if a["kind"] == "wheel"):
        baseline = official_smoke["node_test_outcomes"]
        # Where `ortdist smoke` puts the reports of a dist/<recipe>/ wheel, and publish reads them.
        where = out / "smoke"
        results[art["python"]] = smoke_wheel(out / art["path"], where, scratch_cache(), toolchain, baseline=baseline)
    return results


def test_smoke_suite_passes_with_parity_to_the_official_wheel(
    official_smoke: dict[str, Any], our_smoke: dict[str, tuple[dict[str, Any], list[Any]]]
) -> None:
    """Our cp313 wheel in the clean root, against PyPI's cp313 wheel as the node-test baseline."""
    report, verdicts = our_smoke["3.13"]
    assert report["passed"], [v.message for v in verdicts if not v.passed]
    assert report["environment"]["kind"] == expected_smoke_environment(PORTABLE_GLIBC, "3.13")
    assert report["claims_from"] == "build record"
    assert report["regressions"] == {"CPUExecutionProvider": []}
    ours = report["node_tests"]["CPUExecutionProvider"]
    theirs = official_smoke["node_tests"]["CPUExecutionProvider"]
    assert ours["passed"] >= theirs["passed"]


def test_wheel_and_archive_carry_an_sbom_that_inspect_prints(built: tuple[Path, dict[str, Any], str]) -> None:
    out, manifest, _ = built
    project = Path(__file__).resolve().parents[2]
    for art in [a for a in manifest["artifacts"] if a["kind"] in ("wheel", "c-library")]:
        proc = ortdist(project, "inspect", str(out / art["path"]))
        assert proc.returncode == 0, proc.stderr
        assert "recipe:    cpu-linux (x86_64-unknown-linux-gnu); EPs: cpu" in proc.stdout
        assert (
            "source:    onnxruntime 1.21.0 sha256 32df1f82bd6b07b18372c0f387133214905cbde7a586b3ad83f0ed0075f80273"
            in proc.stdout
        )
        assert "patch:     patches/1.21.0/0001-eigen-3.4.0-nan-propagating-min-max.patch" in proc.stdout
        assert "compiled:  onnx 1.17.0" in proc.stdout
        # Every dependency is compiled in from its pinned source, named with its version.
        for dep in ("abseil 20240722.0", "protobuf 3.21.12", "re2 20240702", "cpuinfo 0.0~git20250905.877328f"):
            assert f"compiled:  {dep}" in proc.stdout, proc.stdout
        assert "ppbt 0.1.8" in proc.stdout and "glibc 2.17" in proc.stdout, proc.stdout
    wheel = next(a for a in manifest["artifacts"] if a["kind"] == "wheel")
    proc = ortdist(project, "inspect", str(out / wheel["path"]))
    # Nothing grafted: abseil, protobuf, re2 and cpuinfo are linked in statically.
    assert not [line for line in proc.stdout.splitlines() if line.startswith("  bundled:")], proc.stdout


def test_wheels_are_manylinux_2_17_with_nothing_grafted(built: tuple[Path, dict[str, Any], str]) -> None:
    """The portable toolchain's promise: every wheel installs on glibc 2.17 and newer, and carries
    no <dist>.libs/ (the dependencies are compiled into libonnxruntime.so and the binding)."""
    from ortdist.wheelnames import required_glibc

    out, manifest, _ = built
    for art in (a for a in manifest["artifacts"] if a["kind"] == "wheel"):
        assert required_glibc(art["path"]) == PORTABLE_GLIBC, art["path"]
        assert "manylinux_2_17_x86_64" in art["tag"], art["tag"]
        with zipfile.ZipFile(out / art["path"]) as zf:
            assert not [n for n in zf.namelist() if n.startswith("onnxruntime.libs/")], art["path"]
    (cp313,) = [a for a in manifest["artifacts"] if a["kind"] == "wheel" and "-cp313-" in a["path"]]
    assert cp313["size"] <= PYPI_CP313_WHEEL_BYTES, cp313


def test_every_shipped_elf_keeps_the_promise_and_a_grafted_debian_library_breaks_it(
    built: tuple[Path, dict[str, Any], str],
) -> None:
    """DT_NEEDED and symbol versions of every ELF in every wheel and the archive, read from the files
    (and cross-checked with readelf), against glibc 2.17; then the build root's own Debian
    libstdc++ grafted into the cp313 wheel must be refused."""
    from ortdist.checks import elf
    from ortdist.checks.elf import wheel_libraries
    from ortdist.paths import Cache
    from ortdist.toolchains import load_toolchain
    from ortdist.wheelnames import required_glibc

    out, manifest, _ = built
    project = Path(__file__).resolve().parents[2]
    system = load_toolchain(project, TOOLCHAIN).system_libraries
    assert system == ()  # glibc's own libraries and nothing else
    checked = 0
    for art in manifest["artifacts"]:
        path = out / art["path"]
        if art["kind"] == "wheel":
            members = wheel_libraries(path)
            promise = required_glibc(path.name)
            assert promise == PORTABLE_GLIBC
        elif art["kind"] == "c-library":
            members, promise = elf.artifact_libraries(path), PORTABLE_GLIBC
        else:
            continue
        policy = elf.policy(promise, system)
        assert elf.violations(members, policy) == [], art["path"]
        checked += sum(1 for _, data in members if elf.is_elf(data))
    wheels = sum(1 for a in manifest["artifacts"] if a["kind"] == "wheel")
    assert checked >= wheels * 3 + 2  # binding, core and providers_shared per wheel; the archive's libraries
    # The reader agrees with readelf on a real library.
    (cp313,) = [out / a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel" and "-cp313-" in a["path"]]
    members = dict(wheel_libraries(cp313))
    core = next(name for name in members if "libonnxruntime.so" in name)
    probe = out.parent / "probe-core.so"
    probe.write_bytes(members[core])
    dynamic = subprocess.run(["readelf", "-dW", str(probe)], text=True, capture_output=True, check=True).stdout
    versions = subprocess.run(["readelf", "-VW", str(probe)], text=True, capture_output=True, check=True).stdout
    needs = elf.read_needs(members[core])
    assert list(needs.needed) == re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    assert {v for names in needs.versions.values() for v in names} == set(
        re.findall(r"Name: ((?:GLIBC|GLIBCXX|CXXABI|GCC)_[0-9.]+)", versions.split("Version needs section")[-1])
    )
    probe.unlink()
    # A Debian library grafted as auditwheel would: trixie's libstdc++ from the build root.
    root = Cache.default().sysroots / manifest["toolchain"]["root"]
    debian = (root / "usr" / "lib" / "x86_64-linux-gnu" / "libstdc++.so.6").resolve()
    doctored = [*members.items(), ("onnxruntime.libs/libstdc++-0a1b2c3d.so.6", debian.read_bytes())]
    found = elf.violations(doctored, elf.policy(PORTABLE_GLIBC, system))
    assert found and all(line.startswith("onnxruntime.libs/libstdc++-0a1b2c3d.so.6: needs ") for line in found)
    assert any(re.search(r"needs GLIBC_2\.(2[89]|3\d|4\d) from libc\.so\.6", line) for line in found), found


def test_an_offline_rebuild_after_rm_rf_is_served_by_ccache_and_byte_identical(
    built: tuple[Path, dict[str, Any], str], tmp_path: Path, pythons: tuple[str, ...]
) -> None:
    """The build tree gone, as after a user's rm -rf, then rebuilt with --fresh in a network namespace
    with no network at all: configure and compile need nothing from outside, every object is a
    compiler-cache hit, and the artifacts are the same bytes. In a cache of its own (the user's
    roots, sources and downloads linked in, its compiler cache a hard-linked copy): the user's
    build tree stays as it is."""
    from ortdist.paths import Cache

    _, manifest, _ = built
    project = Path(__file__).resolve().parents[2]
    cache = scratch_cache(tmp_path / "cache")
    subprocess.run(["cp", "-al", str(Cache.default().root / "ccache"), str(cache.root / "ccache")], check=True)
    assert not cache.work("cpu-linux").exists()
    argv = ["unshare", "--net", "--", sys.executable, "-m", "ortdist", "build", "cpu-linux", "--fresh"]
    argv += ["--python", ",".join(pythons), "--dist", str(tmp_path / "dist")]
    env = {**os.environ, "ORTDIST_CACHE": str(cache.root)}
    proc = subprocess.run(argv, cwd=project, text=True, capture_output=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads((tmp_path / "dist" / "cpu-linux" / "manifest.json").read_text())
    cache = again["compiler_cache"]
    assert cache["cache_miss"] == 0 and cache["direct_cache_hit"] + cache["preprocessed_cache_hit"] > 500, cache
    from ortdist.report import release

    served = release.reuse("build", again["build_times_s"]["build"], again)  # what the report draws
    assert served is not None and served.label == "cached" and again["build"] == {"ninja_no_work": False}, served
    first = {a["path"]: a["sha256"] for a in manifest["artifacts"]}
    second = {a["path"]: a["sha256"] for a in again["artifacts"]}
    assert second == first and len(first) == len(manifest["artifacts"])  # both wheels too
    for art in again["artifacts"]:
        data = (tmp_path / "dist" / "cpu-linux" / art["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == art["sha256"]


# Translation units compiled again with the compiler cache off, one per kind of code the library is
# made of, each with its own way to leak build-time state into an object: the session core (ORT's
# build-info strings), a templated CPU kernel, hand-vectorised MLAS, protobuf code generated into the
# build tree, and the Python binding (pybind11, __FILE__ in its error paths). The byte-identical
# rebuild above is served by ccache, so it proves link and packaging deterministic; this proves the
# compiler gives the same object twice.
FRESH_COMPILE = (
    "onnxruntime/core/session/inference_session.cc",
    "onnxruntime/core/providers/cpu/math/gemm.cc",
    "onnxruntime/core/mlas/lib/sgemm.cpp",
    "onnx/onnx-ml.pb.cc",
    "onnxruntime/python/onnxruntime_pybind_module.cc",
)


def test_the_compile_itself_is_deterministic(built: tuple[Path, dict[str, Any], str], tmp_path: Path) -> None:
    import shlex

    from ortdist.paths import Cache
    from ortdist.pipeline import Roots, make_context
    from ortdist.project import plan_for
    from ortdist.toolchains import Bind, make_toolchain

    project = Path(__file__).resolve().parents[2]
    plan, path = plan_for("cpu-linux", project)
    toolchain = make_toolchain(plan.toolchain)
    ctx = make_context(plan, toolchain, Cache.default(), tmp_path, path, 2)
    roots = Roots(build=toolchain.ensure_build_root(ctx.cache, sys.stderr))
    build = ctx.layout.build
    scratch = Path("/ortdist-fresh")  # tmp_path: the fresh objects never touch the user's build tree

    def in_root(argv: list[str]) -> subprocess.CompletedProcess[str]:
        command = ctx.in_root(roots, argv)
        binds = [*command.binds, Bind(tmp_path, scratch)]
        wrapped = toolchain.wrap(roots.build, command.argv, binds=binds, env=command.env)
        return subprocess.run(wrapped, text=True, capture_output=True, check=False)

    listed = in_root(["ninja", "-C", str(build.inside), "-t", "commands", "onnxruntime_pybind11_state"])
    assert listed.returncode == 0, listed.stderr[-2000:]
    commands = {}
    for line in listed.stdout.splitlines():
        argv = shlex.split(line.split("&&")[-1].strip())
        source = argv[argv.index("-c") + 1] if "-c" in argv else ""
        match = next((unit for unit in FRESH_COMPILE if source.endswith("/" + unit)), None)
        if match:
            commands[match] = argv
    assert set(commands) == set(FRESH_COMPILE), sorted(set(FRESH_COMPILE) - set(commands))
    # Through the build's own launcher (ccache rewrites paths under its base dir, which __FILE__
    # shows) but with an empty cache of its own: every unit is a miss, a real compile.
    empty = f"{scratch}/ccache"
    script = ["set -e", f"cd {build.inside}", f"rm -rf {empty}"]
    for i, (unit, argv) in enumerate(sorted(commands.items())):
        assert argv[0].endswith("ccache"), argv[:2]
        out = argv[argv.index("-o") + 1]
        fresh = f"{scratch}/fresh-{i}.o"
        argv[argv.index("-o") + 1] = fresh
        if "-MF" in argv:
            argv[argv.index("-MF") + 1] = fresh + ".d"
        compile_ = shlex.join(["env", f"CCACHE_DIR={empty}", *argv])
        script += [compile_, f"cmp {shlex.quote(out)} {fresh} && echo SAME {unit}", f"rm -f {fresh} {fresh}.d"]
    counters = "^(cache_miss|direct_cache_hit|preprocessed_cache_hit)"
    script += [f"CCACHE_DIR={empty} ccache --print-stats | grep -E '{counters}'"]
    script += [f"rm -rf {empty}"]
    done = in_root(["/bin/sh", "-c", "\n".join(script)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(line.split()[1] for line in done.stdout.splitlines() if line.startswith("SAME ")) == sorted(
        FRESH_COMPILE
    ), done.stdout
    stats = dict(line.split("\t") for line in done.stdout.splitlines() if "\t" in line)
    assert stats == {"cache_miss": str(len(FRESH_COMPILE)), "direct_cache_hit": "0", "preprocessed_cache_hit": "0"}


def test_report_renders_in_headless_chromium(built: tuple[Path, dict[str, Any], str]) -> None:
    """dist/report.html from the real build and its smoke report, opened in Debian's Chromium."""
    import re
    import shutil

    from ortdist.report import chromium_render
    from ortdist.smoke.run_suite import smoke_wheel
    from ortdist.toolchains import load_toolchain, make_toolchain

    out, manifest, _ = built
    project = Path(__file__).resolve().parents[2]
    wheel = out / next(a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel")
    toolchain = make_toolchain(load_toolchain(project, TOOLCHAIN))
    smoke_wheel(wheel, out / "smoke", scratch_cache(), toolchain, with_node_tests=False)
    dist = out.parent
    png = dist / "report.png"
    proc = ortdist(project, "report", "--dist", str(dist), "--screenshot", str(png))
    assert proc.returncode == 0, proc.stderr
    dom = chromium_render(dist / "report.html")
    # The smoke matrix: one PASS row per CPU reference model, as the smoke report says.
    rows = re.findall(r"<tr class=\"pass\"><td>CPU</td><td>(\w+)</td>", dom)
    assert sorted(rows) == sorted(BUILDERS)
    # The chart: drawn by the page's script, one bar per space group of the real wheel.
    # cpu-linux's wheel grafts nothing (test_wheels_are_manylinux_2_17_with_nothing_grafted): the
    # chart has the binding's bar and no bundled libraries', and draws every bar it was given.
    rendered = re.search(r'<svg class="space"[^>]*data-rendered="(\d+)"', dom)
    assert rendered is not None and dom.count('class="bar"') == int(rendered[1]) >= 3
    assert "Python binding (ORT core linked in)" in dom and "bundled system libraries" not in dom
    assert "abseil" in dom and "ppbt" in dom  # SBOM summary: the sources compiled in, and the compiler
    assert "<td>bullseye-c</td><td>Debian bullseye</td><td>2.31</td>" in dom  # the older systems
    # The timeline: one bar per step in the order the steps ran (driver.STEPS; manifest.json's keys
    # are alphabetical), laid out by the browser as wide as its share of the steps' 600 px.
    from ortdist.pipeline.driver import STEPS

    times = {k: v for k, v in manifest["build_times_s"].items() if k != "total"}
    ran = [s for s in STEPS if s in times]
    assert ran != sorted(ran) and set(ran) == set(times)
    timeline = re.search(r'<svg class="timeline"[^>]*>', dom)
    assert timeline is not None
    assert f'data-rendered="{len(ran)}"' in timeline[0] and f'data-order="{" ".join(ran)}"' in timeline[0]
    widths = re.search(r'data-widths="([^"]*)"', timeline[0])
    assert widths is not None
    total = sum(times[s] for s in ran)
    for step, width in zip(ran, widths[1].split(), strict=True):
        assert float(width) == pytest.approx(600 * times[step] / total, abs=0.2), step
    for step in ("install", "wheel", "repair", "check", "compat", "size"):  # --no-reuse: they all worked
        assert f'<g class="step work" data-step="{step}"' in dom, step
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    kept = Path(os.environ.get("ORTDIST_TEST_RESULTS") or project / "test-results") / "report-screenshot.png"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(png, kept)  # with the run's results, never in the project's dist/


# Run under the tests' own CPython with the unpacked wheel first on sys.path: import onnxruntime,
# run a model, then load the wheel's libonnxruntime for the C API (as a C extension or ctypes user
# in the same process would) and ask it its version; report which libonnxruntime files are mapped.
ONE_PROCESS = """
import ctypes, json, os, sys
import numpy as np
import onnxruntime as ort

def mapped():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f}
    return sorted(p for p in paths if os.path.basename(p).startswith("libonnxruntime.so"))

session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
feeds = {i.name: np.load(os.path.join(sys.argv[2], i.name + ".npy")) for i in session.get_inputs()}
out = session.run(None, feeds)[0]
after_import = mapped()
library = ctypes.CDLL(os.path.join(os.path.dirname(ort.capi.__file__), "libonnxruntime.so.1.21.0"))
library.OrtGetApiBase.restype = ctypes.POINTER(ctypes.c_void_p)
version = ctypes.CFUNCTYPE(ctypes.c_char_p)(library.OrtGetApiBase()[1])().decode()
print(json.dumps({"after_import": after_import, "after_c_api": mapped(), "version": version,
                  "binding": ort.capi.onnxruntime_pybind11_state.__file__, "out": out.ravel().tolist()}))
"""


def test_one_runtime_per_wheel(built: tuple[Path, dict[str, Any], str], tmp_path: Path) -> None:
    """Issue 57: the binding links the libonnxruntime shipped beside it instead of carrying its own
    copy of ONNX Runtime. Read from the wheel: the binding needs the library by the file name the
    wheel has and is a small part of the library's size. Run: importing onnxruntime maps that one
    library, the C API loaded from the same wheel directory in the same process maps nothing more,
    and the model's output is the reference's."""
    from ortdist.elffile import read_needs

    out, manifest, _ = built
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    wheels = {a["python"]: out / a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel"}
    assert python in wheels, f"the tests' CPython {python} has no wheel of this build: {sorted(wheels)}"
    site = tmp_path / "site"
    with zipfile.ZipFile(wheels[python]) as zf:
        zf.extractall(site)
    capi = site / "onnxruntime" / "capi"
    module, library = capi / "onnxruntime_pybind11_state.so", capi / "libonnxruntime.so.1.21.0"
    assert "libonnxruntime.so.1.21.0" in read_needs(module.read_bytes()).needed
    # measured (cp311, 2026-11-29): the binding 2,119,856 B beside the library's 20,171,064 B (it was 21.2 MB)
    assert module.stat().st_size < library.stat().st_size / 5, (module.stat().st_size, library.stat().st_size)
    ref = BUILDERS["cnn"]()
    (tmp_path / "cnn.onnx").write_bytes(ref.model)
    for name, value in ref.inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", ONE_PROCESS, str(tmp_path / "cnn.onnx"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    facts = json.loads(run.stdout.splitlines()[-1])
    assert facts["binding"] == str(module), facts["binding"]  # our wheel's, not an installed one
    assert facts["after_import"] == facts["after_c_api"] == [str(library)], facts
    assert facts["version"] == "1.21.0"
    want = next(iter(ref.expected.values())).ravel()
    assert np.max(np.abs(np.array(facts["out"], dtype=np.float32) - want)) < 1e-4


def test_one_core_five_pythons(
    built: tuple[Path, dict[str, Any], str],
    our_smoke: dict[str, tuple[dict[str, Any], list[Any]]],
    pythons: tuple[str, ...],
) -> None:
    """recipes/cpu-linux.toml asks for CPython 3.10 to 3.14: 3.13 is trixie's, 3.11 bookworm's and
    3.14 sid's (unpacked), 3.10 and 3.12 the host's (pyenv). The core is compiled once, only the
    binding again per version, and every wheel passes the clean-root check and the whole smoke
    suite under its own interpreter, with the cp313 wheel's CPU node-test results."""
    from ortdist import binding
    from ortdist.paths import Cache

    out, manifest, _ = built
    wheels = {a["python"]: out / a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel"}
    assert list(wheels) == list(pythons) and len(pythons) >= 2  # five, or the core's and 3.11 on a slow day
    modules, libraries = {}, {}
    for version, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as zf:
            modules[version] = zf.read("onnxruntime/capi/onnxruntime_pybind11_state.so")
            libraries[version] = zf.read("onnxruntime/capi/libonnxruntime.so.1.21.0")
            assert any(n.endswith(".dist-info/sboms/ortdist.cdx.json") for n in zf.namelist())
        assert f"-cp{version.replace('.', '')}-cp{version.replace('.', '')}-" in wheel.name
    assert len(set(modules.values())) == len(wheels)  # a binding of its own per version
    assert len(set(libraries.values())) == 1  # one core
    for version in wheels:
        others = [f"python{v}".encode() for v in wheels if v != version]
        assert not any(other in modules[version] for other in others), version
    core = ("libonnxruntime_framework.a", "libonnxruntime_providers.a", "libonnxruntime_mlas.a")
    node = our_smoke["3.13"][0]["node_tests"]["CPUExecutionProvider"]
    for version in [v for v in wheels if v != "3.13"]:
        # the binding's build compiles one unit of the binding's own sources and links the core's archives
        ninja = (Cache.default().work("cpu-linux") / "work" / f"binding-{version}" / "build.ninja").read_text()
        edges = dict(line[len("build ") :].split(": ", 1) for line in ninja.splitlines() if line.startswith("build "))
        (unit,) = [target for target in edges if target.endswith(".o")]
        sources = edges[unit].split(" || ")[0].split(" | ")[1].split()
        assert unit.endswith(f"{binding.UNITY}.o") and len(sources) == 11, edges[unit]
        assert all(s.startswith("/ortdist/source/onnxruntime/python/onnxruntime_pybind") for s in sources), sources
        (module,) = [target for target in edges if target.endswith("onnxruntime_pybind11_state.so")]
        # linked after the main binding (the library both link is made by then), against the library
        # alone: none of the core's archives (one runtime per wheel)
        assert edges[module].endswith("| onnxruntime_pybind11_state.so"), edges[module][-200:]
        link = ninja.split(f"build {module}: ", 1)[1].splitlines()[1]
        assert link.startswith("  cmd = ") and " libonnxruntime.so.1.21.0 " in f"{link} ", link[-500:]
        assert not any(archive in link for archive in core), link[-500:]
    # one ninja run: CMake's graph and every version's file, from the build tree's top file
    top = (Cache.default().work("cpu-linux") / "build" / "ortdist-pythons.ninja").read_text()
    assert top.count("subninja ") == len(pythons) - 1 and "include build.ninja\n" in top
    # auditwheel once (--no-reuse: never the last build's kept repair), the others derived from it
    how = manifest["repair"]
    assert how == {"3.13": "auditwheel", **{v: "derived" for v in pythons[1:]}}, how
    assert manifest["wheel_swapped_binding"] == list(pythons[1:])
    for version in [v for v in wheels if v != "3.13"]:
        timings = manifest["python_versions"][version]
        assert isinstance(timings["binding_s"], float) and timings["wheel_s"] > 0 and timings["check_s"] > 0
        assert manifest["clean_root_check_other_python"][version]["ok"] is True
        report, verdicts = our_smoke[version]
        assert report["passed"], (version, [v.message for v in verdicts if not v.passed])
        assert report["environment"]["kind"] == expected_smoke_environment(PORTABLE_GLIBC, version)
        assert report["version"] == "1.21.0"
        assert report["regressions"] == {"CPUExecutionProvider": []}, version
        assert report["node_tests"]["CPUExecutionProvider"] == node, version
        assert {v.name for v in verdicts if v.passed} >= {"cnn", "transformer", "control_flow", "qdq_cnn", "fp16_mlp"}


@pytest.fixture
def package_index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real pypiserver on 127.0.0.1 (from the tests session), uploads guarded by a password as
    a private index's are, reads open, no fallback to PyPI: (upload URL, its packages directory)."""

    from passlib.apache import HtpasswdFile

    packages = tmp_path / "packages"
    packages.mkdir()
    htpasswd = HtpasswdFile(str(tmp_path / "htpasswd"), new=True)
    htpasswd.set_password(INDEX_USER, INDEX_PASSWORD)
    htpasswd.save()
    port = free_port()
    argv = [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port), "-a", "update"]
    argv += ["-P", str(tmp_path / "htpasswd"), "--disable-fallback", "--hash-algo", "sha256", str(packages)]
    url = f"http://127.0.0.1:{port}/"
    with local_server(argv, url + "simple/", tmp_path / "pypiserver.log"):
        yield url, packages


INDEX_USER, INDEX_PASSWORD = "release", "s3cret-for-the-test-index"


def test_publish_round_trip_through_a_real_index(
    built: tuple[Path, dict[str, Any], str],
    our_smoke: dict[str, tuple[dict[str, Any], list[Any]]],
    package_index: tuple[str, Path],
) -> None:
    """`ortdist publish` uploads the five smoke-tested wheels with twine (credentials from twine's
    environment), then installs onnxruntime==1.21.0 by name from the index into the clean root
    under each Python and runs the reference models on what pip installed; a second publish of
    the same version is refused, and with --skip-existing uploads nothing."""
    import time

    out, manifest, _ = built
    url, packages = package_index
    project = Path(__file__).resolve().parents[2]
    wheels = {a["path"]: a["sha256"] for a in manifest["artifacts"] if a["kind"] == "wheel"}
    assert all(our_smoke[v][0]["passed"] for v in our_smoke)
    publish = [sys.executable, "-m", "ortdist", "publish", "cpu-linux", "--dist", str(out.parent)]
    creds = {**os.environ, "TWINE_USERNAME": INDEX_USER, "TWINE_PASSWORD": INDEX_PASSWORD}

    def run(*extra: str, env: dict[str, str] = creds) -> subprocess.CompletedProcess[str]:
        argv = [*publish, "--repository-url", url, *extra]
        return subprocess.run(argv, cwd=project, env=env, text=True, capture_output=True, check=False)

    wrong = run(env={**creds, "TWINE_PASSWORD": "wrong"})
    assert wrong.returncode == 11 and "403" in wrong.stdout + wrong.stderr, wrong.stderr[-3000:]
    assert list(packages.iterdir()) == []

    started = time.monotonic()
    done = run()
    seconds = time.monotonic() - started
    print(f"publish round trip (5 wheels: check, upload, install by name + reference models): {seconds:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    assert INDEX_PASSWORD not in done.stdout + done.stderr
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in packages.iterdir()} == wheels
    record = json.loads((out / "publish.json").read_text())
    assert sorted(record["uploaded"]) == sorted(wheels) and record["index_url"] == url + "simple/"
    for name, sha in wheels.items():
        verified = record["verified"][name]
        assert verified["passed"] and verified["models_passed"] == len(BUILDERS), (name, verified)
        assert verified["installed_from"]["url"] == f"{url}packages/{name}"
        assert verified["installed_from"]["sha256"] == sha
        assert verified["environment"].startswith("clean root"), verified
        report = json.loads((out / "smoke-from-index" / f"{Path(name).stem}.json").read_text())
        assert report["environment"]["kind"] == "root" and report["passed"]

    again = run()
    assert again.returncode == 11 and "already on the index" in again.stderr, again.stderr[-3000:]
    assert "--skip-existing" in again.stderr
    skipped = run("--skip-existing", "--no-verify")
    assert skipped.returncode == 0, skipped.stderr[-3000:]
    record = json.loads((out / "publish.json").read_text())
    assert record["uploaded"] == [] and all(v["same"] for v in record["skipped"].values())
    assert len(record["skipped"]) == len(wheels)
