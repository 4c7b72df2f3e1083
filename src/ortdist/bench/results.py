"""The benchmark's results: facts derived from the measurements (release cost, ratios, spreads),
the wheels' native sizes and output differences, and the markdown table (dist/bench/results.md)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

# The slim part: the C-only arm64 cut, the same cut with exceptions (the wheel's) it is compared
# with, and the goal (issue 37): half of the cap ORT 1.21.0's own binary-size-checks-pipeline.yml
# sets for its Android arm64 minimal build with no operators and exceptions disabled
# (BinarySizeThresholdInBytes: 1306224; issue 19 had quoted 1,595,392 B).
SLIM_RECIPE, SLIM_COMPARED_WITH = "slim-c-linux-aarch64", "slim-linux-aarch64"
UPSTREAM_EMPTY_ARM64_BYTES = 1_306_224
SLIM_GOAL_BYTES = UPSTREAM_EMPTY_ARM64_BYTES // 2
# Issue 37: a one-file change to five proven wheels.
FIVE_WHEELS_GOAL_S = 30.0
# One-file-change rebuilds are measured this many times and the median kept: on a shared 2-core
# machine one rebuild moves by several seconds.
ONE_FILE_ROUNDS = 3


def median_run(runs: list[tuple[float, dict[str, float]]]) -> tuple[float, dict[str, float]]:
    """The run with the median wall time (an odd count; the lower middle one otherwise)."""
    ordered = sorted(runs, key=lambda run: run[0])
    return ordered[(len(ordered) - 1) // 2]


# The web part: the slim WebAssembly module against the stock onnxruntime-web module it replaces.
WEB_RECIPE = "slim-wasm"


def native_sizes(wheel: Path) -> dict[str, int]:
    """Bytes of the native libraries in a wheel (ORT's own and bundled), by member name."""
    with zipfile.ZipFile(wheel) as zf:
        return {i.filename: i.file_size for i in zf.infolist() if ".so" in i.filename.rsplit("/", 1)[-1]}


def max_output_diff(a: Path, b: Path) -> float:
    import numpy as np

    with np.load(a) as x, np.load(b) as y:
        diffs = [
            float(np.max(np.abs(x[k].astype(np.float64) - y[k].astype(np.float64)))) if x[k].size else 0.0
            for k in x.files
        ]
    return max(diffs) if diffs else 0.0


def _lib_stem(member: str) -> str:
    """'onnxruntime/capi/onnxruntime_pybind11_state.cpython-313-x86_64-linux-gnu.so' -> its first name part."""
    return member.rsplit("/", 1)[-1].split(".", 1)[0]


def _ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}x" if ours and theirs else "-"


def _round_spread(ratios: list[float]) -> str:
    """'rounds 0.98-1.03, ours faster in 5 of 8; ' from each round's ratio ('' for older results)."""
    if not ratios:
        return ""
    faster = sum(r < 1 for r in ratios)
    return f"rounds {min(ratios):.2f}-{max(ratios):.2f}, ours faster in {faster} of {len(ratios)}; "


def release_cost(build: dict[str, Any]) -> dict[str, float] | None:
    """What the extra CPythons cost in the measured cold build. ``one_python_s`` is the same cold
    build for the root's Python alone, measured (``ours_cold_one_python_s``); a run from before
    the bindings joined the core's ninja run has it derived instead: the build less every
    version-specific step of the others (the binding step's wall time, each one's wheel, repair and
    check). A run whose bindings compiled inside the build step and that did not measure the
    one-Python build has no such figure. ``per_python_rebuild_s`` is build.py's cold build once per
    version, as ORT's packaging builds every Python from scratch; ``vs_buildpy`` the release against
    build.py's one cold build (which neither packages nor checks)."""
    total, versions = build.get("ours_cold_s"), build.get("ours_cold_python_versions") or {}
    if total is None or len(versions) < 2:
        return None
    figures = {"pythons": float(len(versions)), "release_s": total}
    one = build.get("ours_cold_one_python_s")
    joined = "python_bindings" in (build.get("ours_cold_compile_command_s") or {})
    if one is None and not joined:
        # The root's own Python needs no binding of its own: its steps are part of any build.
        others = [times for times in versions.values() if "binding_s" in times]
        binding_wall = (build.get("ours_cold_steps") or {}).get("binding")
        if binding_wall is None:  # a run from before the one-ninja binding step: its per-version times
            extra = sum(sum(times.values()) for times in others)
        else:
            extra = binding_wall + sum(v for times in others for k, v in times.items() if k != "binding_s")
        one = total - extra
    if one is not None:
        figures |= {"one_python_s": one, "ratio": total / one}
    if build.get("buildpy_cold_s"):
        figures["per_python_rebuild_s"] = build["buildpy_cold_s"] * len(versions)
        figures["vs_buildpy"] = total / build["buildpy_cold_s"]
    return figures


