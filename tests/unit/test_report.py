from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ortdist import registry
from ortdist.errors import CheckError, DataError
from ortdist.pipeline.driver import STEPS
from ortdist.report import RecipeReport, collect, release, render, wheel_space


def test_wheel_space_groups_members_by_what_they_are(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("onnxruntime/capi/onnxruntime_pybind11_state.so", b"x" * 300)
        zf.writestr("onnxruntime/capi/libonnxruntime_providers_dnnl.so", b"x" * 50)
        zf.writestr("onnxruntime_dnnl.libs/libdnnl-565aea08.so.3.7", b"x" * 500)
        zf.writestr("onnxruntime/__init__.py", b"x" * 7)
    groups, largest = wheel_space(wheel)
    assert groups == {
        "Python binding (ORT core linked in)": 300,
        "EP provider libraries": 50,
        "bundled system libraries": 500,
        "Python code and data": 7,
    }
    assert largest[0] == ("onnxruntime_dnnl.libs/libdnnl-565aea08.so.3.7", 500)


def test_render_shows_failures_and_escapes_what_it_prints() -> None:
    smoke = {
        "models": [
            {
                "provider": "DnnlExecutionProvider",
                "name": "transformer",
                "share": 0.96,
                "max_abs_err": 1.04,
                "seconds": 0.004,
                "latency_ms": 0.05,
                "passed": False,
                "skipped": False,
                "message": "outputs differ <b>",
            },
        ],
        "node_tests": {"DnnlExecutionProvider": {"passed": 1014, "failed": 153}},
    }
    manifest = {
        "recipe": "dnnl-linux",
        "artifacts": [],
        "build_times_s": {"total": 30.0},
        "compiler_cache": {"name": "sccache", "cache_hit": 3, "cache_miss": 1},
    }
    page = render([RecipeReport(recipe="dnnl-linux", manifest=manifest, smoke=[smoke], space={"a": 1})])
    assert "<tr class='fail'><td>Dnnl</td><td>transformer</td><td>96%</td><td>1</td>" in page
    assert "FAIL: outputs differ &lt;b&gt;" in page
    assert "Dnnl 1014 passed / 153 failed" in page
    assert "Compiler cache (sccache): 75.0% hit rate: 3 of 4 compiles from the cache, 1 miss" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing fetched from a network


def test_collect_refuses_an_empty_dist(tmp_path: Path) -> None:
    with pytest.raises(CheckError, match="no builds to report on"):
        collect(tmp_path)
    assert collect(tmp_path, require=False) == []


def test_a_dist_with_only_benchmark_results_still_gets_a_report(tmp_path: Path) -> None:
    from ortdist.report import write_report

    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "results.md").write_text("| figure | ortdist |\n|---|---|\n| cold build | 1399.5 s |\n")
    page = write_report(tmp_path, tmp_path / "report.html").read_text()
    assert "0 build(s)" in page and "| cold build | 1399.5 s |" in page


def test_render_lists_the_older_systems_the_build_was_proven_on() -> None:
    manifest = {
        "recipe": "cpu-linux",
        "compat": [
            {
                "name": "bullseye-c",
                "suite": "bullseye",
                "glibc": "2.31",
                "check": "c",
                "ok": True,
                "seconds": 3.2,
                "details": {"gcc": "gcc (Debian 10.2.1-6) 10.2.1 20210110", "ldd": []},
            },
            {
                "name": "bookworm-wheel",
                "suite": "bookworm",
                "glibc": "2.36",
                "check": "wheel",
                "ok": True,
                "seconds": 41.0,
                "details": {
                    "python": "Python 3.11.2",
                    "wheel": "onnxruntime-1.21.0-cp311-cp311-manylinux_2_17_x86_64.whl",
                    "available_providers": ["CPUExecutionProvider"],
                },
            },
        ],
    }
    page = render([RecipeReport(recipe="cpu-linux", manifest=manifest)])
    assert "<h3>Older systems</h3><table class='compat'>" in page
    assert (
        "<tr class='pass'><td>bullseye-c</td><td>Debian bullseye</td><td>2.31</td><td>C program built with "
        "gcc (Debian 10.2.1-6) 10.2.1 20210110 against the shipped library</td><td>3.2 s</td><td>PASS</td></tr>"
    ) in page
    assert "onnxruntime-1.21.0-cp311-cp311-manylinux_2_17_x86_64.whl on Python 3.11.2: reference models on CPU" in page
    without = render([RecipeReport(recipe="x", manifest={"recipe": "x"})])
    assert "No older systems checked" in without


