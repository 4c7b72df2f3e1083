"""The npm package of a WebAssembly build: the module pair from the build tree, package.json, the
SBOM, a reproducible tarball in npm's layout, and the size report against the stock module."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from ortdist import sources, web
from ortdist.errors import PackageError
from ortdist.pipeline.steps import web_package

from .conftest import MakeEnv
from .helpers import StepEnv


def stock_tarball(path: Path) -> Path:
    """An npm tarball holding a stock module pair (sizes 1000 and 100)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, size in zip(web.FILES, (1000, 100), strict=True):
            data = b"s" * size
            info = tarfile.TarInfo(f"package/dist/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def ready(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> StepEnv:
    env = make_env("slim-wasm")
    env.put_roots()
    env.put_source()
    env.layout.build.host.mkdir(parents=True)
    stock = stock_tarball(tmp_path / "onnxruntime-web-1.21.0.tgz")
    monkeypatch.setattr(sources, "fetch", lambda pin, downloads: stock)
    return env


def test_the_module_pair_becomes_a_reproducible_npm_package_with_its_size_against_the_stock_one(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = ready(make_env, monkeypatch, tmp_path)
    (env.layout.build.host / "ort-wasm-simd-threaded.wasm").write_bytes(b"\0asm" + b"w" * 496)
    (env.layout.build.host / "ort-wasm-simd-threaded.mjs").write_bytes(b"m" * 120)
    out = web_package.run(env.ctx, env.state)
    assert out.package.name == "onnxruntime-web-slim-wasm-1.21.0.tgz"
    with tarfile.open(out.package) as tar:
        names = sorted(tar.getnames())
        manifest = json.loads(tar.extractfile("package/package.json").read())  # type: ignore[union-attr]
    assert "package/dist/ort-wasm-simd-threaded.wasm" in names and "package/sboms/ortdist.cdx.json" in names
    assert manifest["name"] == "onnxruntime-web-slim-wasm"
    assert out.sizes["ort-wasm-simd-threaded.wasm"] == 500 and out.stock_sizes["ort-wasm-simd-threaded.wasm"] == 1000
    report = (env.layout.out.host / "slim-wasm.size.md").read_text()
    assert "| ort-wasm-simd-threaded.wasm | 500 | 1,000 | -50.0% |" in report
    first = out.package.read_bytes()
    again = web_package.run(env.ctx, env.state)
    assert again.package.read_bytes() == first  # same files, same bytes


def test_a_build_without_the_module_pair_says_which_file_is_missing(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = ready(make_env, monkeypatch, tmp_path)
    (env.layout.build.host / "ort-wasm-simd-threaded.wasm").write_bytes(b"\0asm")
    with pytest.raises(PackageError, match=r"ort-wasm-simd-threaded\.mjs"):
        web_package.run(env.ctx, env.state)
