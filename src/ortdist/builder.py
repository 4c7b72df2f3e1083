"""Execute a BuildPlan: toolchain -> source -> configure -> build -> install -> wheel -> repair ->
check -> publish.

Resumable: the patched source and the sysroot are cached by content, the build tree persists
per recipe (ninja picks up where an interrupted run stopped), and CMake is re-run only when the
configure command changed. Only one build runs at a time (a lock in the cache); a second waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import hashlib
import json
import os
import shlex
import shutil
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import __version__, binding, bundle, run, sbom, size, sources
from .checks.c_smoke import C_RUNTIME_SONAMES, IN_ROOT_C_SMOKE, c_smoke_cases, c_smoke_needed, run_c_smoke_cases
from .checks.model import write_check_files
from .compiler_cache import IN_ROOT_TOOLS, ensure_tool, tool_dir
from .errors import BuildError, CheckError, PackageError
from .fsutil import atomic_file, remove_tree, sha256_file, sync_tree
from .manifest import Artifact, publish
from .patches import prepare_tree
from .paths import (
    IN_ROOT,
    IN_ROOT_BUILD,
    IN_ROOT_DEPS,
    IN_ROOT_SHIMS,
    IN_ROOT_SOURCE,
    IN_ROOT_TARGET,
    IN_ROOT_TOOLS_VENV,
    IN_ROOT_WHEELHOUSE,
    IN_ROOT_WORK,
    Cache,
)
from .plan import BuildPlan
from .progress import NinjaProgress, failure_excerpt, format_duration
from .reduce import analyze, models
from .smoke.env import overlay_venv_commands, venv_commands
from .toolchains import Bind, Toolchain
from .toolchains.debian_sysroot import in_root_python, pip_download_argv, python_layout, require_host_tools
from .wheel import assemble, record, repair

# The full CPU build slim builds are compared with in their size report.
BASELINE_RECIPE = "cpu-linux"

# Where the C library archive carries its SBOM.
SBOM_IN_ARCHIVE = Path("share/doc/onnxruntime") / sbom.SBOM_NAME


@contextlib.contextmanager
def build_lock(cache: Cache) -> Iterator[None]:
    """One ORT build at a time per cache: a second ortdist waits instead of halving both."""
    cache.root.mkdir(parents=True, exist_ok=True)
    with (cache.root / "build.lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("ortdist: another build holds the cache lock; waiting for it to finish", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def remove_stale_temps(directory: Path) -> None:
    """Temp dirs of a killed run (we hold the lock, so nobody else is writing them)."""
    if directory.is_dir():
        for entry in directory.iterdir():
            stale = ".tmp-" in entry.name or ".old-" in entry.name or entry.name.endswith(".part")
            if entry.name.startswith(".") and stale:
                remove_tree(entry)


def reduce_kernels_argv(plan: BuildPlan, build_dir: str, config: str) -> list[str]:
    """ORT's reduce_op_kernels.py as build.py runs it for this plan."""
    return [
        "python3",
        f"{IN_ROOT_SOURCE}/tools/ci_build/reduce_op_kernels.py",
        "--cmake_build_dir",
        build_dir,
        *(["--is_extended_minimal_build_or_higher"] if plan.recipe.features.minimal_build != "plain" else []),
        *(["--enable_type_reduction"] if plan.recipe.reduce.types else []),
        # EPs with registration tables of their own (CUDA) are reduced too.
        *(ep.reduce_flag for ep in plan.providers if ep.reduce_flag),
        config,
    ]


