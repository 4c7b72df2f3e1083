"""The device proof's ``run``, on the lent machine (offline, its own Python, numpy and onnx): install
the wheel, run the smoke runner on every case, time the real-size models, judge with the smoke suite's
rules, write device-proof.json. device_proof.py prepares the bundle and files the result."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .. import records
from .. import run as door
from ..errors import CheckError
from ..fsutil import remove_tree
from . import env
from .pieces import assemble_wheel, default_store
from .suite import Verdict, device_probes, judge, node_test_outcomes

MANIFEST = "manifest.json"
# The runner, its plan, the reference models and the node tests, deflated: numpy's .npz files are
# stored uncompressed, and the node tests shrink from 14 to 7 MB beside a 50 MB wheel.
SMOKE_ZIP = "smoke.zip"
RESULT = "device-proof.json"
# Timing: discarded warm-up runs, then the median of this many (bench/latency.py via runner.py).
WARMUP, RUNS = 10, 50
CPU_PROVIDER = "CPUExecutionProvider"
# A GPU output is compared with the CPU EP's float32 one relative to its largest magnitude: a wrong
# kernel is off by the order of the values. ORT's CUDA EP multiplies float32 in TF32 by default
# (use_tf32, 10 mantissa bits), which over BERT's 12 layers is ~1e-3; float16 also stores every
# activation in 10 bits.
FP32_RELATIVE = 1e-2
FP16_RELATIVE = 5e-2


def device_providers(claimed: list[str]) -> list[str]:
    """The claimed EPs whose cases need a device (data/smoke.toml [providers.<ep>] device)."""
    return list(device_probes(claimed))


def _say(out: TextIO, text: str) -> None:
    print(text, flush=True)
    out.write(text + "\n")
    out.flush()


def _machine() -> dict[str, Any]:
    """What the proof ran on: the GPU as nvidia-smi names it, CPU cores, Python and its numpy/onnx."""
    gpus = ""
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        gpus = door.capture(query, check=False).stdout.strip()
    import onnx

    return {
        "gpus": gpus.splitlines(),
        "cpu_cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()}",
        "glibc": "{}.{}".format(*env.host_glibc()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnx": getattr(onnx, "__version__", "?"),
    }


def _install(wheel: Path, site: Path, log: TextIO) -> None:
    """pip, no index, no dependencies: the machine's own numpy serves the wheel."""
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-compile"]
    argv += ["--disable-pip-version-check", "--target", str(site), str(wheel)]
    _say(log, "+ " + " ".join(argv))
    done = door.capture(argv, check=False)
    log.write(done.stdout + done.stderr)
    if done.returncode != 0:
        raise CheckError(
            f"pip could not install {wheel.name} (exit {done.returncode})",
            where=str(wheel),
            fix=f"see the log; pip said: {(done.stderr.strip().splitlines() or ['nothing'])[-1]}",
        )


_LOADED = (
    "import ctypes, json, onnxruntime; ctypes.CDLL({path!r}); "
    "maps = open('/proc/self/maps').read().split(); "
    "print(json.dumps(sorted({{p for p in maps if '/lib' in p and any(n in p for n in {names!r})}})))"
)
# The vendor libraries whose loaded file the JSON names (a provider may need others too).
_NAMED = ("libcudart", "libcublas", "libcudnn.so", "libcufft", "libcurand")


