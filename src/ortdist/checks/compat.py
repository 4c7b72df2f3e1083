"""The compat checks' commands and verdicts (pure): what runs in an older Debian root, and what is
wrong with what it printed. The compat step (pipeline/steps/compat.py) creates the roots and runs
these; a root is a toolchain's ``[compat.<name>]`` table.

Check "c": the root's own gcc compiles ortdist's C program against the shipped C library (its
``include/`` and ``lib/libonnxruntime.so``, bound read-only at /ortdist/library), and ``ldd`` shows
libonnxruntime coming from there and the C library from the root. Check "wheel": the root's own
CPython installs the build's wheel for it, offline, and runs the smoke suite's reference models.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..paths import IN_ROOT

IN_ROOT_COMPAT = IN_ROOT / "compat"  # the check's own files: program, cases, results (read-write)
IN_ROOT_LIBRARY = IN_ROOT / "library"  # the shipped C library archive, unpacked (read-only)
IN_ROOT_COMPAT_WHEEL = IN_ROOT / "wheel"  # the directory of the wheel under test (read-only)
IN_ROOT_COMPAT_VENV = IN_ROOT / "venv"

# Every command runs without a network (a network namespace of its own, with nothing in it): what
# the check proves needs nothing from outside, as on an air-gapped machine.
OFFLINE = ("unshare", "--net", "--")
# How the facts of a root are printed, one per line: a marker, then the value.
FACT = "ortdist-fact"
# Printed by the network probe when its connection succeeded: the check was not offline.
REACHED = "ortdist-network-reached"

_LDD_ADDRESS = re.compile(r"\s*\(0x[0-9a-f]+\)$")
_LDD_RESOLVED = re.compile(r"^(?P<soname>\S+) => (?P<path>\S+)$")


def offline(script: str) -> tuple[str, ...]:
    return (*OFFLINE, "/bin/sh", "-c", script)


def network_probe(address: str, port: int) -> str:
    """A TCP connection to ``address`` (the Debian mirror the roots came from, which the build host
    reaches), with bash's /dev/tcp (minbase roots have bash, not curl); prints REACHED if it connects."""
    return f"timeout 10 bash -c 'exec 3<>/dev/tcp/{address}/{port}' 2>&1 && echo {REACHED} || true"


def facts_script(facts: dict[str, str]) -> str:
    """A shell script printing ``<FACT> <name> <first line of the command's output>`` per fact."""
    return " && ".join(f'echo "{FACT} {name} $({command} 2>&1 | head -n 1)"' for name, command in facts.items())


def parse_facts(stdout: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        marker, _, rest = line.partition(" ")
        if marker == FACT:
            name, _, value = rest.partition(" ")
            out[name] = value.strip()
    return out


def glibc_version(getconf: str) -> str:
    """'glibc 2.31' (``getconf GNU_LIBC_VERSION``) -> '2.31'; '' when it says something else."""
    name, _, version = getconf.strip().partition(" ")
    return version if name == "glibc" and re.fullmatch(r"\d+\.\d+", version) else ""


def c_build_script(program: str, binary: str, library: Path = IN_ROOT_LIBRARY) -> str:
    """Compile and link the C program with the root's own gcc against the shipped library only:
    its headers and libonnxruntime.so, found again at run time through the RUNPATH (no
    LD_LIBRARY_PATH, so ``ldd`` shows what a user's program would load)."""
    lib = library / "lib"
    return shlex.join(
        [
            "gcc",
            "-O2",
            "-o",
            binary,
            program,
            f"-I{library / 'include'}",
            f"-L{lib}",
            "-lonnxruntime",
            f"-Wl,-rpath,{lib}",
        ]
    )


def ldd_lines(stdout: str) -> list[str]:
    """``ldd`` output, one library a line, without load addresses (they change every run)."""
    return [_LDD_ADDRESS.sub("", line.strip()) for line in stdout.splitlines() if line.strip()]


def ldd_problems(lines: Sequence[str], library: Path = IN_ROOT_LIBRARY) -> list[str]:
    """What is wrong with the program's libraries (empty: nothing): one not found, libonnxruntime
    from anywhere but the shipped library, the C library from anywhere but the root itself."""
    problems = [f"not found: {line}" for line in lines if "not found" in line]
    resolved = {m["soname"]: m["path"] for line in lines if (m := _LDD_RESOLVED.match(line))}
    ort = {soname: path for soname, path in resolved.items() if soname.startswith("libonnxruntime.so")}
    if not ort:
        problems.append("ldd lists no libonnxruntime.so: the program was not linked against the shipped library")
    for soname, path in ort.items():
        if not PurePosixPath(path).is_relative_to(library):
            problems.append(f"{soname} resolves to {path}, not to the shipped library under {library}")
    libc = resolved.get("libc.so.6")
    if libc is None:
        problems.append("ldd lists no libc.so.6")
    elif PurePosixPath(libc).is_relative_to(IN_ROOT):
        problems.append(f"libc.so.6 resolves to {libc}, not to the root's own C library")
    return problems
