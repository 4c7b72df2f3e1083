"""The clean-root check's case and verdict: which model a wheel runs in a root with nothing but
Python, and what is wrong with the probe's result (pure; the check step runs the probe)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import CheckError
from ..plan import BuildPlan
from ..recipe.model import REFERENCE_PREFIX
from .model import write_check_files


def write_check_case(plan: BuildPlan, models_dir: Path, check: Path) -> tuple[str, float]:
    """The check's model file name and tolerance. A full build runs the NaN-propagation model; a
    reduced build has none of its operators, so it runs the first reference model it was cut
    for, in ORT format (a minimal build reads nothing else)."""
    if not plan.reduced:
        write_check_files(check)
        return "model.onnx", 1e-5
    from ..smoke.models import BUILDERS, save_case, tolerances

    for entry in plan.recipe.reduce.models:
        name = entry.removeprefix(REFERENCE_PREFIX)
        if entry.startswith(REFERENCE_PREFIX) and name in BUILDERS:
            ref = BUILDERS[name]()
            save_case(check, ref.model, ref.inputs, ref.expected)
            (check / "model.onnx").unlink()
            shutil.copyfile(models_dir / "ort" / f"{name}.ort", check / "model.ort")
            return "model.ort", max(tolerances()[name].atol, 1e-5)
    raise CheckError(
        "a reduced wheel is checked with a reference model it was cut for, and the recipe lists none",
        where=f"recipe {plan.recipe.name} [reduce] models",
        fix='add "reference:cnn" (or another reference model) to models',
    )


def libraries_to_load(plan: BuildPlan) -> list[str]:
    """Provider libraries the probe loads itself: those of EPs whose every dependency the wheel
    carries (oneDNN's: libdnnl, libgomp). ORT loads them only for a session on their EP, so the
    check's CPU session would pass a wheel that lacks them. CUDA's need NVIDIA's runtime, which
    the clean root does not have by design (the smoke suite installs it from the extras)."""
    return [ep.provider_library for ep in plan.providers if ep.provider_library and not ep.runtime_libs]


def verify_check_result(
    result: dict[str, Any], claimed: list[str], tolerance: float = 1e-5, libraries: Sequence[str] = ()
) -> list[str]:
    """What is wrong with a clean-root probe result (empty list: nothing). Pure, unit-tested."""
    problems: list[str] = []
    if "error" in result:
        last = result["error"].strip().splitlines()[-1] if result["error"].strip() else "unknown error"
        problems.append(f"import/inference failed: {last}")
        return problems
    available = result.get("available_providers", [])
    for provider in claimed:
        if provider not in available:
            problems.append(f"claims {provider} but get_available_providers() lists only {available}")
    loaded = result.get("provider_libraries", {})
    for library in libraries:
        if library not in loaded:
            problems.append(f"{library}: the probe did not load it")
        elif loaded[library]:
            problems.append(f"{library} cannot be loaded: {loaded[library]}")
    for name, out in result.get("outputs", {}).items():
        if not out.get("nan_pattern_matches", False):
            problems.append(f"output {name!r}: NaN positions differ from onnx.reference (Min/Max NaN semantics)")
        if out.get("max_abs_err", 1.0) > tolerance:
            limit = f"{tolerance:g}".replace("e-0", "e-")
            problems.append(f"output {name!r}: max abs error {out['max_abs_err']:.3g} > {limit} vs onnx.reference")
    off_cpu = {n: p for n, p in result.get("node_providers", {}).items() if p != "CPUExecutionProvider"}
    if off_cpu:
        problems.append(f"nodes ran outside CPUExecutionProvider: {off_cpu}")
    if not result.get("node_providers"):
        problems.append("the profile recorded no node placements")
    if not result.get("ok", False) and not problems:
        problems.append("probe reported failure")
    return problems
