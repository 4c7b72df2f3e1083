"""ONNX's backend node tests (onnx 1.17: 1,288 with data), converted once on the host to
model.onnx + data.npz so the runner needs only numpy and onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..fsutil import temp_sibling_dir
from ..log import log

NUMPY_KINDS = set("biufc")  # bool, int, uint, float, complex: what np.savez stores portably


def _tensors(files: list[Path], names: list[str], prefix: str) -> dict[str, np.ndarray[Any, Any]] | None:
    import onnx
    from onnx import numpy_helper

    out: dict[str, np.ndarray[Any, Any]] = {}
    for path, name in zip(files, names, strict=False):
        proto = onnx.TensorProto()
        try:
            proto.ParseFromString(path.read_bytes())
            array = numpy_helper.to_array(proto)
        except Exception:
            return None  # sequences, optionals, maps: not plain tensors
        if array.dtype.kind not in NUMPY_KINDS or array.dtype.names:
            return None  # bfloat16, float8, int4 ...: numpy cannot hold them portably
        out[f"{prefix}{name}"] = array
    return out


def convert(dest: Path) -> dict[str, str]:
    """Write <dest>/<test>/{model.onnx,data.npz}; return test -> reason for the ones skipped."""
    if (dest / "skipped.json").is_file():
        return dict(json.loads((dest / "skipped.json").read_text()))
    import onnx
    from onnx.backend.test.loader import load_model_tests

    skipped: dict[str, str] = {}
    log.info("converting ONNX's backend node tests for the smoke runner (once)")
    with temp_sibling_dir(dest) as tmp:
        out = tmp / "tests"
        for case in load_model_tests(kind="node"):
            if case.model_dir is None:
                skipped[case.name] = "no model directory"
                continue
            model_dir = Path(case.model_dir)
            data_dir = model_dir / "test_data_set_0"
            model = onnx.load(str(model_dir / "model.onnx"))
            initializers = {i.name for i in model.graph.initializer}
            in_names = [i.name for i in model.graph.input if i.name not in initializers]
            out_names = [o.name for o in model.graph.output]
            inputs = _tensors(
                sorted(data_dir.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1])), in_names, "in_"
            )
            outputs = _tensors(
                sorted(data_dir.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1])), out_names, "out_"
            )
            if inputs is None or outputs is None:
                skipped[case.name] = "inputs/outputs numpy cannot hold (non-tensor or exotic dtype)"
                continue
            target = out / case.name
            target.mkdir(parents=True)
            (target / "model.onnx").write_bytes((model_dir / "model.onnx").read_bytes())
            with (target / "data.npz").open("wb") as fh:
                np.savez(fh, **inputs, **outputs)  # type: ignore[arg-type]
        (out / "skipped.json").write_text(json.dumps(skipped, indent=1, sort_keys=True))
        (out).rename(dest)
    return skipped
