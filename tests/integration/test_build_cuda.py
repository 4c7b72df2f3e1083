"""recipes/cuda-linux.toml end to end, from the cached build tree: the tests both CUDA recipes
share (tests/integration/cuda_wheels.py) on CUDA 12.4 and NVIDIA's cu12 wheels.

The build is a full ORT and CUDA-kernel compile (most of an hour on two cores), so this module runs
once the recipe's build tree is in the cache (`nox -s build-cuda-linux` once, or
ORTDIST_TEST_RECIPES=cuda-linux to build it here).
"""

from __future__ import annotations

import os

import pytest

from .cuda_wheels import (  # noqa: F401 (the shared tests and fixtures, collected here)
    CUDA12,
    CudaLine,
    built,
    index_venv,
    local_index,
    test_a_wheel_without_its_cuda_runtime_fails_even_without_a_gpu,
    test_asking_for_cuda_without_a_driver_falls_back_instead_of_aborting,
    test_every_elf_of_every_artifact_keeps_the_toolchains_promise,
    test_five_portable_wheels_with_nothing_from_cuda_grafted,
    test_smoke_skips_cuda_for_want_of_a_gpu_and_passes_the_cpu,
    test_the_extras_install_from_an_index_and_the_provider_finds_them,
    toolchain,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.recipe_tree(CUDA12.recipe),
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]


@pytest.fixture(scope="module")
def line() -> CudaLine:
    return CUDA12
