"""`ortdist bench` / `nox -s bench`: every claim as a number, measured side by side in one run.

Build: our cold build (empty compiler cache, fresh tree) against ORT's build.py on the same
patched source, sysroot and CMake defines; then a no-op and a one-file-change rebuild of each.
Size: our wheel's native libraries against PyPI's onnxruntime 1.21.0 for the same Python.
Inference: median latency of each reference model, ours and PyPI's in their own processes,
alternating order, and their outputs' max difference. Smoke: the full suite's wall time. EP: ep.py.
Results land in dist/bench/results.{json,md} as measured; ``--only`` re-measures a part.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import records, run, treecheck
from ..errors import BuildError, CheckError
from ..fsutil import atomic_write_text, remove_tree
from ..log import log
from ..patches import source_exclude
from ..paths import IN_ROOT, IN_ROOT_BUILD, IN_ROOT_SOURCE, IN_ROOT_WORK, Cache
from ..pipeline import Layout, Roots
from ..project import plan_for
from ..toolchains import Bind, Toolchain, make_toolchain
from ..wheelhouse import pip_download_argv
from . import PARTS, cuda, ep
from . import results as tables
from .buildpy import buildpy_argv
from .results import SLIM_COMPARED_WITH, SLIM_RECIPE, WEB_RECIPE, markdown, max_output_diff, native_sizes

# A file every CPU build compiles, changed by one comment line for the one-file-change rebuild.
ONE_FILE = "onnxruntime/core/providers/cpu/math/element_wise_ops.cc"
IN_ROOT_BENCH = IN_ROOT / "bench"
# The real-size models' generator version: bump it when smoke/realsize.py changes the graphs.
REALSIZE_VERSION = "v1"
THREADS = (1, 2)


@dataclass
class Bench:
    project: Path
    recipe: str
    jobs: int
    cache: Cache = field(default_factory=Cache.default)
    results: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plan, self.recipe_path = plan_for(self.recipe, self.project)  # a bad --recipe: nothing made
        self.out = self.project / "dist" / "bench"
        self.out.mkdir(parents=True, exist_ok=True)
        previous = self.out / "results.json"
        if previous.is_file():
            self.results = records.load(previous, records.BENCH_RESULTS, BuildError)
        self.toolchain: Toolchain = make_toolchain(self.plan.toolchain)
        self.work = self.cache.root / "bench"
        self.last_steps: dict[str, float] = {}
        self.last_compile: dict[str, float] = {}
        self.last_python_versions: dict[str, dict[str, float]] = {}
        self.last_reused: dict[str, Any] = {}
        # The same layout (source, deps, shims, compiler cache) a real build of the recipe uses.
        self.layout = Layout.for_plan(self.plan, self.cache, self.work / "ours-dist" / self.recipe)
        self.restore_one_file()  # a killed earlier run may have left its change in the source

    # --- bookkeeping ---------------------------------------------------------------------------
    def save(self) -> None:
        self.results["recipe"] = self.recipe
        atomic_write_text(self.out / "results.json", json.dumps(self.results, indent=1, sort_keys=True) + "\n")
        atomic_write_text(self.out / "results.md", markdown(self.results))

    def step(self, name: str, measure: Callable[[], dict[str, Any]]) -> None:
        with log.step(f"bench {name}"):
            self.results[name] = measure()
        self.save()

    # --- builds --------------------------------------------------------------------------------
    def ortdist_build(self, *extra: str, cold_cache: Path | None = None) -> float:
        """Wall seconds of `ortdist build` as a user runs it, compiler cache pointed at ``cold_cache``
        (default: the usual one). ``self.last_steps`` keeps that build's per-step times
        (configure + compile compare with build.py, which neither packages, repairs nor checks)."""
        env = {**os.environ, **({"ORTDIST_COMPILER_CACHE_DIR": str(cold_cache)} if cold_cache else {})}
        seconds, manifest = self.build_recipe(self.recipe, self.work / "ours-dist", "ours-build.log", *extra, env=env)
        self.last_steps = dict(manifest["build_times_s"])
        self.last_compile = dict(manifest.get("compile_command_s", {}))
        self.last_reused = dict(manifest.get("reused_steps", {}))
        self.last_python_versions = dict(manifest.get("python_versions", {}))
        return seconds

    def build_recipe(
        self, recipe: str, dist: Path, log_name: str, *extra: str, env: dict[str, str] | None = None
    ) -> tuple[float, dict[str, Any]]:
        """`ortdist build RECIPE --dist DIST` as a user runs it: its wall seconds and manifest; its
        output is appended to dist/bench/LOG_NAME."""
        dist.parent.mkdir(parents=True, exist_ok=True)  # --only slim or web: nothing made it yet
        start = time.monotonic()
        argv = [sys.executable, "-m", "ortdist", "build", recipe, "--dist", str(dist), "-j", str(self.jobs)]
        proc = run.capture([*argv, *extra], cwd=self.project, env=env, check=False)
        seconds = time.monotonic() - start
        with (self.out / log_name).open("a", encoding="utf-8") as log_file:
            log_file.write(proc.stderr)
        if proc.returncode != 0:
            raise BuildError(f"ortdist build {recipe} failed in the benchmark: {proc.stderr[-1500:]}", where=recipe)
        return seconds, json.loads((dist / recipe / "manifest.json").read_text(encoding="utf-8"))

    def buildpy(self, phase: str, cold_cache: Path) -> float:
        """Wall seconds of ORT's build.py inside the same sysroot, on the same patched source."""
        root = self.toolchain.ensure_build_root(self.cache, sys.stderr)
        cache_dir = self.plan.compiler_cache.in_root_dir
        # Our build's binds, with build.py's own tree and a compiler cache of its own.
        binds = [
            Bind(cold_cache, cache_dir) if b.inside == cache_dir else b
            for b in self.layout.binds(Roots(build=root))
            if b.inside not in (IN_ROOT_BUILD, IN_ROOT_WORK)
        ]
        binds.append(Bind(self.work / "buildpy", IN_ROOT_BENCH))
        env = self.plan.compiler_cache.env(os.environ)  # the same cache settings as ours, other directory
        argv = buildpy_argv(self.plan, str(IN_ROOT_BENCH / "build"), self.jobs, phase)
        script = f"cd {IN_ROOT_SOURCE} && {shlex.join(argv)}"
        start = time.monotonic()
        with (self.out / "buildpy.log").open("a", encoding="utf-8") as log:
            code = run.stream(
                self.toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds, env=env),
                on_line=lambda _l: None,
                log=log,
            )
        seconds = time.monotonic() - start
        if code != 0:
            raise BuildError(f"build.py --{phase} failed (exit {code})", where=str(self.out / "buildpy.log"))
        return seconds

    def touch_one_file(self) -> Callable[[], None]:
        """Change one source file by a comment line; returns the undo. The original is saved
        first, so a run killed before the undo is repaired by the next one (restore_one_file)."""
        src = self.layout.source.host / ONE_FILE
        saved = self.work / "one-file.orig"
        original = src.read_bytes()
        saved.write_bytes(original)
        src.write_bytes(original + b"\n// ortdist bench: one-file-change rebuild\n")
        self.declare_source_change()
        return self.restore_one_file

    def restore_one_file(self) -> None:
        saved = self.work / "one-file.orig"
        if saved.is_file():
            (self.layout.source.host / ONE_FILE).write_bytes(saved.read_bytes())
            self.declare_source_change()
            saved.unlink()

    def declare_source_change(self) -> None:
        """Record the cached source tree's content as it now is: a build verifies that tree against
        its manifest and would otherwise re-make it, measuring a fresh tree, not one changed file."""
        treecheck.record(self.layout.source.host, source_exclude)

    def measure_build(self) -> dict[str, Any]:
        ours_cache, their_cache, one_cache = (self.work / f"cold-ccache-{d}" for d in ("ours", "buildpy", "one-python"))
        remove_tree(self.work / "ours-dist")
        for d in (self.work / "buildpy", ours_cache, their_cache, one_cache):
            remove_tree(d)
            d.mkdir(parents=True)
        figures: dict[str, Any] = {}
        # Make sure the sysroot and the patched source exist (cheap when they do): build.py runs
        # on exactly those, and neither driver's cold figure then includes creating them.
        self.ortdist_build()
        figures["buildpy_cold_s"] = self.buildpy("update", their_cache) + self.buildpy("build", their_cache)
        if len(self.plan.python) > 1:
            # What the extra CPythons cost, measured: the same cold build for the root's Python alone
            # (the bindings compile inside the core's ninja run, so no step's time is theirs alone).
            first = self.plan.python[0]
            figures["ours_cold_one_python_s"] = self.ortdist_build("--fresh", "--python", first, cold_cache=one_cache)
            figures["ours_cold_one_python_steps"] = self.last_steps
        figures["ours_cold_s"] = self.ortdist_build("--fresh", cold_cache=ours_cache)
        figures["ours_cold_steps"] = self.last_steps
        figures["ours_cold_compile_command_s"] = self.last_compile
        figures["ours_cold_python_versions"] = self.last_python_versions
        figures.update(self.measure_rebuild())
        return figures

    def measure_rebuild(self) -> dict[str, Any]:
        """No-op and one-file-change rebuilds of both drivers on the trees the cold builds left
        (``--only rebuild`` re-measures them alone), and the no-op as a user runs it, through nox."""
        ours_cache, their_cache = self.work / "cold-ccache-ours", self.work / "cold-ccache-buildpy"
        if not (self.work / "buildpy" / "build").is_dir():
            raise BuildError(
                "no build.py tree to rebuild: the build part has not run here",
                where=str(self.work / "buildpy"),
                fix="run `nox -s bench -- --only build` first",
            )
        figures: dict[str, Any] = {}
        self.ortdist_build(cold_cache=ours_cache)  # settled: every step recorded by this ortdist
        figures["buildpy_noop_s"] = self.buildpy("build", their_cache)
        figures["ours_noop_s"] = self.ortdist_build(cold_cache=ours_cache)
        figures["ours_noop_steps"] = self.last_steps
        figures["ours_noop_reused"] = sorted(self.last_reused)
        figures["ours_nox_noop_s"] = self.nox_build(ours_cache)
        python = self.plan.python[0]
        runs: dict[str, list[tuple[float, dict[str, float]]]] = {"buildpy": [], "five": [], "one": []}
        for _ in range(tables.ONE_FILE_ROUNDS):
            # Five proven wheels and build.py on one change, one proven wheel (`--python`, the patch
            # loop's command) on another; each undone and every wheel rebuilt pristine after it.
            for key, extra in (("five", ()), ("one", ("--python", python))):
                undo = self.touch_one_file()
                try:
                    if key == "five":
                        runs["buildpy"].append((self.buildpy("build", their_cache), {}))
                    runs[key].append((self.ortdist_build(*extra, cold_cache=ours_cache), self.last_steps))
                finally:
                    undo()
                self.ortdist_build(cold_cache=ours_cache)
        for key, name in (("buildpy", "buildpy_one_file"), ("five", "ours_one_file"), ("one", "ours_one_wheel")):
            seconds, steps = tables.median_run(runs[key])
            figures[f"{name}_s"], figures[f"{name}_all_s"] = seconds, [round(t, 1) for t, _ in runs[key]]
            if steps:
                figures[f"{name}_steps"] = steps
        figures["one_wheel_python"] = python
        manifest = json.loads((self.work / "ours-dist" / self.recipe / "manifest.json").read_text())
        figures["ours_wheel"] = next(a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel")
        return figures

    def nox_build(self, cold_cache: Path) -> float:
        """Wall seconds of `./nox -s build-<recipe>` (nox's start, its venv, the build) after one
        run that settles it, as a release engineer reruns the main job with nothing changed."""
        env = {**os.environ, "ORTDIST_COMPILER_CACHE_DIR": str(cold_cache)}
        argv = [sys.executable, str(self.project / "nox"), "-s", f"build-{self.recipe}"]
        run.capture(argv, cwd=self.project, env=env, error=BuildError, what="the nox build session")
        start = time.monotonic()
        run.capture(argv, cwd=self.project, env=env, error=BuildError, what="the nox build session")
        return time.monotonic() - start

    def measure_cuda(self) -> dict[str, Any]:
        def rebuild(*extra: str) -> tuple[float, dict[str, float]]:
            return self.ortdist_build(*extra), self.last_steps

        return cuda.measure(self.plan, self.toolchain, self.cache, self.layout, rebuild)

    # --- sizes ---------------------------------------------------------------------------------
    def our_wheel(self) -> Path:
        """The wheel the build part just made, else the one in dist/<recipe>/ (built if missing)."""
        for out in (self.work / "ours-dist" / self.recipe, self.project / "dist" / self.recipe):
            manifest_file = out / "manifest.json"
            if manifest_file.is_file():
                manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
                return out / str(next(a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel"))
        self.ortdist_build()
        return self.our_wheel()

    def official_wheel(self) -> Path:
        house = self.work / "official"
        house.mkdir(parents=True, exist_ok=True)
        python = self.plan.python[0]
        argv = pip_download_argv(house, python, ["--no-deps", f"onnxruntime=={self.plan.version.version}"])
        run.capture(argv, error=CheckError, what=f"downloading PyPI's onnxruntime for CPython {python}")
        wheels = sorted(house.glob(f"onnxruntime-{self.plan.version.version}-*.whl"))
        if not wheels:
            raise CheckError("PyPI's onnxruntime wheel did not download", where=str(house))
        return wheels[0]

    def measure_size(self) -> dict[str, Any]:
        ours, theirs = self.our_wheel(), self.official_wheel()
        return {
            "ours": {"wheel": ours.name, "bytes": ours.stat().st_size, "native": native_sizes(ours)},
            "official": {"wheel": theirs.name, "bytes": theirs.stat().st_size, "native": native_sizes(theirs)},
        }

    # --- inference and smoke -------------------------------------------------------------------
    def measure_inference(self, rounds: int = 2, runs: int = 300) -> dict[str, Any]:
        from ..smoke.run_suite import smoke_wheel

        wheels = {"ours": self.our_wheel(), "official": self.official_wheel()}
        medians: dict[str, dict[str, list[float]]] = {"ours": {}, "official": {}}
        outputs: dict[str, Path] = {}
        for r in range(rounds):
            order = ["official", "ours"] if r % 2 == 0 else ["ours", "official"]
            for who in order:
                saved = self.work / "outputs" / who
                report, _ = smoke_wheel(
                    wheels[who],
                    self.work / "smoke" / who,
                    self.cache,
                    self.toolchain,
                    with_node_tests=False,
                    latency={"runs": runs, "warmup": 20, "threads": 1},
                    save_outputs=saved,
                )
                outputs[who] = saved
                for v in report["models"]:
                    if v["provider"] == "CPUExecutionProvider" and v.get("latency_ms") is not None:
                        medians[who].setdefault(v["name"], []).append(v["latency_ms"])
        models = sorted(set(medians["ours"]) & set(medians["official"]))
        table = {}
        for m in models:
            ours_ms = statistics.median(medians["ours"][m])
            theirs_ms = statistics.median(medians["official"][m])
            table[m] = {
                "ours_ms": ours_ms,
                "official_ms": theirs_ms,
                "ratio": ours_ms / theirs_ms,
                "max_output_diff": max_output_diff(
                    outputs["ours"] / f"CPUExecutionProvider__{m}.npz",
                    outputs["official"] / f"CPUExecutionProvider__{m}.npz",
                ),
            }
        return {"rounds": rounds, "runs": runs, "threads": 1, "models": table}

    def real_models(self) -> dict[str, tuple[Path, Path, str]]:
        """The real-size models and their QDQ variants on disk: name -> (model.onnx, inputs.npz, summary)."""
        from ..smoke import realsize

        return realsize.on_disk(self.work / "realsize" / REALSIZE_VERSION)

    def latency_run(
        self, who: str, wheel: Path, models: dict[str, tuple[Path, Path, str]], plan: dict[str, Any], **case: Any
    ) -> dict[str, Any]:
        """latency.py over every model in ``wheel``'s own environment (host venv or clean root);
        ``case``: what each model's case adds (``providers``: the EPs a session gets, default CPU)."""
        from ..smoke import env
        from ..smoke.run_suite import where_to_run
        from ..smoke.wheelinfo import read_wheel

        info = read_wheel(wheel)
        choice = where_to_run(info, self.toolchain)
        workdir = self.work / "latency" / who
        remove_tree(workdir)
        (workdir / "models").mkdir(parents=True)
        visible = workdir if choice.kind == "host" else env.IN_ROOT_SMOKE
        cases = []
        for name, (model, inputs, _) in models.items():
            (workdir / "models" / name).mkdir()
            os.link(model, workdir / "models" / name / "model.onnx")  # same file system: no 500 MB copies
            os.link(inputs, workdir / "models" / name / "inputs.npz")
            seen = visible / "models" / name
            cases.append({"name": name, "model": str(seen / "model.onnx"), "inputs": str(seen / "inputs.npz"), **case})
        (workdir / "plan.json").write_text(json.dumps({**plan, "models": cases}), encoding="utf-8")
        shutil.copyfile(Path(__file__).with_name("latency.py"), workdir / "latency.py")
        smoke = Path(__file__).parents[1] / "smoke"
        for helper in ("runner.py", "proof.py"):  # latency.py times with the smoke runner's measure_latency
            shutil.copyfile(smoke / helper, workdir / helper)
        with (self.out / f"latency-{who}.log").open("a", encoding="utf-8") as log_file:
            code = env.run_in_env(
                choice, info, workdir, self.cache, self.toolchain, log_file, script="latency.py plan.json result.json"
            )
        if code != 0 or not (workdir / "result.json").is_file():
            raise CheckError(f"the latency run failed (exit {code})", where=str(self.out / f"latency-{who}.log"))
        result: dict[str, Any] = json.loads((workdir / "result.json").read_text(encoding="utf-8"))
        result["environment"] = choice.reason
        return result

    def measure_models(self, rounds: int = 8, runs: int = 20, warmup: int = 3) -> dict[str, Any]:
        """Real-size models (smoke/realsize.py), ours vs PyPI's wheel, at 1 and 2 threads: the median
        of each round's median, rounds alternating which wheel goes first; outputs compared. Each
        round's own ratio is kept too: a 1-2% difference is within what rounds on a 2-core machine
        spread over, and the spread says so."""
        models = self.real_models()
        wheels = {"ours": self.our_wheel(), "official": self.official_wheel()}
        plan = {"threads": list(THREADS), "runs": runs, "warmup": warmup}
        medians: dict[str, dict[str, dict[str, list[float]]]] = {"ours": {}, "official": {}}
        environments = {}
        for r in range(rounds):
            for who in ("official", "ours") if r % 2 == 0 else ("ours", "official"):
                result = self.latency_run(who, wheels[who], models, plan)
                environments[who] = result["environment"]
                for name, by_threads in result["models"].items():
                    for threads, ms in by_threads.items():
                        medians[who].setdefault(name, {}).setdefault(threads, []).append(ms)
        table: dict[str, Any] = {}
        for name in models:
            row: dict[str, Any] = {"summary": models[name][2]}
            for threads in map(str, THREADS):
                by_round = medians["ours"][name][threads], medians["official"][name][threads]
                ours, theirs = statistics.median(by_round[0]), statistics.median(by_round[1])
                row[threads] = {
                    "ours_ms": ours,
                    "official_ms": theirs,
                    "ratio": ours / theirs,
                    "round_ratios": [o / t for o, t in zip(*by_round, strict=True)],
                }
            row["max_output_diff"] = max_output_diff(
                self.work / "latency" / "ours" / "outputs" / f"{name}.npz",
                self.work / "latency" / "official" / "outputs" / f"{name}.npz",
            )
            table[name] = row
        return {
            "rounds": rounds,
            "runs": runs,
            "warmup": warmup,
            "threads": list(THREADS),
            "environments": environments,
            "wheels": {who: w.name for who, w in wheels.items()},
            "models": table,
        }

    def measure_slim(self) -> dict[str, Any]:
        """The stripped arm64 library of both slim cuts as built (warm trees rebuild nothing), and
        the C smoke program's result under qemu: the size goal counts only for a library that runs."""
        figures = {}
        for recipe in (SLIM_COMPARED_WITH, SLIM_RECIPE):
            _, manifest = self.build_recipe(recipe, self.work / "slim-dist", "slim-build.log")
            library = manifest["size"]["shared_library"]
            (case,) = manifest["c_smoke"]["models"]
            figures[recipe] = {
                "stripped_bytes": library["stripped_bytes"],
                "sections": library.get("sections", []),
                "c_smoke": {"model": case["model"], "max_abs_err": case["max_abs_err"]},
            }
        return figures

    def measure_web(self) -> dict[str, Any]:
        """The slim WebAssembly module as built (a warm tree rebuilds nothing) against the stock
        onnxruntime-web's same variant, and its run in node and Chromium (web smoke)."""
        _, manifest = self.build_recipe(WEB_RECIPE, self.work / "web-dist", "web-build.log")
        return {"sizes": manifest["web_package"], "smoke": manifest["web_smoke"]}

    def measure_smoke(self) -> dict[str, Any]:
        from ..smoke.run_suite import smoke_wheel

        times = {}
        for who, wheel in (("official", self.official_wheel()), ("ours", self.our_wheel())):
            start = time.monotonic()
            report, _ = smoke_wheel(wheel, self.work / "smoke-full" / who, self.cache, self.toolchain)
            times[who] = {"seconds": time.monotonic() - start, "passed": report["passed"]}
        return times

    def measure_ep(self) -> dict[str, Any]:
        return ep.measure(self)


def run_bench(project: Path, recipe: str, jobs: int, only: list[str]) -> Path:
    bench = Bench(project=project, recipe=recipe, jobs=jobs)
    wanted = only or list(PARTS)
    if "build" in wanted:
        bench.step("build", bench.measure_build)
    elif "rebuild" in wanted:  # the build part measures the rebuilds too

        def rebuild() -> dict[str, Any]:
            return {**bench.results.get("build", {}), **bench.measure_rebuild()}

        bench.step("build", rebuild)
    # A CUDA recipe's compile cost, a CPU EP's latency (ep.py): left out of a full run of another.
    measured = {"cuda": bench.plan.builds_cuda, "ep": ep.cpu_eps([p.provider for p in bench.plan.providers])}
    for part in PARTS[2:]:  # after build and rebuild, each by its measure_<part> method
        if part in wanted and (only or measured.get(part, True)):
            bench.step(part, getattr(bench, f"measure_{part}"))
    return bench.out / "results.md"