def markdown(results: dict[str, Any]) -> str:
    """The table the issue note quotes: each figure ours vs theirs, with the ratio."""
    lines = ["| figure | ortdist | reference | ratio (ortdist / reference) |", "|---|---|---|---|"]
    build = results.get("build", {})
    for key, label in (("cold", "cold build"), ("noop", "no-op rebuild"), ("one_file", "one-file-change rebuild")):
        ours, theirs = build.get(f"ours_{key}_s"), build.get(f"buildpy_{key}_s")
        if ours is not None:
            lines.append(f"| {label} (vs ORT build.py) | {ours:.1f} s | {theirs:.1f} s | {_ratio(ours, theirs)} |")
        steps = build.get(f"ours_{key}_steps")
        if steps and theirs:
            core = steps.get("configure", 0.0) + steps.get("build", 0.0)
            lines.append(
                f"| {label}: configure + compile steps only | {core:.1f} s | {theirs:.1f} s | {_ratio(core, theirs)} |"
            )
    if build.get("ours_nox_noop_s") is not None:
        lines.append(
            f"| no-op `nox -s build-<recipe>` end to end (goal < 5 s; vs build.py's no-op) | "
            f"{build['ours_nox_noop_s']:.1f} s | {build.get('buildpy_noop_s', 0):.1f} s | "
            f"{_ratio(build['ours_nox_noop_s'], build.get('buildpy_noop_s'))} |"
        )
    theirs = build.get("buildpy_one_file_s")
    for key, label, goal in (
        ("ours_one_file", "one-file change to five proven wheels", f"goal <= {FIVE_WHEELS_GOAL_S:.0f} s"),
        (
            "ours_one_wheel",
            f"one-file change to one proven wheel (`--python {build.get('one_wheel_python', '')}`)",
            f"goal <= 2x build.py: {2 * theirs:.1f} s" if theirs else "",
        ),
    ):
        steps, runs = build.get(f"{key}_steps"), build.get(f"{key}_all_s")
        if not (steps and theirs and runs):
            continue
        spent = ", ".join(f"{k} {v:.1f} s" for k, v in steps.items() if k != "total" and v >= 0.5)
        each = ", ".join(f"{t:.1f}" for t in runs)
        lines.append(
            f"| {label} ({goal}; median of {each} s; build.py's: "
            f"{', '.join(f'{t:.1f}' for t in build.get('buildpy_one_file_all_s', [theirs]))} s), by step: {spent} "
            f"| {build[f'{key}_s']:.1f} s | {theirs:.1f} s | {_ratio(build[f'{key}_s'], theirs)} |"
        )
    release = release_cost(build)
    if release:
        n = int(release["pythons"])
        if "one_python_s" in release:
            how = "measured" if build.get("ours_cold_one_python_s") else "derived from the steps"
            lines.append(
                f"| {n}-Python release, cold (vs ortdist's one-Python build, {how}) | {release['release_s']:.1f} s "
                f"| {release['one_python_s']:.1f} s | {release['ratio']:.2f}x |"
            )
        if "vs_buildpy" in release:
            lines.append(
                f"| {n}-Python release, cold (vs build.py's one cold build; goal <= 1.05x) | "
                f"{release['release_s']:.1f} s | {build['buildpy_cold_s']:.1f} s | {release['vs_buildpy']:.2f}x |"
            )
        if "per_python_rebuild_s" in release:
            lines.append(
                f"| {n}-Python release, cold (vs build.py once per Python, compile only) | "
                f"{release['release_s']:.1f} s | {release['per_python_rebuild_s']:.1f} s | "
                f"{_ratio(release['release_s'], release['per_python_rebuild_s'])} |"
            )
    size = results.get("size")
    if size:
        o, t = size["ours"], size["official"]
        lines.append(f"| wheel bytes (vs PyPI) | {o['bytes']:,} | {t['bytes']:,} | {_ratio(o['bytes'], t['bytes'])} |")
        for key in sorted(o["native"]):
            name = key.rsplit("/", 1)[-1]
            # The same library in the other wheel; extension modules may differ only in their ABI tag.
            twin = next((v for k, v in t["native"].items() if _lib_stem(k) == _lib_stem(key)), None)
            if twin:
                lines.append(f"| {name} bytes | {o['native'][key]:,} | {twin:,} | {_ratio(o['native'][key], twin)} |")
        ours_libs = sum(v for k, v in o["native"].items() if ".libs/" in k)
        lines.append(f"| bundled system libraries bytes | {ours_libs:,} | 0 (static) | - |")
    inference = results.get("inference", {})
    for model, m in sorted(inference.get("models", {}).items()):
        lines.append(
            f"| {model} median latency, 1 thread (vs PyPI) | {m['ours_ms']:.4f} ms | {m['official_ms']:.4f} ms | "
            f"{m['ratio']:.2f}x (max output diff {m['max_output_diff']:.2g}) |"
        )
    for model, m in (results.get("models", {}).get("models") or {}).items():
        for threads in map(str, results["models"]["threads"]):
            t = m[threads]
            lines.append(
                f"| {model} median latency, {threads} thread(s) (vs PyPI; goal <= 1.00) | {t['ours_ms']:.2f} ms | "
                f"{t['official_ms']:.2f} ms | {t['ratio']:.2f}x ({_round_spread(t.get('round_ratios', []))}max "
                f"output diff {m['max_output_diff']:.2g}) |"
            )
    smoke = results.get("smoke", {})
    if smoke:
        o, t = smoke["ours"], smoke["official"]
        lines.append(
            f"| smoke suite wall time (vs PyPI wheel) | {o['seconds']:.1f} s | {t['seconds']:.1f} s | "
            f"{_ratio(o['seconds'], t['seconds'])} |"
        )
    slim = results.get("slim", {})
    if SLIM_RECIPE in slim:
        ours, cut = slim[SLIM_RECIPE], slim.get(SLIM_COMPARED_WITH)
        lines.append(
            f"| {SLIM_RECIPE} libonnxruntime.so stripped (goal < {SLIM_GOAL_BYTES:,} B, half of upstream's "
            f"empty-operator arm64 build; C smoke max error {ours['c_smoke']['max_abs_err']:.2g}) | "
            f"{ours['stripped_bytes']:,} | {SLIM_GOAL_BYTES:,} | {_ratio(ours['stripped_bytes'], SLIM_GOAL_BYTES)} |"
        )
        if cut:
            lines.append(
                f"| the same cut with exceptions and RTTI ({SLIM_COMPARED_WITH}; vs upstream's empty build) | "
                f"{cut['stripped_bytes']:,} | {UPSTREAM_EMPTY_ARM64_BYTES:,} | "
                f"{_ratio(cut['stripped_bytes'], UPSTREAM_EMPTY_ARM64_BYTES)} |"
            )
    web = results.get("web", {})
    if web:
        ours, stock = web["sizes"]["sizes"], web["sizes"]["stock_sizes"]
        runs = {where: [r for r in models if not r.get("refused")] for where, models in web["smoke"].items()}
        ran = ", ".join(f"{where} {r['model']} {r['max_abs_err']:.2g}" for where, rs in runs.items() for r in rs)
        for name in ("ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.wasm.gz"):
            lines.append(
                f"| {WEB_RECIPE} {name} (vs stock onnxruntime-web's; ran: {ran}) | {ours[name]:,} | {stock[name]:,} | "
                f"{_ratio(ours[name], stock[name])} |"
            )
    lines += cuda_rows(results.get("cuda") or {})
    lines += ep_rows(results.get("ep") or {})
    return "\n".join(lines) + "\n"


