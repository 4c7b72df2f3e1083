"""recipes/cuda-linux.toml end to end, from the cached build tree: the tests both CUDA recipes
share (tests/integration/cuda_wheels.py) on CUDA 12.4 and NVIDIA's cu12 wheels.

The build is a full ORT and CUDA-kernel compile (most of an hour on two cores), so this module runs
once the recipe's build tree is in the cache (`nox -s build-cuda-linux` once, or
ORTDIST_TEST_RECIPES=cuda-linux to build it here).
"""

from __future__ import annotations

import os

import pytest

from .cuda_wheels import *  # noqa: F403 (the shared tests and fixtures, collected here)
from .cuda_wheels import CUDA12, CudaLine

pytestmark = [
    pytest.mark.integration,
    pytest.mark.recipe_tree(CUDA12.recipe),
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]


@pytest.fixture(scope="module")
def line() -> CudaLine:
    return CUDA12
