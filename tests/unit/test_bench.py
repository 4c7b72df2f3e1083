from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ortdist.bench.results import markdown, max_output_diff, release_cost
from ortdist.bench.run import ONE_FILE, Bench
from ortdist.patches import prepare_tree, reuse_tree
from ortdist.paths import Cache


def test_markdown_puts_each_figure_beside_its_reference_with_the_ratio() -> None:
    results = {
        "build": {"ours_cold_s": 1500.0, "buildpy_cold_s": 1600.0, "ours_noop_s": 30.0, "buildpy_noop_s": 3.0},
        "size": {
            "ours": {"bytes": 110, "native": {"onnxruntime/capi/x.so": 50, "onnxruntime.libs/libre2-1.so.11": 10}},
            "official": {"bytes": 100, "native": {"onnxruntime/capi/x.so": 40}},
        },
        "inference": {"models": {"cnn": {"ours_ms": 0.02, "official_ms": 0.025, "ratio": 0.8, "max_output_diff": 0}}},
        "smoke": {"ours": {"seconds": 20.0, "passed": True}, "official": {"seconds": 16.0, "passed": True}},
    }
    table = markdown(results)
    assert "| cold build (vs ORT build.py) | 1500.0 s | 1600.0 s | 0.94x |" in table
    assert "| no-op rebuild (vs ORT build.py) | 30.0 s | 3.0 s | 10.00x |" in table
    assert "one-file-change" not in table  # not measured, not invented
    assert "| wheel bytes (vs PyPI) | 110 | 100 | 1.10x |" in table
    assert "| x.so bytes | 50 | 40 | 1.25x |" in table
    assert "| bundled system libraries bytes | 10 | 0 (static) | - |" in table
    assert "| cnn median latency, 1 thread (vs PyPI) | 0.0200 ms | 0.0250 ms | 0.80x (max output diff 0) |" in table
    assert "| smoke suite wall time (vs PyPI wheel) | 20.0 s | 16.0 s | 1.25x |" in table


def test_markdown_shows_the_slim_goal_beside_its_reference() -> None:
    slim = {
        "slim-c-linux-aarch64": {
            "stripped_bytes": 700_000,
            "sections": [],
            "c_smoke": {"model": "cnn.ort", "max_abs_err": 1e-7},
        },
        "slim-linux-aarch64": {
            "stripped_bytes": 1_300_000,
            "sections": [],
            "c_smoke": {"model": "cnn.ort", "max_abs_err": 0},
        },
    }
    table = markdown({"slim": slim})
    assert (
        "| slim-c-linux-aarch64 libonnxruntime.so stripped (goal < 653,112 B, half of upstream's empty-operator "
        "arm64 build; C smoke max error 1e-07) | 700,000 | 653,112 | 1.07x |"
    ) in table
    assert (
        "| the same cut with exceptions and RTTI (slim-linux-aarch64; vs upstream's empty build) | 1,300,000 | "
        in table
    )
    assert "no slim recipe" not in table
    assert "slim-c-linux-aarch64" not in markdown({})  # not measured, not shown


def test_max_output_diff_compares_every_output(tmp_path: Path) -> None:
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez(a, y=np.array([1.0, 2.0], np.float32), z=np.array([3], np.int64))
    np.savez(b, y=np.array([1.0, 2.5], np.float32), z=np.array([3], np.int64))
    assert max_output_diff(a, b) == 0.5


def test_release_cost_takes_only_the_other_versions_steps_out_of_an_older_runs_cold_build() -> None:
    """Results from before the bindings joined the core's ninja run: the one-Python build is that
    build less the other versions' own steps."""
    build = {
        "ours_cold_s": 1000.0,
        "buildpy_cold_s": 900.0,
        "ours_cold_python_versions": {
            "3.13": {"wheel_s": 10.0, "repair_s": 5.0, "check_s": 20.0},  # the root's own: in any build
            "3.10": {"binding_s": 60.0, "wheel_s": 10.0, "repair_s": 5.0, "check_s": 25.0},
            "3.14": {"binding_s": 70.0, "wheel_s": 10.0, "repair_s": 5.0, "check_s": 15.0},
        },
    }
    figures = release_cost(build)
    assert figures == {
        "pythons": 3.0,
        "release_s": 1000.0,
        "one_python_s": 800.0,
        "ratio": 1.25,
        "per_python_rebuild_s": 2700.0,
        "vs_buildpy": 1000.0 / 900.0,
    }
    table = markdown({"build": build})
    derived = "| 3-Python release, cold (vs ortdist's one-Python build, derived from the steps) |"
    assert f"{derived} 1000.0 s | 800.0 s | 1.25x |" in table
    assert (
        "| 3-Python release, cold (vs build.py's one cold build; goal <= 1.05x) | 1000.0 s | 900.0 s | 1.11x |" in table
    )
    assert "| 3-Python release, cold (vs build.py once per Python, compile only) | 1000.0 s | 2700.0 s |" in table
    # With the one-ninja binding step, its wall time (all extra versions at once) is what comes out.
    stepped = {**build, "ours_cold_steps": {"binding": 100.0}}
    assert release_cost(stepped) == {**figures, "one_python_s": 830.0, "ratio": 1000.0 / 830.0}
    single = {"ours_cold_s": 500.0, "buildpy_cold_s": 450.0, "ours_cold_python_versions": {}}
    assert release_cost(single) is None and "Python release" not in markdown({"build": single})