@dataclass
class Builder:
    plan: BuildPlan
    toolchain: Toolchain
    cache: Cache
    dist: Path
    recipe_path: Path
    jobs: int
    fresh: bool = False  # discard this recipe's build tree first (caches stay): a clean build
    timings: dict[str, float] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)  # what the manifest reports

    def __post_init__(self) -> None:
        self.artifacts: list[Artifact] = []
        self.root = Path()
        self.target_root: Path | None = None  # a cross target's sysroot
        self.raw_wheel = Path()
        self.wheel = Path()
        # Per CPython version (the root's own first): raw and repaired wheels, and each extra
        # version's unpacked interpreter directory.
        self.raw_wheels: dict[str, Path] = {}
        self.wheels: dict[str, Path] = {}
        self.python_overlays: dict[str, Path] = {}
        self.started = time.monotonic()

    # --- layout --------------------------------------------------------------------------------
    @property
    def work(self) -> Path:
        return self.cache.work(self.plan.recipe.name)

    @property
    def build_dir(self) -> Path:
        return self.work / "build"

    @property
    def work_dir(self) -> Path:
        """Visible as /ortdist/work in the root: install tree, staged package, wheels, check files."""
        return self.work / "work"

    @property
    def logs(self) -> Path:
        return self.dist / "logs"

    @property
    def source_dir(self) -> Path:
        return self.cache.sources / f"onnxruntime-{self.plan.version.version}-{self.plan.source_key}"

    def dep_dir(self, name: str) -> Path:
        dep = next(d for d in self.plan.version.deps if d.name == name)
        return self.cache.sources / f"{dep.pypi_sdist}-{dep.version}-{dep.sha256[:12]}"

    def binds(self) -> list[Bind]:
        out = [
            Bind(self.source_dir, IN_ROOT_SOURCE),
            Bind(self.build_dir, IN_ROOT_BUILD),
            Bind(self.work_dir, IN_ROOT_WORK),
            *(Bind(host, IN_ROOT_SHIMS / name, read_only=True) for name, host in self.plan.toolchain.shims.items()),
            Bind(self.compiler_cache_dir(), self.plan.compiler_cache.in_root_dir),
        ]
        if self.plan.compiler_cache.tool:
            out.append(Bind(tool_dir(self.plan.compiler_cache, self.cache), IN_ROOT_TOOLS, read_only=True))
        out += [Bind(self.dep_dir(d.name), IN_ROOT_DEPS / d.name) for d in self.plan.version.deps]
        if self.target_root is not None:
            out.append(Bind(self.target_root, IN_ROOT_TARGET, read_only=True))
        out += [Bind(path, in_root_python(v), read_only=True) for v, path in self.python_overlays.items()]
        return out

    def env(self) -> dict[str, str]:
        return {
            **self.plan.compiler_cache.env(os.environ),
            "SOURCE_DATE_EPOCH": str(self.source_date_epoch()),
            **self.plan.toolchain.cross_facts(self.plan.target.triple, "env"),
        }

    def compiler_cache_dir(self) -> Path:
        """$ORTDIST_COMPILER_CACHE_DIR, else <cache>/<ccache|sccache>: a cold-cache build (the
        benchmark's) points it at an empty directory without touching the sysroot or sources."""
        override = os.environ.get("ORTDIST_COMPILER_CACHE_DIR")
        return Path(override).resolve() if override else self.cache.root / self.plan.compiler_cache.cache_dir

    @functools.cached_property
    def recipe_sha256(self) -> str:
        return sha256_file(self.recipe_path)

    @functools.cached_property
    def root_packages(self) -> dict[str, str]:
        """Package -> version in the build root (read once; the SBOMs and the manifest use it)."""
        return self.toolchain.installed_packages(self.root)

    def source_date_epoch(self) -> int:
        """The source release's own timestamp, so rebuilds stamp the same times into archives."""
        return int((self.source_dir / "VERSION_NUMBER").stat().st_mtime)

    def in_root(self, root: Path, cmd: list[str], **kw: Any) -> list[str]:
        return self.toolchain.wrap(root, cmd, binds=self.binds(), env=self.env(), **kw)

    # --- driver --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        with build_lock(self.cache):
            for directory in (self.cache.sources, self.cache.sysroots, self.dist):
                remove_stale_temps(directory)
            if self.fresh:
                print(f"ortdist: --fresh: discarding {self.work}", file=sys.stderr, flush=True)
                remove_tree(self.work)
            for step in self.plan.steps:
                print(f"ortdist: == {step} ==", file=sys.stderr, flush=True)
                t0 = time.monotonic()
                getattr(self, f"step_{step}")()
                self.timings[step] = round(time.monotonic() - t0, 1)
                print(f"ortdist: {step} done in {format_duration(self.timings[step])}", file=sys.stderr, flush=True)
        self.timings["total"] = round(time.monotonic() - self.started, 1)
        return self.results

    def _log(self, name: str) -> TextIO:
        return (self.logs / f"{name}.log").open("w", encoding="utf-8")

    # --- steps ---------------------------------------------------------------------------------
    def step_toolchain(self) -> None:
        with self._log("toolchain") as log:
            self.root = self.toolchain.ensure_build_root(self.cache, log)
            if self.plan.toolchain.is_cross(self.plan.target.triple):
                self.target_root = self.toolchain.ensure_target_root(
                    self.cache, self.root, self.plan.target.triple, log
                )
            for version in self.plan.extra_python:
                self.python_overlays[version] = self.toolchain.ensure_python_overlay(
                    self.cache, self.root, version, log
                )
        (self.compiler_cache_dir()).mkdir(parents=True, exist_ok=True)
        ensure_tool(self.plan.compiler_cache, self.cache)

    def step_source(self) -> None:
        plan, recipe = self.plan, self.plan.recipe
        src = recipe.source
        if src.kind == "debian":
            pin = sources.debian_orig(plan.version.source, src.sha256)
            archive = sources.fetch(pin, self.cache.downloads)
            self.results["source"] = {"kind": "debian", "file": pin.filename, "url": pin.url, "sha256": pin.sha256}

        def fill(tree: Path) -> None:
            if src.kind == "debian":
                sources.unpack(archive, tree)
            elif src.kind == "git":
                sources.git_checkout(src.url, src.tag, src.commit, tree)
            else:
                sources.copy_tree((self.recipe_path.parent / src.path).resolve(), tree)

        if plan.patches:
            require_host_tools("patch")
        # Keyed by source + patch digests, so a reused tree is exactly what this plan asks for.
        # A local path can change under us: copy it afresh every run.
        if not (self.source_dir / ".ortdist-patched").is_file() or src.kind == "path":
            prepare_tree(self.source_dir, fill, plan.patches)
        if src.kind != "debian":
            self.results["source"] = {"kind": src.kind, "url": src.url, "tag": src.tag, "path": src.path, "sha256": ""}
        for dep in plan.version.deps:
            target = self.dep_dir(dep.name)
            if not target.is_dir():
                sources.unpack(sources.fetch(sources.sdist(dep), self.cache.downloads), target)
        self.results["patches"] = [{"name": p.name, "sha256": p.sha256} for p in plan.patches]

    # --- reduced builds ----------------------------------------------------------------------------
    @property
    def models_dir(self) -> Path:
        """Visible as /ortdist/work/models: source models, their ORT-format conversions, ops.config."""
        return self.work_dir / "models"

    @property
    def op_config(self) -> Path:
        return self.models_dir / "ops.config"

    def step_models(self) -> None:
        """Convert the recipe's models to ORT format at the runtime's optimization level and derive
        the operator config from those (plus the recipe's own config)."""
        recipe = self.plan.recipe
        remove_tree(self.models_dir)
        self.models_dir.mkdir(parents=True)
        inputs: list[Path] = []
        if recipe.reduce.models:
            onnx_models = models.gather_models(recipe.reduce.models, self.recipe_path.parent, self.models_dir / "onnx")
            ort_dir = self.models_dir / "ort"
            with self._log("models") as log:
                converted = models.convert_to_ort_format(
                    onnx_models,
                    ort_dir,
                    level=recipe.reduce.optimization_level,
                    target_arch=self.plan.target.arch,
                    ort_version=self.plan.version.version,
                    cache=self.cache,
                    toolchain=self.toolchain,
                    log=log,
                )
            inputs += converted
            for path in converted:
                self.artifacts.append(
                    Artifact(path, "ort-model", extra={"optimization_level": recipe.reduce.optimization_level})
                )
        if recipe.reduce.config:
            inputs.append((self.recipe_path.parent / recipe.reduce.config).resolve())
        config = analyze.analyze(inputs, typed=recipe.reduce.types)
        config.sources = [p.name for p in inputs]  # names only: the published file is machine-independent
        self.op_config.write_text(config.render(), encoding="utf-8")
        published = self.work_dir / "out" / f"{recipe.name}.ops.config"
        published.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.op_config, published)
        self.artifacts.append(Artifact(published, "ops-config", extra={"types": recipe.reduce.types}))
        self.results["reduced_ops"] = {
            "config": published.name,
            "types": recipe.reduce.types,
            "operators": sorted(f"{d}:{op}" for d, op in config.op_names()),
        }

    def reduce_kernels(self) -> None:
        """ORT's own reduce_op_kernels.py rewrites the kernel registrations from the config (as
        build.py does before CMake). It regenerates every file, so it writes to a staging tree and
        only files whose bytes changed reach the build tree."""
        stage = self.work_dir / "op-reduction"
        remove_tree(stage)
        stage.mkdir(parents=True)
        argv = reduce_kernels_argv(self.plan, f"{IN_ROOT_WORK}/op-reduction", f"{IN_ROOT_WORK}/models/ops.config")
        with self._log("reduce") as log:
            run.call(self.in_root(self.root, argv), log=log, error=BuildError, what="reduce_op_kernels.py")
        generated = stage / "op_reduction.generated"
        if not generated.is_dir():
            raise BuildError(
                "reduce_op_kernels.py wrote no op_reduction.generated tree", fix=f"see {self.logs / 'reduce.log'}"
            )
        written = sync_tree(generated, self.build_dir / "op_reduction.generated")
        print(f"ortdist: kernel registrations reduced ({written} generated files changed)", file=sys.stderr)

    def step_configure(self) -> None:
        identity = self.build_dir / ".ortdist-tree"
        if self.build_dir.exists() and (
            not identity.is_file() or identity.read_text().strip() != self.plan.tree_identity()
        ):
            print("ortdist: source or toolchain changed: starting a fresh build tree", file=sys.stderr)
            remove_tree(self.build_dir)
        self.build_dir.mkdir(parents=True, exist_ok=True)
        identity.write_text(self.plan.tree_identity() + "\n")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.plan.reduced:
            self.reduce_kernels()
        # CMake's file API: the bundler reads the real link graph of the library from its reply.
        query = self.build_dir / ".cmake" / "api" / "v1" / "query" / "codemodel-v2"
        query.parent.mkdir(parents=True, exist_ok=True)
        query.touch()
        stamp = self.build_dir / ".ortdist-configure"
        digest = self.plan.configure_digest()
        if stamp.is_file() and stamp.read_text().strip() == digest and (self.build_dir / "build.ninja").is_file():
            print("ortdist: configure is up to date", file=sys.stderr)
            return
        (self.build_dir / "CMakeCache.txt").unlink(missing_ok=True)
        stamp.unlink(missing_ok=True)
        log_path = self.logs / "configure.log"
        with log_path.open("w", encoding="utf-8") as log:
            code = run.stream(self.in_root(self.root, self.plan.configure_argv()), on_line=lambda _l: None, log=log)
        if code != 0:
            lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
            first = next((i for i, line in enumerate(lines) if line.startswith("CMake Error")), max(len(lines) - 15, 0))
            raise BuildError(
                "CMake configure failed:\n" + "\n".join(f"    {line}" for line in lines[first : first + 15]),
                where=f"recipe {self.plan.recipe.name}",
                fix=f"full log: {log_path}",
            )
        stamp.write_text(digest + "\n")

    def _account_compile(self, seconds: float) -> float:
        """Compile seconds spent on this build tree over every run since it was created: what the
        artifacts cost to compile, which a resumed or cached run's own time does not show."""
        ledger = self.build_dir / ".ortdist-compile-seconds"
        try:
            total = float(ledger.read_text(encoding="utf-8")) if ledger.is_file() else 0.0
        except ValueError:
            total = 0.0
        total = round(total + seconds, 1)
        ledger.write_text(f"{total}\n", encoding="utf-8")
        return total

    def step_build(self) -> None:
        log_path = self.logs / "build.log"
        lines: list[str] = []
        progress = NinjaProgress()

        def on_line(line: str) -> None:
            lines.append(line)
            progress.feed(line)

        cc = self.plan.compiler_cache
        stats_file = self.work_dir / "compiler-cache-stats.txt"
        stats_file.unlink(missing_ok=True)
        # One shell in one mount namespace: a cache server (sccache) started by the first command
        # serves the build and is stopped before the namespace, and its bind mounts, go away.
        script = "; ".join(
            [
                f"{shlex.join(cc.zero_stats)} >/dev/null 2>&1",
                shlex.join(self.plan.build_argv(self.jobs)),
                "rc=$?",
                f"{shlex.join(cc.show_stats)} > {IN_ROOT_WORK}/{stats_file.name} 2>&1",
                *([f"{shlex.join(cc.stop)} >/dev/null 2>&1"] if cc.stop else []),
                "exit $rc",
            ]
        )
        started = time.monotonic()
        with log_path.open("w", encoding="utf-8") as log:
            code = run.stream(self.in_root(self.root, ["/bin/sh", "-c", script]), on_line=on_line, log=log)
            progress.close()
        self.results["build_tree_compile_s"] = self._account_compile(time.monotonic() - started)
        stats = stats_file.read_text(encoding="utf-8", errors="replace") if stats_file.is_file() else ""
        self.results["compiler_cache"] = {"name": cc.name, **cc.parse_stats(stats)}
        if code != 0:
            excerpt = failure_excerpt(lines)
            detail = (
                f"failed target: {excerpt.target}\n    command: {excerpt.command}\n"
                + "\n".join(f"    {e}" for e in excerpt.errors)
                if excerpt
                else "\n".join(f"    {line}" for line in lines[-15:])
            )
            raise BuildError(
                f"the build failed (exit {code}):\n    {detail}",
                where=f"recipe {self.plan.recipe.name}",
                fix=f"full log: {log_path}; rerun the same command to resume after fixing",
            )

    def step_binding(self) -> None:
        """The Python binding for each extra CPython, compiled against the core just built: the
        main build's own binding commands with the other version's headers (see binding.py)."""
        main = binding.main_build_headers((self.build_dir / "CMakeCache.txt").read_text(encoding="utf-8"))
        listed = run.capture(
            self.in_root(self.root, ["ninja", "-C", str(IN_ROOT_BUILD), "-t", "commands", binding.TARGET]),
            error=BuildError,
            what="listing the binding's build commands",
        ).stdout
        timings = self.results.setdefault("python_versions", {})
        for version in self.plan.extra_python:
            started = time.monotonic()
            layout = python_layout(version)
            out_dir = self.work_dir / f"binding-{version}"
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "build.ninja").write_text(
                binding.binding_ninja(
                    listed,
                    main,
                    binding.Headers(
                        python=layout["include"],
                        numpy=layout["numpy_include"],
                        extra=(layout["multiarch_include"],),
                    ),
                    f"{IN_ROOT_WORK}/binding-{version}",
                    str(IN_ROOT_BUILD),
                ),
                encoding="utf-8",
            )
            with self._log(f"binding-{version}") as log:
                run.call(
                    self.in_root(self.root, ["ninja", "-C", f"{IN_ROOT_WORK}/binding-{version}", "-j", str(self.jobs)]),
                    log=log,
                    error=BuildError,
                    what=f"compiling the Python {version} binding",
                )
            timings.setdefault(version, {})["binding_s"] = round(time.monotonic() - started, 1)

    def step_install(self) -> None:
        install = self.work_dir / "install"
        remove_tree(install)
        with self._log("install") as log:
            run.call(
                self.in_root(
                    self.root, ["cmake", "--install", str(IN_ROOT_BUILD), *(["--strip"] if self.plan.strip else [])]
                ),
                log=log,
                error=PackageError,
                what="cmake --install",
            )
        name = f"onnxruntime-{self.plan.recipe.name}-{self.plan.version.version}"
        out = self.work_dir / "out"
        out.mkdir(parents=True, exist_ok=True)
        archive = out / f"{name}.tar.gz"
        subject = {"name": name, "version": self.plan.version.version, "description": "C library archive"}
        document = sbom.make_sbom(self.sbom_inputs([]), subject)
        (install / SBOM_IN_ARCHIVE).parent.mkdir(parents=True, exist_ok=True)
        (install / SBOM_IN_ARCHIVE).write_text(sbom.dumps(document), encoding="utf-8")
        deterministic_tarball(install, archive, name, self.source_date_epoch())
        self.artifacts.append(
            Artifact(archive, "c-library", extra={"execution_providers": [ep.name for ep in self.plan.providers]})
        )

    # --- the monolithic static library -------------------------------------------------------------
    def _file_api_reply(self, name: str) -> str:
        reply = self.build_dir / ".cmake" / "api" / "v1" / "reply"
        if not name:
            return "\n".join(sorted(p.name for p in reply.iterdir())) if reply.is_dir() else ""
        return (reply / name).read_text(encoding="utf-8")

    def host_path(self, in_root: str) -> Path:
        """Where a path seen inside the build root lives on the host."""
        path = Path(in_root)
        if path.is_relative_to(IN_ROOT_BUILD):
            return self.build_dir / path.relative_to(IN_ROOT_BUILD)
        if path.is_relative_to(IN_ROOT_WORK):
            return self.work_dir / path.relative_to(IN_ROOT_WORK)
        if self.target_root is not None and path.is_relative_to(IN_ROOT_TARGET):
            return self.target_root / path.relative_to(IN_ROOT_TARGET)
        return self.root / path.relative_to("/")

    def step_bundle(self) -> None:
        """libonnxruntime.a from the library's CMake link graph, with headers and a pkg-config file;
        then a C program linked against nothing but it (and the C runtime) must run a model."""
        plan = self.plan
        graph = self.link_graph()
        if graph.unresolved:
            raise BuildError(
                "these libraries in the link graph have no static archive to bundle:\n"
                + "\n".join(f"    {lib}" for lib in graph.unresolved),
                where=f"recipe {plan.recipe.name} linkage = {plan.recipe.linkage!r}",
                fix="drop the feature that needs them (e.g. [features] cpuinfo = false) or add a toolchain "
                "package that ships the .a",
            )
        name = f"onnxruntime-{plan.recipe.name}-{plan.version.version}-static"
        stage = self.work_dir / "static"
        remove_tree(stage)
        (stage / "lib" / "pkgconfig").mkdir(parents=True)
        archive = f"{IN_ROOT_WORK}/static/lib/libonnxruntime.a"
        archives, objects = list(graph.archives), []
        sysroot = [f"--sysroot={IN_ROOT_TARGET}"] if self.target_root is not None else []
        with self._log("bundle-lto") as log:
            if plan.recipe.features.lto:
                own, archives = bundle.split_lto(graph.archives, str(IN_ROOT_BUILD))
                objects = [f"{IN_ROOT_WORK}/onnxruntime-lto.o"]
                optimize = "-Os" if plan.recipe.build_type == "MinSizeRel" else "-O2"
                run.call(
                    self.in_root(
                        self.root, bundle.lto_object_command(self.tool("g++"), own, objects[0], optimize, sysroot)
                    ),
                    log=log,
                    error=BuildError,
                    what="compiling the LTO objects for the static archive",
                )
        (self.work_dir / "bundle.mri").write_text(bundle.mri_script(archive, archives, objects), encoding="utf-8")
        prefix = self.work_dir / "bundle-prefix"
        remove_tree(prefix)
        with self._log("bundle") as log:
            script = f"{self.tool('ar')} -M < {IN_ROOT_WORK}/bundle.mri && {self.tool('ranlib')} {archive}"
            run.call(self.in_root(self.root, ["/bin/sh", "-c", script]), log=log, error=BuildError, what="ar -M")
            run.call(
                self.in_root(
                    self.root, ["cmake", "--install", str(IN_ROOT_BUILD), "--prefix", f"{IN_ROOT_WORK}/bundle-prefix"]
                ),
                log=log,
                error=PackageError,
                what="cmake --install (headers)",
            )
        shutil.copytree(prefix / "include", stage / "include")
        remove_tree(prefix)
        (stage / "lib" / "pkgconfig" / "libonnxruntime.pc").write_text(
            bundle.pkg_config(
                "onnxruntime",
                plan.version.version,
                graph.system_libs,
                f"ONNX Runtime ({plan.recipe.name}), one static archive",
            ),
            encoding="utf-8",
        )
        subject = {"name": name, "version": plan.version.version, "description": "static library archive"}
        (stage / SBOM_IN_ARCHIVE).parent.mkdir(parents=True, exist_ok=True)
        (stage / SBOM_IN_ARCHIVE).write_text(
            sbom.dumps(sbom.make_sbom(self.sbom_inputs([]), subject)), encoding="utf-8"
        )
        (self.work_dir / "onnxruntime-lto.o").unlink(missing_ok=True)
        merged: dict[str, int] = {}
        for archive_path in graph.archives:
            component = bundle.component_of(archive_path)
            merged[component] = merged.get(component, 0) + 1
        self.results["static_library"] = {
            "archives_merged": merged,
            "system_libs": list(graph.system_libs),
            "bytes": (stage / "lib" / "libonnxruntime.a").stat().st_size,
        }
        self.results["c_smoke"] = self.c_smoke(stage)
        out = self.work_dir / "out" / f"{name}.tar.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        deterministic_tarball(stage, out, name, self.source_date_epoch())
        self.artifacts.append(Artifact(out, "static-library", extra={"linked_only_with": list(graph.system_libs)}))

    def tool(self, name: str) -> str:
        """A binutils/compiler tool for the target (the cross prefix when there is one)."""
        return self.plan.toolchain.tool_prefix(self.plan.target.triple) + name

    def target_command(self, smoke: Path, argv: list[str], log: TextIO) -> list[str]:
        """Run a target binary from ``smoke`` (seen as /ortdist/c-smoke): natively in the clean root,
        which has none of the build's libraries; a cross target's under its emulator in the build root."""
        cross = self.plan.toolchain.cross.get(self.plan.target.triple)
        binds = [Bind(smoke, IN_ROOT_C_SMOKE)]
        if cross:
            emulator = [str(cross["emulator"]), "-L", str(IN_ROOT_TARGET)]
            return self.toolchain.wrap(self.root, [*emulator, *argv], binds=[*self.binds(), *binds])
        clean = self.toolchain.ensure_clean_root(self.cache, log)
        return self.toolchain.wrap(clean, argv, binds=binds)

    def c_smoke(self, stage: Path) -> dict[str, Any]:
        """Build the C smoke program against the bundled archive alone and run the recipe's models."""
        smoke = self.work_dir / "c-smoke"
        remove_tree(smoke)
        smoke.mkdir(parents=True)
        shutil.copyfile(Path(__file__).parent / "data" / "c_smoke" / "ort_smoke.c", smoke / "ort_smoke.c")
        cases = c_smoke_cases(self, smoke)
        pc = f"{IN_ROOT_WORK}/static/lib/pkgconfig"
        sysroot = f"--sysroot={IN_ROOT_TARGET}" if self.target_root is not None else ""
        build = (
            f"cd {IN_ROOT_WORK}/c-smoke && "
            f"{self.tool('gcc')} {sysroot} -O2 -c ort_smoke.c -I{IN_ROOT_WORK}/static/include && "
            # g++ drives the link so libstdc++ can be linked statically: the binary needs only libc/libm.
            f"{self.tool('g++')} {sysroot} -o ort_smoke ort_smoke.o {IN_ROOT_WORK}/static/lib/libonnxruntime.a "
            f"-static-libstdc++ -static-libgcc $(PKG_CONFIG_PATH={pc} pkg-config --static --libs-only-l libonnxruntime "
            "| tr ' ' '\\n' | grep -v -e '^-lonnxruntime$' -e '^-lstdc++$' | tr '\\n' ' ') && "
            f"{self.tool('readelf')} -d ort_smoke > needed.txt"
        )
        with self._log("c-smoke") as log:
            run.call(
                self.in_root(self.root, ["/bin/sh", "-c", build]),
                log=log,
                error=CheckError,
                what="building the C smoke program",
            )
        needed = c_smoke_needed((smoke / "needed.txt").read_text(encoding="utf-8"))
        extra = [lib for lib in needed if not any(lib.startswith(ok) for ok in C_RUNTIME_SONAMES)]
        if extra:
            raise CheckError(
                f"the C program linked against libonnxruntime.a still needs {', '.join(extra)}",
                where=str(stage / "lib" / "libonnxruntime.a"),
                fix="a dependency was bundled as a shared library; see logs/bundle.log",
            )
        results = run_c_smoke_cases(self, smoke, cases)
        remove_tree(smoke / "cases")
        return {"needed": needed, "binary_bytes": (smoke / "ort_smoke").stat().st_size, "models": results}

    def step_wheel(self) -> None:
        for version in self.plan.python:
            started = time.monotonic()
            self._wheel_for(version)
            self._time_version(version, "wheel_s", started)

    def _suffix(self, version: str) -> str:
        """Work-file suffix of a CPython version: none for the root's own (its paths stay as they
        were before several versions existed, so its wheel stays byte-identical)."""
        return "" if version == self.plan.python[0] else f"-{version}"

    def _time_version(self, version: str, key: str, started: float) -> None:
        if len(self.plan.python) > 1:
            versions = self.results.setdefault("python_versions", {})
            versions.setdefault(version, {})[key] = round(time.monotonic() - started, 1)

    def _wheel_for(self, version: str) -> None:
        plan, suffix = self.plan, self._suffix(version)
        build_record = assemble.build_record(
            plan,
            self.recipe_sha256,
            self.results["source"]["sha256"],
            self.results.get("reduced_ops", {}).get("operators"),
        )
        stage = self.work_dir / f"stage{suffix}"
        try:
            assemble.stage_package(self.build_dir / "onnxruntime", stage, plan, build_record)
        except FileNotFoundError as exc:
            raise PackageError(
                str(exc), fix="check logs/build.log: the pybind post-build step lays out the package"
            ) from exc
        if suffix:  # the binding compiled for this version replaces the root Python's
            built = self.work_dir / f"binding-{version}" / binding.MODULE
            shutil.copyfile(built, stage / "onnxruntime" / "capi" / binding.MODULE)
        self.set_provider_runpaths(stage)
        project = f"wheelproj{suffix}"
        assemble.write_project(
            self.work_dir / project, plan, self.source_dir, f"{IN_ROOT_WORK}/stage{suffix}/onnxruntime"
        )
        raw = self.work_dir / "wheel" / f"raw{suffix}"
        remove_tree(raw)
        raw.mkdir(parents=True)
        with self._log(f"wheel{suffix}") as log:
            run.call(
                self.in_root(
                    self.root,
                    [
                        f"{IN_ROOT_TOOLS_VENV}/bin/pip",
                        "wheel",
                        "--no-deps",
                        "--no-build-isolation",
                        "--no-index",
                        "--wheel-dir",
                        f"{IN_ROOT_WORK}/wheel/raw{suffix}",
                        f"{IN_ROOT_WORK}/{project}",
                    ],
                ),
                log=log,
                error=PackageError,
                what="scikit-build-core wheel build",
            )
        wheel = repair.single_wheel(raw)
        # scikit-build-core tags the wheel for the interpreter it runs under (the root's own).
        self.raw_wheels[version] = record.retag(wheel, version) if suffix else wheel
        if not suffix:
            self.raw_wheel = wheel

    def set_provider_runpaths(self, stage: Path) -> None:
        """Provider libraries whose vendor runtime comes from pip wheels (CUDA, cuDNN) get a
        RUNPATH into those wheels' directories, so loading the provider finds them."""
        libraries = [ep for ep in self.plan.providers if ep.pip_library_dirs]
        if not libraries:
            return
        with self._log("runpath") as log:
            for ep in libraries:
                library = stage / assemble.CAPI_DIR / ep.provider_library
                if not library.is_file():
                    raise PackageError(
                        f"the {ep.name} provider library {ep.provider_library} is not in the package",
                        where=str(library.parent),
                        fix="check logs/build.log: ORT's pybind post-build step copies provider libraries into capi/",
                    )
                runpath = assemble.provider_runpath(ep.pip_library_dirs)
                in_root = f"{IN_ROOT_WORK}/{library.relative_to(self.work_dir)}"
                run.call(
                    self.in_root(self.root, ["patchelf", "--set-rpath", runpath, in_root]),
                    log=log,
                    error=PackageError,
                    what=f"setting the RUNPATH of {ep.provider_library}",
                )

    def verify_provider_runpaths(self, wheel: Path) -> None:
        """The RUNPATH into NVIDIA's wheels must survive auditwheel: without it the provider only
        loads where the user set LD_LIBRARY_PATH, which the GPU proof would not notice."""
        expected = {
            ep.provider_library: assemble.provider_runpath(ep.pip_library_dirs)
            for ep in self.plan.providers
            if ep.pip_library_dirs
        }
        if not expected:
            return
        probe = self.work_dir / "wheel" / "runpath"
        remove_tree(probe)
        probe.mkdir(parents=True)
        with zipfile.ZipFile(wheel) as zf:
            for library in expected:
                member = f"{assemble.CAPI_DIR}/{library}"
                if member not in zf.namelist():
                    raise PackageError(
                        f"the repaired wheel has no {member}", where=wheel.name, fix="see logs/repair.log"
                    )
                (probe / library).write_bytes(zf.read(member))
        for library, runpath in expected.items():
            found = run.capture(
                self.in_root(self.root, ["patchelf", "--print-rpath", f"{IN_ROOT_WORK}/wheel/runpath/{library}"]),
                error=PackageError,
                what=f"reading the RUNPATH of {library}",
            ).stdout.strip()
            if not assemble.search_path_keeps(found, runpath):
                raise PackageError(
                    f"{library} in the repaired wheel has the search path {found!r}, which lost entries of {runpath!r}",
                    where=wheel.name,
                    fix="auditwheel dropped them (it discards entries that point outside the wheel): see "
                    "logs/repair.log and set the path again after the repair",
                )
        remove_tree(probe)

    def target_library_env(self) -> list[str]:
        """For a cross target: ``env`` naming its libraries (auditwheel grafts them from there) and
        putting its ``strip`` first on PATH (auditwheel --strip calls plain ``strip``)."""
        paths = self.plan.toolchain.cross.get(self.plan.target.triple, {}).get("library_path", [])
        if not paths:
            return []
        tools = self.work_dir / "target-tools"
        remove_tree(tools)
        tools.mkdir(parents=True)
        (tools / "strip").symlink_to(f"/usr/bin/{self.tool('strip')}")  # resolved inside the root
        joined = ":".join(str(p).replace("{target}", str(IN_ROOT_TARGET)) for p in paths)
        return ["env", f"LD_LIBRARY_PATH={joined}", f"PATH={IN_ROOT_WORK}/target-tools:/usr/sbin:/usr/bin:/sbin:/bin"]

    def step_repair(self) -> None:
        for version in self.plan.python:
            started = time.monotonic()
            self._repair(version)
            self._time_version(version, "repair_s", started)

    def _repair(self, version: str) -> None:
        suffix = self._suffix(version)
        repaired = self.work_dir / "wheel" / f"repaired{suffix}"
        remove_tree(repaired)
        repaired.mkdir(parents=True)
        raw_in_root = f"{IN_ROOT_WORK}/wheel/raw{suffix}/{self.raw_wheels[version].name}"
        with self._log(f"repair{suffix}") as log:
            run.call(
                self.in_root(
                    self.root,
                    [
                        *self.target_library_env(),
                        *repair.auditwheel_argv(
                            raw_in_root,
                            f"{IN_ROOT_WORK}/wheel/repaired{suffix}",
                            self.plan.repair_excludes,
                            strip=self.plan.strip,
                        ),
                    ],
                ),
                log=log,
                error=PackageError,
                what="auditwheel repair",
            )
            show = run.capture(
                self.in_root(
                    self.root, [*self.target_library_env(), f"{IN_ROOT_TOOLS_VENV}/bin/auditwheel", "show", raw_in_root]
                ),
                check=False,
            )
            log.write(show.stdout + show.stderr)
        wheel = repair.single_wheel(repaired)
        self.verify_provider_runpaths(wheel)
        self._add_wheel_sbom(wheel)
        self.wheels[version] = wheel
        if not suffix:
            self.wheel = wheel
        self.artifacts.append(
            Artifact(
                wheel,
                "wheel",
                tag=repair.wheel_tag(wheel.name),
                extra={
                    "execution_providers": [ep.name for ep in self.plan.providers],
                    "provider_names": [ep.provider for ep in self.plan.providers],
                    "distribution": self.plan.distribution,
                    "python": version,
                },
            )
        )

    def sbom_inputs(self, bundled: list[sbom.BundledFile]) -> sbom.SbomInputs:
        return sbom.SbomInputs(
            plan=self.plan,
            recipe_path=f"recipes/{self.recipe_path.name}",
            recipe_text=self.recipe_path.read_text(encoding="utf-8"),
            recipe_sha256=self.recipe_sha256,
            source=self.results.get("source", {}),
            root_packages=self.root_packages,
            source_date_epoch=self.source_date_epoch(),
            bundled=bundled,
            target_packages=self.toolchain.installed_packages(self.target_root) if self.target_root else {},
            target_arch=str(self.plan.toolchain.cross.get(self.plan.target.triple, {}).get("dpkg_arch", "")),
        )

    def _add_wheel_sbom(self, wheel: Path) -> None:
        """PEP 770: the repaired wheel's SBOM, naming each grafted library and its Debian package."""
        owners = self.toolchain.library_packages(self.root)
        versions = self.root_packages
        bundled = []
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                top = name.split("/", 1)[0]
                if top.endswith(".libs") and not name.endswith("/"):
                    package = owners.get(sbom.original_soname(name.rsplit("/", 1)[-1]))
                    bundled.append(
                        sbom.BundledFile(
                            path=name,
                            sha256=hashlib.sha256(zf.read(name)).hexdigest(),
                            package=package,
                            package_version=versions.get(package) if package else None,
                        )
                    )
        subject = {
            "name": self.plan.distribution,
            "version": self.plan.version.version,
            "purl": f"pkg:pypi/{self.plan.distribution}@{self.plan.version.version}",
            "description": f"wheel {wheel.name}",
        }
        document = sbom.make_sbom(self.sbom_inputs(bundled), subject)
        record.add_to_dist_info(
            wheel, {f"sboms/{sbom.SBOM_NAME}": sbom.dumps(document).encode()}, self.source_date_epoch()
        )

    def write_check_case(self, check: Path) -> tuple[str, float]:
        """The check's model file name and tolerance. A full build runs the NaN-propagation model; a
        reduced build has none of its operators, so it runs the first reference model it was cut
        for, in ORT format (a minimal build reads nothing else)."""
        if not self.plan.reduced:
            write_check_files(check)
            return "model.onnx", 1e-5
        from .smoke.models import BUILDERS, save_case, tolerances

        for entry in self.plan.recipe.reduce.models:
            name = entry.removeprefix(models.REFERENCE_PREFIX)
            if entry.startswith(models.REFERENCE_PREFIX) and name in BUILDERS:
                ref = BUILDERS[name]()
                save_case(check, ref.model, ref.inputs, ref.expected)
                (check / "model.onnx").unlink()
                shutil.copyfile(self.models_dir / "ort" / f"{name}.ort", check / "model.ort")
                return "model.ort", max(tolerances()[name].atol, 1e-5)
        raise CheckError(
            "a reduced wheel is checked with a reference model it was cut for, and the recipe lists none",
            where=f"recipe {self.plan.recipe.name} [reduce] models",
            fix='add "reference:cnn" (or another reference model) to models',
        )

    def step_check(self) -> None:
        for version in self.plan.python:
            started = time.monotonic()
            self._check(version)
            self._time_version(version, "check_s", started)

    def _check(self, python: str) -> None:
        suffix = self._suffix(python)
        wheel_file = self.wheels[python]
        check = self.work_dir / f"check{suffix}"
        remove_tree(check)
        model_file, tolerance = self.write_check_case(check)
        shutil.copyfile(Path(__file__).parent / "checks" / "probe.py", check / "probe.py")
        shutil.copyfile(Path(__file__).parent / "smoke" / "proof.py", check / "proof.py")
        arch = self.plan.target.arch
        house = self.cache.wheelhouse(python, arch)
        requirements = list(self.plan.version.python_requires)
        run.capture(
            pip_download_argv(house, python, requirements, arch),
            error=CheckError,
            what="downloading the wheel's runtime dependencies",
        )
        cross = self.plan.toolchain.cross.get(self.plan.target.triple)
        with self._log(f"check{suffix}") as log:
            venv = self.work / "check-venv"
            remove_tree(venv)
            venv.mkdir(parents=True)
            binds = [
                Bind(wheel_file.parent, IN_ROOT / "wheel", read_only=True),
                Bind(house, IN_ROOT_WHEELHOUSE, read_only=True),
                Bind(check, IN_ROOT / "check"),
                Bind(venv, IN_ROOT / "venv"),
            ]
            if cross:
                # The target's own CPython, under the emulator, from a root with nothing but that
                # Python: a library the wheel forgot to bundle fails the import, as natively.
                clean_target = self.toolchain.ensure_clean_target_root(
                    self.cache, self.root, self.plan.target.triple, log
                )
                check_root, binds = self.root, [*binds, Bind(clean_target, IN_ROOT_TARGET, read_only=True)]
            else:
                check_root = self.toolchain.ensure_clean_root(self.cache, log)
            if python in self.python_overlays:
                # Another CPython, unpacked: its venv gets pip from the root's own pip wheel.
                binds.append(Bind(self.python_overlays[python], in_root_python(python), read_only=True))
                cmds = overlay_venv_commands(python_layout(python)["executable"], "/ortdist/venv")
            else:
                cmds = venv_commands(
                    f"python{python}", "/ortdist/venv", str(cross["emulator"]) if cross else "", str(IN_ROOT_TARGET)
                )
            script = (
                f"{cmds.create} && "
                f"{cmds.pip} install --quiet --no-index --find-links {IN_ROOT_WHEELHOUSE} "
                f"/ortdist/wheel/{wheel_file.name} && "
                f"cd /ortdist/check && {cmds.python} probe.py {model_file} data.npz result.json {tolerance}"
            )
            # The probe explains failures in result.json; its exit code only confirms them.
            code = run.stream(
                self.toolchain.wrap(check_root, ["/bin/sh", "-c", script], binds=binds), on_line=print, log=log
            )
            remove_tree(venv)
        clean = check_root
        result_file = check / "result.json"
        result: dict[str, Any] = json.loads(result_file.read_text()) if result_file.is_file() else {"ok": False}
        problems = verify_check_result(result, [ep.provider for ep in self.plan.providers], tolerance)
        if code != 0 or problems:
            raise CheckError(
                "the wheel failed the clean-root check:\n"
                + "\n".join(f"    {p}" for p in problems or ["see log"])
                + ("\n" + result.get("error", "") if result.get("error") else ""),
                where=wheel_file.name,
                fix=f"full log: {self.logs / f'check{suffix}.log'}",
            )
        if suffix:
            checks = self.results.setdefault("clean_root_check_other_python", {})
            checks[python] = {"ok": True, "outputs": result["outputs"]}
            return
        self.results["clean_root_check"] = {
            "ok": True,
            "root": clean.name,
            "python": python,
            "available_providers": result["available_providers"],
            "outputs": result["outputs"],
            "node_providers": result["node_providers"],
        }

    def link_graph(self) -> bundle.LinkGraph:
        if not self._file_api_reply(""):  # a tree configured before ortdist queried the file API
            with self._log("configure-file-api") as log:
                run.call(
                    self.in_root(self.root, ["cmake", str(IN_ROOT_BUILD)]), log=log, error=BuildError, what="cmake"
                )
        return bundle.link_graph(
            bundle.read_reply(self._file_api_reply), str(IN_ROOT_BUILD), lambda p: self.host_path(p).is_file()
        )

    def step_size(self) -> None:
        """Stripped sizes of the artifacts and the library, and what takes the space in it."""
        plan = self.plan
        work = self.work_dir / "size"
        remove_tree(work)
        work.mkdir(parents=True)
        library = f"libonnxruntime.so.{plan.version.version}"
        pybind = "onnxruntime/capi/onnxruntime_pybind11_state.so"
        graph = self.link_graph()
        nm, strip = self.tool("nm"), self.tool("strip")
        # The build may link with -s (MinSizeRel): the breakdown needs symbols, so the library is
        # linked once more from its own ninja command without -s (same objects, same flags).
        relink = bundle.unstripped_link_command(
            run.capture(
                self.in_root(self.root, ["ninja", "-C", str(IN_ROOT_BUILD), "-t", "commands", library]),
                error=BuildError,
                what="ninja -t commands",
            ).stdout,
            library,
            f"{IN_ROOT_WORK}/size/lib.unstripped",
        )
        symbolic = f"{IN_ROOT_WORK}/size/lib.unstripped" if relink else f"{IN_ROOT_BUILD}/{library}"
        lines = [
            *([f"cd {IN_ROOT_BUILD}", relink] if relink else []),
            f"cd {IN_ROOT_WORK}/size",
            f"{strip} --strip-all -o lib.stripped {IN_ROOT_BUILD}/{library}",
            f"{nm} -S --defined-only {symbolic} > lib.nm",
            f"{nm} -S --defined-only -C {symbolic} > lib.demangled.nm",
        ]
        if plan.builds_wheel:
            lines.append(f"{strip} --strip-all -o pybind.stripped {IN_ROOT_BUILD}/{pybind}")
        lines += [f"{nm} --defined-only {a} > archive-{i}.nm 2>/dev/null" for i, a in enumerate(graph.archives)]
        with self._log("size") as log:
            run.call(
                self.in_root(self.root, ["/bin/sh", "-ec", " && ".join(lines)]),
                log=log,
                error=BuildError,
                what="nm/strip",
            )
        symbols = size.parse_nm_sizes((work / "lib.nm").read_text(encoding="utf-8", errors="replace"))
        demangled_symbols = size.parse_nm_sizes(
            (work / "lib.demangled.nm").read_text(encoding="utf-8", errors="replace")
        )
        demangled = {a.name: b.name for a, b in zip(symbols, demangled_symbols, strict=False)}
        definers = [
            (
                bundle.component_of(a),
                size.parse_archive_definitions((work / f"archive-{i}.nm").read_text(errors="replace")),
            )
            for i, a in enumerate(graph.archives)
        ]
        owners = size.attribute(symbols, definers)
        report: dict[str, Any] = {
            "recipe": plan.recipe.name,
            "target": plan.target.triple,
            "artifacts": [
                {"name": a.source.name, "bytes": a.source.stat().st_size, "stripped_bytes": None}
                for a in self.artifacts
            ],
            "shared_library": {
                "name": library,
                "bytes": (self.build_dir / library).stat().st_size,
                **size.breakdown(symbols, owners, demangled, (work / "lib.stripped").stat().st_size),
            },
        }
        shipped = library if plan.builds_shared_library else f"{library} (linked for the report; not shipped)"
        report["artifacts"].insert(
            0,
            {
                "name": shipped,
                "bytes": report["shared_library"]["bytes"],
                "stripped_bytes": report["shared_library"]["stripped_bytes"],
            },
        )
        if plan.builds_wheel:
            report["artifacts"].insert(
                1,
                {
                    "name": Path(pybind).name,
                    "bytes": (self.build_dir / pybind).stat().st_size,
                    "stripped_bytes": (work / "pybind.stripped").stat().st_size,
                },
            )
        baseline = self.size_baseline()
        if baseline:
            report["baseline"] = {
                "recipe": baseline["recipe"],
                "stripped_bytes": baseline["shared_library"]["stripped_bytes"],
            }
        remove_tree(work)
        self.results["size"] = report
        table = self.work_dir / "out" / f"{plan.recipe.name}.size.md"
        table.parent.mkdir(parents=True, exist_ok=True)
        table.write_text(size.render_table(plan.recipe.name, report, baseline), encoding="utf-8")
        self.artifacts.append(Artifact(table, "size-report"))
        print(table.read_text(encoding="utf-8"), file=sys.stderr)

    def size_baseline(self) -> dict[str, Any] | None:
        """The full CPU build of the same version and target (dist/<recipe>/manifest.json), if built;
        reduced and minimal builds are compared with it."""
        if not (self.plan.reduced or self.plan.minimal) or self.plan.recipe.name == BASELINE_RECIPE:
            return None
        candidate = self.dist.parent / BASELINE_RECIPE / "manifest.json"
        if not candidate.is_file():
            return None
        data = json.loads(candidate.read_text(encoding="utf-8"))
        found = data.get("size")
        same = data.get("ort_version") == self.plan.version.version
        if found and same and found.get("target") == self.plan.target.triple and found.get("shared_library"):
            return dict(found)
        return None

    def step_publish(self) -> None:
        manifest = {
            "schema": 1,
            "ortdist_version": __version__,
            "recipe": self.plan.recipe.name,
            "recipe_sha256": self.recipe_sha256,
            "description": self.plan.recipe.description,
            "ort_version": self.plan.version.version,
            "target": self.plan.target.triple,
            "execution_providers": [ep.name for ep in self.plan.providers],
            "provider_names": [ep.provider for ep in self.plan.providers],
            "build_type": self.plan.recipe.build_type,
            "toolchain": {
                "name": self.plan.toolchain.name,
                "digest": self.plan.toolchain.digest,
                "root": self.root.name,
            },
            "cmake_defines": self.plan.cmake_defines,
            "build_times_s": {**self.timings, "total": round(time.monotonic() - self.started, 1)},
            **self.results,
        }
        self.results["artifacts"] = publish(self.dist, self.artifacts, manifest)


