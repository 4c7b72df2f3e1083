"""Runs INSIDE the clean root with only the installed wheel (and its dependencies) available.

Usage: python probe.py MODEL DATA.npz RESULT.json [TOLERANCE [LIBRARY,...]]   (with proof.py beside it)
Writes a JSON result; exits non-zero when the wheel cannot import, a LIBRARY (a file in
onnxruntime/capi) cannot be loaded, or outputs differ.
This file must stay standard library + numpy + onnxruntime only.
"""

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from proof import read_profile  # copied beside this script: ortdist/smoke/proof.py


def load_libraries(capi: Path, names: list[str]) -> dict[str, str]:
    """Load each provider library now: name -> "" or the loader's error (naming what is missing).
    ORT loads them only for a session on their EP, so a CPU session never would."""
    import ctypes

    loaded: dict[str, str] = {}
    for name in names:
        try:
            ctypes.CDLL(str(capi / name))
            loaded[name] = ""
        except OSError as exc:
            loaded[name] = str(exc)
    return loaded


def main() -> int:
    model, data, result_path = sys.argv[1:4]
    tolerance = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
    libraries = [name for name in (sys.argv[5] if len(sys.argv) > 5 else "").split(",") if name]
    result: dict[str, Any] = {"ok": False}
    try:
        import numpy as np
        import onnxruntime as ort

        pkg = Path(ort.__file__).parent
        record_file = pkg / "ortdist_build.json"
        result["record"] = json.loads(record_file.read_text()) if record_file.is_file() else None
        result["version"] = ort.__version__
        result["available_providers"] = ort.get_available_providers()
        arrays = np.load(data)
        inputs = {k[3:]: arrays[k] for k in arrays.files if k.startswith("in_")}
        expected = {k[4:]: arrays[k] for k in arrays.files if k.startswith("out_")}
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(result_path).with_suffix("")) + "_profile"
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        names = list(expected)
        outputs = session.run(names, inputs)
        result["node_providers"] = read_profile(session.end_profiling())
        errors = {}
        for name, got in zip(names, outputs, strict=True):
            want = expected[name]
            same_nan = bool(np.array_equal(np.isnan(got), np.isnan(want)))
            diff = np.abs(np.nan_to_num(got) - np.nan_to_num(want))
            errors[name] = {"max_abs_err": float(diff.max()), "nan_pattern_matches": same_nan}
        result["outputs"] = errors
        # After the session, so loading them cannot change what the CPU EP computed.
        result["provider_libraries"] = load_libraries(pkg / "capi", libraries)
        outputs_ok = all(e["max_abs_err"] <= tolerance and e["nan_pattern_matches"] for e in errors.values())
        result["ok"] = outputs_ok and not any(result["provider_libraries"].values())
    except Exception:  # report anything: a missing library shows up as an ImportError here
        result["error"] = traceback.format_exc()
    Path(result_path).write_text(json.dumps(result, indent=2, sort_keys=True))
    print(
        json.dumps(
            {k: result.get(k) for k in ("ok", "version", "available_providers", "provider_libraries", "outputs")}
        )
    )
    if result.get("error"):
        print(result["error"], file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