# build_times_s of a real no-op rebuild of cpu-linux (dist/cpu-linux/manifest.json), as manifest.json
# stores it: keys sorted alphabetically, not in the order the steps ran.
REBUILD_TIMES = {
    "binding": 0.3,
    "build": 0.3,
    "check": 65.2,
    "compat": 16.2,
    "configure": 0.0,
    "install": 2.6,
    "repair": 46.9,
    "size": 1.7,
    "source": 4.1,
    "toolchain": 6.0,
    "total": 178.8,
    "wheel": 35.5,
}
RAN = ["toolchain", "source", "configure", "build", "binding", "install", "wheel", "repair", "check", "compat", "size"]
SVG = "{http://www.w3.org/2000/svg}"
CP313 = "onnxruntime-1.21.0-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"


def as_stored(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as a reader gets it back from manifest.json (sorted keys, as publish writes it)."""
    loaded: dict[str, Any] = json.loads(json.dumps(manifest, sort_keys=True))
    return loaded


def timeline_of(page: str) -> ET.Element:
    """The page's timeline, parsed as the XML an inline SVG must be."""
    (svg,) = re.findall(r"<svg class='timeline'.*?</svg>", page)
    return ET.fromstring(svg)


def bars(page: str) -> list[tuple[str, str, float, float]]:
    """(step, class, x, width) of each timeline row, in document order."""
    rows = []
    for g in timeline_of(page).iter(f"{SVG}g"):
        rect = g.find(f"{SVG}rect")
        assert rect is not None
        rows.append((g.attrib["data-step"], g.attrib["class"], float(rect.attrib["x"]), float(rect.attrib["width"])))
    return rows


def test_steps_are_shown_in_the_order_they_ran_not_alphabetically() -> None:
    manifest = as_stored({"recipe": "cpu-linux", "build_times_s": {**REBUILD_TIMES, "later-step": 1.0}})
    assert list(manifest["build_times_s"])[:3] == ["binding", "build", "check"]  # what the page gets
    assert [s for s in STEPS if s in REBUILD_TIMES] == RAN  # driver.STEPS's order
    page = render([RecipeReport(recipe="cpu-linux", manifest=manifest)])
    assert [step for step, *_ in bars(page)] == [*RAN, "later-step"]  # a step STEPS does not know comes last
    table = re.findall(r"<tr class='[\w-]+'><td>([\w-]+)</td>", page.split("<table class='times'>")[1])
    assert table == [*RAN, "later-step", "total"]


def test_timeline_bars_are_proportional_to_seconds_and_start_where_the_last_step_ended() -> None:
    page = render([RecipeReport(recipe="cpu-linux", manifest=as_stored({"build_times_s": REBUILD_TIMES}))])
    rows = bars(page)
    seconds = [REBUILD_TIMES[step] for step, *_ in rows]
    scale = 600 / sum(seconds)  # one scale: all the steps together span 600 px
    for (step, _, _, width), s in zip(rows, seconds, strict=True):
        assert width == pytest.approx(s * scale, abs=0.006), step  # drawn to 0.01 px
    starts = [x for _, _, x, _ in rows]
    ends = [x + w for _, _, x, w in rows]
    assert starts[1:] == pytest.approx(ends[:-1], abs=0.02)  # a timeline: each starts where the last ended
    assert rows[RAN.index("check")][3] / rows[RAN.index("repair")][3] == pytest.approx(65.2 / 46.9, rel=1e-3)
    labels = [t.text for t in timeline_of(page).iter(f"{SVG}text") if t.attrib.get("class") == "secs"]
    assert labels[RAN.index("check")] == "65.2 s" and labels[RAN.index("configure")] == "0.0 s · no-op"
    assert "178.8 s" in [t.text for t in timeline_of(page).iter(f"{SVG}text")]  # the axis: the steps' sum


def classes(manifest: dict[str, Any]) -> dict[str, str]:
    page = render([RecipeReport(recipe="r", manifest=as_stored(manifest))])
    return {step: kind.removeprefix("step ") for step, kind, *_ in bars(page)}


def test_a_no_op_rebuild_is_drawn_apart_from_real_work() -> None:
    """The real no-op rebuild's manifest (before the steps recorded ninja's verdict): build counted
    no compile, configure took 0.0 s; binding's 0.3 s has no record and stays work."""
    manifest = {"build_times_s": REBUILD_TIMES, "compiler_cache": {"name": "ccache", "cache_miss": 0}}
    kinds = classes({**manifest, "compiler_cache": {**manifest["compiler_cache"], "direct_cache_hit": 0}})
    assert kinds == {step: "no-op" if step in ("configure", "build") else "work" for step in RAN}
    # What the steps now record: ninja's own "no work to do", and configure's skipped CMake.
    recorded = {
        **manifest,
        "build_times_s": {**REBUILD_TIMES, "configure": 0.2},
        "build": {"ninja_no_work": True},
        "binding": {"ninja_no_work": True},
        "configure": {"reconfigured": False},
    }
    kinds = classes(recorded)
    assert {s for s, k in kinds.items() if k != "work"} == {"configure", "build", "binding"}
    assert all(kinds[s] == "no-op" for s in ("configure", "build", "binding"))


@pytest.mark.parametrize(
    ("step", "seconds", "extra", "expected"),
    [
        # build: ninja's verdict, then the compiler cache's counters; never the duration.
        ("build", 0.3, {"build": {"ninja_no_work": True}}, "no-op"),
        ("build", 95.0, {"compiler_cache": {"direct_cache_hit": 1200, "cache_miss": 0}}, "cached"),
        ("build", 0.4, {"compiler_cache": {"direct_cache_hit": 1200, "cache_miss": 1}}, "work"),
        ("build", 0.1, {"build": {"ninja_no_work": False}, "compiler_cache": {"cache_miss": 0}}, "work"),  # a relink
        ("build", 0.3, {"compiler_cache": {"cache_miss": 0}}, "no-op"),  # an older manifest: no compile at all
        ("build", 0.0, {"build": {"ninja_no_work": False}}, "work"),  # its record beats the 0.0 s rule
        ("binding", 0.3, {"binding": {"ninja_no_work": True}}, "no-op"),
        ("binding", 0.3, {}, "work"),  # nothing recorded, 0.3 s: work, not a guess
        ("configure", 0.5, {"configure": {"reconfigured": False}}, "no-op"),
        ("configure", 0.0, {"configure": {"reconfigured": True}}, "work"),
        ("configure", 2.0, {"configure": {"reconfigured": False}, "reduced_ops": {}}, "work"),  # kernels regenerated
        ("configure", 0.0, {}, "no-op"),  # an older manifest: 0.0 s
        ("size", 0.0, {}, "no-op"),
        ("size", 0.1, {}, "work"),
    ],
)
def test_the_reuse_rule(step: str, seconds: float, extra: dict[str, Any], expected: str) -> None:
    found = release.reuse(step, seconds, extra)
    assert (found.label if found else "work") == expected


def test_compiler_cache_hit_rate_with_its_counts() -> None:
    def line(cache: dict[str, Any]) -> str:
        page = render([RecipeReport(recipe="r", manifest={"compiler_cache": cache})])
        (found,) = re.findall(r"<p class='cache'>(.*?)</p>", page)
        return found

    ccache = {"name": "ccache", "direct_cache_hit": 1170, "preprocessed_cache_hit": 30, "cache_miss": 31}
    assert line(ccache) == (
        "Compiler cache (ccache): 97.5% hit rate: 1,200 of 1,231 compiles from the cache "
        "(1,170 direct, 30 preprocessed), 31 misses"
    )
    cold = {"name": "ccache", "direct_cache_hit": 0, "preprocessed_cache_hit": 0, "cache_miss": 1653}
    assert line(cold) == (
        "Compiler cache (ccache): 0.0% hit rate: 0 of 1,653 compiles from the cache (0 direct, 0 preprocessed), "
        "1,653 misses"
    )
    idle = {"name": "ccache", "direct_cache_hit": 0, "preprocessed_cache_hit": 0, "cache_miss": 0}
    assert line(idle) == "Compiler cache (ccache): no compiles in this build (0 hits, 0 misses)"
    assert line({"name": "none"}) == "Compiler cache: no counters in the manifest (none used)."


def wheel_entry(path: str, size: int, sha: str = "a" * 64, python: str = "3.13") -> dict[str, Any]:
    return {"path": path, "kind": "wheel", "size": size, "sha256": sha, "distribution": "onnxruntime", "python": python}


def write_dist(dist: Path, manifest: dict[str, Any], previous: dict[str, Any] | None = None) -> None:
    out = dist / "cpu-linux"
    out.mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps(manifest, sort_keys=True))
    if previous is not None:
        (out / "previous-manifest.json").write_text(json.dumps(previous, sort_keys=True))


