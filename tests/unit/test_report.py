from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from ortdist.errors import CheckError
from ortdist.report import RecipeReport, collect, render, wheel_space


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
    assert "Compiler cache (sccache): 75.0% (3 hits, 1 misses)" in page
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
