"""The commands behind ``ortdist <command>``: each a few lines over the library (cli/parser.py wires them)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from .. import cacheuse, diskspace, pipeline, registry, sources, workers
from ..checks import elf, fatbin
from ..errors import ModelError, OrtdistError, PatchError
from ..fsutil import atomic_write_text, check_output_dir, check_output_file
from ..hosttools import require_host_tools
from ..log import log
from ..patches import apply_series, read_series
from ..paths import Cache, project_root
from ..pipeline.state import Published
from ..progress import format_duration
from ..project import plan_for
from ..recipe.schema import recipe_schema_text
from ..toolchains import Toolchain, load_toolchain, make_toolchain, require_host_pythons
from .release import smoke_dir

SCHEMA_PATH = Path("recipes") / "recipe.schema.json"


def cmd_build(args: argparse.Namespace) -> int:
    project = project_root()
    plan, path = plan_for(args.recipe, project, args.compiler_cache, args.python, args.workers, args.cuda_architectures)
    dist_root = Path(args.dist) if args.dist else project / "dist"
    check_output_dir(dist_root, what="dist directory")
    dist = dist_root / plan.recipe.name
    if dist.exists() and not dist.is_dir():
        raise OrtdistError("exists and is not a directory", where=str(dist), fix="remove it, or pass another --dist")
    toolchain = make_toolchain(plan.toolchain)
    toolchain.preflight()  # not root, a plan-only toolchain: refused before the lock and dist/
    require_host_pythons(plan.recipe.name, plan.python, plan.toolchain)  # in seconds, not after a debootstrap
    if os.environ.get("ORTDIST_DISK_CHECK") != "0":
        diskspace.check_free(plan, Cache.default(), dist_root)  # a full disk said now, not an hour in
    jobs = args.jobs or os.cpu_count() or 2
    ctx = pipeline.make_context(
        plan,
        toolchain,
        Cache.default(),
        dist,
        path,
        jobs,
        fresh=args.fresh,
        reuse=args.reuse,
        keep_going=args.keep_going,
    )
    state = pipeline.build(ctx)
    print(f"\nortdist: built {plan.recipe.name} in {format_duration(state.timings['total'])}")
    published = state.find(Published)
    for art in published.entries if published else ():
        tag = f"  [{art['tag']}]" if "tag" in art else ""
        print(f"  {dist / art['path']}  {art['size'] / 1e6:.1f} MB{tag}")
    print(f"  manifest: {dist / 'manifest.json'}")
    if plan.python_not_built:
        print(f"  not built (--python): Python {', '.join(plan.python_not_built)} of the recipe's [wheel] python")
    if plan.cuda_recipe_architectures:
        print(
            f"  CUDA code for {', '.join(plan.recipe.cuda.architectures)} only (--cuda-architectures); the recipe "
            f"ships {', '.join(plan.cuda_recipe_architectures)}: not for publishing"
        )
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    """Every tree of the cache with the recipes (in recipes/) whose plan uses it; ``--prune``
    removes the trees none uses, under the build lock (never under a running build)."""
    project = project_root()
    cache = Cache.default()
    plans = {p.stem: plan_for(str(p), project)[0] for p in sorted((project / "recipes").glob("*.toml"))}
    with pipeline.build_lock(cache, "pruning the cache") if args.prune else contextlib.nullcontext():
        entries = cacheuse.survey(cache, plans, cacheuse.disk_bytes)
        unused = [e for e in entries if e.prunable]
        for e in entries:
            who = ", ".join(e.used_by) or e.kept or ("removed" if args.prune else "unused")
            print(f"{e.kind:10} {e.name or '-':60} {gigabytes(e.size):>9}  {who}")
            if args.prune and e.prunable:
                cacheuse.remove(cache, e)
    freed = sum(e.size for e in unused)
    total = sum(e.size for e in entries)
    free = diskspace.free_bytes(cache.root)
    print(f"\n{cache.root}: {gigabytes(total)}; {len(unused)} tree(s) no recipe uses, {gigabytes(freed)}")
    if args.prune:
        print(f"removed them; {gigabytes(free)} free now")
    elif unused:
        print(f"`ortdist cache --prune` removes them ({gigabytes(free)} free now)")
    return 0


def gigabytes(size: int) -> str:
    return f"{size / 1e9:.2f} GB"


def cmd_worker(args: argparse.Namespace) -> int:
    toolchain = make_toolchain(load_toolchain(project_root(), args.toolchain, "the worker's toolchain"))
    toolchain.preflight()
    state = Path(args.state or tempfile.mkdtemp(prefix="ortdist-worker-")).resolve()
    check_output_dir(state, what="worker state directory")
    jobs = args.jobs or os.cpu_count() or 2
    return workers.serve(toolchain, Cache.default(), state, args.listen, args.allow, args.port, jobs)


def cmd_plan(args: argparse.Namespace) -> int:
    plan, _ = plan_for(args.recipe, project_root())
    print(json.dumps(plan.summary(), indent=2))
    return 0


def declared_archive(project: Path) -> str:
    """The Debian archive the project's toolchains name (their ``mirror``): what a command with no
    toolchain of its own fetches ORT's orig tarball from, unless the host's apt names one."""
    for path in sorted((project / "toolchains").glob("*.toml")):
        mirror = load_toolchain(project, path.stem).mirror
        if mirror:
            return mirror
    return ""


def cmd_patches_check(args: argparse.Namespace) -> int:
    """Apply each series to a fresh copy of its pinned source; nothing is kept."""
    project = project_root()
    cache = Cache.default()
    series_dirs = (
        [project / "patches" / args.series]
        if args.series
        else sorted(p for p in (project / "patches").iterdir() if (p / "series").is_file())
    )
    if args.series and not (project / "patches" / args.series / "series").is_file():
        known = sorted(p.name for p in (project / "patches").iterdir() if (p / "series").is_file())
        raise PatchError(
            f"no patch series {args.series!r}", where=str(project / "patches"), fix=f"known series: {', '.join(known)}"
        )
    failures = checked = 0
    for directory in series_dirs:
        version = registry.ort_versions().get(directory.name)
        if version is None:
            print(f"{directory.name}: no pinned source for this version; skipped")
            failures += bool(args.series)
            continue
        checked += 1
        patches = read_series(directory)
        require_host_tools("patch")
        archive = sources.fetch(sources.debian_orig(version.source, declared_archive(project)), cache.downloads)
        with tempfile.TemporaryDirectory(prefix="ortdist-patches-") as tmp:
            tree = Path(tmp) / "src"
            sources.unpack(archive, tree)
            try:
                apply_series(patches, tree)
            except PatchError as exc:
                failures += 1
                print(f"FAIL {directory.name}: {exc}")
                continue
        print(f"ok   {directory.name}: {len(patches)} patch(es) apply cleanly to {version.source.orig_tarball}")
    return 1 if failures or not checked else 0


def cmd_validate(args: argparse.Namespace) -> int:
    project = project_root()
    paths = [Path(p) for p in args.recipes] or sorted((project / "recipes").glob("*.toml"))
    for path in paths:
        plan, _ = plan_for(str(path), project)
        print(f"ok   {path.name}: {', '.join(ep.name for ep in plan.providers)} on {plan.target.triple}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    path = project_root() / SCHEMA_PATH
    text = recipe_schema_text()
    if args.check:
        if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
            print(f"{path} is out of date; run `ortdist schema --write`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    if args.write:
        check_output_file(path, what="schema file")
        atomic_write_text(path, text)
        print(f"wrote {path}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    """Generate ci/ from the plans of every recipe (or, with --check, fail when ci/ differs)."""
    from .. import ci

    project = project_root()
    recipes = sorted((project / "recipes").glob("*.toml"))
    # The jobs build with the default compiler cache (they set no ORTDIST_COMPILER_CACHE), and its
    # name is part of their cache keys: this shell's setting must not change what is generated.
    plans = [plan_for(str(path), project, ci.JOB_COMPILER_CACHE)[0] for path in recipes]
    files = ci.generate(plans)
    ci_dir = project / "ci"
    if args.check:
        stale = ci.drift(ci_dir, files)
        if stale:
            print(
                f"ci/ is out of date with recipes/: {', '.join(f'ci/{p}' for p in stale)}; "
                "run `ortdist matrix` (or `nox -s ci`) and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"ci/ is up to date with recipes/ ({len(files)} generated files)")
        return 0
    written, removed = ci.write(ci_dir, files)
    for rel in written:
        print(f"wrote   ci/{rel}")
    for rel in removed:
        print(f"removed ci/{rel}")
    print(f"ci/: {len(files)} generated files, {len(written)} written, {len(removed)} removed")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    """Smoke-test wheels; a foreign wheel given alongside ours is the baseline for node-test parity."""
    project = project_root()
    cache = Cache.default()
    toolchain = make_toolchain(load_toolchain(project, args.toolchain, "--toolchain"))
    wheels = [Path(w) for w in args.wheels]
    from ..smoke.run_suite import check_runnable

    for wheel in wheels:  # before the lock: a bad argument must not wait for another build
        check_runnable(wheel, toolchain)
    with pipeline.build_lock(cache, "the smoke suite"):  # shares the cache (clean root, wheelhouse) with builds
        return _smoke(args, project, cache, toolchain, wheels)


def _smoke(args: argparse.Namespace, project: Path, cache: Cache, toolchain: Toolchain, wheels: list[Path]) -> int:
    from ..smoke.report import table
    from ..smoke.run_suite import smoke_wheel
    from ..smoke.wheelinfo import read_wheel

    infos = {w: read_wheel(w) for w in wheels}
    ordered = sorted(wheels, key=lambda w: infos[w].record is not None)  # foreign (baseline) wheels first
    baseline: dict[str, dict[str, bool]] | None = None
    rows = []
    failed = 0
    for wheel in ordered:
        record = infos[wheel].record
        out_dir = smoke_dir(project, wheel, record)
        latency = {"runs": args.latency, "warmup": args.warmup, "threads": args.threads} if args.latency else None
        report, verdicts = smoke_wheel(
            wheel,
            out_dir,
            cache,
            toolchain,
            baseline if record else None,
            latency=latency,
            require_devices=args.require_device,
        )
        if record is None and baseline is None:
            baseline = report["node_test_outcomes"]
        rows += [(wheel.name, v) for v in verdicts]
        counts = ", ".join(
            f"{p.removesuffix('ExecutionProvider')} {c['passed']} passed / {c['failed']} failed"
            for p, c in report["node_tests"].items()
        )
        print(
            f"{wheel.name}: {'PASS' if report['passed'] else 'FAIL'} in {report['seconds']} s "
            f"({report['environment']['kind']}); node tests: {counts or 'none'}; reports in {out_dir}"
        )
        failed += not report["passed"]
    print(table(rows))
    return 1 if failed else 0


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print the SBOM an artifact carries (wheel: .dist-info/sboms/, archive: share/doc/onnxruntime/)."""
    from ..sbom import read_artifact_sbom, summary, sysroot_packages

    document = read_artifact_sbom(Path(args.artifact))
    if args.json:
        print(json.dumps(document, indent=1, sort_keys=True))
        return 0
    facts = summary(document)
    print(f"{Path(args.artifact).name}: {facts['subject']}")
    print(f"  recipe:    {facts['recipe']} ({facts['target']}); EPs: {', '.join(facts['execution_providers'])}")
    print(f"  source:    onnxruntime {facts['source']['version']} sha256 {facts['source']['sha256']}")
    for patch in facts["source"]["patches"]:
        print(f"  patch:     {patch}")
    for dep in facts["deps"]:
        print(f"  compiled:  {dep}")
    print(f"  toolchain: {facts['toolchain']}")
    if facts["compiler"]:
        print(f"  compiler:  {facts['compiler']}")
    for lib in facts["bundled"]:
        print(f"  bundled:   {lib['file']}  <- {lib['from'] or 'unknown package'}")
    members = elf.artifact_libraries(Path(args.artifact))
    needs = elf.needs_summary(members)
    newest = ", ".join(f"{family}_{version}" for family, version in needs["newest"].items()) or "no versioned symbol"
    print(f"  needs:     {newest} at most, from {needs['elf_files']} ELF file(s) (read from their bytes)")
    beyond = ", ".join(needs["beyond_glibc"]) or "nothing"
    print(f"  system:    glibc's own libraries; besides them {beyond}")
    for name, archs in fatbin.device_code(members).items():
        code = ", ".join([*archs["sass"], *archs["ptx"]])
        print(f"  cuda:      {name.rsplit('/', 1)[-1]}: {code} (read from its .nv_fatbin)")
    if args.packages:
        for name, version in sysroot_packages(document):
            print(f"  package:   {name} {version}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """dist/report.html for every build in dist/ (and a Chromium screenshot of it with --screenshot)."""
    from ..report import chromium_render, input_files, write_report

    dist = Path(args.dist) if args.dist else project_root() / "dist"
    out = Path(args.out) if args.out else dist / "report.html"
    inputs = input_files(dist)
    check_output_file(out, inputs, what="report")
    if args.screenshot:
        check_output_file(Path(args.screenshot), [*inputs, out], what="screenshot")
    out = write_report(dist, out)
    log.info(f"wrote {out}")
    if args.screenshot:
        chromium_render(out, Path(args.screenshot))
        log.info(f"screenshot {args.screenshot}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Build, size, inference and smoke figures side by side; dist/bench/results.{json,md}."""
    from ..bench.run import run_bench

    table = run_bench(project_root(), args.recipe, args.jobs or os.cpu_count() or 2, args.only)
    print(table.read_text(encoding="utf-8"))
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """Models/configs -> one reduced-build config. ONNX models are first converted to ORT format at
    the runtime's optimization level, so operators ORT's optimizers insert are included."""
    from ..reduce.convert import analyze_models, check_inputs

    paths = [Path(p) for p in args.models]
    archs = sorted({t.arch for t in registry.targets().values()})
    if args.target_arch not in archs:
        raise ModelError(f"unknown CPU {args.target_arch!r}", where="--target-arch", fix=f"one of {', '.join(archs)}")
    if not re.fullmatch(r"\d+\.\d+\.\d+", args.ort_version):  # any release pip can install converts
        raise ModelError(
            f"{args.ort_version!r} is not an ONNX Runtime version",
            where="--ort-version",
            fix="e.g. --ort-version 1.21.0",
        )
    load_toolchain(project_root(), args.toolchain, "--toolchain")  # the converter's root, if one is needed
    check_inputs(paths)
    if args.output != "-":
        check_output_file(Path(args.output), paths, what="output config")
    if args.ort_dir:
        ort_dir = Path(args.ort_dir)
        check_output_dir(ort_dir, paths, what="--ort-dir")
        conversions = [ort_dir / f"{p.stem}.ort" for p in paths if p.suffix.lower() == ".onnx"]
        for kept in conversions:  # a conversion must not replace an input or the output
            check_output_file(kept, [*paths, *([Path(args.output)] if args.output != "-" else [])], what="conversion")
    config = analyze_models(
        paths,
        level=args.optimization_level,
        target_arch=args.target_arch,
        ort_version=args.ort_version,
        toolchain_name=args.toolchain,
        typed=args.types,
        keep_ort_dir=Path(args.ort_dir) if args.ort_dir else None,
    )
    config.sources = [str(p) for p in paths]
    text = config.render()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        atomic_write_text(Path(args.output), text)
        ops = len(config.op_names())
        log.info(f"wrote {args.output}: {ops} operators" + (" with types" if args.types else ""))
    return 0


def cmd_providers(_args: argparse.Namespace) -> int:
    for ep in registry.providers().values():
        print(f"{ep.name:9} {ep.provider:27} {ep.summary}")
    return 0
