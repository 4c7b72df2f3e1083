"""Median latency of each model at each thread count, inside the wheel's own venv.

Copied next to its plan and run there as ``python latency.py plan.json result.json``: it may import
only the standard library, numpy and the onnxruntime under test. The plan names each model and its
inputs (.npz). Each model and thread count gets a fresh session, with graph optimizations at ORT's
default (all) and one inter-op thread; the warm-up runs are discarded, and the first run's outputs
are saved to outputs/<model>.npz so the two wheels' outputs can be compared.
"""

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def main(plan_path: str, result_path: str) -> int:
    import numpy as np
    import onnxruntime as ort

    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    Path("outputs").mkdir(exist_ok=True)
    result: dict[str, Any] = {"version": ort.__version__, "models": {}}
    for case in plan["models"]:
        data = np.load(case["inputs"])
        inputs = {name: data[name] for name in data.files}
        medians: dict[str, float] = {}
        for threads in plan["threads"]:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            session = ort.InferenceSession(case["model"], options, providers=["CPUExecutionProvider"])
            outputs = session.run(None, inputs)
            if threads == plan["threads"][0]:
                np.savez(Path("outputs") / (case["name"] + ".npz"), *outputs)
            for _ in range(plan["warmup"]):
                session.run(None, inputs)
            times = []
            for _ in range(plan["runs"]):
                start = time.perf_counter()
                session.run(None, inputs)
                times.append(time.perf_counter() - start)
            medians[str(threads)] = statistics.median(times) * 1000.0
        result["models"][case["name"]] = medians
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
