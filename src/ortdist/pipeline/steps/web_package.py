"""The WebAssembly module as an npm package: ORT's ``ort-wasm-simd-threaded.{wasm,mjs}`` from the
build tree, package.json naming the onnxruntime-web it pairs with, the SBOM, and the module's size
against the stock package's own (web.py)."""

from __future__ import annotations

import shutil
import tarfile

from ... import sbom, sources, web
from ...errors import PackageError
from ...fsutil import atomic_write_text, deterministic_tarball, remove_tree
from ...manifest import Artifact
from ..context import BuildContext
from ..sboms import sbom_inputs
from ..state import BuildState, Models, WebPackage
from ..step import StepDef

SBOM_IN_PACKAGE = "sboms/ortdist.cdx.json"


def stock_sizes(ctx: BuildContext) -> dict[str, int]:
    """The stock onnxruntime-web package's module files, by name: size in bytes (and gzip -9)."""
    tarball = sources.fetch(web.STOCK[ctx.plan.version.version].pin, ctx.cache.downloads)
    sizes: dict[str, int] = {}
    with tarfile.open(tarball) as tar:
        for name in web.FILES:
            member = tar.extractfile(f"package/dist/{name}")
            if member is None:
                raise PackageError(f"{tarball.name} has no dist/{name}", where=str(tarball))
            data = member.read()
            sizes[name] = len(data)
            sizes[f"{name}.gz"] = web.gzip_size(data)
    return sizes


def size_report(recipe: str, ours: dict[str, int], stock: dict[str, int], version: str) -> str:
    lines = [
        f"# {recipe}: the WebAssembly module against onnxruntime-web {version}'s own",
        "",
        "| file | ours (bytes) | stock (bytes) | change |",
        "|---|---:|---:|---:|",
    ]
    for name in sorted(ours):
        change = (ours[name] - stock[name]) / stock[name] * 100
        lines.append(f"| {name} | {ours[name]:,} | {stock[name]:,} | {change:+.1f}% |")
    lines += ["", "`.gz`: gzip -9, what a server compressing the file sends.", ""]
    return "\n".join(lines)


def run(ctx: BuildContext, state: BuildState) -> WebPackage:
    plan, build = ctx.plan, ctx.layout.build.host
    missing = [name for name in web.FILES if not (build / name).is_file()]
    if missing:
        raise PackageError(
            f"the build left no {', '.join(missing)}",
            where=str(build),
            fix=f"ORT names the module from its switches: SIMD and threads must be on; see {ctx.log_path('build')}",
        )
    stage = ctx.layout.work.host / "web-package"
    remove_tree(stage)
    (stage / "dist").mkdir(parents=True)
    ours: dict[str, int] = {}
    for name in web.FILES:
        shutil.copyfile(build / name, stage / "dist" / name)
        data = (stage / "dist" / name).read_bytes()
        ours[name] = len(data)
        ours[f"{name}.gz"] = web.gzip_size(data)
    models = state.find(Models)
    operators = list(models.operators) if models else []
    name = f"onnxruntime-web-{plan.recipe.name}"
    (stage / "package.json").write_text(
        web.package_json(plan.recipe.name, plan.version.version, plan.recipe.description, operators), encoding="utf-8"
    )
    subject = {"name": name, "version": plan.version.version, "description": "WebAssembly module (npm package)"}
    (stage / SBOM_IN_PACKAGE).parent.mkdir(parents=True)
    (stage / SBOM_IN_PACKAGE).write_text(sbom.dumps(sbom.make_sbom(sbom_inputs(ctx, state, []), subject)), "utf-8")
    out = ctx.layout.out.host
    out.mkdir(parents=True, exist_ok=True)
    package = out / f"{name}-{plan.version.version}.tgz"
    deterministic_tarball(stage, package, "package", ctx.source_date_epoch())  # npm's layout: package/...
    stock = stock_sizes(ctx)
    report = out / f"{plan.recipe.name}.size.md"
    atomic_write_text(report, size_report(plan.recipe.name, ours, stock, plan.version.version))
    return WebPackage(
        package=package,
        stage=stage,
        sizes=ours,
        stock_sizes=stock,
        artifacts=(
            Artifact(package, "npm-package", extra={"pairs_with": f"onnxruntime-web@{plan.version.version}"}),
            Artifact(report, "size-report"),
        ),
    )


STEP = StepDef(run, reusable=True)
