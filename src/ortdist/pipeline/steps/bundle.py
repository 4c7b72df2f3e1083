"""One static archive, libonnxruntime.a, from the library's CMake link graph, with headers, a
pkg-config file and an SBOM (the C smoke step then proves it links and runs alone)."""

from __future__ import annotations

import shutil

from ... import bundle, sbom
from ...errors import BuildError, PackageError
from ...fsutil import deterministic_tarball, remove_tree
from ...manifest import Artifact
from ..context import BuildContext
from ..linkgraph import link_graph
from ..sboms import SBOM_IN_ARCHIVE, sbom_inputs
from ..state import BuildState, StaticLibrary
from ..step import StepDef


def run(ctx: BuildContext, state: BuildState) -> StaticLibrary:
    plan, roots, work = ctx.plan, state.roots, ctx.layout.work
    graph = link_graph(ctx, roots)
    if graph.unresolved:
        raise BuildError(
            "these libraries in the link graph have no static archive to bundle:\n"
            + "\n".join(f"    {lib}" for lib in graph.unresolved),
            where=f"recipe {plan.recipe.name} linkage = {plan.recipe.linkage!r}",
            fix="drop the feature that needs them (e.g. [features] cpuinfo = false) or add a toolchain "
            "package that ships the .a",
        )
    name = f"onnxruntime-{plan.recipe.name}-{plan.version.version}-static"
    stage = work / "static"
    remove_tree(stage.host)
    (stage.host / "lib" / "pkgconfig").mkdir(parents=True)
    archive = str(stage.inside / "lib" / "libonnxruntime.a")
    archives, objects = list(graph.archives), []
    lto_object = work / "onnxruntime-lto.o"
    with ctx.open_log("bundle-lto") as log:
        if plan.recipe.features.lto:
            own, archives = bundle.split_lto(graph.archives, str(ctx.layout.build.inside))
            objects = [str(lto_object.inside)]
            optimize = "-Os" if plan.recipe.build_type == "MinSizeRel" else "-O2"
            ctx.runner.call(
                ctx.in_root(roots, ctx.compiler(roots).lto_object(own, objects[0], optimize)),
                log=log,
                error=BuildError,
                what="compiling the LTO objects for the static archive",
            )
    mri = work / "bundle.mri"
    mri.host.write_text(bundle.mri_script(archive, archives, objects), encoding="utf-8")
    prefix = work / "bundle-prefix"
    remove_tree(prefix.host)
    with ctx.open_log("bundle") as log:
        script = f"{ctx.tool('ar')} -M < {mri.inside} && {ctx.tool('ranlib')} {archive}"
        ctx.runner.call(ctx.in_root(roots, ["/bin/sh", "-c", script]), log=log, error=BuildError, what="ar -M")
        ctx.runner.call(
            ctx.in_root(roots, ["cmake", "--install", str(ctx.layout.build.inside), "--prefix", str(prefix.inside)]),
            log=log,
            error=PackageError,
            what="cmake --install (headers)",
        )
    shutil.copytree(prefix.host / "include", stage.host / "include")
    remove_tree(prefix.host)
    (stage.host / "lib" / "pkgconfig" / "libonnxruntime.pc").write_text(
        bundle.pkg_config(
            "onnxruntime",
            plan.version.version,
            graph.system_libs,
            f"ONNX Runtime ({plan.recipe.name}), one static archive",
        ),
        encoding="utf-8",
    )
    subject = {"name": name, "version": plan.version.version, "description": "static library archive"}
    (stage.host / SBOM_IN_ARCHIVE).parent.mkdir(parents=True, exist_ok=True)
    (stage.host / SBOM_IN_ARCHIVE).write_text(
        sbom.dumps(sbom.make_sbom(sbom_inputs(ctx, state, []), subject)), encoding="utf-8"
    )
    lto_object.host.unlink(missing_ok=True)
    merged: dict[str, int] = {}
    for archive_path in graph.archives:
        component = bundle.component_of(archive_path)
        merged[component] = merged.get(component, 0) + 1
    out = ctx.layout.out.host / f"{name}.tar.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    deterministic_tarball(stage.host, out, name, ctx.source_date_epoch())
    return StaticLibrary(
        stage=stage.host,
        system_libs=tuple(graph.system_libs),
        archives_merged=merged,
        bytes=(stage.host / "lib" / "libonnxruntime.a").stat().st_size,
        artifacts=(Artifact(out, "static-library", extra={"linked_only_with": list(graph.system_libs)}),),
    )


STEP = StepDef(run, reusable=True)
