"""The Python binding for other CPython versions, against an ONNX Runtime core compiled once.

The binding (``onnxruntime_pybind11_state.so``) is the only part of ORT that depends on the
Python it is built for: a dozen sources compiled with that Python's and numpy's headers, linked
with the core's static archives. So instead of a second configure and build tree per version, the
exact compile and link commands ninja would run for the binding are taken from the main build
(``ninja -t commands``), the header directories of the root's Python are swapped for the other
version's, and written as a small ninja file per version whose outputs go to a directory of its
own. A top file includes CMake's ``build.ninja`` and every version's file, so one ninja run
builds the core and every binding (no second run waiting for the core's last link).

Each extra version compiles its sources as ONE unit (a file that includes them all, same flags):
pybind11's templates and ORT's inline code are then instantiated and optimized once, not in each
of a dozen units (measured: 38.5 cmd-s instead of 122.5 per version). The main build's own
binding stays CMake's per-file build.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from . import ninjalog
from .errors import BuildError

TARGET = "onnxruntime_pybind11_state"
MODULE = f"{TARGET}.so"
OBJECT_DIR = f"CMakeFiles/{TARGET}.dir/"
# CMake's Ninja generator: the phony that orders a target's compiles after what they include is
# generated (onnx's protobuf headers): the extra versions' compiles wait for the same things.
ORDER_DEPS = f"cmake_object_order_depends_target_{TARGET}"
# The top ninja file in the build tree: CMake's graph and every version's binding.
TOP = "ortdist-pythons.ninja"
# The one unit each extra version compiles: it includes every binding source, FIRST_UNIT first.
UNITY = f"{TARGET}_unity.cc"
# The source that defines numpy's C API table (PY_ARRAY_UNIQUE_SYMBOL without NO_IMPORT_ARRAY): it
# must include numpy's headers first in the unit, the others only declare the table.
FIRST_UNIT = "onnxruntime_pybind_state.cc"


def runtime_names(version: str) -> tuple[str, str]:
    """libonnxruntime's DT_SONAME and the file name the build and the package give it (PyPI's),
    for ORT ``version``: the binding links the first (patch 0017), the wheel step makes it name the second."""
    return f"libonnxruntime.so.{version.split('.')[0]}", f"libonnxruntime.so.{version}"


# What CMake's FindPython recorded in CMakeCache.txt for the main build.
_CACHE_ENTRY = re.compile(r"^(?P<key>_Python_INCLUDE_DIR|_Python_NumPy_INCLUDE_DIR):INTERNAL=(?P<value>.*)$", re.M)


@dataclass(frozen=True, kw_only=True)
class Headers:
    """A Python's header directories as the compiler sees them."""

    python: str
    numpy: str
    # More directories the Python's headers include from (Debian's multiarch pyconfig.h lives in
    # <prefix>/include/<triplet>/python3.X), searched after ``python``.
    extra: tuple[str, ...] = ()


def main_build_headers(cmake_cache: str) -> Headers:
    found = {m["key"]: m["value"].strip() for m in _CACHE_ENTRY.finditer(cmake_cache)}
    try:
        return Headers(python=found["_Python_INCLUDE_DIR"], numpy=found["_Python_NumPy_INCLUDE_DIR"])
    except KeyError as exc:
        raise BuildError(
            f"CMakeCache.txt has no {exc.args[0]}: the main build did not configure the Python binding",
            fix="the recipe needs [wheel] enabled = true",
        ) from exc


def _ninja_escape(text: str) -> str:
    return text.replace("$", "$$")


@dataclass(frozen=True)
class Graph:
    """One extra version's build: its ninja file and, when the sources compile as one unit, that
    unit's text (written as ``UNITY`` in the version's directory)."""

    ninja: str
    unity: str | None


@dataclass(frozen=True)
class _Compile:
    argv: str  # retargeted: the other version's headers, objects in its directory
    source: str
    output: str  # retargeted


def _retarget(command: str, main: Headers, other: Headers, out_dir: str) -> _Compile:
    for old in (main.python, main.numpy):
        if old not in command.split() and f"-I{old}" not in command.split():
            raise BuildError(
                f"a compile command of {TARGET} does not name {old}: cannot retarget it",
                fix="report this: ORT's CMake passes the Python headers differently than expected",
            )
    python = other.python + "".join(f" -isystem {d}" for d in other.extra)
    argv = command.replace(main.python, python).replace(main.numpy, other.numpy)
    argv = argv.replace(OBJECT_DIR, f"{out_dir}/{OBJECT_DIR}")
    tokens = shlex.split(argv)
    return _Compile(argv=argv, source=tokens[tokens.index("-c") + 1], output=tokens[tokens.index("-o") + 1])


