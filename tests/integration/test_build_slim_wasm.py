"""recipes/slim-wasm.toml end to end: the WebAssembly module onnxruntime-web loads, built with
Debian's emscripten, as an npm package; the smoke suite ran the model it was cut for through
onnxruntime-web 1.21.0's own JS in node and in headless Chromium (a page from 127.0.0.1), and a
model outside the cut was refused with a missing operator named."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ortdist.smoke.models import tolerances

from . import build_recipe

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain needs root (see README)"),
    pytest.mark.recipe_tree("slim-wasm"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return build_recipe("slim-wasm", tmp_path_factory.mktemp("dist"))


def artifact(out: Path, manifest: dict[str, Any], kind: str) -> Path:
    (entry,) = [a for a in manifest["artifacts"] if a["kind"] == kind]
    return out / str(entry["path"])


def test_the_npm_package_holds_the_module_pair_onnxruntime_web_loads(built: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = built
    package = artifact(out, manifest, "npm-package")
    with tarfile.open(package) as tar:
        meta = json.loads(tar.extractfile("package/package.json").read())  # type: ignore[union-attr]
        wasm = tar.extractfile("package/dist/ort-wasm-simd-threaded.wasm").read()  # type: ignore[union-attr]
        mjs = tar.extractfile("package/dist/ort-wasm-simd-threaded.mjs").read()  # type: ignore[union-attr]
        sbom = json.loads(tar.extractfile("package/sboms/ortdist.cdx.json").read())  # type: ignore[union-attr]
    assert wasm[:4] == b"\0asm" and b"new Worker(new URL(import.meta.url)" in mjs  # post-processed (patch 0013)
    assert meta["ortdist"]["pairs_with"] == "onnxruntime-web@1.21.0" and meta["ortdist"]["operators"]
    assert sbom["metadata"]["component"]["name"] == "onnxruntime-web-slim-wasm"


def test_the_module_is_smaller_than_the_stock_one(built: tuple[Path, dict[str, Any]]) -> None:
    """The sizes the manifest reports are the shipped module's own (read from the package), and smaller."""
    from ortdist import web

    out, manifest = built
    sizes, stock = manifest["web_package"]["sizes"], manifest["web_package"]["stock_sizes"]
    name = "ort-wasm-simd-threaded.wasm"
    with tarfile.open(artifact(out, manifest, "npm-package")) as tar:
        wasm = tar.extractfile(f"package/dist/{name}").read()  # type: ignore[union-attr]
    assert (sizes[name], sizes[f"{name}.gz"]) == (len(wasm), web.gzip_size(wasm))
    assert sizes[name] < stock[name] and sizes[f"{name}.gz"] < stock[f"{name}.gz"]


@pytest.mark.parametrize("runtime", ["node", "chromium"])
def test_the_cut_model_runs_and_a_model_outside_it_is_refused(built: tuple[Path, dict[str, Any]], runtime: str) -> None:
    _, manifest = built
    runs = manifest["web_smoke"][runtime]
    ran = [r for r in runs if not r.get("refused")]
    refused = [r for r in runs if r.get("refused")]
    assert [r["model"] for r in ran] == ["cnn.ort"]
    assert ran[0]["max_abs_err"] <= tolerances()["cnn"].atol + 1e-6
    assert [r["model"] for r in refused] == ["transformer.ort"] and refused[0]["operators_named"]


def test_the_browser_page_was_captured(built: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = built
    assert artifact(out, manifest, "screenshot").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