def test_release_cost_with_the_bindings_in_the_cores_run_is_measured_or_not_claimed() -> None:
    """Once the bindings compile inside the build step no step's time is theirs: the one-Python
    build must be measured; a run that did not measure it claims no ratio against it."""
    build = {
        "ours_cold_s": 1000.0,
        "buildpy_cold_s": 950.0,
        "ours_cold_steps": {"binding": 0.0, "build": 900.0},
        "ours_cold_compile_command_s": {"onnxruntime": 1500.0, "python_bindings": 130.0},
        "ours_cold_python_versions": {"3.13": {"wheel_s": 3.0}, "3.10": {"binding_s": 65.0, "wheel_s": 0.5}},
    }
    figures = release_cost(build)
    assert figures is not None and "one_python_s" not in figures and "ratio" not in figures
    assert "one-Python build" not in markdown({"build": build})
    assert "| 2-Python release, cold (vs build.py's one cold build; goal <= 1.05x) | 1000.0 s | 950.0 s | 1.05x |" in (
        markdown({"build": build})
    )
    measured = release_cost({**build, "ours_cold_one_python_s": 940.0})
    assert measured is not None and measured["one_python_s"] == 940.0 and measured["ratio"] == 1000.0 / 940.0
    assert "(vs ortdist's one-Python build, measured) | 1000.0 s | 940.0 s | 1.06x |" in markdown(
        {"build": {**build, "ours_cold_one_python_s": 940.0}}
    )


def test_the_one_file_change_is_declared_so_the_build_keeps_the_changed_tree(tmp_path: Path, project: Path) -> None:
    """The benchmark changes one source file on purpose: the build must compile that tree, not re-make it."""
    for name in ("recipes", "toolchains", "patches"):
        shutil.copytree(project / name, tmp_path / "project" / name)
    bench = Bench(tmp_path / "project", "cpu-linux", 1, cache=Cache(tmp_path / "cache"))
    tree = bench.layout.source.host

    def fill(dest: Path) -> None:
        (dest / ONE_FILE).parent.mkdir(parents=True)
        (dest / ONE_FILE).write_text("int x;\n")

    prepare_tree(tree, fill, ())
    bench.work.mkdir(parents=True)  # measure_build makes it
    undo = bench.touch_one_file()
    assert (tree / ONE_FILE).read_text().startswith("int x;\n\n// ortdist bench")
    assert reuse_tree(tree)
    undo()
    assert (tree / ONE_FILE).read_text() == "int x;\n" and reuse_tree(tree)


def test_markdown_shows_the_web_module_against_the_stock_one() -> None:
    sizes = {
        "sizes": {"ort-wasm-simd-threaded.wasm": 886_375, "ort-wasm-simd-threaded.wasm.gz": 338_796},
        "stock_sizes": {"ort-wasm-simd-threaded.wasm": 12_666_427, "ort-wasm-simd-threaded.wasm.gz": 3_225_155},
    }
    smoke = {
        "node": [{"model": "cnn.ort", "max_abs_err": 6e-8}, {"model": "transformer.ort", "refused": True}],
        "chromium": [{"model": "cnn.ort", "max_abs_err": 6e-8}],
    }
    table = markdown({"web": {"sizes": sizes, "smoke": smoke}})
    assert (
        "| slim-wasm ort-wasm-simd-threaded.wasm (vs stock onnxruntime-web's; ran: node cnn.ort 6e-08, chromium "
        "cnn.ort 6e-08) | 886,375 | 12,666,427 | 0.07x |"
    ) in table
    assert "| 338,796 | 3,225,155 | 0.11x |" in table
    assert "slim-wasm" not in markdown({})


def test_one_file_rebuilds_are_the_median_of_their_rounds_with_each_goal() -> None:
    """Five proven wheels against issue 37's 30 s, one proven wheel (`--python`) against twice
    build.py's rebuild; each the median run, every round's time shown."""
    from ortdist.bench.results import median_run

    assert median_run([(31.0, {"build": 1.0}), (29.0, {"build": 2.0}), (40.0, {"build": 3.0})]) == (
        31.0,
        {"build": 1.0},
    )
    assert median_run([(2.0, {}), (1.0, {})]) == (1.0, {})
    build = {
        "buildpy_one_file_s": 5.0,
        "buildpy_one_file_all_s": [5.0, 4.9, 5.3],
        "ours_one_file_s": 29.5,
        "ours_one_file_all_s": [29.5, 31.0, 28.0],
        "ours_one_file_steps": {"build": 10.0, "repair": 8.0, "configure": 0.0, "total": 29.0},
        "ours_one_wheel_s": 12.0,
        "ours_one_wheel_all_s": [12.0, 11.0, 13.0],
        "ours_one_wheel_steps": {"build": 6.0, "check": 0.4, "total": 11.5},
        "one_wheel_python": "3.13",
    }
    table = markdown({"build": build})
    assert (
        "| one-file change to five proven wheels (goal <= 30 s; median of 29.5, 31.0, 28.0 s; build.py's: "
        "5.0, 4.9, 5.3 s), by step: build 10.0 s, repair 8.0 s | 29.5 s | 5.0 s | 5.90x |"
    ) in table
    assert (
        "| one-file change to one proven wheel (`--python 3.13`) (goal <= 2x build.py: 10.0 s; median of "
        "12.0, 11.0, 13.0 s; build.py's: 5.0, 4.9, 5.3 s), by step: build 6.0 s | 12.0 s | 5.0 s | 2.40x |"
    ) in table
    assert "one proven wheel" not in markdown({"build": {k: v for k, v in build.items() if "one_wheel" not in k}})