def _ms(cell: dict[str, Any], who: str) -> str:
    value = cell.get(f"{who}_ms")
    return f"{value:,.1f}" if value is not None else "failed"


def ep_rows(ep: dict[str, Any]) -> list[str]:
    """The EP part (ep.py): each real-size model's latency on the EP, on our CPU EP and on PyPI's
    package of the EP, at each thread count, and the wheels' sizes."""
    if not ep:
        return []
    provider = ep["provider"].removesuffix("ExecutionProvider")
    lines = [
        "",
        f"## {provider} EP: {ep['recipe']} against our CPU EP and PyPI's {ep['wheels']['pypi']} "
        f"(CPython {ep['python']}, median of {ep['rounds']} rounds of {ep['runs']} runs)",
        "",
        f"| model | threads | ours on {provider} ms | ours on CPU ms | PyPI's on {provider} ms | "
        f"{provider} vs CPU | ours vs PyPI's | sessions' EPs (ours, PyPI's) | max diff vs CPU, vs PyPI's |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, row in ep["models"].items():
        eps = ", ".join(
            "+".join(p.removesuffix("ExecutionProvider") for p in row["sessions"][w]) or "-"
            for w in ("ours-ep", "pypi-ep")
        )
        diffs = (
            f"{row.get('max_diff_vs_ours-cpu', float('nan')):.2g}, {row.get('max_diff_vs_pypi-ep', float('nan')):.2g}"
        )
        for threads in ("1", "2"):
            cell = row[threads]
            lines.append(
                f"| {name} | {threads} | {_ms(cell, 'ours-ep')} | {_ms(cell, 'ours-cpu')} | {_ms(cell, 'pypi-ep')} | "
                f"{_ratio(cell.get('ours-ep_ms'), cell.get('ours-cpu_ms'))} | "
                f"{_ratio(cell.get('ours-ep_ms'), cell.get('pypi-ep_ms'))} | {eps} | {diffs} |"
            )
        for who, error in row["errors"].items():
            lines.append(f"| {name} | - | {who} failed: {error[:200]} | | | | | | |")
    ours, pypi = ep["bytes"]["ours"], ep["bytes"]["pypi"]
    lines += ["", f"Wheels: ours {ours:,} B, PyPI's {pypi:,} B ({_ratio(ours, pypi)})."]
    return lines


def cuda_rows(cuda: dict[str, Any]) -> list[str]:
    """The CUDA compile's cost: the tree's cold compile by group, each architecture's share of the
    kernels' compile (measured on a sample), and the no-op and warm rebuilds."""
    if not cuda:
        return []
    lines = [
        "",
        f"## CUDA compile cost: {cuda['recipe']} ({cuda['kernels']} kernel files)",
        "",
        "| what | command seconds |",
        "|---|---:|",
        *(
            f"| cold compile: {group} | {seconds:,.0f} |"
            for group, seconds in sorted(cuda["compile_command_s"].items())
        ),
    ]
    if cuda.get("compile_over_every_sitting_s") is not None:
        lines.append(f"| the tree's compile over every sitting (wall) | {cuda['compile_over_every_sitting_s']:,.0f} |")
    lines.append(
        f"| CUDA kernels: host side ({cuda['host_share']:.0%} of a kernel's compile) | "
        f"{cuda['cuda_kernels_by_architecture_s']['host_side']:,.0f} |"
    )
    for entry, share in cuda["architecture_shares"].items():
        seconds = cuda["cuda_kernels_by_architecture_s"][entry]
        lines.append(f"| CUDA kernels: architecture {entry} ({share:.0%} of the device compile) | {seconds:,.0f} |")
    lines += [
        f"| no-op rebuild (wall) | {cuda['noop_s']:,.1f} |",
        f"| warm rebuild: fresh tree, warm compiler cache (wall) | {cuda['warm_s']:,.1f} |",
        "",
        f"Architecture shares measured on {', '.join(cuda['sample'])}, each compiled without the cache for every "
        "architecture alone and for all of them.",
    ]
    return lines
