"""Runs INSIDE the environment under test (fresh venv with only the wheel and its dependencies).

Usage: python runner.py PLAN.json RESULT.json     (proof.py beside it)

PLAN.json: {"claimed": [provider...], "cases": [{"suite", "name", "model", "data", "atol", "rtol",
            "provider", "must_take": "all"|"any"|"none"}]}
Each case runs one model with [provider, CPUExecutionProvider] (or CPU alone), profiling on, and
records where every node ran, the max abs error against the expected outputs, and the time.
Standard library + numpy + onnxruntime only.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from proof import compare, read_profile_ops, share_on  # copied beside this script: ortdist/smoke/proof.py


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


def run_case(ort: Any, case: dict[str, Any], profile_dir: str) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {k: case[k] for k in ("suite", "name", "provider", "must_take")}
    providers = (
        [case["provider"]] if case["provider"] == "CPUExecutionProvider" else [case["provider"], "CPUExecutionProvider"]
    )
    try:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = f"{profile_dir}/{case['suite']}_{case['name']}"
        options.log_severity_level = 3
        native_log: list[str] = []
        with native_stderr(native_log):
            session = ort.InferenceSession(case["model"], options, providers=providers)
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
    except Exception as exc:  # an unsupported op, a missing library: the error text is the finding
        out["status"] = "error"
        out["error"] = f"{type(exc).__name__}: {exc}".strip()[:2000]
    return out


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    result: dict[str, Any] = {"cases": []}
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
    with tempfile.TemporaryDirectory(prefix="ortdist-profiles-") as profiles:
        for case in plan["cases"]:
            if case["provider"] not in result["available_providers"]:
                result["cases"].append(
                    {k: case[k] for k in ("suite", "name", "provider", "must_take")} | {"status": "unavailable"}
                )
                continue
            result["cases"].append(run_case(ort, case, profiles))
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
