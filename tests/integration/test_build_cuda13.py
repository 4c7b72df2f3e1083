"""recipes/cuda13-linux.toml end to end, from the cached build tree: the tests both CUDA recipes
share (tests/integration/cuda_wheels.py) on CUDA 13 and NVIDIA's cu13 wheels.

The build is a full ORT and CUDA-kernel compile (about an hour on two cores), so this module runs
once the recipe's build tree is in the cache (`nox -s build-cuda13-linux` once, or
ORTDIST_TEST_RECIPES=cuda13-linux to build it here).
"""

from __future__ import annotations

import os

import pytest

from .cuda_wheels import *  # noqa: F403 (the shared tests and fixtures, collected here)
from .cuda_wheels import CUDA13, CudaLine

pytestmark = [
    pytest.mark.integration,
    pytest.mark.recipe_tree(CUDA13.recipe),
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
]


@pytest.fixture(scope="module")
def line() -> CudaLine:
    return CUDA13
