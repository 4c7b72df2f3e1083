"""Our analysis against ORT's own tools/python/create_reduced_build_config.py (from the ORT source
tree ortdist builds) on the reference models: ONNX models without types, ORT-format models with
types, each model alone and all merged. Needs the ORT source (cached by any build, else fetched
from Debian's pool)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ortdist import registry, sources
from ortdist.reduce.analyze import analyze
from ortdist.smoke.models import BUILDERS
from reduce_helpers import config_lines, to_ort

from . import scratch_cache

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ort_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = scratch_cache()  # the user's sources, linked; a download lands in the tests' own
    for tree in sorted(cache.sources.glob("onnxruntime-1.21.0-*")):
        script = tree / "tools" / "python" / "create_reduced_build_config.py"
        if script.is_file():
            return script
    pin = sources.debian_orig(registry.ort_versions()["1.21.0"].source, "")
    host = urlsplit(pin.url).hostname or ""
    try:
        socket.create_connection((host, 443 if pin.url.startswith("https") else 80), timeout=10).close()
    except OSError:
        pytest.skip(f"offline: no cached ORT source, and {host} (Debian's pool) is unreachable")
    tree = tmp_path_factory.mktemp("ort-source")
    sources.unpack(sources.fetch(pin, cache.downloads), tree)
    return tree / "tools" / "python" / "create_reduced_build_config.py"


def ort_config(script: Path, model_dir: Path, fmt: str, out: Path) -> list[str]:
    argv = [sys.executable, str(script), "-f", fmt, *(["-t"] if fmt == "ORT" else []), str(model_dir), str(out)]
    subprocess.run(argv, check=True, capture_output=True)
    return config_lines(out.read_text())


@pytest.mark.parametrize("names", [[n] for n in BUILDERS] + [list(BUILDERS)], ids=[*BUILDERS, "all-merged"])
def test_same_config_as_ort_tools(ort_tools: Path, tmp_path: Path, names: list[str]) -> None:
    onnx_dir, ort_dir = tmp_path / "onnx", tmp_path / "ort"
    onnx_dir.mkdir()
    ort_dir.mkdir()
    onnx_models, ort_models = [], []
    for name in names:
        path = onnx_dir / f"{name}.onnx"
        path.write_bytes(BUILDERS[name]().model)
        onnx_models.append(path)
        ort_models.append(to_ort(ort_dir, path).rename(ort_dir / f"{name}.ort"))

    ours_onnx = config_lines(analyze(onnx_models, typed=False).render())
    assert ours_onnx == ort_config(ort_tools, onnx_dir, "ONNX", tmp_path / "onnx.config")

    ours_ort = config_lines(analyze(ort_models, typed=True).render())
    assert ours_ort == ort_config(ort_tools, ort_dir, "ORT", tmp_path / "ort.config")
