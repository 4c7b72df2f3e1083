"""Reading ninja's ``.ninja_log``: what each output's last compile cost; and its console output."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

# What ninja prints, and prints only, when every output is up to date: it ran no command at all.
NO_WORK = "ninja: no work to do."


def no_work(output: Iterable[str]) -> bool:
    """Whether ninja's console output says it had nothing to do."""
    return any(line.strip() == NO_WORK for line in output)


# Outputs CMake's generator makes ninja run on every build (the CONFIGURE_DEPENDS glob check): a
# fresh log line for them says nothing about what was built.
EVERY_RUN = ("cmake.verify_globs",)


def built_state(ninja_log: str) -> str:
    """A digest of each output's last build as the log records it (mtime and command hash), the
    outputs ninja runs every time left out: equal while nothing was rebuilt, whatever ninja
    appended or recompacted."""
    last: dict[str, str] = {}
    for line in ninja_log.splitlines():
        fields = line.split("\t")
        if len(fields) >= 5 and fields[0].isdigit() and not fields[3].endswith(EVERY_RUN):
            last[fields[3]] = f"{fields[2]} {fields[4]}"
    return hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(last.items())).encode()).hexdigest()


def last_runs(ninja_log: str) -> dict[str, tuple[int, int]]:
    """Output -> (start, end) in ms of its last run: a command run again (an incremental rebuild)
    counts with its last run only."""
    last: dict[str, tuple[int, int]] = {}
    for line in ninja_log.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4 and fields[0].isdigit() and fields[1].isdigit():
            last[fields[3]] = (int(fields[0]), int(fields[1]))
    return last


# Names an output's group of a build's outputs (None: leave it out).
Group = Callable[[str], str | None]


def seconds_by(ninja_log: str, group: Group) -> dict[str, float]:
    """Command seconds per group of outputs (``group`` names an output's group, None skips it)."""
    out: dict[str, float] = {}
    for output, (start, end) in last_runs(ninja_log).items():
        name = group(output)
        if name is not None:
            out[name] = out.get(name, 0.0) + (end - start) / 1000
    return {name: round(seconds, 1) for name, seconds in out.items()}


def compile_group(output: str) -> str:
    """ORT's CMake builds the dependencies it fetches (or is handed) under ``_deps/``; its CUDA
    kernels (nvcc, every architecture of the recipe) apart from the rest of ORT."""
    if output.startswith("_deps/"):
        return "dependencies"
    return "cuda_kernels" if output.endswith(".cu.o") else "onnxruntime"
