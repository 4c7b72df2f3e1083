"""Stripped sizes of the artifacts and the library, and what takes the space in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import binding, bundle, records, size
from ...errors import BuildError
from ...fsutil import remove_tree
from ...log import log
from ...manifest import Artifact
from ..context import BuildContext
from ..linkgraph import link_graph
from ..state import BuildState, Size
from ..step import StepDef

# The full CPU build slim builds are compared with in their size report, unless the recipe names
# another ([size] compare_with).
BASELINE_RECIPE = "cpu-linux"
PYBIND = "onnxruntime/capi/onnxruntime_pybind11_state.so"
# The compiler's own archives, after the link graph's in link order: what the library takes from
# them (all of libstdc++ it uses, where a toolchain links it statically) is one component.
RUNTIME_ARCHIVES = ("libstdc++.a", "libgcc_eh.a", "libgcc.a")
RUNTIME_COMPONENT = "C++ runtime (libstdc++, libgcc)"


def size_baseline(ctx: BuildContext) -> dict[str, Any] | None:
    """The build the recipe names in [size] compare_with, or else the full CPU build, of the same
    version and target (dist/<recipe>/manifest.json), if built; reduced and minimal builds are
    compared with it."""
    plan = ctx.plan
    wanted = plan.recipe.size.compare_with or BASELINE_RECIPE
    if not (plan.reduced or plan.minimal) or plan.recipe.name == wanted:
        return None
    candidate = ctx.layout.dist.parent / wanted / "manifest.json"
    if not candidate.is_file():
        if plan.recipe.size.compare_with:
            log.info(f"size: {wanted} is not built in {candidate.parent.parent}; the report has no comparison")
        return None
    data = records.load(candidate, records.MANIFEST, BuildError)
    found = data.get("size")
    same = data.get("ort_version") == plan.version.version
    if found and same and found.get("target") == plan.target.triple and found.get("shared_library"):
        return dict(found)
    return None


def measure_script(ctx: BuildContext, state: BuildState, archives: list[str]) -> str:
    """strip and nm over the library (relinked without -s when the build strips at link time),
    the binding and every bundled archive, into work/size/, in two lanes side by side."""
    plan, build = ctx.plan, ctx.layout.build
    work = ctx.layout.work / "size"
    library = binding.runtime_names(plan.version.version)[1]
    nm, strip = ctx.tool("nm"), ctx.tool("strip")
    # The build may link with -s (MinSizeRel): the breakdown needs symbols, so the library is
    # linked once more from its own ninja command without -s (same objects, same flags).
    relink = bundle.unstripped_link_command(
        ctx.runner.capture(
            ctx.in_root(state.roots, ["ninja", "-C", str(build.inside), "-t", "commands", library]),
            error=BuildError,
            what="ninja -t commands",
        ).stdout,
        library,
        str(work.inside / "lib.unstripped"),
    )
    symbolic = str(work.inside / "lib.unstripped") if relink else str(build.inside / library)
    library_lines = [
        *([f"cd {build.inside}", relink] if relink else []),
        f"cd {work.inside}",
        f"{strip} --strip-all -o lib.stripped {build.inside}/{library}",
        f"{ctx.tool('readelf')} -SW lib.stripped > lib.sections",
        f"{nm} -S --defined-only {symbolic} > lib.nm",
        f"{nm} -S --defined-only -C {symbolic} > lib.demangled.nm",
    ]
    archive_lines = [f"cd {work.inside}"]
    if plan.builds_wheel:
        archive_lines.append(f"{strip} --strip-all -o pybind.stripped {build.inside}/{PYBIND}")
    archive_lines += [f"{nm} --defined-only {a} > archive-{i}.nm 2>/dev/null" for i, a in enumerate(archives)]
    # -print-file-name: a clang cross compiler finds the target's runtime archives only when told
    # the target, sysroot and --gcc-toolchain as well; a GCC one is the compiler the build ran.
    compiler = ctx.compiler(state.roots)
    cxx = compiler.shell("cxx") if compiler.clang else plan.cmake_defines.get("CMAKE_CXX_COMPILER") or ctx.tool("g++")
    archive_lines += [
        f'{{ {nm} --defined-only "$({cxx} -print-file-name={name})" > runtime-{i}.nm 2>/dev/null || true; }}'
        for i, name in enumerate(RUNTIME_ARCHIVES)
    ]
    # Side by side: the library's own tools, and the binding's strip with the archives' symbols.
    return side_by_side(library_lines, archive_lines)


def side_by_side(*lanes: list[str]) -> str:
    """A /bin/sh -e script running each lane's commands in order, the lanes at once; it waits for
    every lane and fails when any did."""
    started = " ; ".join(f"( {' && '.join(lane)} ) & lane{i}=$!" for i, lane in enumerate(lanes))
    waited = " ; ".join(f"s{i}=0 ; wait $lane{i} || s{i}=$?" for i in range(len(lanes)))
    return f"{started} ; {waited} ; " + " && ".join(f"[ $s{i} = 0 ]" for i in range(len(lanes)))


def run(ctx: BuildContext, state: BuildState) -> Size:
    plan, work = ctx.plan, ctx.layout.work.host / "size"
    remove_tree(work)
    work.mkdir(parents=True)
    library = binding.runtime_names(plan.version.version)[1]
    graph = link_graph(ctx, state.roots)
    with ctx.open_log("size") as out:
        ctx.runner.call(
            ctx.in_root(state.roots, ["/bin/sh", "-ec", measure_script(ctx, state, list(graph.archives))]),
            log=out,
            error=BuildError,
            what="nm/strip",
        )
    symbols = size.parse_nm_sizes((work / "lib.nm").read_text(encoding="utf-8", errors="replace"))
    demangled_symbols = size.parse_nm_sizes((work / "lib.demangled.nm").read_text(encoding="utf-8", errors="replace"))
    demangled = {a.name: b.name for a, b in zip(symbols, demangled_symbols, strict=False)}
    definers = [
        (bundle.component_of(a), size.parse_archive_definitions((work / f"archive-{i}.nm").read_text(errors="replace")))
        for i, a in enumerate(graph.archives)
    ]
    for i in range(len(RUNTIME_ARCHIVES)):
        found = work / f"runtime-{i}.nm"
        if found.is_file():
            definers.append((RUNTIME_COMPONENT, size.parse_archive_definitions(found.read_text(errors="replace"))))
    owners = size.attribute(symbols, definers)
    built = ctx.layout.build.host
    report: dict[str, Any] = {
        "recipe": plan.recipe.name,
        "target": plan.target.triple,
        "artifacts": [
            {"name": a.source.name, "bytes": a.source.stat().st_size, "stripped_bytes": None} for a in state.artifacts()
        ],
        "shared_library": {
            "name": library,
            "bytes": (built / library).stat().st_size,
            **size.breakdown(symbols, owners, demangled, (work / "lib.stripped").stat().st_size),
            "sections": size.parse_sections(
                (work / "lib.sections").read_text(encoding="utf-8"), (work / "lib.stripped").stat().st_size
            ),
        },
    }
    shipped = library if plan.builds_shared_library else f"{library} (linked for the report; not shipped)"
    shared = report["shared_library"]
    report["artifacts"].insert(
        0, {"name": shipped, "bytes": shared["bytes"], "stripped_bytes": shared["stripped_bytes"]}
    )
    if plan.builds_wheel:
        report["artifacts"].insert(
            1,
            {
                "name": Path(PYBIND).name,
                "bytes": (built / PYBIND).stat().st_size,
                "stripped_bytes": (work / "pybind.stripped").stat().st_size,
            },
        )
    if plan.builds_cuda:
        # The provider libraries as built (stripping leaves .nv_fatbin alone): what each GPU costs.
        built_providers = [built / ep.provider_library for ep in plan.providers if ep.provider_library]
        report["cuda_device_code"] = size.device_code((p.name, p.read_bytes()) for p in built_providers if p.is_file())
    baseline = size_baseline(ctx)
    if baseline:
        report["baseline"] = {
            "recipe": baseline["recipe"],
            "stripped_bytes": baseline["shared_library"]["stripped_bytes"],
        }
    remove_tree(work)
    table = ctx.layout.out.host / f"{plan.recipe.name}.size.md"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(size.render_table(plan.recipe.name, report, baseline), encoding="utf-8")
    log.info("size report:\n" + table.read_text(encoding="utf-8"))
    return Size(report=report, artifacts=(Artifact(table, "size-report"),))


STEP = StepDef(run, reusable=True)
