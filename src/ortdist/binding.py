"""The Python binding for other CPython versions, against an ONNX Runtime core compiled once.

The binding (``onnxruntime_pybind11_state.so``) is the only part of ORT that depends on the
Python it is built for: a dozen sources compiled with that Python's and numpy's headers, linked
with the core's static archives. So instead of a second configure and build tree per version, the
exact compile and link commands ninja would run for the binding are taken from the main build
(``ninja -t commands``), the header directories of the root's Python are swapped for the other
version's, and written as a small ninja file per version whose outputs go to a directory of its
own. A top file includes CMake's ``build.ninja`` and every version's file, so one ninja run
builds the core and every binding (no second run waiting for the core's last link).
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


def binding_ninja(ninja_commands: str, main: Headers, other: Headers, out_dir: str) -> str:
    """A ninja file that compiles and links the binding against ``other``'s headers into
    ``out_dir``, from the output of ``ninja -t commands onnxruntime_pybind11_state`` in the main
    build tree: the same commands, so the same flags. It is read as part of the main
    build's graph (``top_ninja``): compiles wait for the main binding's generated headers, the
    link for the main binding's (which needs every archive both link)."""
    compiles: list[str] = []
    link = ""
    for line in ninja_commands.splitlines():
        if f" -o {OBJECT_DIR}" in line and " -c " in line:
            compiles.append(line)
        for part in line.split(" && "):  # the link rule runs CMake's post-build copies after it
            if f" -o {MODULE} " in part:
                link = part.strip()
    if not compiles or not link:
        raise BuildError(
            f"ninja lists no compile or link command for {TARGET}",
            fix="the main build tree must have the Python binding (rebuild the recipe)",
        )
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
    objects: list[str] = []
    for command in compiles:
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
        output, source = tokens[tokens.index("-o") + 1], tokens[tokens.index("-c") + 1]
        objects.append(output)
        rule = "compile" if f"-MF {output}.d" in argv else "run"
        lines += [
            f"build {output}: {rule} {source} || {ORDER_DEPS}",
            f"  cmd = {_ninja_escape(argv)}",
            f"  desc = {output}",
        ]
    link = link.replace(OBJECT_DIR, f"{out_dir}/{OBJECT_DIR}").replace(f" -o {MODULE} ", f" -o {out_dir}/{MODULE} ")
    lines += [
        f"build {out_dir}/{MODULE}: run {' '.join(objects)} | {MODULE}",
        f"  cmd = {_ninja_escape(link)}",
        f"  desc = {MODULE}",
        "",
    ]
    return "\n".join(lines)


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
