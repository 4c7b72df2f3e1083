"""Runs INSIDE the environment under test (fresh venv with only the wheel and its dependencies).

Usage: python runner.py PLAN.json RESULT.json     (proof.py beside it)

PLAN.json: {"claimed": [provider...], "cases": [{"suite", "name", "model", "data", "atol", "rtol",
            "provider", "must_take": "all"|"any"|"none"}],
            "latency": {"runs", "warmup", "threads"} (optional),
            "save_outputs": true (optional: model outputs to outputs/<provider>__<model>.npz)}
Each case runs one model with [provider, CPUExecutionProvider] (or CPU alone), profiling on, and
records where every node ran, the max abs error against the expected outputs, and the time; with
"latency", model cases also get the median of many runs in a second, unprofiled session.
Standard library + numpy + onnxruntime only.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from proof import (  # copied beside this script: ortdist/smoke/proof.py
    compare,
    compiled_share,
    read_profile_ops,
    share_on,
)

# What a case result carries over from its plan (the judge reads them back). Also in env.py:
# this script runs standalone in the wheel's environment and cannot be imported there.
CASE_KEYS = ("suite", "name", "provider", "must_take", "expect_error", "refused_ops")


@contextlib.contextmanager
def native_stderr(sink: list[str]) -> Iterator[None]:
    """Capture what native code writes to fd 2 (ORT logs a provider library that failed to load there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf-8", "replace")[-4000:])


def measure_latency(
    ort: Any, model: str, providers: list[str], inputs: dict[str, Any], names: list[str], latency: dict[str, int]
) -> float:
    """Median wall time of one run in ms: a fresh session without profiling, a fixed thread count,
    warm-up runs discarded (first runs pay for allocations and EP kernel set-up)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = latency["threads"]
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=providers)
    for _ in range(latency["warmup"]):
        session.run(names, inputs)
    times = []
    for _ in range(latency["runs"]):
        start = time.perf_counter()
        session.run(names, inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000.0


def unoptimized_placement(
    ort: Any, case: dict[str, Any], providers: list[str], inputs: dict[str, Any], names: list[str], profile_dir: str
) -> dict[str, str]:
    """Node placement from a profiled run with graph optimizations off."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = f"{profile_dir}/{case['suite']}_{case['name']}_unoptimized_{len(providers)}"
    options.log_severity_level = 3
    session = ort.InferenceSession(case["model"], options, providers=providers)
    session.run(names, inputs)
    placement: dict[str, str] = read_profile_ops(session.end_profiling())[0]
    return placement


def run_case(
    ort: Any,
    case: dict[str, Any],
    profile_dir: str,
    latency: dict[str, int] | None = None,
    save_outputs: bool = False,
) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {k: case[k] for k in CASE_KEYS if k in case}
    providers = (
        [case["provider"]] if case["provider"] == "CPUExecutionProvider" else [case["provider"], "CPUExecutionProvider"]
    )
    try:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = f"{profile_dir}/{case['suite']}_{case['name']}"
        options.log_severity_level = 3
        native_log: list[str] = []
        created = time.perf_counter()
        with native_stderr(native_log):
            session = ort.InferenceSession(case["model"], options, providers=providers)
        out["session_seconds"] = time.perf_counter() - created
        if native_log and native_log[0].strip():
            out["ort_log"] = native_log[0]
        with np.load(case["data"]) as data:
            inputs = {k[3:]: data[k] for k in data.files if k.startswith("in_")}
            expected = {k[4:]: data[k] for k in data.files if k.startswith("out_")}
        names = [o.name for o in session.get_outputs()]
        start = time.perf_counter()
        outputs = session.run(names, inputs)
        out["seconds"] = time.perf_counter() - start
        placement, ops = read_profile_ops(session.end_profiling())
        out["placement"] = placement
        out["ops"] = ops
        out["share"] = share_on(placement, case["provider"])
        nodes = case.get("nodes") or {}
        if case.get("compiles") and nodes:
            # An EP that fuses what it takes into nodes of its own: credit it with the model nodes
            # those fused nodes absorbed (see proof.absorbed_nodes).
            plain = unoptimized_placement(ort, case, providers, inputs, names, profile_dir)
            ran = unoptimized_placement(ort, case, ["CPUExecutionProvider"], inputs, names, profile_dir)
            out["absorbed"], out["share"] = compiled_share(plain, ran, nodes, case["provider"])
        errors, ok = {}, True
        unmatched = sorted(set(expected) - set(names))
        if unmatched or not expected:
            raise ValueError(f"expected outputs {unmatched or '(none)'} do not match the model's outputs {names}")
        for name, got in zip(names, outputs, strict=True):
            if name not in expected:
                continue
            result = compare(np.asarray(got), expected[name], case["atol"], case["rtol"])
            errors[name] = result.max_abs_err
            ok = ok and result.ok
        out["max_abs_err"] = max(errors.values()) if errors else 0.0
        out["outputs_ok"] = ok
        out["status"] = "ok"
        if latency and case["suite"] == "model":
            out["latency_ms"] = measure_latency(ort, case["model"], providers, inputs, names, latency)
        if save_outputs and case["suite"] == "model":
            Path("outputs").mkdir(exist_ok=True)
            np.savez(f"outputs/{case['provider']}__{case['name']}.npz", **dict(zip(names, outputs, strict=True)))
    except Exception as exc:  # an unsupported op, a missing library: the error text is the finding
        out["status"] = "error"
        out["error"] = f"{type(exc).__name__}: {exc}".strip()[:2000]
    return out


def probe_device(ort: Any, facts: dict[str, str]) -> dict[str, str]:
    """Is the provider's device here? {"status": "present"|"absent"|"load_error", "reason": ...}.

    The provider library is loaded first, as ORT would load it: a missing dependency (say the
    CUDA runtime the wheel's extras should have brought) is a broken wheel on any machine, so it
    is a load_error, never a skip. Then the vendor runtime, already loaded as its dependency,
    counts devices."""
    import ctypes

    library = Path(ort.__file__).parent / "capi" / facts["library"]
    try:
        ctypes.CDLL(str(library))
    except OSError as exc:
        return {"status": "load_error", "reason": f"cannot load {facts['library']}: {exc}"}
    names = [facts["runtime"]] if isinstance(facts["runtime"], str) else list(facts["runtime"])
    errors: list[str] = []
    for name in names:  # the first soname this machine has (CUDA 13's, else CUDA 12's)
        try:
            runtime = ctypes.CDLL(name)
            count_devices, describe = getattr(runtime, facts["count"]), getattr(runtime, facts["error_string"])
            break
        except (OSError, AttributeError) as exc:
            errors.append(str(exc))
    else:
        return {
            "status": "load_error",
            "reason": f"{facts['library']} loaded, but its runtime did not: {'; '.join(errors)}",
        }
    count = ctypes.c_int(0)
    status = int(count_devices(ctypes.byref(count)))
    if status == 0 and count.value > 0:
        return {"status": "present", "reason": f"{count.value} device(s)"}
    describe.restype = ctypes.c_char_p
    text = (describe(status) or b"").decode("utf-8", "replace") if status else "no devices"
    return {"status": "absent", "reason": f"no {facts['label']} ({facts['count']}: {status}, {text})"}


PROGRESS = "progress.jsonl"  # one finished case per line, so a crash loses nothing
RUNNING = "running.txt"  # index of the case in flight: names the case a native crash killed


def done_cases() -> dict[int, dict[str, Any]]:
    path = Path(PROGRESS)
    if not path.is_file():
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {line["index"]: line["case"] for line in lines}


def main() -> int:
    """Run the plan's cases not yet in progress.jsonl; write RESULT.json when all are done.

    A case that kills the process (SIGFPE, SIGSEGV in a native kernel) leaves its index in
    running.txt; the caller records it as crashed and starts this script again.
    """
    plan = json.loads(Path(sys.argv[1]).read_text())
    # What actually ran: the interpreter and the CPU it saw (an emulated one reports the target's).
    result: dict[str, Any] = {"cases": [], "python": platform.python_version(), "machine": platform.machine()}
    try:
        import onnxruntime as ort

        result["version"] = ort.__version__
        result["available_providers"] = ort.get_available_providers()
        record = Path(ort.__file__).parent / "ortdist_build.json"
        result["record"] = json.loads(record.read_text()) if record.is_file() else None
    except Exception:
        result["import_error"] = traceback.format_exc()
        Path(sys.argv[2]).write_text(json.dumps(result, indent=1))
        print(result["import_error"], file=sys.stderr)
        return 1
    devices = {
        provider: probe_device(ort, facts)
        for provider, facts in plan.get("devices", {}).items()
        if provider in result["available_providers"]  # a foreign wheel is asked about every EP
    }
    result["devices"] = devices
    done = done_cases()
    with tempfile.TemporaryDirectory(prefix="ortdist-profiles-") as profiles, open(PROGRESS, "a") as progress:
        for index, case in enumerate(plan["cases"]):
            if index in done:
                continue
            Path(RUNNING).write_text(str(index))
            device = devices.get(case["provider"], {"status": "present"})
            if case["provider"] not in result["available_providers"]:
                out = {k: case[k] for k in CASE_KEYS if k in case} | {"status": "unavailable"}
            elif device["status"] == "load_error":
                out = {k: case[k] for k in CASE_KEYS if k in case} | {"status": "error", "error": device["reason"]}
            elif device["status"] == "absent":
                out = {k: case[k] for k in CASE_KEYS if k in case} | {"status": "no_device", "reason": device["reason"]}
            else:
                out = run_case(ort, case, profiles, plan.get("latency"), bool(plan.get("save_outputs")))
            progress.write(json.dumps({"index": index, "case": out}) + "\n")
            progress.flush()
    Path(RUNNING).unlink(missing_ok=True)
    done = done_cases()
    result["cases"] = [done[i] for i in sorted(done)]
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
