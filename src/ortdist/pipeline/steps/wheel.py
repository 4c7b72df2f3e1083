"""One wheel per CPython: the package staged from the build tree, provider RUNPATHs set, its
libraries stripped, built by scikit-build-core (or its last wheel with the changed files, where
that is what it would make: wheel.derive.KeptRaw); each other version's wheel is that wheel with
the version's own (stripped) binding in its place and its tag (wheel.derive.swap_binding)."""

from __future__ import annotations

import hashlib
import shutil
import time
import zipfile
from pathlib import Path
from typing import Any, TextIO

from ... import binding
from ...checks import cxx_state, one_runtime
from ...defines import PYBIND_USES_LIBRARY
from ...elffile import read_needs
from ...errors import PackageError
from ...fsutil import remove_tree
from ...paths import IN_ROOT_COMPILER, IN_ROOT_TOOLS_VENV
from ...toolchains.spec import LIBSTDCXX_STUB
from ...wheel import assemble, derive, record, repair
from ..context import BuildContext
from ..state import Bindings, BuildState, Models, PerPython, Source, Wheels
from ..step import StepDef
from ..vendor import copy_ep_bundle


def suffix(ctx: BuildContext, version: str) -> str:
    """Work-file suffix of a CPython version: none for the root's own (its paths stay as they
    were before several versions existed, so its wheel stays byte-identical)."""
    return "" if version == ctx.plan.python[0] else f"-{version}"


def set_provider_runpaths(ctx: BuildContext, state: BuildState, stage: Path, sfx: str) -> None:
    """Provider libraries whose vendor runtime comes from pip wheels (CUDA, cuDNN) get a
    RUNPATH into those wheels' directories, and those whose runtime the package carries
    ([ep_bundle]) one of their own directory, so loading the provider finds them."""
    libraries = [ep for ep in ctx.plan.providers if ep.pip_library_dirs or ep.name in ctx.plan.ep_bundle]
    if not libraries:
        return
    with ctx.open_log(f"runpath{sfx}") as log:
        for ep in libraries:
            library = stage / assemble.CAPI_DIR / ep.provider_library
            if not library.is_file():
                raise PackageError(
                    f"the {ep.name} provider library {ep.provider_library} is not in the package",
                    where=str(library.parent),
                    fix="check logs/build.log: ORT's pybind post-build step copies provider libraries into capi/",
                )
            inside = ctx.layout.work.inside / library.relative_to(ctx.layout.work.host)
            ctx.runner.call(
                ctx.in_root(
                    state.roots,
                    ["patchelf", "--set-rpath", assemble.provider_runpath(ep.pip_library_dirs), str(inside)],
                ),
                log=log,
                error=PackageError,
                what=f"setting the RUNPATH of {ep.provider_library}",
            )


def check_one_cxx_state(ctx: BuildContext, state: BuildState, package: Path, log: TextIO) -> None:
    """Where the toolchain links libstdc++ shared ([libstdcxx]): no library of ours (the vendor
    files carried beside it aside) may hold its own copy of libstdc++'s data (checks/cxx_state.py),
    read before stripping removes the local symbols that show it."""
    if ctx.plan.toolchain.libstdcxx is None:
        return
    carried = {Path(f).name for files in ctx.plan.ep_bundle.values() for f in files}
    work = ctx.layout.work
    libraries = sorted(
        p for p in package.rglob("*.so*") if p.is_file() and not p.is_symlink() and p.name not in carried
    )

    def readelf(*argv: str) -> str:
        return ctx.runner.capture(
            ctx.in_root(state.roots, ["readelf", *argv]), error=PackageError, what="reading symbol tables"
        ).stdout

    shared = cxx_state.shared_objects(readelf("--dyn-syms", "-W", f"{IN_ROOT_COMPILER}/{LIBSTDCXX_STUB}"))
    found = {}
    for library in libraries:
        inside = str(work.inside / library.relative_to(work.host))
        own = cxx_state.own_copies(readelf("-sW", inside), shared, cxx_state.writable_sections(readelf("-SW", inside)))
        if own:
            found[library.name] = own
    log.write(f"one libstdc++ state: {len(libraries)} libraries read, {len(shared)} shared objects\n")
    if found:
        name, own = next(iter(found.items()))
        raise PackageError(
            f"{', '.join(found)} hold their own copy of libstdc++'s data ({name}: {', '.join(own[:4])}"
            f"{', ...' if len(own) > 4 else ''}), which the process must share with the system's libstdc++.so.6",
            where=str(package),
            fix="a static libstdc++ member was linked in for a newer function and brought its data: keep that "
            "function out (or raise the toolchain's [libstdcxx] versions); docs/eps.md",
        )


