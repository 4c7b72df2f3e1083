"""The WebAssembly target's pure side: which recipes may build it, what its plan runs, the npm
package's metadata and the stock package it pairs with."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from ortdist import web
from ortdist.errors import RecipeError
from ortdist.project import plan_for
from ortdist.recipe import load_recipe


def test_the_slim_wasm_plan_builds_the_module_and_proves_it(project: Path) -> None:
    plan, _ = plan_for("slim-wasm", project)
    assert " ".join(plan.steps) == "toolchain source models configure build web_package web_smoke publish"
    defines = plan.cmake_defines
    assert defines["onnxruntime_BUILD_SHARED_LIB"] == "OFF"  # the module is ORT's own executable target
    assert defines["onnxruntime_ENABLE_PYTHON"] == "OFF"
    assert defines["onnxruntime_ENABLE_WEBASSEMBLY_EXCEPTION_CATCHING"] == "OFF"  # exceptions = false
    assert defines["onnxruntime_ENABLE_WEBASSEMBLY_SIMD"] == defines["onnxruntime_ENABLE_WEBASSEMBLY_THREADS"] == "ON"
    assert defines["CMAKE_TOOLCHAIN_FILE"].startswith("/usr/share/emscripten/")
    assert "0013-wasm-debian-emscripten.patch" in [p.name for p in plan.patches]
    linux, _ = plan_for("slim-linux", project)
    assert "0013-wasm-debian-emscripten.patch" not in [p.name for p in linux.patches]
    assert "onnxruntime_ENABLE_WEBASSEMBLY_EXCEPTION_CATCHING" not in linux.cmake_defines


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"linkage": "shared"}, "linkage 'shared'"),
        ({"target": "x86_64-unknown-linux-gnu"}, "linkage 'wasm'"),
    ],
)
def test_wasm_linkage_and_the_wasm_target_go_together(
    project: Path, tmp_path: Path, changes: dict[str, str], said: str
) -> None:
    text = (project / "recipes" / "slim-wasm.toml").read_text()
    for key, value in changes.items():
        text = text.replace(f'{key} = "', f'{key} = "{value}" #', 1)
    path = tmp_path / "bad.toml"
    path.write_text(text.replace('name = "slim-wasm"', 'name = "bad"'))
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    assert said in str(caught.value) and 'linkage = "wasm"' in (caught.value.fix or "")


def test_a_wasm_recipe_with_a_wheel_is_refused(project: Path, tmp_path: Path) -> None:
    text = (project / "recipes" / "slim-wasm.toml").read_text().replace("enabled = false", "enabled = true")
    path = tmp_path / "wheel.toml"
    path.write_text(text.replace('name = "slim-wasm"', 'name = "wheel"'))
    with pytest.raises(RecipeError, match="and a wheel"):
        load_recipe(path)


def test_the_package_json_names_the_onnxruntime_web_it_pairs_with() -> None:
    data = json.loads(web.package_json("slim-wasm", "1.21.0", "cut", ["ai.onnx:Conv"]))
    assert data["name"] == "onnxruntime-web-slim-wasm" and data["version"] == "1.21.0"
    assert data["peerDependencies"] == {"onnxruntime-web": "1.21.0"}
    assert data["files"] == [
        "dist/ort-wasm-simd-threaded.wasm",
        "dist/ort-wasm-simd-threaded.mjs",
        "sboms/ortdist.cdx.json",
    ]
    assert data["ortdist"]["operators"] == ["ai.onnx:Conv"]


def test_the_stock_package_is_pinned_on_npms_registry() -> None:
    """On the registry npm is configured with (tests/conftest.py gives the unit tests their own)."""
    pin = web.STOCK["1.21.0"].pin
    assert pin.url == "http://npm.mirror.example/onnxruntime-web/-/onnxruntime-web-1.21.0.tgz"
    assert len(pin.sha256) == 64 and pin.filename == "onnxruntime-web-1.21.0.tgz"
    assert dataclasses.is_dataclass(web.STOCK["1.21.0"])


def test_gzip_size_is_reproducible() -> None:
    data = b"\0asm" + bytes(range(256)) * 64
    assert web.gzip_size(data) == web.gzip_size(data) == len(gzip.compress(data, 9, mtime=0)) < len(data)


def test_an_npm_packages_sbom_is_read_like_an_archives(tmp_path: Path) -> None:
    import io
    import tarfile

    from ortdist import sbom

    document = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "metadata": {
            "component": {"name": "onnxruntime-web-slim-wasm", "version": "1.21.0"},
            "properties": [{"name": "ortdist:recipe", "value": "slim-wasm"}, {"name": "ortdist:target", "value": "t"}],
        },
        "components": [{"bom-ref": "source:onnxruntime", "name": "onnxruntime", "version": "1.21.0"}],
    }
    package = tmp_path / "onnxruntime-web-slim-wasm-1.21.0.tgz"
    with tarfile.open(package, "w:gz") as tar:
        data = json.dumps(document).encode()
        info = tarfile.TarInfo("package/sboms/ortdist.cdx.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert sbom.read_artifact_sbom(package)["metadata"]["component"]["name"] == "onnxruntime-web-slim-wasm"
