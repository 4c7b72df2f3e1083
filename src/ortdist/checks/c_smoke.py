"""The C smoke program's cases: which models it runs against the static archive, with which
inputs, and how its outputs compare with the reference outputs."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import run
from ..errors import CheckError
from ..fsutil import remove_tree
from ..paths import IN_ROOT

if TYPE_CHECKING:
    from ..builder import Builder

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


def c_smoke_cases(builder: Builder, smoke: Path) -> list[CSmokeCase]:
    """Reduced builds run their ORT-format models; full builds run the MobileNet-like reference model."""
    from ..smoke.models import BUILDERS, tolerances

    ort_dir = builder.models_dir / "ort"
    cases = []
    if builder.plan.reduced and not ort_dir.is_dir():
        return []  # cut from a config alone: no model it is known to run (the link check still runs)
    if builder.plan.reduced:
        for model in sorted(ort_dir.glob("*.ort")):
            if model.stem in BUILDERS and f"reference:{model.stem}" in builder.plan.recipe.reduce.models:
                ref = BUILDERS[model.stem]()
                tol = tolerances()[model.stem]
                cases.append(
                    CSmokeCase(
                        model.stem, model, list(ref.inputs.values()), list(ref.expected.values()), tol.atol, tol.rtol
                    )
                )
            else:
                cases.append(
                    CSmokeCase(
                        model.stem, model, _zero_inputs(builder.models_dir / "onnx" / f"{model.stem}.onnx"), None
                    )
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


def run_c_smoke_cases(builder: Builder, smoke: Path, cases: list[CSmokeCase]) -> list[dict[str, Any]]:
    """Run each case with the program (in the clean root, or under the target's emulator) and compare."""
    results = []
    for case in cases:
        here = smoke / "cases" / case.name
        remove_tree(here)
        here.mkdir(parents=True)
        shutil.copyfile(case.model, here / case.model.name)
        for i, array in enumerate(case.inputs):
            (here / f"in_{i}.bin").write_bytes(np.ascontiguousarray(array, dtype=np.float32).tobytes())
        argv = [
            f"{IN_ROOT_C_SMOKE}/ort_smoke",
            f"{IN_ROOT_C_SMOKE}/cases/{case.name}/{case.model.name}",
            f"{IN_ROOT_C_SMOKE}/cases/{case.name}",
        ]
        with builder._log(f"c-smoke-{case.name}") as log:
            result = run.capture(builder.target_command(smoke, argv, log), check=False)
            log.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise CheckError(
                f"the C smoke program failed on {case.model.name} (exit {result.returncode}):\n    "
                + (result.stderr.strip() or result.stdout.strip()).replace("\n", "\n    "),
                where=str(case.model),
                fix=f"see {builder.logs / f'c-smoke-{case.name}.log'}",
            )
        outcome: dict[str, Any] = {"model": case.model.name, "ran": True}
        if case.expected is not None:
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
        results.append(outcome)
    return results
