"""Older systems: the finished build proven in Debian roots older than its toolchain's, offline.

For each ``[compat.<name>]`` of the toolchain (x86_64 Linux recipes; plan.py names the step after
the check), a debootstrap root of that suite with only its packages (made once, cached and
verified like the clean root), and in it one check, every command without a network:

- ``c``: the root's own gcc compiles ortdist's C program against the C library archive this
  build ships (unpacked, bound read-only at /ortdist/library); ``ldd`` must show libonnxruntime
  from there and libc from the root; the program runs the reference model and its outputs are
  compared with the reference, as the c_smoke step compares them.
- ``wheel``: the root's own CPython makes a venv, installs the build's wheel for that version
  with every extra it declares (a CUDA wheel's NVIDIA libraries) with ``--no-index`` from the
  wheelhouse, and runs the smoke suite's reference models (no ONNX node tests) on every EP the
  build claims: an EP whose device the machine lacks is skipped only after its library loaded.

The proof is keyed by what it checks (``checked_interface``): every ELF file's needed libraries,
symbol versions and imported symbols, every other file's bytes. A rebuild whose artefacts present
the same interface to an older system (a patch to a kernel's code) reuses it, and the manifest's
``reused_steps`` says since when; a new import, library, Python file or tag runs it again.

What each root is needed for is checked before the first root is made. A failure is one
CheckError naming the root, what failed, its log (logs/compat-<name>.log) and a fix.

Measured on 2 cores, next to a running ORT compile, with PyPI's onnxruntime 1.21.0 C library and
cp311 wheel standing in for a build's: 200 s cold (both debootstraps: bullseye + gcc 92 s,
bookworm + python3 108 s), 19 s with the roots cached (bullseye-c 1.8 s, bookworm-wheel 16.8 s,
verifying each root's content included).
"""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ... import mirrors, sources, wheelhouse
from ...checks import interface
from ...checks.c_smoke import c_smoke_cases, compare_case_outputs, write_case_inputs
from ...checks.compat import (
    IN_ROOT_COMPAT,
    IN_ROOT_COMPAT_VENV,
    IN_ROOT_COMPAT_WHEEL,
    IN_ROOT_LIBRARY,
    REACHED,
    c_build_script,
    facts_script,
    glibc_version,
    ldd_lines,
    ldd_problems,
    network_probe,
    offline,
    parse_facts,
)
from ...errors import CheckError, OrtdistError
from ...fsutil import remove_tree
from ...inroot import Venv, venv_commands
from ...log import log as status
from ...paths import IN_ROOT_WHEELHOUSE
from ...recipe.model import REFERENCE_PREFIX
from ...smoke.env import run_until_settled
from ...smoke.run_suite import write_reference_models, write_runner
from ...smoke.suite import ModelFiles, judge
from ...smoke.wheelinfo import read_wheel
from ...toolchains import Bind
from ...toolchains.spec import CompatRoot
from ..context import BuildContext
from ..runner import Command
from ..state import BuildState, CLibrary, Compat, Repaired
from ..step import StepDef
from .c_smoke import PROGRAM

# Python writes no bytecode into the root's own /usr: its content manifest stays as made.
WHEEL_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}