def _one_unit(compiles: list[_Compile], out_dir: str) -> tuple[_Compile, str] | None:
    """The compile of one unit including every source (FIRST_UNIT first) and that unit's text;
    None where the sources do not share one set of flags or FIRST_UNIT is not among them."""
    first = next((c for c in compiles if c.source.endswith(f"/{FIRST_UNIT}")), None)
    if first is None or len({c.argv.replace(c.output, "@").replace(c.source, "@") for c in compiles}) != 1:
        return None
    source, output = f"{out_dir}/{UNITY}", f"{out_dir}/{OBJECT_DIR}{UNITY}.o"
    argv = first.argv.replace(first.output, output).replace(first.source, source)
    ordered = [first, *(c for c in compiles if c is not first)]
    text = "// ortdist: every binding source in one unit (see ortdist.binding)\n" + "".join(
        f'#include "{c.source}"\n' for c in ordered
    )
    return _Compile(argv=argv, source=source, output=output), text


def binding_ninja(ninja_commands: str, main: Headers, other: Headers, out_dir: str) -> Graph:
    """A ninja file that compiles and links the binding against ``other``'s headers into
    ``out_dir``, from the output of ``ninja -t commands onnxruntime_pybind11_state`` in the main
    build tree: the same commands, so the same flags, the sources as one unit (``Graph.unity``)
    where they share their flags. It is read as part of the main build's graph (``top_ninja``):
    compiles wait for the main binding's generated headers, the link for the main binding's
    (which needs every archive both link)."""
    commands: list[str] = []
    link = ""
    for line in ninja_commands.splitlines():
        if f" -o {OBJECT_DIR}" in line and " -c " in line:
            commands.append(line)
        for part in line.split(" && "):  # the link rule runs CMake's post-build copies after it
            if f" -o {MODULE} " in part:
                link = part.strip()
    if not commands or not link:
        raise BuildError(
            f"ninja lists no compile or link command for {TARGET}",
            fix="the main build tree must have the Python binding (rebuild the recipe)",
        )
    compiles = [_retarget(command, main, other, out_dir) for command in commands]
    lines = [
        f"# ortdist: {TARGET} for another CPython, from the main build's own commands",
        "rule run",
        "  command = $cmd",  # ninja runs it in the build tree, as CMake's own
        "  description = $desc",
        # A compile that writes its header dependencies (-MF, as CMake's do): a changed header
        # recompiles this version's object too.
        "rule compile",
        "  command = $cmd",
        "  description = $desc",
        "  depfile = $out.d",
        "  deps = gcc",
        "",
    ]
    link = link.replace(OBJECT_DIR, f"{out_dir}/{OBJECT_DIR}").replace(f" -o {MODULE} ", f" -o {out_dir}/{MODULE} ")
    unit = _one_unit(compiles, out_dir)
    if unit is not None:
        one, _ = unit
        for index, compile_ in enumerate(compiles):  # the unit's object where the first one was
            link = f"{link} ".replace(f" {compile_.output} ", f" {one.output} " if index == 0 else " ", 1).strip()
        builds = [(one, " | " + " ".join(c.source for c in compiles))]
    else:
        builds = [(c, "") for c in compiles]
    for compile_, inputs in builds:
        rule = "compile" if f"-MF {compile_.output}.d" in compile_.argv else "run"
        lines += [
            f"build {compile_.output}: {rule} {compile_.source}{inputs} || {ORDER_DEPS}",
            f"  cmd = {_ninja_escape(compile_.argv)}",
            f"  desc = {compile_.output}",
        ]
    objects = " ".join(compile_.output for compile_, _ in builds)
    lines += [
        f"build {out_dir}/{MODULE}: run {objects} | {MODULE}",
        f"  cmd = {_ninja_escape(link)}",
        f"  desc = {MODULE}",
        "",
    ]
    return Graph(ninja="\n".join(lines), unity=None if unit is None else unit[1])


def top_ninja(files: list[str], modules: list[str]) -> str:
    """CMake's graph and every version's own file (each keeps its rules in its own scope), the
    versions' modules built by default beside CMake's ``all``."""
    return (
        "# ortdist: ONNX Runtime and the binding of every extra CPython, in one ninja run\n"
        "include build.ninja\n" + "".join(f"subninja {f}\n" for f in files) + f"default {' '.join(modules)}\n"
    )


def command_seconds(ninja_log: str, out_dirs: dict[str, str]) -> dict[str, float]:
    """Per version, the seconds its commands ran (``.ninja_log``): compile time, which overlaps
    between versions as they share the cores. A version with no command counts 0."""

    def version_of(output: str) -> str | None:
        return next((v for v, d in out_dirs.items() if output.startswith(d + "/")), None)

    return {version: 0.0 for version in out_dirs} | ninjalog.seconds_by(ninja_log, version_of)
