"""Issue #16: every command turns a bad input into an error that names the offending path or key,
exits non-zero, prints no traceback and writes nothing (project, cache, dist and the files given).

Each case runs ``ortdist.cli.main`` in-process in a temp project (ORTDIST_PROJECT) with a temp cache
(ORTDIST_CACHE); a case builds its files under ``tmp`` and returns the argv and the strings the
output must contain. ``build`` cases fail before the toolchain step, so they need no root or network.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ortdist import diskspace
from ortdist.cli import main
from ortdist.cli.parser import parser
from ortdist.smoke import env as smoke_env
from ortdist.smoke.models import BUILDERS

PROJECT = Path(__file__).resolve().parents[2]
RECIPE = 'name = "{name}"\ndescription = "t"\n{body}'
SLIM = '[wheel]\nenabled = false\n[reduce]\nmodels = ["{model}"]\n'
WHEEL = "onnxruntime-1.21.0-cp313-cp313-manylinux_2_28_x86_64.whl"


@dataclass(frozen=True)
class Env:
    tmp: Path  # where a case's own files go
    project: Path
    monkeypatch: pytest.MonkeyPatch

    def write(self, rel: str, data: str | bytes) -> Path:
        path = self.tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
        return path

    def recipe(self, rel: str, name: str, body: str = "") -> Path:
        return self.write(rel, RECIPE.format(name=name, body=body))

    def dist_build(self, recipe: str = "cpu-linux", manifest: str | None = None, wheel: bytes | None = None) -> Path:
        """dist/<recipe>/ as a build leaves it: manifest.json naming a wheel (bytes given or a valid one)."""
        out = self.project / "dist" / recipe
        entry = {"path": WHEEL, "kind": "wheel", "sha256": "0", "size": 1}
        text = manifest if manifest is not None else json.dumps({"recipe": recipe, "artifacts": [entry]})
        self.write(str((out / "manifest.json").relative_to(self.tmp)), text)
        self.write(str((out / WHEEL).relative_to(self.tmp)), wheel if wheel is not None else wheel_bytes(WHEEL))
        return out


def wheel_bytes(filename: str, extra: dict[str, bytes] | None = None, *, with_wheel_file: bool = True) -> bytes:
    dist, version, py, abi, plat = filename.removesuffix(".whl").split("-")
    info = f"{dist}-{version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        if with_wheel_file:
            zf.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {py}-{abi}-{plat}\n")
        for name, data in (extra or {}).items():
            zf.writestr(name.format(info=info), data)
    return buf.getvalue()


def sbom_wheel(document: bytes) -> bytes:
    return wheel_bytes(WHEEL, {"{info}/sboms/ortdist.cdx.json": document})


def onnx_model() -> bytes:
    return BUILDERS["cnn"]().model


def tarball(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


Case = Callable[[Env], tuple[list[str], list[str]]]
CASES: dict[str, tuple[str, Case]] = {}


def case(cls: str, case_id: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[case_id] = (cls, fn)
        return fn

    return register


# -- recipe files: encoding, names ------------------------------------------------------------------
@case("recipe-file", "validate-non-utf8")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("r.toml", b'name = "r"\ndescription = "caf\xe9"\n')
    return ["validate", str(p)], [str(p), "not UTF-8"]


@case("recipe-file", "plan-non-utf8-in-recipes")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("project/recipes/latin.toml", b'name = "latin"\ndescription = "\xff"\n')
    return ["plan", "latin"], [str(p), "not UTF-8"]


@case("recipe-file", "validate-unknown-key")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("r.toml", "r", "colour = 1\n")
    return ["validate", str(p)], [str(p), "colour"]


@case("recipe-file", "validate-unknown-ep")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("r.toml", "r", 'execution_providers = ["cuda2"]\n')
    return ["validate", str(p)], [str(p), "execution_providers[0]"]


@case("recipe-file", "validate-wrong-type")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("r.toml", "r", 'execution_providers = "cpu"\n')
    return ["validate", str(p)], [str(p), "execution_providers"]


@case("recipe-file", "validate-not-toml")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("r.toml", "name = \n")
    return ["validate", str(p)], [str(p), "not valid TOML"]


@case("recipe-file", "matrix-bad-recipe-in-recipes")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("project/recipes/zz.toml", b"\xfe\xff")
    return ["matrix"], [str(p)]


@case("recipe-file", "validate-recipe-is-directory")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.tmp / "dir.toml"
    p.mkdir()
    return ["validate", str(p)], [str(p), "cannot read"]


@case("recipe-name", "validate-name-differs-non-toml")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("x.recipe", "y")
    return ["validate", str(p)], [str(p), "key 'name'", "'y'"]


@case("recipe-name", "validate-name-differs-no-extension")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("x", "cpu-linux")
    return ["validate", str(p)], [str(p), "key 'name'"]


@case("recipe-name", "validate-name-with-slash")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("b.toml", "a/b")
    return ["validate", str(p)], [str(p), "key 'name'", "not a plain recipe name"]


@case("recipe-name", "validate-name-only-dots")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("...toml", "..")  # the stem of '...toml' is '..': equal, and still refused
    return ["validate", str(p)], [str(p), "key 'name'", "not a plain recipe name"]


@case("recipe-name", "build-name-differs")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("project/recipes/mine.toml", "cpu-linux")
    return ["build", "mine"], [str(p), "key 'name'"]


@case("recipe-name", "build-arg-parent")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.recipe("x.toml", "x")  # project/recipes/../x.toml exists: the name must still be refused
    return ["build", "../x"], ["error: ../x: not a plain recipe name"]


@case("recipe-name", "build-arg-slash")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "a/b"], ["error: a/b: not a plain recipe name"]


@case("recipe-name", "build-arg-dot")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "."], ["error: .: not a plain recipe name"]


@case("recipe-name", "plan-arg-dotdot")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["plan", ".."], ["error: ..: not a plain recipe name"]


@case("recipe-name", "plan-missing-recipe")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["plan", "no-such-recipe"], [str(e.project / "recipes" / "no-such-recipe.toml")]


@case("recipe-name", "build-missing-recipe")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "nope"], [str(e.project / "recipes" / "nope.toml")]


# -- recipe models: checked when the recipe loads ----------------------------------------------------
@case("recipe-model", "validate-model-text")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.write("m.onnx", "this is not a model\n")
    p = e.recipe("r.toml", "r", SLIM.format(model="m.onnx"))
    return ["validate", str(p)], [str(p), "models[0]", "not an ONNX model"]


@case("recipe-model", "validate-model-truncated")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.write("m.onnx", onnx_model()[:-7])
    p = e.recipe("r.toml", "r", SLIM.format(model="m.onnx"))
    return ["validate", str(p)], [str(p), "models[0]", "not an ONNX model"]


@case("recipe-model", "validate-model-directory")
def _(e: Env) -> tuple[list[str], list[str]]:
    (e.tmp / "d.onnx").mkdir()
    p = e.recipe("r.toml", "r", SLIM.format(model="d.onnx"))
    return ["validate", str(p)], [str(p), "models[0]", "is a directory"]


@case("recipe-model", "plan-model-missing")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("project/recipes/slimmer.toml", "slimmer", SLIM.format(model="gone.onnx"))
    return ["plan", "slimmer"], [str(p), "models[0]", "does not exist"]


@case("recipe-model", "build-model-empty-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.write("project/recipes/empty.onnx", b"")
    p = e.recipe("project/recipes/slimmer.toml", "slimmer", SLIM.format(model="empty.onnx"))
    return ["build", "slimmer"], [str(p), "models[0]", "not an ONNX model"]


# -- build arguments ---------------------------------------------------------------------------------
@case("build-args", "build-jobs-negative")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "--jobs", "-3"], ["--jobs", "-3"]


@case("build-args", "build-jobs-not-a-number")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "-j", "many"], ["--jobs", "'many'"]


@case("build-args", "build-dist-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("dist-file", "x")
    return ["build", "cpu-linux", "--dist", str(p)], [str(p), "is a file, not a directory"]


@case("build-args", "build-disk-too-full")
def _(e: Env) -> tuple[list[str], list[str]]:
    """A cold cpu-linux needs its roots, source and tree (data/disk.toml): 2 GB free is refused."""
    e.monkeypatch.setattr(diskspace, "free_bytes", lambda path: 2 * 10**9)
    return ["build", "cpu-linux"], [
        str(e.tmp / "cache"),
        "building cpu-linux needs about 6.0 GB free",
        "the portable-glibc2.17 roots 2.7 GB",
        "it has 2.0 GB",
        "`ortdist cache --prune`",
    ]


@case("build-args", "build-dist-disk-too-full")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.tmp / "out"
    e.monkeypatch.setattr(diskspace, "free_bytes", lambda path: 10**8 if path == out else 10**12)
    return ["build", "cpu-linux", "--dist", str(out)], [str(out), "dist/ has 0.1 GB free"]


@case("build-args", "build-dist-recipe-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("out/cpu-linux", "x")
    return ["build", "cpu-linux", "--dist", str(p.parent)], [str(p), "not a directory"]


@case("build-args", "build-dist-parent-missing")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.tmp / "no" / "such" / "dist"
    return ["build", "cpu-linux", "--dist", str(p)], [str(p.parent), "does not exist"]


# -- outputs: never an input, never a directory, in an existing directory -----------------------------
@case("outputs", "analyze-output-replaces-input")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    return ["analyze", str(cfg), "-o", str(e.tmp / "." / "ops.config")], [str(cfg), "would replace the input"]


@case("outputs", "analyze-output-hardlink-of-input")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    link = e.tmp / "link.config"
    link.hardlink_to(cfg)
    return ["analyze", str(cfg), "-o", str(link)], [str(link), "would replace the input"]


@case("outputs", "analyze-output-is-directory")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    (e.tmp / "outdir").mkdir()
    return ["analyze", str(cfg), "-o", str(e.tmp / "outdir")], [str(e.tmp / "outdir"), "is a directory"]


@case("outputs", "analyze-output-parent-missing")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    out = e.tmp / "missing" / "out.config"
    return ["analyze", str(cfg), "-o", str(out)], [str(out.parent), "does not exist"]


@case("outputs", "analyze-ort-dir-is-input")
def _(e: Env) -> tuple[list[str], list[str]]:
    model = e.write("m.onnx", onnx_model())
    return ["analyze", str(model), "--ort-dir", str(model)], [str(model), "--ort-dir"]


@case("outputs", "analyze-ort-dir-conversion-replaces-input")
def _(e: Env) -> tuple[list[str], list[str]]:
    model = e.write("m.onnx", onnx_model())
    ort = e.write("m.ort", b"old conversion")
    return ["analyze", str(model), str(ort), "--ort-dir", str(e.tmp)], [str(ort), "would replace the input"]


@case("outputs", "report-out-is-directory")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.dist_build()
    (e.tmp / "o").mkdir()
    return ["report", "--out", str(e.tmp / "o")], [str(e.tmp / "o"), "is a directory"]


@case("outputs", "report-out-replaces-manifest")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build()
    return ["report", "--out", str(out / "manifest.json")], [str(out / "manifest.json"), "would replace the input"]


@case("outputs", "report-out-replaces-previous-manifest")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build()
    previous = e.write(str((out / "previous-manifest.json").relative_to(e.tmp)), "{}")
    return ["report", "--out", str(previous)], [str(previous), "would replace the input"]


@case("outputs", "report-out-parent-missing")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.dist_build()
    out = e.tmp / "nowhere" / "r.html"
    return ["report", "--out", str(out)], [str(out.parent), "does not exist"]


@case("outputs", "report-screenshot-is-the-page")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.dist_build()
    out = e.tmp / "r.html"
    return ["report", "--out", str(out), "--screenshot", str(out)], [str(out), "would replace the input"]


@case("outputs", "schema-write-target-is-directory")
def _(e: Env) -> tuple[list[str], list[str]]:
    target = e.project / "recipes" / "recipe.schema.json"
    target.unlink()
    target.mkdir()
    return ["schema", "--write"], [str(target), "is a directory"]


# -- analyze inputs ----------------------------------------------------------------------------------
@case("analyze-inputs", "analyze-missing-model")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["analyze", str(e.tmp / "gone.onnx")], [str(e.tmp / "gone.onnx"), "no such file"]


@case("analyze-inputs", "analyze-text-model")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("t.onnx", "not a model")
    return ["analyze", str(p), "-o", str(e.tmp / "o.config")], [str(p), "not an ONNX model"]


@case("analyze-inputs", "analyze-unknown-type")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("m.pt", b"\x80\x02")
    return ["analyze", str(p)], [str(p), "unknown file type"]


@case("analyze-inputs", "analyze-non-utf8-config")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("ops.config", b"ai.onnx;13;Re\xfflu\n")
    return ["analyze", str(p)], [str(p), "not UTF-8"]


# -- inspect: archives and SBOMs ---------------------------------------------------------------------
@case("inspect", "inspect-wheel-not-zip")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, "plain text")
    return ["inspect", str(p)], [str(p), "not a readable archive"]


@case("inspect", "inspect-truncated-tarball")
def _(e: Env) -> tuple[list[str], list[str]]:
    data = tarball({"onnxruntime/share/doc/onnxruntime/ortdist.cdx.json": b"{}" * 5000})
    p = e.write("onnxruntime-linux.tar.gz", data[: len(data) // 2])
    return ["inspect", str(p)], [str(p), "not a readable archive"]


@case("inspect", "inspect-wheel-without-sbom")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, wheel_bytes(WHEEL))
    return ["inspect", str(p)], [str(p), "carries no ortdist SBOM"]


@case("inspect", "inspect-sbom-invalid-json")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, sbom_wheel(b'{"bomFormat": '))
    return ["inspect", str(p)], [str(p), "ortdist.cdx.json", "not valid JSON"]


@case("inspect", "inspect-sbom-empty-object")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, sbom_wheel(b"{}"))
    return ["inspect", str(p)], [str(p), "lacks", "metadata.component.name/version", "ortdist:recipe"]


@case("inspect", "inspect-sbom-json-flag-still-checked")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, sbom_wheel(b"[1, 2]"))
    return ["inspect", "--json", str(p)], [str(p), "JSON object"]


@case("inspect", "inspect-tarball-without-sbom")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("lib.tar.gz", tarball({"lib/libonnxruntime.so": b"\x7fELF"}))
    return ["inspect", str(p)], [str(p), "carries no ortdist SBOM"]


@case("inspect", "inspect-other-file-type")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("notes.txt", "x")
    return ["inspect", str(p)], [str(p), "neither a wheel nor"]


# -- report over a damaged dist/ ---------------------------------------------------------------------
@case("report", "report-corrupt-manifest")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build(manifest='{"recipe": ')
    return ["report"], [str(out / "manifest.json"), "not valid JSON", "delete it"]


@case("report", "report-corrupt-previous-manifest")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build()
    previous = e.write(str((out / "previous-manifest.json").relative_to(e.tmp)), '{"recipe": ')
    return ["report"], [str(previous), "not valid JSON", "delete it"]


@case("report", "report-manifest-artifacts-wrong")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build(manifest='{"recipe": "cpu-linux", "artifacts": [3]}')
    return ["report"], [str(out / "manifest.json"), "'artifacts'"]


@case("report", "report-corrupt-smoke-report")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build()
    smoke = e.write(str((out / "smoke" / f"{WHEEL.removesuffix('.whl')}.json").relative_to(e.tmp)), "{oops")
    return ["report"], [str(smoke), "not valid JSON"]


@case("report", "report-corrupt-wheel")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build(wheel=b"truncated")
    return ["report"], [str(out / WHEEL), "not a readable"]


@case("report", "report-corrupt-sbom")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.dist_build(wheel=sbom_wheel(b"{}"))
    return ["report"], [str(out / WHEEL), "ortdist.cdx.json", "lacks"]


@case("report", "report-dist-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("dist.txt", "x")
    return ["report", "--dist", str(p), "--out", str(e.tmp / "r.html")], [str(p), "not a directory"]


@case("report", "report-empty-dist")
def _(e: Env) -> tuple[list[str], list[str]]:
    (e.tmp / "empty").mkdir()
    return ["report", "--dist", str(e.tmp / "empty")], [str(e.tmp / "empty"), "no builds"]


# -- smoke: arguments refused before the cache lock ----------------------------------------------------
@case("smoke", "smoke-text-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, "text")
    return ["smoke", str(p)], [str(p), "not a zip archive"]


@case("smoke", "smoke-missing-wheel")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["smoke", str(e.tmp / "dist" / "*.whl")], [str(e.tmp / "dist" / "*.whl"), "no such wheel"]


@case("smoke", "smoke-no-wheel-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, wheel_bytes(WHEEL, with_wheel_file=False))
    return ["smoke", str(p)], [str(p), ".dist-info/WHEEL"]


@case("smoke", "smoke-not-a-wheel-name")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("onnxruntime.whl", wheel_bytes(WHEEL))
    return ["smoke", str(p)], [str(p), "not a wheel file name"]


@case("smoke", "smoke-macos-wheel")
def _(e: Env) -> tuple[list[str], list[str]]:
    name = "onnxruntime-1.21.0-cp313-cp313-macosx_13_0_universal2.whl"
    p = e.write(name, wheel_bytes(name))
    return ["smoke", str(p)], [str(p), "'macosx_13_0_universal2'", "x86_64"]


@case("smoke", "smoke-windows-wheel")
def _(e: Env) -> tuple[list[str], list[str]]:
    name = "onnxruntime-1.21.0-cp313-cp313-win_amd64.whl"
    p = e.write(name, wheel_bytes(name))
    return ["smoke", str(p)], [str(p), "'win_amd64'"]


@case("smoke", "smoke-aarch64-wheel-no-python")
def _(e: Env) -> tuple[list[str], list[str]]:
    name = "onnxruntime-1.21.0-cp312-cp312-manylinux_2_28_aarch64.whl"
    p = e.write(name, wheel_bytes(name))
    return ["smoke", str(p)], [str(p), "aarch64", "CPython 3.12"]


@case("smoke", "smoke-second-wheel-bad")
def _(e: Env) -> tuple[list[str], list[str]]:
    good = e.write(WHEEL, wheel_bytes(WHEEL))
    bad = e.write("x/" + WHEEL, "text")
    return ["smoke", str(good), str(bad)], [str(bad), "not a zip archive"]


@case("smoke", "smoke-latency-zero")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, wheel_bytes(WHEEL))
    return ["smoke", str(p), "--latency", "0"], ["--latency", "0 is less than 1"]


@case("smoke", "smoke-warmup-negative")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, wheel_bytes(WHEEL))
    return ["smoke", str(p), "--latency", "5", "--warmup", "-1"], ["--warmup", "-1 is less than 0"]


@case("smoke", "smoke-threads-zero")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, wheel_bytes(WHEEL))
    return ["smoke", str(p), "--latency", "5", "--threads", "0"], ["--threads", "0 is less than 1"]


# -- patches, matrix --------------------------------------------------------------------------------
@case("patches-matrix", "patches-unknown-series")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["patches", "check", "9.9.9"], ["'9.9.9'", str(e.project / "patches")]


@case("patches-matrix", "patches-series-path")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["patches", "check", "../recipes"], ["'../recipes'"]


@case("patches-matrix", "matrix-name-mismatch-in-recipes")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.recipe("project/recipes/odd.toml", "even")
    return ["matrix", "--check"], [str(p), "key 'name'"]


# -- more arguments ----------------------------------------------------------------------------------
@case("more-args", "inspect-directory")
def _(e: Env) -> tuple[list[str], list[str]]:
    (e.tmp / WHEEL).mkdir()
    return ["inspect", str(e.tmp / WHEEL)], [str(e.tmp / WHEEL), "is a directory"]


@case("more-args", "analyze-target-arch-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    return ["analyze", str(cfg), "--target-arch", "sparc"], ["--target-arch", "'sparc'"]


@case("more-args", "plan-empty-name")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["plan", ""], ["error: '': not a plain recipe name"]


@case("more-args", "schema-check-non-utf8-schema")
def _(e: Env) -> tuple[list[str], list[str]]:
    target = e.project / "recipes" / "recipe.schema.json"
    target.write_bytes(b"\xff\xfe")
    return ["schema", "--check"], [str(target), "out of date"]


# -- publish: refused before any upload, lock or command ---------------------------------------------
INDEX = "http://127.0.0.1:9/"


def published_build(e: Env, smoke: dict[str, object] | None) -> Path:
    """dist/cpu-linux/ with a wheel whose manifest sha256 is right, and this smoke report of it."""
    import hashlib

    data = wheel_bytes(WHEEL)
    entry = {"path": WHEEL, "kind": "wheel", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    out = e.dist_build(manifest=json.dumps({"recipe": "cpu-linux", "artifacts": [{**entry, "python": "3.13"}]}))
    if smoke is not None:
        report = {"wheel": WHEEL, "wheel_sha256": entry["sha256"], **smoke}
        e.write(str((out / "smoke" / f"{Path(WHEEL).stem}.json").relative_to(e.tmp)), json.dumps(report))
    return out


@case("publish", "publish-nothing-built")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["publish", "cpu-linux", "--repository-url", INDEX], [str(e.project / "dist" / "cpu-linux"), "no manifest"]


@case("publish", "publish-no-smoke-report")
def _(e: Env) -> tuple[list[str], list[str]]:
    published_build(e, None)
    return ["publish", "cpu-linux", "--repository-url", INDEX], [WHEEL, "no smoke report", "nox -s smoke --"]


@case("publish", "publish-failed-smoke-report")
def _(e: Env) -> tuple[list[str], list[str]]:
    published_build(e, {"passed": False})
    return ["publish", "cpu-linux", "--repository-url", INDEX], [WHEEL, "smoke report says FAIL"]


@case("publish", "publish-smoke-report-of-other-bytes")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = published_build(e, {"passed": True})
    report = out / "smoke" / f"{Path(WHEEL).stem}.json"
    report.write_text(json.dumps({"wheel": WHEEL, "passed": True, "wheel_sha256": "1" * 64}), encoding="utf-8")
    return ["publish", "cpu-linux", "--repository-url", INDEX], [WHEEL, "of another build of it"]


@case("publish", "publish-wheel-changed-after-build")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.dist_build()  # the manifest's sha256 is "0"
    return ["publish", "cpu-linux", "--repository-url", INDEX], [WHEEL, "sha256 differs from manifest.json"]


@case("publish", "publish-repository-url-not-http")
def _(e: Env) -> tuple[list[str], list[str]]:
    published_build(e, {"passed": True})
    return ["publish", "cpu-linux", "--repository-url", "ftp://index"], ["--repository-url 'ftp://index'", "http"]


@case("publish", "publish-no-wheel-built")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.dist_build(manifest=json.dumps({"recipe": "cpu-linux", "artifacts": []}))
    return ["publish", "cpu-linux", "--repository-url", INDEX], ["manifest.json", "made no wheel"]


# -- the OSError backstop ----------------------------------------------------------------------------
@case("oserror-backstop", "report-permission-denied")
def _(e: Env) -> tuple[list[str], list[str]]:
    """As a non-root user meets a root-owned dist/ (the tests run as root, who may read anything)."""
    locked = e.dist_build() / "manifest.json"
    read_bytes = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    e.monkeypatch.setattr(Path, "read_bytes", denied)
    return ["report"], [str(locked), "cannot be read (Permission denied)"]


@case("oserror-backstop", "smoke-cache-unusable")
def _(e: Env) -> tuple[list[str], list[str]]:
    """A wheel that passes the argument checks; the cache (here a file) cannot be locked."""
    wheel = e.write(WHEEL, wheel_bytes(WHEEL))
    cache = e.write("cache-file", "x")
    e.monkeypatch.setenv("ORTDIST_CACHE", str(cache))
    return ["smoke", str(wheel)], [str(cache), "cannot use the cache", "ORTDIST_CACHE"]


# -- every option of every command: a bad value refused before any work (issue #56) ---------------
@case("options", "build-compiler-cache-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "--compiler-cache", "redis"], ["--compiler-cache", "'redis'"]


@case("options", "build-compiler-cache-env-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.monkeypatch.setenv("ORTDIST_COMPILER_CACHE", "redis")
    return ["build", "cpu-linux"], ["ORTDIST_COMPILER_CACHE", "'redis'"]


@case("options", "build-python-not-a-version")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "--python", "3.x"], ["--python", "3.x"]


@case("options", "build-python-not-the-recipes")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "--python", "3.9"], ["--python", "3.9"]


@case("options", "build-cuda-architectures-native")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cuda13-linux", "--cuda-architectures", "native"], ["--cuda-architectures", "'native'"]


@case("options", "build-cuda-architectures-cpu-recipe")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "--cuda-architectures", "90"], ["--cuda-architectures", "compiles no CUDA code"]


@case("options", "build-workers-bad-port")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["build", "cpu-linux", "--workers", "10.0.0.2:port"], ["--workers", "10.0.0.2:port"]


@case("options", "build-workers-env-bad-slots")
def _(e: Env) -> tuple[list[str], list[str]]:
    e.monkeypatch.setenv("ORTDIST_WORKERS", "10.0.0.2/zero")
    return ["build", "cpu-linux"], ["ORTDIST_WORKERS", "10.0.0.2/zero"]


@case("options", "worker-listen-not-an-address")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["worker", "portable-glibc2.17", "--listen", "nowhere", "--allow", "10.0.0.0/24"], ["--listen", "'nowhere'"]


@case("options", "worker-allow-not-a-network")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["worker", "portable-glibc2.17", "--listen", "10.0.0.1", "--allow", "10.0.0.0/33"], [
        "--allow",
        "'10.0.0.0/33'",
    ]


@case("options", "worker-port-out-of-range")
def _(e: Env) -> tuple[list[str], list[str]]:
    argv = ["worker", "portable-glibc2.17", "--listen", "10.0.0.1", "--allow", "10.0.0.0/24", "--port", "70000"]
    return argv, ["--port", "70000"]


@case("options", "worker-jobs-negative")
def _(e: Env) -> tuple[list[str], list[str]]:
    argv = ["worker", "portable-glibc2.17", "--listen", "10.0.0.1", "--allow", "10.0.0.0/24", "-j", "-2"]
    return argv, ["--jobs", "-2"]


@case("options", "worker-state-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("state", "x")
    argv = ["worker", "portable-glibc2.17", "--listen", "10.0.0.1", "--allow", "10.0.0.0/24", "--state", str(p)]
    return argv, [str(p), "not a directory"]


@case("options", "worker-toolchain-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["worker", "nope", "--listen", "10.0.0.1", "--allow", "10.0.0.0/24"], ["unknown toolchain 'nope'"]


@case("options", "smoke-toolchain-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write(WHEEL, wheel_bytes(WHEEL))
    return ["smoke", str(p), "--toolchain", "nope"], ["--toolchain", "unknown toolchain 'nope'"]


@case("options", "device-proof-prepare-python-not-a-version")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["device-proof", "prepare", "cuda13-linux", "--python", "312"], ["--python", "'312'"]


@case("options", "device-proof-prepare-dist-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("dist-file", "x")
    return ["device-proof", "prepare", "cuda13-linux", "--dist", str(p)], [str(p), "not a directory"]


def _bundle(e: Env) -> Path:
    bundle = e.tmp / "bundle"
    manifest = {"recipe": "cuda13-linux", "wheel": WHEEL, "wheel_sha256": "0" * 64, "python": "3.12"}
    e.write("bundle/manifest.json", json.dumps(manifest))
    return bundle


@case("options", "device-proof-run-out-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    out = e.write("out", "x")
    return ["device-proof", "run", str(_bundle(e)), "--out", str(out)], [str(out), "not a directory"]


@case("options", "device-proof-run-runs-zero")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["device-proof", "run", str(_bundle(e)), "--out", str(e.tmp / "o"), "--runs", "0"], ["--runs", "0"]


@case("options", "device-proof-run-libraries-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    argv = ["device-proof", "run", str(_bundle(e)), "--out", str(e.tmp / "o"), "--libraries", "conda"]
    return argv, ["--libraries", "'conda'"]


@case("options", "device-proof-run-store-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    store = e.write("store", "x")
    argv = ["device-proof", "run", str(_bundle(e)), "--out", str(e.tmp / "o"), "--store", str(store)]
    return argv, [str(store), "not a directory"]


@case("options", "device-proof-gather-store-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    store = e.write("store", "x")
    return ["device-proof", "gather", str(_bundle(e)), "--store", str(store)], [str(store), "not a directory"]


@case("options", "device-proof-accept-dist-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("dist-file", "x")
    folder = e.write("results/device-proof.json", "{}").parent
    return ["device-proof", "accept", "cuda13-linux", str(folder), "--dist", str(p)], [str(p), "not a directory"]


@case("options", "device-proof-run-bundle-without-manifest")
def _(e: Env) -> tuple[list[str], list[str]]:
    bundle = e.write("bundle/smoke.zip", b"").parent
    return ["device-proof", "run", str(bundle), "--out", str(e.tmp / "o")], [
        str(bundle / "manifest.json"),
        "does not exist",
    ]


@case("options", "device-proof-accept-proof-without-wheel")
def _(e: Env) -> tuple[list[str], list[str]]:
    folder = e.write("results/device-proof.json", "{}").parent
    return ["device-proof", "accept", "cuda13-linux", str(folder)], [str(folder / "device-proof.json"), "'wheel'"]


@case("options", "publish-index-url-not-http")
def _(e: Env) -> tuple[list[str], list[str]]:
    published_build(e, {"passed": True})
    argv = ["publish", "cpu-linux", "--repository-url", "http://i/", "--index-url", "file:///simple"]
    return argv, ["--index-url 'file:///simple'", "http"]


@case("options", "publish-dist-is-a-file")
def _(e: Env) -> tuple[list[str], list[str]]:
    p = e.write("dist-file", "x")
    return ["publish", "cpu-linux", "--repository-url", "http://i/", "--dist", str(p)], [str(p), "not a directory"]


@case("options", "bench-recipe-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["bench", "--recipe", "nope"], ["nope"]


@case("options", "bench-jobs-negative")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["bench", "-j", "-1"], ["--jobs", "-1"]


@case("options", "bench-only-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    return ["bench", "--only", "speed"], ["--only", "'speed'"]


@case("options", "analyze-optimization-level-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    return ["analyze", str(cfg), "--optimization-level", "max"], ["--optimization-level", "'max'"]


@case("options", "analyze-ort-version-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    return ["analyze", str(cfg), "--ort-version", "latest"], ["--ort-version", "'latest'"]


@case("options", "analyze-toolchain-unknown")
def _(e: Env) -> tuple[list[str], list[str]]:
    cfg = e.write("ops.config", "ai.onnx;13;Relu\n")
    return ["analyze", str(cfg), "--toolchain", "nope"], ["--toolchain", "unknown toolchain 'nope'"]


def _snapshot(root: Path) -> dict[str, tuple[bool, int, int]]:
    return {
        str(p.relative_to(root)): (p.is_dir(), p.lstat().st_size if not p.is_dir() else 0, p.lstat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.usefixtures("no_subprocess")
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_bad_input_is_an_error_naming_it_and_writes_nothing(
    case_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    for sub in ("recipes", "toolchains", "patches"):
        shutil.copytree(PROJECT / sub, project / sub)
    monkeypatch.setenv("ORTDIST_PROJECT", str(project))
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    # No host interpreter fits a wheel (asking one would run it): smoke's wheels go to the clean root.
    monkeypatch.setattr(smoke_env, "host_python", lambda version: None)
    _, make = CASES[case_id]
    argv, expected = make(Env(tmp_path, project, monkeypatch))
    before = _snapshot(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusal of a bad option value
        code = exc.code if isinstance(exc.code, int) else 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert code != 0, text
    assert "Traceback" not in text
    for needle in expected:
        assert needle in text, f"{needle!r} not in:\n{text}"
    assert _snapshot(tmp_path) == before, "the refused command wrote or removed files"
    assert not (tmp_path / "cache").exists(), "the refused command created the cache"


def test_the_table_covers_every_command() -> None:
    """Case ids start with the command they run."""
    assert len(CASES) >= 40
    commands = {case_id.split("-")[0] for case_id in CASES}
    assert commands >= {
        "validate",
        "plan",
        "build",
        "analyze",
        "smoke",
        "inspect",
        "report",
        "matrix",
        "patches",
        "schema",
        "publish",
    }


def _leaf_commands() -> dict[str, argparse.ArgumentParser]:
    """Each command as its case ids start ("build", "device-proof-run"), with its parser."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prefix: str, p: argparse.ArgumentParser) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found[prefix] = p
        for name, child in subs[0].choices.items() if subs else ():
            walk(f"{prefix}-{name}" if prefix else name, child)

    walk("", parser())
    return found