def strip_libraries(ctx: BuildContext, state: BuildState, package: Path, log: TextIO) -> None:
    """The package's shared libraries stripped as auditwheel --strip strips them (``strip -s``),
    before the wheel is built: scikit-build-core then compresses, and auditwheel reads, a third
    of the bytes (the binding is 66 MB unstripped), and the repaired wheel holds the same files."""
    libraries = sorted(p for p in package.rglob("*.so*") if p.is_file() and not p.is_symlink())
    if not libraries:
        return
    work = ctx.layout.work
    inside = [str(work.inside / p.relative_to(work.host)) for p in libraries]
    ctx.runner.call(
        ctx.in_root(state.roots, [ctx.tool("strip"), "-s", *inside]),
        log=log,
        error=PackageError,
        what="stripping the package's libraries",
    )


def link_shipped_runtime(ctx: BuildContext, state: BuildState, module: Path, log: TextIO) -> None:
    """Where the binding links libonnxruntime (one runtime per wheel, patch 0017): it names the
    library by its soname, which no file in the package has (it ships under PyPI's name,
    libonnxruntime.so.<version>, and a wheel holds no symlinks), so it is made to name that file.
    A binding that does not need the library carries a runtime of its own, and one that imports
    an ONNX Runtime symbol the library does not export would not load: both are refused."""
    if ctx.plan.cmake_defines.get(PYBIND_USES_LIBRARY) != "ON":
        return
    soname, shipped = binding.runtime_names(ctx.plan.version.version)
    library = ctx.layout.work.host / "stage" / assemble.CAPI_DIR / shipped  # the first version's stage
    inside = str(ctx.layout.work.inside / module.relative_to(ctx.layout.work.host))
    ctx.runner.call(
        ctx.in_root(state.roots, ["patchelf", "--replace-needed", soname, shipped, inside]),
        log=log,
        error=PackageError,
        what=f"naming {shipped} in {module.name}",
    )
    data = module.read_bytes()
    needed = read_needs(data).needed
    if shipped not in needed:
        raise PackageError(
            f"{module.name} does not link {shipped} (it needs {', '.join(needed) or 'nothing'}): it carries "
            "a copy of ONNX Runtime of its own beside the package's library",
            where=str(module),
            fix=f"the build must link the binding against libonnxruntime ({PYBIND_USES_LIBRARY}=ON, patch 0017): "
            "see logs/build.log",
        )
    missing = one_runtime.missing_exports(data, library.read_bytes())
    if missing:
        raise PackageError(
            f"{module.name} imports {len(missing)} ONNX Runtime symbol(s) {shipped} does not export "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): it would not load",
            where=str(module),
            fix="the library's export list is read from the main binding's objects "
            "(tools/ci_build/gen_pybind_exports.py, patch 0017): a binding compiled differently needs them too",
        )
    log.write(f"{module.name}: links {shipped}, which exports every ONNX Runtime symbol it imports\n")


def kept_key(ctx: BuildContext, state: BuildState, project: Path) -> str:
    """What scikit-build-core's wheel depends on besides the stage: the project it builds, the
    root it runs in, the build's timestamp (every member's time), and the code that reuses it."""
    files = sorted(p for p in project.rglob("*") if p.is_file())
    facts: list[Any] = [[p.relative_to(project).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest()] for p in files]
    return derive.kept_key([*facts, str(state.roots.build), ctx.source_date_epoch()])


