"""The WebAssembly target's facts: what onnxruntime-web loads, the stock package it pairs with, and
the npm package ortdist makes (recipes with linkage = "wasm").

onnxruntime-web 1.21.0's JS loads one module by name, ``ort-wasm-simd-threaded.{mjs,wasm}`` (its
``env.wasm.wasmPaths`` points it at another directory), so a recipe's build replaces exactly
that pair; the JS itself needs no build and comes from npm's package, pinned by hash.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

from . import mirrors, sources
from .errors import SourceError

MODULE = "ort-wasm-simd-threaded"  # the SIMD + threads variant: the only one 1.21.0's loader names
FILES = (f"{MODULE}.wasm", f"{MODULE}.mjs")


@dataclass(frozen=True)
class NpmPackage:
    name: str
    version: str
    sha256: str

    @property
    def pin(self) -> sources.Pinned:
        filename = f"{self.name}-{self.version}.tgz"
        try:
            url, unreachable = f"{mirrors.npm_registry().url}/{self.name}/-/{filename}", None
        except SourceError as exc:  # no npm to ask: a cached copy still serves
            url, unreachable = "", exc
        return sources.Pinned(
            url=url, filename=filename, sha256=self.sha256, origin="ortdist/web.py", unreachable=unreachable
        )


# The stock package a build pairs with: its JS runs our module, its own module is the size baseline.
STOCK = {
    "1.21.0": NpmPackage(
        "onnxruntime-web", "1.21.0", "9c6b3e0955aa8bc61b69f62873bb3bdb021010a6d1550b6a638a74af353f445c"
    ),
}
# What the stock package's node build imports by name (npm installs it beside it, in node_modules).
COMMON = {
    "1.21.0": NpmPackage(
        "onnxruntime-common", "1.21.0", "9c6126102b312514e64703c0922772974ee5c83e89eb345161226bcfeb67a22c"
    ),
}
NODE_ENTRY = "dist/ort.node.min.mjs"  # onnxruntime-web's build for node (an ES module importing onnxruntime-common)
BROWSER_ENTRY = "dist/ort.wasm.bundle.min.mjs"  # the browser build, wasm backend only, one file


def package_json(recipe: str, ort_version: str, description: str, operators: list[str]) -> str:
    """package.json of the npm package: the module files, and the onnxruntime-web it pairs with."""
    stock = STOCK[ort_version]
    data: dict[str, Any] = {
        "name": f"onnxruntime-web-{recipe}",
        "version": ort_version,
        "description": description,
        "license": "MIT",
        "files": [f"dist/{name}" for name in FILES] + ["sboms/ortdist.cdx.json"],
        "peerDependencies": {stock.name: stock.version},
        "ortdist": {
            "pairs_with": f"{stock.name}@{stock.version}",
            "usage": "ort.env.wasm.wasmPaths = '<this package>/dist/'",
            "operators": operators,
        },
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def gzip_size(data: bytes) -> int:
    """What a server sending it compressed sends (gzip -9, no name or time in the header)."""
    return len(gzip.compress(data, compresslevel=9, mtime=0))
