"""The EP part (`nox -s bench -- --recipe openvino-linux --only ep`): the real-size models on the
recipe's EP against our own CPU EP and against PyPI's package of the same EP (onnxruntime-openvino
for OpenVINO), in one run: same machine, same CPython, same thread counts, rounds alternating the
order. Only EPs that run on this machine's CPU (no smoke [providers] device) are measured here; a
GPU EP's latency is the device proof's.

PyPI's package runs where the smoke suite would run it; onnxruntime-openvino 1.21.0 asks for an
executable stack, which glibc 2.41 refuses, so the CPython chosen is one the host runs (Debian 12,
glibc 2.36) and PyPI has the package for: both wheels then run on the host.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Protocol

from .. import registry, run
from ..errors import CheckError
from ..fsutil import sha256_file
from ..plan import BuildPlan
from ..wheelhouse import pip_download_argv
from .results import max_output_diff

CPU = "CPUExecutionProvider"
# Who runs what: ours on [EP, CPU] as a user calls it, ours on the CPU EP alone, PyPI's on [EP, CPU].
WHO = ("pypi-ep", "ours-ep", "ours-cpu")


class Bench(Protocol):
    """What this part uses of the benchmark (run.Bench), which imports it."""

    recipe: str
    work: Path
    plan: BuildPlan

    def our_wheel(self) -> Path: ...

    def real_models(self) -> dict[str, tuple[Path, Path, str]]: ...

    def latency_run(
        self, who: str, wheel: Path, models: dict[str, tuple[Path, Path, str]], plan: dict[str, Any], **case: Any
    ) -> dict[str, Any]: ...


def cpu_eps(provider_names: list[str]) -> list[str]:
    """The recipe's EPs besides the CPU EP that need no device (they run on this CPU)."""
    from ..smoke.suite import expectations

    table = expectations()
    return [p for p in provider_names if p != CPU and p in table and not table[p].device]


def choose_python(pythons: list[str], pinned: set[str], distribution: str, version: str, host: Any) -> str | None:
    """The first of the recipe's CPythons PyPI has ``distribution`` for and the host runs."""
    for python in pythons:
        tag = f"cp{python.replace('.', '')}"
        if any(f.startswith(f"{distribution}-{version}-{tag}-") for f in pinned) and host(python):
            return python
    return None


def measure(bench: Bench, rounds: int = 4, runs: int = 10, warmup: int = 3) -> dict[str, Any]:
    from ..smoke import env

    out = bench.our_wheel().parent  # the build part's, else dist/<recipe>/ (built if missing)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    eps = cpu_eps(manifest["provider_names"])
    if not eps:
        raise CheckError(
            f"{bench.recipe} has no EP that runs on this CPU to measure",
            fix="run the ep part for an EP recipe such as openvino-linux (a GPU EP is measured by the device proof)",
        )
    provider = eps[0]
    wheels = {a["python"]: out / a["path"] for a in manifest["artifacts"] if a["kind"] == "wheel"}
    # The distribution as wheel file names spell it (onnxruntime_openvino).
    distribution, version = bench.plan.distribution.replace("-", "_"), bench.plan.version.version
    pinned = {w.file: w for w in registry.pypi_wheels()}
    python = choose_python(list(wheels), set(pinned), distribution, version, env.host_python)
    if python is None:
        raise CheckError(
            f"no CPython of {sorted(wheels)} that both this host runs and PyPI has {distribution} {version} for",
            fix="install one of those CPythons on the host (pyenv: set PYENV_VERSION to include it)",
        )
    house = bench.work / "pypi-ep"
    house.mkdir(parents=True, exist_ok=True)
    argv = pip_download_argv(house, python, ["--no-deps", f"{distribution.replace('_', '-')}=={version}"])
    run.capture(argv, error=CheckError, what=f"downloading PyPI's {distribution} for CPython {python}")
    (theirs,) = sorted(house.glob(f"{distribution}-{version}-cp{python.replace('.', '')}-*.whl"))
    if theirs.name not in pinned or sha256_file(theirs) != pinned[theirs.name].sha256:
        raise CheckError(f"{theirs.name} is not the file data/pypi_wheels.toml pins", where=str(theirs))
    runners = {"pypi-ep": (theirs, [provider, CPU]), "ours-ep": (wheels[python], [provider, CPU])}
    runners["ours-cpu"] = (wheels[python], [CPU])
    # An EP with its own thread pool gets its own thread-count option (providers.toml threads_option).
    threads_option = {ep.provider: ep.threads_option for ep in bench.plan.providers if ep.threads_option}
    models = bench.real_models()
    plan = {"threads": [1, 2], "runs": runs, "warmup": warmup, "record_errors": True}
    medians: dict[str, dict[str, dict[str, list[float]]]] = {who: {} for who in WHO}
    sessions: dict[str, dict[str, list[str]]] = {}
    errors: dict[str, dict[str, str]] = {}
    for r in range(rounds):
        for who in WHO if r % 2 == 0 else tuple(reversed(WHO)):
            wheel, providers = runners[who]
            options = {p: threads_option[p] for p in providers if p in threads_option}
            result = bench.latency_run(who, wheel, models, plan, providers=providers, threads_option=options)
            sessions[who], errors[who] = result["session_providers"], result["errors"]
            for name, by_threads in result["models"].items():
                for threads, ms in by_threads.items():
                    medians[who].setdefault(name, {}).setdefault(threads, []).append(ms)
    return {
        "recipe": bench.recipe,
        "provider": provider,
        "python": python,
        "rounds": rounds,
        "runs": runs,
        "warmup": warmup,
        "wheels": {"ours": wheels[python].name, "pypi": theirs.name},
        "bytes": {"ours": wheels[python].stat().st_size, "pypi": theirs.stat().st_size},
        "models": table(bench.work, models, medians, sessions, errors),
    }


def table(
    work: Path,
    models: dict[str, tuple[Path, Path, str]],
    medians: dict[str, dict[str, dict[str, list[float]]]],
    sessions: dict[str, dict[str, list[str]]],
    errors: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """Per model and thread count: the median of the rounds' medians of each runner, the EP's
    speed-up over our CPU EP and its ratio to PyPI's; which EPs each session registered; errors;
    the largest output differences (ours on the EP against ours on the CPU EP and PyPI's)."""
    out: dict[str, Any] = {}
    outputs = work / "latency"
    for name in models:
        row: dict[str, Any] = {
            "summary": models[name][2],
            "errors": {w: errors[w][name] for w in WHO if name in errors[w]},
        }
        row["sessions"] = {who: sessions[who].get(name, []) for who in WHO}
        for threads in ("1", "2"):
            ms = {who: statistics.median(medians[who][name][threads]) for who in WHO if name in medians[who]}
            cell: dict[str, Any] = {f"{who}_ms": value for who, value in ms.items()}
            if "ours-ep" in ms and "ours-cpu" in ms:
                cell["ep_vs_cpu"] = ms["ours-ep"] / ms["ours-cpu"]
            if "ours-ep" in ms and "pypi-ep" in ms:
                cell["ours_vs_pypi"] = ms["ours-ep"] / ms["pypi-ep"]
            row[threads] = cell
        mine = outputs / "ours-ep" / "outputs" / f"{name}.npz"
        for other in ("ours-cpu", "pypi-ep"):
            theirs = outputs / other / "outputs" / f"{name}.npz"
            if mine.is_file() and theirs.is_file():
                row[f"max_diff_vs_{other}"] = max_output_diff(mine, theirs)
        out[name] = row
    return out