def test_every_option_of_every_command_has_a_bad_value_case() -> None:
    """Each option that takes a value is given a bad one by a case named <command>-<option>-...:
    a new option without one fails here."""
    missing = []
    for command, p in _leaf_commands().items():
        for action in p._actions:
            flags = [f for f in action.option_strings if f.startswith("--")]
            if not flags or action.nargs == 0 or isinstance(action, argparse._HelpAction):
                continue
            prefix = f"{command}-{flags[0].removeprefix('--')}-"
            if not any(case_id.startswith(prefix) for case_id in CASES):
                missing.append(prefix + "...")
    assert missing == []


def test_single_wheel_names_the_directory_and_what_it_found(tmp_path: Path) -> None:
    """A step that wrote no wheel (or two) is a PackageError naming the directory, not a FileNotFoundError."""
    from ortdist.errors import PackageError
    from ortdist.wheel.repair import single_wheel

    with pytest.raises(PackageError, match="found no such directory") as missing:
        single_wheel(tmp_path / "raw")
    assert missing.value.where == str(tmp_path / "raw")
    (tmp_path / "a-1-cp313-cp313-linux_x86_64.whl").write_bytes(b"")
    (tmp_path / "b-1-cp313-cp313-linux_x86_64.whl").write_bytes(b"")
    with pytest.raises(PackageError, match=r"found a-1-cp313-cp313-linux_x86_64\.whl, b-1-"):
        single_wheel(tmp_path)