def wheel_for(ctx: BuildContext, state: BuildState, version: str) -> Path:
    plan, work, sfx = ctx.plan, ctx.layout.work, suffix(ctx, version)
    models = state.find(Models)
    build_record = assemble.build_record(
        plan, ctx.recipe_sha256, state.get(Source).record["sha256"], list(models.operators) if models else None
    )
    stage = work / f"stage{sfx}"
    assemble.stage_package(ctx.layout.build.host / "onnxruntime", stage.host, plan, build_record)
    if sfx:  # the binding compiled for this version replaces the root Python's
        shutil.copyfile(state.get(Bindings).modules[version], stage.host / "onnxruntime" / "capi" / binding.MODULE)
    copy_ep_bundle(ctx, state, stage.host / assemble.CAPI_DIR)
    set_provider_runpaths(ctx, state, stage.host, sfx)
    project = work / f"wheelproj{sfx}"
    assemble.write_project(project.host, plan, ctx.layout.source.host, str(stage.inside / "onnxruntime"))
    raw = work / "wheel" / f"raw{sfx}"
    remove_tree(raw.host)
    raw.host.mkdir(parents=True)
    argv = [
        f"{IN_ROOT_TOOLS_VENV}/bin/pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--no-cache-dir",  # pip would copy each 22 MB wheel into its cache, never to use it
        "--wheel-dir",
        str(raw.inside),
        str(project.inside),
    ]
    kept = derive.KeptRaw(work.host / "wheel" / f"kept-raw{sfx}")
    key = kept_key(ctx, state, project.host)
    with ctx.open_log(f"wheel{sfx}") as log:
        check_one_cxx_state(ctx, state, stage.host / "onnxruntime", log)
        link_shipped_runtime(ctx, state, stage.host / assemble.CAPI_DIR / binding.MODULE, log)
        if plan.strip:
            strip_libraries(ctx, state, stage.host / "onnxruntime", log)
        files = derive.staged_files(stage.host)  # stripped: as the wheel takes them
        # --no-reuse: scikit-build-core really runs (its kept wheel is a reuse like any other)
        if ctx.reuse and kept.made(key, stage.host, files, raw.host) is not None:
            log.write(f"scikit-build-core not run: its last wheel ({kept.directory}) with the changed files\n")
        else:
            ctx.runner.call(
                ctx.in_root(state.roots, argv), log=log, error=PackageError, what="scikit-build-core wheel build"
            )
            kept.keep(key, files, repair.single_wheel(raw.host))
    wheel = repair.single_wheel(raw.host)
    # scikit-build-core tags the wheel for the interpreter it runs under (the root's own).
    return record.retag(wheel, version) if sfx else wheel


def packed_verbatim(raw: Path, stage: Path) -> bool:
    """Whether scikit-build-core packed the staged binding as it was: then a wheel with another
    binding is the same wheel with that one member changed."""
    staged = stage / assemble.CAPI_DIR / binding.MODULE
    with zipfile.ZipFile(raw) as zf:
        try:
            return zf.read(f"{assemble.CAPI_DIR}/{binding.MODULE}") == staged.read_bytes()
        except (KeyError, OSError):
            return False


def swapped_wheel(ctx: BuildContext, state: BuildState, version: str, first: Path) -> Path:
    """``version``'s raw wheel: its binding, stripped as the first one was, swapped into ``first``."""
    work, sfx = ctx.layout.work, suffix(ctx, version)
    module = work / "wheel" / f"binding{sfx}" / binding.MODULE
    remove_tree(module.host.parent)
    module.host.parent.mkdir(parents=True)
    shutil.copyfile(state.get(Bindings).modules[version], module.host)
    with ctx.open_log(f"wheel{sfx}") as log:
        link_shipped_runtime(ctx, state, module.host, log)
        if ctx.plan.strip:
            strip_libraries(ctx, state, module.host.parent, log)
    raw = work / "wheel" / f"raw{sfx}"
    remove_tree(raw.host)
    raw.host.mkdir(parents=True)
    member = f"{assemble.CAPI_DIR}/{binding.MODULE}"
    return derive.swap_binding(first, member, module.host.read_bytes(), version, raw.host)


def run(ctx: BuildContext, state: BuildState) -> Wheels:
    """The first version's wheel by scikit-build-core, then every other version's side by side:
    swapped from it, or (should scikit-build-core not have packed the binding verbatim) built the
    same way."""
    first_version = ctx.plan.python[0]
    started = time.monotonic()
    first = wheel_for(ctx, state, first_version)
    seconds = {first_version: round(time.monotonic() - started, 1)}
    swap = bool(ctx.plan.extra_python) and packed_verbatim(first, ctx.layout.work.host / "stage")

    def other(version: str) -> Path:
        return swapped_wheel(ctx, state, version, first) if swap else wheel_for(ctx, state, version)

    raw, more = ctx.each_python(ctx.plan.extra_python, other)
    return Wheels(
        raw={first_version: first, **raw},
        times=PerPython("wheel_s", seconds | more, timed=len(ctx.plan.python) > 1),
        swapped=tuple(raw) if swap else (),
    )


STEP = StepDef(run, reusable=True)
