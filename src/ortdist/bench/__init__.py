"""Benchmarks: ortdist's build compared with ONNX Runtime's own ``tools/ci_build/build.py``."""