def mirror_endpoint(url: str) -> tuple[str, int] | None:
    """The mirror's first IPv4 address and port, resolved on the build host (which reached it to make
    the roots); None where it does not resolve (an offline host with cached roots)."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(parts.hostname or "", port, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return (str(found[0][4][0]), port) if found else None


def log_name(compat: CompatRoot) -> str:
    return f"compat-{compat.name}"


class Check:
    """One compat root's check: its files on the host, its commands in the root, its failures."""

    def __init__(self, ctx: BuildContext, compat: CompatRoot, root: Path, log: TextIO) -> None:
        self.ctx, self.compat, self.root, self.log = ctx, compat, root, log
        self.base = ctx.layout.work.host / "compat" / compat.name
        self.files = self.base / "files"  # bound at /ortdist/compat
        remove_tree(self.base)
        self.files.mkdir(parents=True)
        self.binds: list[Bind] = [Bind(self.files, IN_ROOT_COMPAT)]

    def failure(self, what: str, detail: Sequence[str] = (), fix: str = "") -> CheckError:
        lines = "".join(f"\n    {line}" for line in detail)
        return CheckError(
            f"{self.compat.label}: {what}{lines}",
            where=str(self.root),
            fix=f"{fix + '; ' if fix else ''}full log: {self.ctx.log_path(log_name(self.compat))}",
        )

    def sh(self, script: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
        """``script`` in the root, offline, its output into the log: (exit code, output lines)."""
        lines: list[str] = []
        cmd = Command(offline(script), self.root, tuple(self.binds), env)
        return self.ctx.runner.stream(cmd, on_line=lines.append, log=self.log), lines

    def probe_network(self, endpoint: tuple[str, int] | None) -> str:
        """Prove the check is offline: a connection to the mirror (``endpoint``, resolved on the host)
        must fail inside the root. Its error, or why nothing was probed."""
        if endpoint is None:
            return "not probed: the build host could not resolve the mirror"
        code, lines = self.sh(network_probe(*endpoint))
        if code != 0 or any(REACHED in line for line in lines):
            raise self.failure(
                f"the check reached {endpoint[0]}:{endpoint[1]} from inside the root (exit {code})",
                lines[-3:],
                fix="the compat checks must run without a network: every command goes through `unshare --net`",
            )
        return f"unreachable from the root: {lines[-1].strip() if lines else 'no connection'}"

    def facts(self, commands: dict[str, str], env: dict[str, str] | None = None) -> dict[str, str]:
        """The first output line of each command (a "glibc" one must say which glibc)."""
        code, lines = self.sh(facts_script(commands), env)
        found = parse_facts("\n".join(lines))
        if code != 0 or set(found) != set(commands) or not glibc_version(found.get("glibc", "glibc ?")):
            raise self.failure("could not read the root's facts (" + ", ".join(commands.values()) + ")", lines[-5:])
        return found


def check_c(ctx: BuildContext, check: Check, archive: Path) -> dict[str, Any]:
    library = check.base / "library"
    sources.unpack(archive, library)
    shipped = [library / "include" / "onnxruntime" / "onnxruntime_c_api.h", library / "lib" / "libonnxruntime.so"]
    missing = [str(p.relative_to(library)) for p in shipped if not p.exists()]
    if missing:
        raise check.failure(
            f"the C library archive {archive.name} has no {', '.join(missing)}",
            fix="see logs/install.log: `cmake --install` did not install the shared library and its headers",
        )
    check.binds.append(Bind(library, IN_ROOT_LIBRARY, read_only=True))
    facts = check.facts({"gcc": "gcc --version", "glibc": "getconf GNU_LIBC_VERSION"})
    shutil.copyfile(PROGRAM, check.files / PROGRAM.name)
    cases = c_smoke_cases(ctx.plan, ctx.layout.models.host, check.files)
    code, lines = check.sh(f"cd {IN_ROOT_COMPAT} && {c_build_script(PROGRAM.name, 'ort_smoke')}")
    if code != 0:
        raise check.failure(
            f"its gcc ({facts['gcc']}) could not compile and link {PROGRAM.name} against the shipped "
            "include/ and lib/libonnxruntime.so",
            lines[-10:],
            fix="gcc's words above name what it lacks in the shipped include/ or lib/ (glibc symbols newer "
            "than this system's: `objdump -T lib/libonnxruntime.so | grep GLIBC_`)",
        )
    code, lines = check.sh(f"ldd {IN_ROOT_COMPAT}/ort_smoke")
    ldd = ldd_lines("\n".join(lines))
    problems = ldd_problems(ldd) if code == 0 else [f"ldd exited with code {code}"]
    if problems:
        raise check.failure(
            "the program does not load the shipped library with the root's own C library",
            [*problems, *(f"ldd: {line}" for line in ldd)],
            fix="a library the shipped one needs is missing from this system, or too new for it",
        )
    models = []
    for case in cases:
        here = check.files / "cases" / case.name
        write_case_inputs(case, here)
        inside = IN_ROOT_COMPAT / "cases" / case.name
        code, lines = check.sh(f"{IN_ROOT_COMPAT}/ort_smoke {inside}/{case.model.name} {inside}")
        if code != 0:
            raise check.failure(f"the C program failed on {case.model.name} (exit {code})", lines[-10:])
        try:
            models.append(compare_case_outputs(case, here))
        except CheckError as exc:
            raise check.failure(exc.message, fix=exc.fix or "") from exc
    return {
        "glibc": glibc_version(facts["glibc"]),
        "details": {"gcc": facts["gcc"], "library": str(IN_ROOT_LIBRARY), "ldd": ldd, "models": models},
    }


def reference_files(ctx: BuildContext, check: Check) -> list[ModelFiles]:
    """The reference models as the runner reads them: all of them, or for a reduced build the ones
    it was cut for, in the ORT format the models step converted them to."""
    plan = ctx.plan
    if not plan.reduced:
        return write_reference_models(check.files, IN_ROOT_COMPAT)
    names = [m.removeprefix(REFERENCE_PREFIX) for m in plan.recipe.reduce.models if m.startswith(REFERENCE_PREFIX)]
    if not names:
        raise check.failure(
            "this reduced build was cut for no reference model, so the suite has nothing to check outputs of",
            fix=f"add a 'reference:<name>' model to [reduce] models of recipe {plan.recipe.name}",
        )
    files = write_reference_models(check.files, IN_ROOT_COMPAT, names)
    ort = check.files / "reduced-ort"
    ort.mkdir()
    out = []
    for f in files:
        shutil.copyfile(ctx.layout.models.host / "ort" / f"{f.name}.ort", ort / f"{f.name}.ort")
        model = str(IN_ROOT_COMPAT / "reduced-ort" / f"{f.name}.ort")
        out.append(ModelFiles(f.suite, f.name, model, f.data, f.atol, f.rtol))  # node names change in .ort
    return out


def check_wheel(ctx: BuildContext, check: Check, wheel: Path) -> dict[str, Any]:
    compat, python = check.compat, check.compat.python or ""
    info = read_wheel(wheel)
    house = ctx.cache.wheelhouse(python)
    wheelhouse.fill(
        house,
        python,
        list(info.all_requirements),
        capture=ctx.host_capture,
        error=CheckError,
        what=f"downloading the requirements of {wheel.name}",
    )
    claimed = [ep.provider for ep in ctx.plan.providers]
    unknown = write_runner(check.files, claimed, reference_files(ctx, check))
    venv = ctx.layout.recipe_work / f"compat-venv-{compat.name}"
    remove_tree(venv)
    venv.mkdir(parents=True)
    check.binds += [
        Bind(wheel.parent, IN_ROOT_COMPAT_WHEEL, read_only=True),
        Bind(house, IN_ROOT_WHEELHOUSE, read_only=True),
        Bind(venv, IN_ROOT_COMPAT_VENV),
    ]
    interpreter = f"/usr/bin/python{python}"
    facts = check.facts({"python": f"{interpreter} --version", "glibc": "getconf GNU_LIBC_VERSION"}, WHEEL_ENV)
    try:
        fresh = Venv(venv_commands(interpreter, str(IN_ROOT_COMPAT_VENV)), str(IN_ROOT_WHEELHOUSE))
        code, lines = check.sh(fresh.create_and_install(f"{IN_ROOT_COMPAT_WHEEL}/{info.install_spec}"), WHEEL_ENV)
        if code != 0:
            raise check.failure(
                f"{facts['python']} could not install {wheel.name} offline",
                lines[-10:],
                fix=f"pip refuses a wheel whose tags this system does not support (glibc "
                f"{glibc_version(facts['glibc'])}), "
                f"or a requirement missing from {house}",
            )
        runner = fresh.run("runner.py plan.json result.json", str(IN_ROOT_COMPAT))

        def start() -> int:
            nonlocal lines
            code, lines = check.sh(runner, WHEEL_ENV)
            return code

        code = run_until_settled(start, check.files)
    finally:
        remove_tree(venv)
    result_file = check.files / "result.json"
    result: dict[str, Any] = json.loads(result_file.read_text(encoding="utf-8")) if result_file.is_file() else {}
    if not result or "import_error" in result:
        said = result.get("import_error") or "\n".join(lines[-5:]) or "no result.json"
        raise check.failure(
            f"{wheel.name} could not be imported, or the smoke runner died (exit {code})",
            said.strip().splitlines()[-3:],
            fix="a library the wheel needs is missing from this older system, or too new for it",
        )
    verdicts = judge(result, claimed, unknown)
    problems = [f"{v.provider} {v.name}: {v.message}" for v in verdicts if not v.passed]
    problems += [f"{p}: no reference model ran on it" for p in claimed if not any(v.provider == p for v in verdicts)]
    if problems or code != 0:
        raise check.failure(
            f"the smoke suite failed with {wheel.name} (exit {code})",
            problems,
            fix="the wheel behaves differently on this older system: compare with logs/check.log",
        )
    return {
        "glibc": glibc_version(facts["glibc"]),
        "details": {
            "python": facts["python"],
            "wheel": wheel.name,
            "version": result.get("version"),
            "available_providers": result.get("available_providers", []),
            "models": [
                {"name": v.name, "provider": v.provider, "passed": v.passed, "skipped": v.skipped}
                | {"max_abs_err": v.max_abs_err, "share": v.share}
                for v in verdicts
            ],
        },
    }


CHECKS: dict[str, Callable[[BuildContext, Check, Path], dict[str, Any]]] = {"c": check_c, "wheel": check_wheel}


def what_to_check(ctx: BuildContext, state: BuildState, compat: CompatRoot) -> Path:
    """The shipped artefact ``compat``'s check needs: the C library archive, or the wheel for its
    CPython. A recipe that ships none is refused before any root is made."""
    plan = ctx.plan
    drop = f"drop [compat.{compat.name}] from toolchains/{plan.toolchain.name}.toml"
    if compat.check == "c":
        library = state.find(CLibrary)
        if library is None:
            raise CheckError(
                f"{compat.label}: the recipe ships no shared C library (lib/libonnxruntime.so) for the root's "
                "gcc to compile against",
                where=f"recipe {plan.recipe.name} key 'linkage' ({plan.recipe.linkage!r})",
                fix=f'linkage = "shared" or "both" ships it; or {drop}',
            )
        return library.archive
    python = compat.python or ""
    repaired = state.find(Repaired)
    wheel = repaired.wheels.get(python) if repaired is not None else None
    if wheel is None:
        built = ", ".join(f"cp{v.replace('.', '')}" for v in plan.python) or "none"
        raise CheckError(
            f"{compat.label}: the recipe ships no cp{python.replace('.', '')} wheel for the root's CPython {python} "
            f"(its wheels: {built})",
            where=f"recipe {plan.recipe.name} [wheel] key 'python'",
            fix=f'add "{python}" to [wheel] python; or {drop}',
        )
    return wheel


def left_out(ctx: BuildContext, compat: CompatRoot) -> bool:
    """A wheel check for a CPython that ``build --python`` left out: nothing to run it on."""
    return compat.check == "wheel" and (compat.python or "") in ctx.plan.python_not_built


def checked(ctx: BuildContext) -> list[CompatRoot]:
    return [compat for compat in ctx.plan.toolchain.compat_roots("system") if not left_out(ctx, compat)]


def run(ctx: BuildContext, state: BuildState) -> Compat:
    entries = checked(ctx)
    artefacts = {compat.name: what_to_check(ctx, state, compat) for compat in entries}
    results: list[dict[str, Any]] = []
    for compat in ctx.plan.toolchain.compat_roots("system"):
        if left_out(ctx, compat):
            why = f"build --python left out CPython {compat.python}, whose wheel this root runs"
            status.warning(f"{compat.label}: not run ({why})")
            results.append(
                {"name": compat.name, "suite": compat.suite, "check": compat.check, "ok": None, "not_run": why}
            )
    for compat in entries:
        started = time.monotonic()
        with ctx.open_log(log_name(compat)) as log:
            try:
                root = ctx.toolchain.ensure_compat_root(ctx.cache, compat, log)
            except OrtdistError as exc:  # the same kind of error (its exit code), naming the root
                raise type(exc)(
                    f"{compat.label}: the root could not be made: {exc.message}",
                    where=exc.where,
                    fix=f"{exc.fix + '; ' if exc.fix else ''}full log: {ctx.log_path(log_name(compat))}",
                ) from exc
            check = Check(ctx, compat, root, log)
            network = check.probe_network(
                mirror_endpoint(mirrors.debian_archive(compat.mirror or ctx.plan.toolchain.mirror).url)
            )
            outcome = CHECKS[compat.check](ctx, check, artefacts[compat.name])
        details = {**outcome["details"], "network": network}
        proof = details.get("gcc") or f"{details.get('python')}, {len(details.get('models', []))} model runs"
        status.info(f"{compat.label}: ok (glibc {outcome['glibc']}; {proof})")
        results.append(
            {
                "name": compat.name,
                "suite": compat.suite,
                "glibc": outcome["glibc"],
                "check": compat.check,
                "ok": True,
                "seconds": round(time.monotonic() - started, 1),
                "root": root.name,
                "details": details,
            }
        )
    return Compat(results=tuple(results))


def checked_interface(ctx: BuildContext, state: BuildState) -> str:
    """What the checks depend on: the artefacts they run, as an older system sees them (each ELF's
    needed libraries, symbol versions and imports; every other file's bytes). A change to ORT's
    code that leaves all of that as it was reuses the proof; a new import, library or file reruns it."""
    return interface.digest(sorted({what_to_check(ctx, state, compat) for compat in checked(ctx)}))


STEP = StepDef(run, reusable=True, inputs=checked_interface)
