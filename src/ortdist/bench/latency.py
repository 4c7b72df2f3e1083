"""Median latency of each model at each thread count, inside the wheel's own venv.

Copied next to its plan, with the smoke suite's runner.py and proof.py, and run there as
``python latency.py plan.json result.json``: it may import only the standard library, numpy, the
onnxruntime under test and the runner, whose ``measure_latency`` times each model (with the
case's ``providers``, default the CPU EP, and ``threads_option``: an EP's own thread-count option)
and thread count in a fresh session (ORT's default graph optimizations, one inter-op thread, warm-up runs
discarded). The first thread count's outputs are saved to outputs/<model>.npz, so the two wheels'
outputs can be compared.
"""

import json
import sys
from pathlib import Path
from typing import Any

from runner import measure_latency  # copied beside this script: ortdist/smoke/runner.py


def at(providers: list[str], named: dict[str, str], threads: int) -> list[Any]:
    """The providers with an EP's own thread-count option set (``named``: EP -> option), for an
    EP whose thread pool ignores intra_op_num_threads."""
    return [(p, {named[p]: str(threads)}) if p in named else p for p in providers]


def main(plan_path: str, result_path: str) -> int:
    import numpy as np
    import onnxruntime as ort

    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    Path("outputs").mkdir(exist_ok=True)
    result: dict[str, Any] = {"version": ort.__version__, "models": {}, "session_providers": {}, "errors": {}}
    for case in plan["models"]:
        # The providers a user would pass (the EP first, CPU as fallback); the CPU EP alone by default.
        providers = case.get("providers", ["CPUExecutionProvider"])
        data = np.load(case["inputs"])
        inputs = {name: data[name] for name in data.files}
        named = case.get("threads_option", {})
        options = ort.SessionOptions()
        options.intra_op_num_threads = plan["threads"][0]
        try:
            first = at(providers, named, plan["threads"][0])
            session = ort.InferenceSession(case["model"], options, providers=first)
            # What the session registered: an EP that failed to start is missing here (ORT fell back).
            result["session_providers"][case["name"]] = session.get_providers()
            names = [o.name for o in session.get_outputs()]
            np.savez(Path("outputs") / (case["name"] + ".npz"), *session.run(names, inputs))
            del session
            timing = {"warmup": plan["warmup"], "runs": plan["runs"]}
            result["models"][case["name"]] = {
                str(t): measure_latency(
                    ort, case["model"], at(providers, named, t), inputs, names, {**timing, "threads": t}
                )
                for t in plan["threads"]
            }
        except Exception as exc:  # ORT's own errors: one model's failure is that row's result
            if not plan.get("record_errors"):
                raise
            result["errors"][case["name"]] = f"{type(exc).__name__}: {exc}"[:500]
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
