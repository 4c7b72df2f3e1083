"""What a CUDA recipe's compile costs, per GPU architecture (`nox -s bench -- --recipe cuda13-linux
--only cuda`).

A cold multi-architecture build takes hours on 2 cores and is resumed across sittings, so its cost
is read from what the tree recorded: the ledger of compile seconds over every run since the tree
was created (build step), and ninja's log, whose last run of each output is its cold compile. How
that CUDA share splits across architectures is measured: a sample of the kernels, each compiled
again without the compiler cache once for every architecture alone and once for all of them. With
t_i for architecture i alone and t_all for all N, the host side (preprocessing, cudafe, the host
compile) is H = (sum t_i - t_all) / (N - 1), and architecture i's device compile is t_i - H.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import ninjalog, run
from ..errors import BuildError
from ..paths import IN_ROOT_BUILD, Cache
from ..pipeline import Layout, Roots
from ..plan import BuildPlan
from ..toolchains import Toolchain

# CMake's nvcc flag for each entry of CMAKE_CUDA_ARCHITECTURES, and nvcc's other spellings.
_ARCH_FLAGS = re.compile(r"^(--generate-code=|-gencode=|--gpu-architecture=|-arch=)")
_LAUNCHERS = ("ccache", "sccache", "distcc")
SCRATCH = "/tmp/ortdist-bench-cuda"  # where the sample compiles write, inside the root


def gencode(entry: str) -> str:
    """The nvcc flag CMake writes for one CMAKE_CUDA_ARCHITECTURES entry ("90", "89-real", ...)."""
    arch, _, only = entry.partition("-")
    codes = {"": f"[compute_{arch},sm_{arch}]", "real": f"[sm_{arch}]", "virtual": f"[compute_{arch}]"}[only]
    return f"--generate-code=arch=compute_{arch},code={codes}"


def sample(durations: Mapping[str, float], count: int) -> list[str]:
    """``count`` CUDA kernels spread over the range of their compile times (the slowest, the
    fastest and evenly between), so the architectures' shares are not one file's."""
    kernels = sorted((name for name in durations if name.endswith(".cu.o")), key=lambda n: (-durations[n], n))
    if len(kernels) <= count:
        return kernels
    picks = {round(i * (len(kernels) - 1) / max(count - 1, 1)) for i in range(count)}
    return [kernels[i] for i in sorted(picks)]


def variant(command: str, entries: Sequence[str], label: str) -> str:
    """The kernel's compile command for ``entries`` alone: the compiler cache left out (a hit
    measures nothing), every architecture flag replaced, the object and depfile written to scratch."""
    argv = shlex.split(command)
    if argv and argv[0].rsplit("/", 1)[-1] in _LAUNCHERS:
        argv = argv[1:]
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if _ARCH_FLAGS.match(arg):
            continue
        if arg in ("-o", "-MF") and i + 1 < len(argv):
            out += [arg, f"{SCRATCH}/{label}{'.o' if arg == '-o' else '.d'}"]
            skip = True
            continue
        out.append(arg)
    compiler, rest = out[0], out[1:]
    return shlex.join([compiler, *(gencode(e) for e in entries), *rest])


def timing_script(commands: Mapping[str, str], entries: Sequence[str]) -> tuple[str, list[str]]:
    """A shell script that compiles each sampled kernel for each entry alone, then for all of them,
    printing `ORTDIST-TIME <label> <start> <end>` after each; and the labels in order."""
    lines = ["set -e", f"mkdir -p {SCRATCH}", "now() { date +%s.%N; }"]
    labels = []
    for number, (_, command) in enumerate(sorted(commands.items())):
        for key, chosen in [*((e, [e]) for e in entries), ("all", list(entries))]:
            label = f"k{number}-{key}"
            labels.append(label)
            lines.append(
                f's=$(now); {variant(command, chosen, label)} >/dev/null; echo "ORTDIST-TIME {label} $s $(now)"'
            )
    lines.append(f"rm -rf {SCRATCH}")
    return "\n".join(lines) + "\n", labels


def parse_times(output: str) -> dict[str, float]:
    found = {}
    for line in output.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[0] == "ORTDIST-TIME":
            found[fields[1]] = round(float(fields[3]) - float(fields[2]), 2)
    return found


def shares(times: Mapping[str, float], kernels: int, entries: Sequence[str]) -> dict[str, Any]:
    """Each architecture's share of the device compile and the host side's share of a kernel's
    compile, from the sample's times (see the module's docstring)."""
    device = dict.fromkeys(entries, 0.0)
    host = every = 0.0
    for k in range(kernels):
        alone = {e: times[f"k{k}-{e}"] for e in entries}
        together = times[f"k{k}-all"]
        own_host = (sum(alone.values()) - together) / (len(entries) - 1) if len(entries) > 1 else 0.0
        own_host = min(max(own_host, 0.0), min(alone.values()))
        host += own_host
        every += together
        for e in entries:
            device[e] += alone[e] - own_host
    total_device = sum(device.values()) or 1.0
    return {
        "host_share": round(host / every, 3) if every else 0.0,
        "architecture_shares": {e: round(seconds / total_device, 3) for e, seconds in device.items()},
    }


def whole_tree(cuda_seconds: float, found: Mapping[str, Any]) -> dict[str, float]:
    """The tree's CUDA compile seconds split as the sample split: host side and each architecture."""
    device = cuda_seconds * (1 - found["host_share"])
    split = {e: round(device * share, 1) for e, share in found["architecture_shares"].items()}
    return {"host_side": round(cuda_seconds - device, 1), **split}


