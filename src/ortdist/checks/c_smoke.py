"""The C smoke program's cases: which models it runs against the static archive, with which
inputs, and how its outputs compare with the reference outputs (pure but for file writes; the
c_smoke step compiles and runs the program)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckError
from ..paths import IN_ROOT
from ..plan import BuildPlan

# What a binary linked against the static archive may still need: the C runtime only.
C_RUNTIME_SONAMES = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux")
_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[(?P<lib>[^\]]+)\]")
IN_ROOT_C_SMOKE = IN_ROOT / "c-smoke"


def c_smoke_needed(readelf_dynamic: str) -> list[str]:
    """The DT_NEEDED entries from ``readelf -d`` output."""
    return [m.group("lib") for m in _NEEDED.finditer(readelf_dynamic)]


@dataclass(frozen=True)
class CSmokeCase:
    name: str
    model: Path  # .ort (reduced builds) or .onnx
    inputs: list[np.ndarray[Any, Any]]
    expected: list[np.ndarray[Any, Any]] | None  # None: a model of the recipe's own, only run
    atol: float = 0.0
    rtol: float = 0.0


def _zero_inputs(onnx_model: Path) -> list[np.ndarray[Any, Any]]:
    import onnx

    model = onnx.load(str(onnx_model))
    initializers = {i.name for i in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type != onnx.TensorProto.FLOAT:
            raise CheckError(
                f"input {value.name!r} is not float32; the C smoke program feeds float inputs only",
                where=str(onnx_model),
                fix="cut the static build for at least one float-input model, or use a reference model",
            )
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tensor.shape.dim]
        out.append(np.zeros(shape, dtype=np.float32))
    return out


def c_smoke_cases(plan: BuildPlan, models_dir: Path, smoke: Path) -> list[CSmokeCase]:
    """Reduced builds run their ORT-format models; full builds run the MobileNet-like reference model."""
    from ..smoke.models import BUILDERS, tolerances

    ort_dir = models_dir / "ort"
    cases = []
    if plan.reduced and not ort_dir.is_dir():
        return []  # cut from a config alone: no model it is known to run (the link check still runs)
    if plan.reduced:
        for model in sorted(ort_dir.glob("*.ort")):
            if model.stem in BUILDERS and f"reference:{model.stem}" in plan.recipe.reduce.models:
                ref = BUILDERS[model.stem]()
                tol = tolerances()[model.stem]
                cases.append(
                    CSmokeCase(
                        model.stem, model, list(ref.inputs.values()), list(ref.expected.values()), tol.atol, tol.rtol
                    )
                )
            else:
                cases.append(
                    CSmokeCase(model.stem, model, _zero_inputs(models_dir / "onnx" / f"{model.stem}.onnx"), None)
                )
    else:
        ref = BUILDERS["cnn"]()
        tol = tolerances()["cnn"]
        path = smoke / "cnn.onnx"
        path.write_bytes(ref.model)
        cases.append(
            CSmokeCase("cnn", path, list(ref.inputs.values()), list(ref.expected.values()), tol.atol, tol.rtol)
        )
    return cases


def write_case_inputs(case: CSmokeCase, here: Path) -> None:
    """The case directory the program reads: the model and one raw float32 file per input."""
    here.mkdir(parents=True)
    shutil.copyfile(case.model, here / case.model.name)
    for i, array in enumerate(case.inputs):
        (here / f"in_{i}.bin").write_bytes(np.ascontiguousarray(array, dtype=np.float32).tobytes())


def compare_case_outputs(case: CSmokeCase, here: Path) -> dict[str, Any]:
    """The program's outputs (out_<i>.bin) against the reference; a mismatch is a CheckError."""
    outcome: dict[str, Any] = {"model": case.model.name, "ran": True}
    if case.expected is None:
        return outcome
    worst = 0.0
    for i, expected in enumerate(case.expected):
        got = np.frombuffer((here / f"out_{i}.bin").read_bytes(), dtype=np.float32)
        want = np.asarray(expected, dtype=np.float32).ravel()
        if got.shape != want.shape:
            raise CheckError(
                f"output {i} of {case.model.name} has {got.size} values, expected {want.size}",
                where=str(case.model),
            )
        err = np.abs(got - want)
        worst = max(worst, float(err.max(initial=0.0)))
        if np.any(err > case.atol + case.rtol * np.abs(want)):
            raise CheckError(
                f"output {i} of {case.model.name} differs from the reference: max abs error {worst:.3g}",
                where=str(case.model),
                fix="the static archive computes wrong results; compare with the shared library",
            )
    outcome["max_abs_err"] = worst
    return outcome