def _libraries_from(site: Path, library: str, source: str, log: TextIO) -> dict[str, Any]:
    """Where the EP library's vendor libraries come from, and which files were loaded: the
    system's loader path, or this Python's own NVIDIA wheels (site-packages/nvidia, where
    `pip install <wheel>[cuda,cudnn]` puts them), linked where the library's RUNPATH
    ($ORIGIN/../../nvidia/...) looks, which the loader searches before its cache. ``auto``: the
    system's, else the wheels."""
    import site as site_module

    path = site / "onnxruntime" / "capi" / library

    def load() -> tuple[str, list[str]]:
        """('' and the vendor files loaded) or (the loader's complaint, []): a fresh process each
        time, after onnxruntime itself, whose binding exports what the provider library binds to."""
        script = _LOADED.format(path=str(path), names=_NAMED)
        done = door.capture([sys.executable, "-c", script], env=_python_env(site), check=False)
        if done.returncode != 0:
            return (done.stderr.strip().splitlines() or ["?"])[-1], []
        return "", list(json.loads(done.stdout.strip().splitlines()[-1]))

    first, loaded = ("", []) if source == "wheels" else load()
    if source != "wheels" and (not first or source == "system"):
        return {"from": "system" if not first else "none", "error": first, "loaded": loaded}
    if first:
        _say(log, f"{library} does not load from the system's libraries: {first}")
    for packages in site_module.getsitepackages():
        wheels = Path(packages) / "nvidia"
        if wheels.is_dir():
            (site / "nvidia").symlink_to(wheels)
            error, loaded = load()
            return {"from": f"wheels: {wheels}" if not error else "none", "error": error, "loaded": loaded}
    return {"from": "none", "error": first or "this Python has no site-packages/nvidia", "loaded": []}


