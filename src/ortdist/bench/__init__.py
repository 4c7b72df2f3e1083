"""Benchmarks: ortdist's build compared with ONNX Runtime's own ``tools/ci_build/build.py``."""

# The parts `ortdist bench --only PART` re-measures, in the order a full run measures them; here,
# not in run.py, so the command line lists them without importing the benchmark.
PARTS = ("build", "rebuild", "size", "inference", "models", "smoke", "slim", "web", "cuda", "ep")