def cold_compile(ninja_log: str) -> dict[str, float]:
    """Command seconds of the tree's last run of each output, by group (cuda_kernels, onnxruntime,
    dependencies): the cold compile, when every output was last built from an empty cache."""
    return ninjalog.seconds_by(ninja_log, ninjalog.compile_group)


# The compile of one kernel for one architecture, for every sampled kernel and architecture: a
# few minutes on 2 cores for the release lists' seven or eight entries.
SAMPLE = 3


def measure(
    plan: BuildPlan,
    toolchain: Toolchain,
    cache: Cache,
    layout: Layout,
    rebuild: Callable[..., tuple[float, dict[str, float]]],
) -> dict[str, Any]:
    """The recipe's compile cost: the tree's cold compile by group and over every sitting, each
    architecture's share measured on a sample of kernels, then a warm rebuild (fresh tree, warm
    compiler cache) and a no-op, each through ``rebuild(*build_options)`` -> (seconds, steps)."""
    if not plan.builds_cuda:
        raise BuildError(
            f"recipe {plan.recipe.name} compiles no CUDA code",
            where="--recipe",
            fix="measure a CUDA recipe: nox -s bench -- --recipe cuda13-linux --only cuda",
        )
    build = layout.build.host
    ninja_log, ledger = build / ".ninja_log", build / ".ortdist-compile-seconds"
    if not ninja_log.is_file():
        raise BuildError(
            f"no build tree of {plan.recipe.name} to measure",
            where=str(build),
            fix=f"build it first (hours on 2 cores; it resumes): ortdist build {plan.recipe.name} --keep-going",
        )
    text = ninja_log.read_text(encoding="utf-8", errors="replace")
    durations = {out: (end - start) / 1000 for out, (start, end) in ninjalog.last_runs(text).items()}
    cold = cold_compile(text)
    kernels = sample(durations, SAMPLE)
    entries = list(plan.recipe.cuda.architectures)
    root = toolchain.ensure_build_root(cache, sys.stderr)
    binds = layout.binds(Roots(build=root))
    env = plan.compiler_cache.env(os.environ)

    def in_root(script: str) -> str:
        argv = toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds, env=env)
        return run.capture(argv, error=BuildError, what="the CUDA compile sample").stdout

    listed = in_root(f"ninja -C {IN_ROOT_BUILD} -t commands -s {shlex.join(kernels)}").strip().splitlines()
    commands = dict(zip(kernels, listed[-len(kernels) :], strict=True))
    script, _ = timing_script(commands, entries)
    found = shares(parse_times(in_root(f"cd {IN_ROOT_BUILD} && {script}")), len(kernels), entries)
    figures: dict[str, Any] = {
        "recipe": plan.recipe.name,
        "architectures": entries,
        "compile_command_s": cold,
        "compile_over_every_sitting_s": float(ledger.read_text().strip()) if ledger.is_file() else None,
        "kernels": sum(1 for out in durations if out.endswith(".cu.o")),
        "sample": kernels,
        **found,
        "cuda_kernels_by_architecture_s": whole_tree(cold.get("cuda_kernels", 0.0), found),
    }
    figures["noop_s"], figures["noop_steps"] = rebuild()
    figures["warm_s"], figures["warm_steps"] = rebuild("--fresh")
    return figures
