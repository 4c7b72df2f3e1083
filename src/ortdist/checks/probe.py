"""Runs INSIDE the clean root with only the installed wheel (and its dependencies) available.

Usage: python probe.py MODEL DATA.npz RESULT.json [TOLERANCE]   (with proof.py beside it)
Writes a JSON result; exits non-zero when the wheel cannot import or outputs differ.
This file must stay standard library + numpy + onnxruntime only.
"""

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from proof import read_profile  # copied beside this script: ortdist/smoke/proof.py


def main() -> int:
    model, data, result_path = sys.argv[1:4]
    tolerance = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
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
        result["ok"] = all(e["max_abs_err"] <= tolerance and e["nan_pattern_matches"] for e in errors.values())
    except Exception:  # report anything: a missing library shows up as an ImportError here
        result["error"] = traceback.format_exc()
    Path(result_path).write_text(json.dumps(result, indent=2, sort_keys=True))
    print(json.dumps({k: result.get(k) for k in ("ok", "version", "available_providers", "outputs")}))
    if result.get("error"):
        print(result["error"], file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
