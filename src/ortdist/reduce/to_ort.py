"""ONNX models to ORT format with onnxruntime itself, inside the clean root (the wheel installed there):
argv = optimization level, target arch, then pairs of (onnx path, ort path). Mirrors ORT's
convert_onnx_models_to_ort.py "fixed" style. A script, not imported by ortdist (reduce/convert.py copies it)."""

import json
import sys

import onnxruntime as ort

LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
level, arch, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
failures: dict[str, str] = {}
for src, dst in zip(pairs[::2], pairs[1::2], strict=True):
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.optimized_model_filepath = dst
    so.add_session_config_entry("session.save_model_format", "ORT")
    # NCHWc blocking is x86-only: a model for another CPU must not carry it (as ORT's converter does).
    disabled = ["NchwcTransformer"] if level == "all" and arch != "x86_64" else None
    try:
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
    except Exception as exc:
        failures[src] = str(exc)
print(json.dumps({"onnxruntime": ort.__version__, "failures": failures}))
sys.exit(1 if failures else 0)