def _python_env(site: Path) -> dict[str, str]:
    """The wheel first on the path: a machine's own onnxruntime (if any) stays behind it."""
    return {**os.environ, "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}


def _run_smoke(workdir: Path, site: Path, log: TextIO) -> dict[str, Any]:
    """The smoke runner, restarted after a case that kills the interpreter (recorded as failed)."""
    argv = [sys.executable, "runner.py", "plan.json", "result.json"]
    code = env.run_until_settled(lambda: door.returncode(argv, log=log, cwd=workdir, env=_python_env(site)), workdir)
    result_file = workdir / "result.json"
    if not result_file.is_file():
        raise CheckError(f"the smoke runner left no result (exit {code})", fix="see the log")
    result: dict[str, Any] = json.loads(result_file.read_text(encoding="utf-8"))
    return result


def _timing_plan(workdir: Path, providers: list[str], threads: int, warmup: int, runs: int) -> list[dict[str, Any]]:
    """Generate the real-size models here (fp32, and fp16 for the device EPs) and the latency plan:
    every model on the CPU EP alone and on each device EP (with the CPU EP as fallback)."""
    import onnx

    from . import realsize

    cases: list[dict[str, Any]] = []
    for name, builder in realsize.BUILDERS.items():
        fp32 = builder()
        for variant, on in ((fp32, [CPU_PROVIDER, *providers]), (realsize.half(fp32), providers)):
            model_path, inputs_path = workdir / f"{variant.name}.onnx", workdir / f"{variant.name}.npz"
            onnx.save(variant.model, str(model_path))
            np.savez(inputs_path, **variant.inputs)  # type: ignore[arg-type]
            for provider in on:
                cases.append(
                    {
                        "name": f"{variant.name}@{provider}",
                        "model": str(model_path),
                        "inputs": str(inputs_path),
                        "providers": [provider] if provider == CPU_PROVIDER else [provider, CPU_PROVIDER],
                        "base": name,
                        "variant": variant.name,
                        "provider": provider,
                        "summary": variant.summary,
                    }
                )
    plan = {"models": cases, "threads": [threads], "warmup": warmup, "runs": runs, "record_errors": True}
    (workdir / "plan.json").write_text(json.dumps(plan, indent=1), encoding="utf-8")
    return cases


def compare_outputs(got: list[np.ndarray[Any, Any]], want: list[np.ndarray[Any, Any]]) -> float:
    """The largest |got - want| relative to the largest |want| over every output (float64)."""
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        reference = np.asarray(w, np.float64)
        scale = float(np.max(np.abs(reference))) or 1.0
        worst = max(worst, float(np.max(np.abs(np.asarray(g, np.float64) - reference))) / scale)
    return worst


def _run_timing(workdir: Path, site: Path, cases: list[dict[str, Any]], log: TextIO) -> list[dict[str, Any]]:
    """latency.py in the wheel's environment; each device row's outputs against the CPU EP's fp32."""
    code = door.returncode(
        [sys.executable, "latency.py", "plan.json", "result.json"], log=log, cwd=workdir, env=_python_env(site)
    )
    if code != 0 or not (workdir / "result.json").is_file():
        raise CheckError(f"the latency script failed (exit {code})", fix="see the log")
    result = json.loads((workdir / "result.json").read_text(encoding="utf-8"))
    measured, errors, registered = result["models"], result.get("errors", {}), result.get("session_providers", {})

    def outputs(name: str) -> list[np.ndarray[Any, Any]]:
        with np.load(workdir / "outputs" / f"{name}.npz") as data:
            return [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]

    rows = []
    for case in cases:
        reference = f"{case['base']}@{CPU_PROVIDER}"
        row: dict[str, Any] = {k: case[k] for k in ("name", "base", "variant", "provider", "summary")}
        row["session_providers"] = registered.get(case["name"], [])
        if case["name"] in errors:
            row |= {"error": errors[case["name"]], "median_ms": None, "matches_cpu": False}
        elif case["provider"] not in row["session_providers"]:
            # ORT dropped the EP and ran on the CPU: a timing of the wrong thing.
            row |= {"error": f"the session runs on {row['session_providers']}", "median_ms": None, "matches_cpu": False}
        else:
            row["median_ms"] = round(next(iter(measured[case["name"]].values())), 3)
            if case["name"] != reference and reference not in errors:
                error = compare_outputs(outputs(case["name"]), outputs(reference))
                limit = FP16_RELATIVE if case["variant"].endswith("_fp16") else FP32_RELATIVE
                row |= {"max_relative_error": error, "tolerance": limit, "matches_cpu": error <= limit}
        rows.append(row)
    for row in rows:
        cpu = next(r for r in rows if r["base"] == row["base"] and r["provider"] == CPU_PROVIDER)
        both = row["median_ms"] and cpu["median_ms"]
        row["speedup_vs_cpu"] = round(cpu["median_ms"] / row["median_ms"], 2) if both else None
    return rows


def read_manifest(bundle: Path) -> dict[str, Any]:
    """The bundle's manifest.json, as `prepare` wrote it, or a named error."""
    return records.load(bundle / MANIFEST, records.PROOF_BUNDLE, CheckError)


# The driver compiles PTX even where SASS of the GPU's own architecture is there: the path a GPU
# with no SASS in the wheel takes. Its JIT cache goes to a fresh folder, so the time is a cold one.
FORCE_PTX = "CUDA_FORCE_PTX_JIT"
JIT_CACHE = "CUDA_CACHE_PATH"


def run(
    bundle: Path,
    out: Path,
    *,
    timing: bool = True,
    warmup: int = WARMUP,
    runs: int = RUNS,
    libraries_from: str = "auto",
    force_ptx: bool = False,
    store: Path | None = None,
) -> dict[str, Any]:
    """The proof on this machine; writes <out>/device-proof.json (and device-proof.log).
    ``force_ptx``: every kernel from the wheel's PTX, JIT-compiled by the driver."""
    started = time.monotonic()
    manifest = read_manifest(bundle)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if manifest["python"] != here:
        raise CheckError(
            f"the bundle's wheel is for CPython {manifest['python']}, this is {here}",
            where=str(bundle),
            fix=f"run it with python{manifest['python']}, or prepare the bundle with --python {here}",
        )
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ortdist-device-proof-"))
    saved = {name: os.environ.get(name) for name in (FORCE_PTX, JIT_CACHE)}
    if force_ptx:
        os.environ[FORCE_PTX] = "1"
        os.environ[JIT_CACHE] = str(work / "jit-cache")
    try:
        wheel = assemble_wheel(bundle, manifest, store or default_store(bundle), work)
        with (out / "device-proof.log").open("w", encoding="utf-8") as log:
            machine = _machine()
            _say(log, f"device proof of {manifest['wheel']} on {machine['gpus'] or 'no GPU nvidia-smi knows'}")
            site = work / "site"
            t0 = time.monotonic()
            _install(wheel, site, log)
            install_s = time.monotonic() - t0
            libraries = {
                provider: _libraries_from(site, facts["library"], libraries_from, log)
                for provider, facts in device_probes(manifest["device_providers"]).items()
            }
            with zipfile.ZipFile(bundle / SMOKE_ZIP) as archive:
                archive.extractall(work / "smoke")
            t0 = time.monotonic()
            result = _run_smoke(work / "smoke", site, log)
            smoke_s = time.monotonic() - t0
            report = _judge(manifest, result)
            _say(log, f"smoke: {'passed' if report['passed'] else 'FAILED'} in {smoke_s:.0f} s")
            rows: list[dict[str, Any]] = []
            latency_error = ""
            timing_s = 0.0
            # Timed only where the smoke runner found the device: an EP asked for on a machine
            # without it may take the process down (ORT 1.21's CUDA EP aborts without a driver).
            present = [
                p for p in manifest["device_providers"] if report["devices"].get(p, {}).get("status") == "present"
            ]
            if timing and "import_error" not in result:
                t0 = time.monotonic()
                shutil.copytree(bundle / "latency", work / "latency")
                threads = os.cpu_count() or 1
                cases = _timing_plan(work / "latency", present, threads, warmup, runs)
                try:
                    rows = _run_timing(work / "latency", site, cases, log)
                except CheckError as exc:  # the smoke verdicts still stand and are written
                    latency_error = str(exc)
                    _say(log, f"latency: {exc}")
                timing_s = time.monotonic() - t0
            proof = {
                **{k: manifest[k] for k in ("recipe", "wheel", "wheel_sha256", "python", "claimed")},
                "machine": machine,
                "vendor_libraries": libraries,
                **report,
                "latency": {
                    "threads": os.cpu_count(),
                    "warmup": warmup,
                    "runs": runs,
                    "rows": rows,
                    "not_timed": {
                        p: report["devices"].get(p, {}).get("reason", "?")
                        for p in manifest["device_providers"]
                        if p not in present
                    },
                    **({"error": latency_error} if latency_error else {}),
                },
                "jit": {"force_ptx": force_ptx, **_first_sessions(result, manifest["device_providers"])},
                "seconds": {
                    "install": round(install_s, 1),
                    "smoke": round(smoke_s, 1),
                    "latency": round(timing_s, 1),
                    "total": round(time.monotonic() - started, 1),
                },
            }
            proof["passed"] = report["passed"] and not latency_error and all(r.get("matches_cpu", True) for r in rows)
            (out / RESULT).write_text(json.dumps(proof, indent=1, sort_keys=True), encoding="utf-8")
            _say(log, summary(proof))
    finally:
        remove_tree(work)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return proof


def _first_sessions(result: dict[str, Any], providers: list[str]) -> dict[str, Any]:
    """The first session on each device EP (creating it and its first run): where a driver that
    JIT-compiles PTX spends its time, and the device cases' total."""
    found: dict[str, Any] = {}
    for provider in providers:
        cases = [c for c in result.get("cases", []) if c.get("provider") == provider and "session_seconds" in c]
        if cases:
            first = cases[0]
            found[provider] = {
                "first_case": first["name"],
                "first_session_s": round(first["session_seconds"] + first.get("seconds", 0.0), 3),
                "cases": len(cases),
                "all_cases_s": round(sum(c["session_seconds"] + c.get("seconds", 0.0) for c in cases), 3),
            }
    return {"first_sessions": found}


def _judge(manifest: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The smoke suite's verdicts with --require-device, the node-test counts per EP and the share
    of each reference model's nodes each EP ran."""
    claimed = manifest["claimed"]
    record = result.get("record") or {}
    if "import_error" in result:
        verdicts = [Verdict.failure("import", "-", result["import_error"].strip().splitlines()[-1])]
    elif record.get("recipe") != manifest["recipe"]:
        # The wheel is first on PYTHONPATH: an onnxruntime without our record is the machine's own.
        verdicts = [Verdict.failure("import", "-", f"python imported another onnxruntime ({result.get('version')})")]
    else:
        verdicts = judge(result, claimed, [], require_devices=True)
    node = node_test_outcomes(result)
    return {
        "version": result.get("version"),
        "available_providers": result.get("available_providers"),
        "devices": result.get("devices", {}),
        "passed": bool(verdicts) and all(v.passed for v in verdicts),
        "models": [v.__dict__ for v in verdicts if v.suite == "model"],
        "node_tests": {
            p: {"passed": sum(o.values()), "failed": sum(not x for x in o.values())} for p, o in node.items()
        },
        "node_test_failures": {p: sorted(n for n, ok in o.items() if not ok) for p, o in node.items()},
        "node_tests_skipped_by_converter": manifest.get("node_tests_skipped_by_converter", 0),
    }


def summary(proof: dict[str, Any]) -> str:
    """The proof as a few plain tables, for a terminal and the closing note."""
    lines = [
        f"wheel {proof['wheel']} (onnxruntime {proof.get('version')}) on {', '.join(proof['machine']['gpus']) or '?'}",
        *(
            f"{p} libraries from {v['from']}: {', '.join(v['loaded']) or v['error']}"
            for p, v in proof.get("vendor_libraries", {}).items()
        ),
        f"{'model':<16} {'provider':<26} {'result':<6} detail",
    ]
    for m in proof["models"]:
        detail = m["message"]
        if m["passed"] and detail == "ok":
            detail = f"{m['share']:.0%} of its nodes on it, max abs error {m['max_abs_err']:.1e}"
        lines.append(f"{m['name']:<16} {m['provider']:<26} {'pass' if m['passed'] else 'FAIL':<6} {detail}")
    lines.append(
        "node tests: "
        + "; ".join(f"{p}: {c['passed']} passed, {c['failed']} failed" for p, c in proof["node_tests"].items())
    )
    rows = proof["latency"]["rows"]
    for provider, reason in proof["latency"].get("not_timed", {}).items():
        lines.append(f"latency: {provider} not timed: {reason}")
    if proof["latency"].get("error"):
        lines.append(f"latency: FAILED: {proof['latency']['error']}")
    if rows:
        lines.append(
            f"latency (median of {proof['latency']['runs']} runs, CPU EP on {proof['latency']['threads']} threads):"
        )
        for r in rows:
            if r.get("error"):
                lines.append(f"  {r['variant']:<16} {r['provider']:<26} FAILED: {r['error']}")
                continue
            check = "" if "max_relative_error" not in r else f"  rel. error vs CPU fp32 {r['max_relative_error']:.1e}"
            lines.append(
                f"  {r['variant']:<16} {r['provider']:<26} {r['median_ms']:>9.2f} ms  x{r['speedup_vs_cpu']}{check}"
            )
    jit = proof.get("jit") or {}
    for provider, first in (jit.get("first_sessions") or {}).items():
        path = "PTX JIT-compiled by the driver (CUDA_FORCE_PTX_JIT=1)" if jit.get("force_ptx") else "SASS"
        lines.append(
            f"{provider}, {path}: first session ({first['first_case']}) {first['first_session_s']:.2f} s; "
            f"{first['cases']} sessions {first['all_cases_s']:.1f} s"
        )
    lines.append(f"device proof: {'PASSED' if proof['passed'] else 'FAILED'} in {proof['seconds']['total']:.0f} s")
    return "\n".join(lines)