def cells(page: str, path: str) -> list[str]:
    """An artifact row's cells after its file name (size, sha256, vs previous build, vs PyPI), as text."""
    (row,) = re.findall(rf"<tr><td>[\w-]+</td><td>{re.escape(path)}</td>(.*?)</tr>", page)
    return [re.sub(r"<[^>]+>", " ", c).split("  ")[0].strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_artifacts_and_step_times_against_the_previous_build_of_the_recipe(tmp_path: Path) -> None:
    """previous-manifest.json (kept by publish): each artifact's size delta, step-time deltas."""
    library = {
        "path": "onnxruntime-cpu-linux-1.21.0.tar.gz",
        "kind": "c-library",
        "size": 7_415_461,
        "sha256": "b" * 64,
    }
    previous = {
        "recipe": "cpu-linux",
        "recipe_sha256": "1" * 64,
        "ortdist_version": "0.1.0",
        "ort_version": "1.20.1",
        "build_times_s": {"build": 1834.1, "check": 60.0, "compat": 16.2, "total": 2410.0},
        "artifacts": [
            {**library, "path": "onnxruntime-cpu-linux-1.20.1.tar.gz", "size": 7_400_000, "sha256": "c" * 64},
            wheel_entry(
                "onnxruntime-1.20.1-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", 15_958_000, "9" * 64
            ),
            {"path": "old.size.md", "kind": "size-report", "size": 10, "sha256": "d" * 64},
            {"path": "gone.tar.gz", "kind": "static-library", "size": 10, "sha256": "e" * 64},
        ],
    }
    manifest = {
        "recipe": "cpu-linux",
        "recipe_sha256": "2" * 64,
        "target": "x86_64-unknown-linux-gnu",
        "build_times_s": {"build": 0.3, "check": 65.2, "size": 1.7, "total": 178.8},
        "artifacts": [
            library,
            wheel_entry(CP313, 15_956_603),
            wheel_entry("onnxruntime-1.21.0-cp314-cp314-manylinux2014_x86_64.whl", 15_956_852, python="3.14"),
            {"path": "cpu-linux.size.md", "kind": "size-report", "size": 10, "sha256": "d" * 64},
        ],
    }
    write_dist(tmp_path, manifest, previous)
    (report,) = collect(tmp_path)
    assert report.previous == previous
    page = render([report])
    assert "Compared with the previous build of this recipe (previous-manifest.json: ortdist 0.1.0, " in page
    assert "ONNX Runtime 1.20.1, the recipe file has changed since)" in page
    # Renamed by the version bump, still compared: same kind (wheels: same distribution and CPython).
    assert cells(page, library["path"])[2] == "+15,461 B (+0.21%)"
    assert cells(page, CP313)[2] == "-1,397 B (-0.01%)"
    assert cells(page, "onnxruntime-1.21.0-cp314-cp314-manylinux2014_x86_64.whl")[2] == "new"
    assert cells(page, "cpu-linux.size.md")[2] == "identical (same sha256)"
    assert "In the previous build, no longer built: gone.tar.gz" in page
    times = page.split("<table class='times'>")[1]
    assert "<tr class='work'><td>check</td><td>65.2 s</td><td>97%</td><td>60.0 s</td><td>+5.2 s</td>" in times
    assert "<td>build</td><td>0.3 s</td><td>0%</td><td>1834.1 s</td><td>-1833.8 s</td>" in times
    assert "<td>size</td><td>1.7 s</td><td>3%</td><td></td><td></td>" in times  # did not run then
    assert "<tr class='total'><td>total</td><td>178.8 s</td><td></td><td>2410.0 s</td><td>-2231.2 s</td>" in times


def test_without_a_previous_build_the_page_says_how_one_appears(tmp_path: Path) -> None:
    write_dist(tmp_path, {"recipe": "cpu-linux", "artifacts": [wheel_entry(CP313, 15_956_603)]})
    (report,) = collect(tmp_path)
    page = render([report])
    assert report.previous is None and cells(page, CP313)[2] == "no previous build"
    assert "publishing keeps the manifest it replaces as previous-manifest.json" in page


def test_wheels_against_pypis_wheel_from_the_data_file(tmp_path: Path) -> None:
    """data/pypi_wheels.toml gives PyPI's sizes; a wheel is matched by distribution, version,
    CPython and target, and one PyPI does not have (cp314, another target or name) shows none."""
    manifest = {
        "recipe": "cpu-linux",
        "target": "x86_64-unknown-linux-gnu",
        "artifacts": [
            wheel_entry(CP313, 15_956_603),
            wheel_entry("onnxruntime-1.21.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", 15_957_831),
            wheel_entry("onnxruntime-1.21.0-cp314-cp314-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", 15_956_852),
            wheel_entry("onnxruntime_dnnl-1.21.0-cp313-cp313-manylinux_2_39_x86_64.whl", 30_000_000),
            {"path": "onnxruntime-cpu-linux-1.21.0.tar.gz", "kind": "c-library", "size": 7, "sha256": "b" * 64},
        ],
    }
    write_dist(tmp_path, manifest)
    (report,) = collect(tmp_path)
    page = render([report])
    assert cells(page, CP313)[3] == "-62,344 B (-0.39%)"  # the README's figure: 62,344 B under 16,018,947 B
    assert "<small>PyPI 16,018,947 B</small>" in page
    assert "title='onnxruntime-1.21.0-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl'" in page
    assert cells(page, "onnxruntime-1.21.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")[3] == (
        "-44,134 B (-0.28%)"  # 15,957,831 against 16,001,965
    )
    assert cells(page, "onnxruntime-1.21.0-cp314-cp314-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")[3] == "-"
    assert cells(page, "onnxruntime_dnnl-1.21.0-cp313-cp313-manylinux_2_39_x86_64.whl")[3] == "-"
    assert cells(page, "onnxruntime-cpu-linux-1.21.0.tar.gz")[3] == ""
    aarch64 = {**manifest, "target": "aarch64-unknown-linux-gnu"}
    found = release.pypi_reference(manifest["artifacts"][0], aarch64)  # the target's own PyPI wheel
    assert found is not None and found.file.endswith("cp313-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl")
    android = {**manifest, "target": "aarch64-linux-android"}
    assert release.pypi_reference(manifest["artifacts"][0], android) is None  # same name, a target PyPI lacks


def test_a_cuda_wheel_is_compared_with_its_own_cuda_lines_pypi_wheel() -> None:
    """Both CUDA recipes make onnxruntime-gpu 1.21.0: cuda-linux's is compared with PyPI's 1.21.0
    (CUDA 12), cuda13-linux's with PyPI's CUDA 13 wheel, 1.31.1, by CPython tag."""
    wheel = wheel_entry("onnxruntime_gpu-1.21.0-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", 1)
    target = "x86_64-unknown-linux-gnu"
    cuda12 = release.pypi_reference(wheel, {"recipe": "cuda-linux", "target": target})
    cuda13 = release.pypi_reference(wheel, {"recipe": "cuda13-linux", "target": target})
    assert cuda12 is not None and cuda12.file.startswith("onnxruntime_gpu-1.21.0-cp312-") and cuda12.size == 280_811_594
    assert cuda13 is not None and cuda13.file == "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert release.pypi_reference(wheel, {"recipe": "my-gpu-build", "target": target}) is None
    cp310 = wheel_entry("onnxruntime_gpu-1.21.0-cp310-cp310-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", 1)
    assert release.pypi_reference(cp310, {"recipe": "cuda13-linux", "target": target}) is None  # 1.31.1 has none


def test_the_pypi_data_file_is_checked() -> None:
    wheels = registry.pypi_wheels()
    assert {w.file: w.size for w in wheels}[
        "onnxruntime-1.21.0-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    ] == 16_018_947
    good = {"target": "x86_64-unknown-linux-gnu", "size": 1, "sha256": "f" * 64}
    name = "onnxruntime-1.21.0-cp313-cp313-manylinux_2_28_x86_64.whl"
    for bad, message in [
        ({"x.whl": good}, "not a wheel's file name"),
        ({name: {**good, "target": "x86_64-linux"}}, "unknown target 'x86_64-linux'"),
        ({name: {**good, "sha256": "F" * 64}}, "is not a lowercase sha256"),
        ({name: {**good, "size": 0}}, "size 0 is not a file's size"),
        ({name: good, name.replace("onnxruntime", "ONNXRuntime"): good}, "a second wheel for onnxruntime 1.21.0"),
        ({name: {**good, "bytes": 1}}, "bytes"),
    ]:
        with pytest.raises(DataError, match=re.escape(message)):
            registry.parse_pypi_wheels(bad)


def test_the_release_page_says_where_the_wheels_were_published_and_proven() -> None:
    from ortdist.report import RecipeReport, render

    name = "onnxruntime-1.21.0-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    published = {
        "repository_url": "http://127.0.0.1:8080/",
        "uploaded": [name],
        "skipped": {},
        "seconds": {"check": 0.4, "upload": 0.5, "verify": 15.4, "total": 16.3},
        "verified": {
            name: {
                "passed": True,
                "installed_from": {"url": f"http://127.0.0.1:8080/packages/{name}"},
                "models_passed": 8,
                "models": 8,
                "environment": "clean root",
            }
        },
    }
    page = render([RecipeReport(recipe="cpu-linux", manifest={}, published=published)])
    assert "Uploaded 1 wheel(s) to <code>http://127.0.0.1:8080/</code> (0 already there)" in page
    assert f"<tr class='pass'><td>{name}</td><td>http://127.0.0.1:8080/packages/{name}</td><td>8/8</td>" in page
    assert "verify 15.4 s" in page
    assert "Not published" in render([RecipeReport(recipe="cpu-linux", manifest={})])


def test_a_build_of_some_of_the_recipes_pythons_says_which_were_left_out() -> None:
    base = {"recipe": "cpu-linux", "artifacts": [], "build_times_s": {"total": 1.0}}
    whole = render([RecipeReport(recipe="cpu-linux", manifest={**base, "python": ["3.13", "3.10"]})])
    assert "Wheels for Python 3.13, 3.10." in whole and "Not built" not in whole
    part = {**base, "python": ["3.13", "3.11"], "python_not_built": ["3.10", "3.12"]}
    page = render([RecipeReport(recipe="cpu-linux", manifest=part)])
    assert "Wheels for Python 3.13, 3.11." in page
    assert "Not built (chosen on the command line with --python): Python 3.10, 3.12" in page


def test_a_cuda_build_shows_its_architectures_and_a_narrowed_one_says_it_is_not_the_release() -> None:
    base = {"recipe": "cuda13-linux", "artifacts": [], "build_times_s": {"total": 1.0}}
    device_code = [{"library": "libonnxruntime_providers_cuda.so", "bytes_per_arch": {"sm_90": 2_000_000}}]
    release = {**base, "cuda_architectures": ["89-real", "90"], "size": {"cuda_device_code": device_code}}
    page = render([RecipeReport(recipe="cuda13-linux", manifest=release)])
    assert "CUDA code for 89-real, 90 (CMake architectures)." in page and "not its release" not in page
    assert "<td>libonnxruntime_providers_cuda.so</td><td>sm_90</td><td>SASS</td><td>2.00 MB</td>" in page
    quick = {**base, "cuda_architectures": ["90"], "cuda_recipe_architectures": ["89-real", "90"]}
    page = render([RecipeReport(recipe="cuda13-linux", manifest=quick)])
    assert "the recipe ships 89-real, 90; this is not its release" in page
    assert "CUDA code" not in render([RecipeReport(recipe="cpu-linux", manifest=base)])