def verify_check_result(result: dict[str, Any], claimed: list[str], tolerance: float = 1e-5) -> list[str]:
    """What is wrong with a clean-root probe result (empty list: nothing). Pure, unit-tested."""
    problems: list[str] = []
    if "error" in result:
        last = result["error"].strip().splitlines()[-1] if result["error"].strip() else "unknown error"
        problems.append(f"import/inference failed: {last}")
        return problems
    available = result.get("available_providers", [])
    for provider in claimed:
        if provider not in available:
            problems.append(f"claims {provider} but get_available_providers() lists only {available}")
    for name, out in result.get("outputs", {}).items():
        if not out.get("nan_pattern_matches", False):
            problems.append(f"output {name!r}: NaN positions differ from onnx.reference (Min/Max NaN semantics)")
        if out.get("max_abs_err", 1.0) > tolerance:
            limit = f"{tolerance:g}".replace("e-0", "e-")
            problems.append(f"output {name!r}: max abs error {out['max_abs_err']:.3g} > {limit} vs onnx.reference")
    off_cpu = {n: p for n, p in result.get("node_providers", {}).items() if p != "CPUExecutionProvider"}
    if off_cpu:
        problems.append(f"nodes ran outside CPUExecutionProvider: {off_cpu}")
    if not result.get("node_providers"):
        problems.append("the profile recorded no node placements")
    if not result.get("ok", False) and not problems:
        problems.append("probe reported failure")
    return problems


def deterministic_tarball(tree: Path, archive: Path, top: str, mtime: int) -> None:
    """A .tar.gz whose bytes depend only on the files: sorted, fixed owner, fixed times."""
    with (
        atomic_file(archive) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(tree.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=f"{top}/{path.relative_to(tree)}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = mtime
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
