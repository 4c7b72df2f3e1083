"""The check step: each repaired wheel installed in a fresh venv of a root with nothing but its
CPython, the probe's result.json judged; every problem named in the CheckError."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from ortdist.errors import CheckError
from ortdist.pipeline.runner import Command, Effect, Result
from ortdist.pipeline.state import PerPython, Repaired
from ortdist.pipeline.steps import check

from .conftest import MakeEnv
from .helpers import StepEnv, host_of, make_wheel

LIBRARY = {"onnxruntime/capi/libonnxruntime.so.1.21.0": b"\x7fELF one build", "onnxruntime/__init__.py": b""}

GOOD: dict[str, Any] = {
    "ok": True,
    "available_providers": ["CPUExecutionProvider"],
    "outputs": {"probs": {"nan_pattern_matches": True, "max_abs_err": 1e-7}},
    "node_providers": {"MatMul": "CPUExecutionProvider"},
}


def ready(env: StepEnv) -> StepEnv:
    env.put_roots()
    env.put_source()
    wheels = {}
    for version in env.plan.python:
        sfx = "" if version == env.plan.python[0] else f"-{version}"
        wheel = (
            env.layout.work.host / "wheel" / f"repaired{sfx}" / f"onnxruntime-1.21.0-cp{version.replace('.', '')}.whl"
        )
        wheels[version] = make_wheel(
            wheel.parent, wheel.name.replace(".whl", f"-cp{version.replace('.', '')}-linux_x86_64.whl"), LIBRARY
        )
    env.state.put(Repaired(wheels=wheels, times=PerPython("repair_s", {}, timed=False)))
    return env


def probe(result: dict[str, Any] | None, returncode: int = 0) -> Effect:
    """The probe in the clean root: writes result.json where the check directory is bound."""

    def effect(cmd: Command) -> Result:
        check_dir = host_of(cmd, "/ortdist/check")
        assert (check_dir / "probe.py").is_file() and (check_dir / "data.npz").is_file()
        if result is not None:
            (check_dir / "result.json").write_text(json.dumps(result))
        return Result(returncode)

    return effect


def test_each_wheel_is_checked_in_a_clean_root(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    env.runner.on("probe.py", probe(GOOD))
    out = check.run(env.ctx, env.state)
    # The versions are checked side by side: each one's commands, whatever order they ran in.
    downloads = sorted(env.matching("pip download"), key=lambda c: c.argv[c.argv.index("--python-version") + 1])
    assert [c.root for c in downloads] == [None, None]  # on the host, for the clean root's wheelhouse
    assert [c.argv[c.argv.index("--python-version") + 1] for c in downloads] == ["3.11", "3.13"]
    assert [Path(c.argv[c.argv.index("--dest") + 1]) for c in downloads] == [
        env.ctx.cache.wheelhouse("3.11"),
        env.ctx.cache.wheelhouse("3.13"),
    ]
    # A wheelhouse that has the requirements is enough: no network (a warm rebuild works offline).
    assert all("--no-index" in c.argv and "--find-links" in c.argv for c in downloads)
    main, other = sorted(env.matching("probe.py"), key=lambda c: "/ortdist/python/3.11/" in c.argv[2])
    clean = env.toolchain.base / "clean-root"
    assert main.root == clean and other.root == clean
    # No ensurepip for a venv that lives for one check, and no byte-compiling of what it installs.
    assert main.argv[2].startswith("python3.13 -m venv --without-pip /ortdist/venv && ")
    assert "/usr/share/python-wheels/pip-*.whl" in main.argv[2]
    assert all(" install --quiet --no-compile " in c.argv[2] for c in (main, other))
    assert "/ortdist/wheel/onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl" in main.argv[2]
    assert "probe.py model.onnx data.npz result.json 1e-05" in main.argv[2]
    binds = {str(b.inside): b for b in main.binds}
    assert (
        binds["/ortdist/wheel"].host == env.layout.work.host / "wheel" / "repaired"
        and binds["/ortdist/wheel"].read_only
    )
    assert "/ortdist/source" not in binds and "/ortdist/build" not in binds  # nothing of the build
    # The extra CPython comes from its overlay, with pip from the root's own wheel.
    assert other.argv[2].startswith("/ortdist/python/3.11/usr/bin/python3.11 -m venv --without-pip /ortdist/venv")
    overlay = {str(b.inside): b for b in other.binds}["/ortdist/python/3.11"]
    assert overlay.host == env.state.roots.pythons["3.11"] and overlay.read_only
    assert out.main == {
        "ok": True,
        "root": "clean-root",
        "python": "3.13",
        "available_providers": ["CPUExecutionProvider"],
        "outputs": GOOD["outputs"],
        "node_providers": GOOD["node_providers"],
        "installed": "pip",
    }
    assert out.others == {"3.11": {"ok": True, "outputs": GOOD["outputs"], "installed": "pip"}}
    assert set(out.manifest()) == {"clean_root_check", "clean_root_check_other_python"}
    # pip did not run here, so no venv holds the wheel: the next check installs it again.
    assert not any(env.layout.recipe_work.glob("check-venv*/.ortdist-installed.json"))


def test_the_probes_problems_are_listed(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13",)))
    bad = {
        **GOOD,
        "ok": False,
        "outputs": {"max": {"nan_pattern_matches": False, "max_abs_err": 0.5}},
        "node_providers": {"Max": "XnnpackExecutionProvider"},
    }
    env.runner.on("probe.py", probe(bad, returncode=1))
    with pytest.raises(CheckError) as info:
        check.run(env.ctx, env.state)
    message = str(info.value)
    assert "the wheel failed the clean-root check:" in message
    assert "output 'max': NaN positions differ" in message
    assert "output 'max': max abs error 0.5 > 1e-5" in message
    assert "nodes ran outside CPUExecutionProvider: {'Max': 'XnnpackExecutionProvider'}" in message
    assert str(env.ctx.log_path("check")) in message


def test_an_import_error_or_a_silent_probe_fails(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13",)))
    env.runner.on("probe.py", probe({"ok": False, "error": "Traceback\nImportError: libgomp.so.1: cannot open"}, 1))
    with pytest.raises(CheckError, match=r"import/inference failed: ImportError: libgomp\.so\.1"):
        check.run(env.ctx, env.state)
    env = ready(make_env("xnnpack-linux", python=("3.13",)))
    env.runner.on("probe.py", probe(None, returncode=1))  # died before writing its verdict
    with pytest.raises(CheckError, match="the probe exited with code 1 before writing its result"):
        check.run(env.ctx, env.state)


def test_a_claimed_provider_that_is_not_available_fails(make_env: MakeEnv) -> None:
    env = ready(make_env("xnnpack-linux"))
    env.runner.on("probe.py", probe(GOOD))
    with pytest.raises(CheckError, match="claims XnnpackExecutionProvider but get_available_providers"):
        check.run(env.ctx, env.state)


def test_a_cross_wheel_is_checked_under_the_emulator_with_a_bare_target_python(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux-aarch64"))
    ort = env.layout.models.host / "ort"
    ort.mkdir(parents=True)
    (ort / "cnn.ort").write_bytes(b"ORTM")
    env.runner.on("probe.py", probe(GOOD | {"outputs": {"logits": {"nan_pattern_matches": True, "max_abs_err": 0}}}))
    out = check.run(env.ctx, env.state)
    (run,) = env.matching("probe.py")
    assert run.root == env.state.roots.build
    target = {str(b.inside): b for b in run.binds}["/ortdist/target"]
    assert target.host == env.toolchain.base / "clean-target-aarch64-unknown-linux-gnu" and target.read_only
    assert run.argv[2].startswith("qemu-aarch64 -L /ortdist/target /ortdist/target/usr/bin/python3.13 -m venv")
    assert "probe.py model.ort data.npz result.json" in run.argv[2]
    assert (env.layout.work.host / "check" / "model.ort").read_bytes() == b"ORTM"
    assert "aarch64" in env.only("pip download").text
    assert out.main["root"] == "build-root"


def test_a_cross_targets_other_pythons_run_under_the_emulator_and_the_unreachable_ones_are_said(
    make_env: MakeEnv,
) -> None:
    """cpu-linux-aarch64: 3.11 and 3.14 are Debian's arm64 CPythons, each run by qemu from its overlay
    with the bare target root's libraries; 3.10 and 3.12 have no aarch64 interpreter here, so they are
    not run, and the manifest says why instead of claiming a pass."""
    env = ready(make_env("cpu-linux-aarch64"))
    env.runner.on("probe.py", probe(GOOD))
    out = check.run(env.ctx, env.state)
    order = ("/target/usr/bin/python3.13", "python3.11", "python3.14")  # side by side: sorted back
    runs = sorted(
        env.matching("probe.py"), key=lambda r: [o in r.argv[2].split(" -m venv")[0] for o in order].index(True)
    )
    assert [r.argv[2].split(" -m venv")[0] for r in runs] == [
        "qemu-aarch64 -L /ortdist/target /ortdist/target/usr/bin/python3.13",
        "qemu-aarch64 -L /ortdist/target /ortdist/python/3.11/usr/bin/python3.11",
        "qemu-aarch64 -L /ortdist/target /ortdist/python/3.14/usr/bin/python3.14",
    ]
    assert all("/ortdist/target/usr/share/python-wheels/pip-*.whl" in r.argv[2] for r in runs)
    overlay = {str(b.inside): b for b in runs[1].binds}["/ortdist/python/3.11"]
    assert overlay.host == env.state.roots.pythons["3.11"]
    assert {v: r["ok"] for v, r in out.others.items()} == {"3.10": None, "3.11": True, "3.12": None, "3.14": True}
    assert "no CPython 3.10 for aarch64 is reachable offline" in out.others["3.10"]["not_run"]
    assert not [r for r in runs if "cp310" in r.argv[2] or "cp312" in r.argv[2]]


def test_the_index_is_asked_only_for_what_the_wheelhouse_lacks(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13", "3.11")))
    env.runner.on("probe.py", probe(GOOD))
    for python in ("3.13", "3.11"):  # the wheelhouses lack something
        env.runner.on(f"--no-index --find-links {env.ctx.cache.wheelhouse(python)}", returncode=1)
    check.run(env.ctx, env.state)
    # each version's own order (the versions are checked side by side): offline first, then online
    downloads = sorted(env.matching("pip download"), key=lambda c: c.argv[c.argv.index("--python-version") + 1])
    assert ["--no-index" in c.argv for c in downloads] == [True, False, True, False]
    downloads = [c for c in downloads if "3.13" in c.argv]
    offline, online = (list(c.argv) for c in downloads[:2])
    at = offline.index("--find-links")
    assert offline[at + 1] == str(env.ctx.cache.wheelhouse("3.13"))
    del offline[at : at + 2]
    offline.remove("--no-index")
    assert offline == online  # the same request, from the index this time


# --- a wheel that lacks a library auditwheel should have grafted -------------------------------------
DNNL = "libonnxruntime_providers_dnnl.so"
MISSING = ": cannot open shared object file: No such file or directory"
DNNL_GOOD: dict[str, Any] = {
    **GOOD,
    "available_providers": ["DnnlExecutionProvider", "CPUExecutionProvider"],
    "provider_libraries": {DNNL: ""},
}


@pytest.mark.parametrize(
    ("recipe", "result", "missing"),
    [
        # XNNPACK is linked into the core: without its grafted library the import fails.
        (
            "xnnpack-linux",
            {"ok": False, "error": f"Traceback\nImportError: libXNNPACK-3f2a9c1d.so.0{MISSING}\n"},
            "libXNNPACK-3f2a9c1d.so.0",
        ),
        # oneDNN's EP is a library ORT loads on demand: the import and a CPU session succeed
        # without libdnnl or its OpenMP runtime, so only loading the provider library shows it.
        (
            "dnnl-linux",
            {**DNNL_GOOD, "ok": False, "provider_libraries": {DNNL: f"libdnnl-8c6f0d2e.so.3.7{MISSING}"}},
            "libdnnl-8c6f0d2e.so.3.7",
        ),
        (
            "dnnl-linux",
            {**DNNL_GOOD, "ok": False, "provider_libraries": {DNNL: f"libgomp-a34b3233.so.1.0.0{MISSING}"}},
            "libgomp-a34b3233.so.1.0.0",
        ),
    ],
    ids=["xnnpack-import", "dnnl-libdnnl", "dnnl-libgomp"],
)
def test_a_wheel_lacking_a_grafted_library_fails_naming_it(
    make_env: MakeEnv, recipe: str, result: dict[str, Any], missing: str
) -> None:
    """README: auditwheel grafts libXNNPACK/libpthreadpool, or libdnnl and libgomp; the clean-root
    check fails a wheel that lacks them."""
    env = ready(make_env(recipe))
    env.runner.on("probe.py", probe(result, returncode=1))
    with pytest.raises(CheckError, match="the wheel failed the clean-root check") as info:
        check.run(env.ctx, env.state)
    assert f"{missing}{MISSING}" in str(info.value)


def test_the_probe_loads_the_provider_libraries_whose_dependencies_the_wheel_must_carry(make_env: MakeEnv) -> None:
    """oneDNN's EP library (nothing of it excluded from the wheel) must load in the clean root; a
    CPU-only wheel has none, and CUDA's needs NVIDIA's runtime, which the clean root lacks by design."""
    env = ready(make_env("dnnl-linux", python=("3.13",)))
    env.runner.on("probe.py", probe(DNNL_GOOD))
    out = check.run(env.ctx, env.state)
    assert f"probe.py model.onnx data.npz result.json 1e-05 {DNNL}" in env.only("probe.py").argv[2]
    assert out.main["available_providers"] == DNNL_GOOD["available_providers"]
    for recipe in ("cpu-linux", "cuda-linux"):
        other = ready(make_env(recipe, python=("3.13",)))
        other.runner.on("probe.py", probe(GOOD))
        with contextlib.suppress(CheckError):  # cuda-linux claims an EP GOOD lacks: only the command matters
            check.run(other.ctx, other.state)
        assert other.only("probe.py").argv[2].endswith("probe.py model.onnx data.npz result.json 1e-05")


def test_a_provider_library_the_probe_did_not_report_fails(make_env: MakeEnv) -> None:
    env = ready(make_env("dnnl-linux", python=("3.13",)))
    env.runner.on("probe.py", probe({**DNNL_GOOD, "provider_libraries": {}}))
    with pytest.raises(CheckError, match=f"{DNNL}: the probe did not load it"):
        check.run(env.ctx, env.state)


def pip_installs(cmd: Command) -> Result:
    """pip in the clean root: the wheel's files under the venv's site-packages, and its RECORD
    with the lines pip adds; then the probe passes."""
    import zipfile

    venv, wheel_dir = host_of(cmd, "/ortdist/venv"), host_of(cmd, "/ortdist/wheel")
    wheel = next(wheel_dir.glob("*.whl"))
    site = venv / "lib" / "python3.13" / "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        info = next(n.split("/")[0] for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
    (site / info / "INSTALLER").write_text("pip\n")
    with (site / info / "RECORD").open("a") as record:
        record.write(f"{info}/INSTALLER,sha256=x,4\n")
    return probe(GOOD)(cmd)


def rebuilt(env: StepEnv, members: dict[str, bytes]) -> None:
    """The repair step's wheel of the next build, for the one version."""
    (wheel,) = env.state.get(Repaired).wheels.values()
    wheel.unlink()
    make_wheel(wheel.parent, wheel.name, members)


def test_a_wheel_differing_only_in_file_bytes_is_checked_in_the_venv_the_last_check_left(make_env: MakeEnv) -> None:
    """The patch loop: the relinked library replaced in the venv pip filled for the last wheel
    (and its RECORD line), no venv made, no pip; the probe runs; the result says how."""
    env = ready(make_env("cpu-linux", python=("3.13",)))
    env.runner.on(" install --quiet ", pip_installs)
    first = check.run(env.ctx, env.state)
    assert first.main["installed"] == "pip"
    site = env.layout.recipe_work / "check-venv" / "lib" / "python3.13" / "site-packages"
    assert (site / "onnxruntime/capi/libonnxruntime.so.1.21.0").read_bytes() == b"\x7fELF one build"
    env.runner.commands.clear()
    env.runner.effects.clear()
    env.runner.on("probe.py", probe(GOOD))
    rebuilt(env, {**LIBRARY, "onnxruntime/capi/libonnxruntime.so.1.21.0": b"\x7fELF the next build"})
    second = check.run(env.ctx, env.state)
    (run,) = env.matching("probe.py")
    assert " -m venv " not in run.argv[2] and " install " not in run.argv[2]
    assert run.argv[2].startswith("cd /ortdist/check && /ortdist/venv/bin/python probe.py ")
    assert second.main["installed"] == "updated: 1 changed file(s) replaced in the venv a passing check left"
    assert (site / "onnxruntime/capi/libonnxruntime.so.1.21.0").read_bytes() == b"\x7fELF the next build"
    record = (site / "onnxruntime-1.21.0.dist-info" / "RECORD").read_text()
    from ortdist.wheel.record import record_line

    assert record_line("onnxruntime/capi/libonnxruntime.so.1.21.0", b"\x7fELF the next build") in record
    assert "INSTALLER,sha256=x,4" in record  # pip's own lines stay
    assert (env.layout.recipe_work / "check-venv" / ".ortdist-installed.json").is_file()


@pytest.mark.parametrize(
    "members",
    [
        {**LIBRARY, "onnxruntime/capi/libextra.so": b"\x7fELF"},  # a file more
        {"onnxruntime/capi/libonnxruntime.so.1.21.0": b"\x7fELF one build"},  # a file less
    ],
)
def test_a_wheel_pip_would_install_differently_gets_a_fresh_venv(make_env: MakeEnv, members: dict[str, bytes]) -> None:
    env = ready(make_env("cpu-linux", python=("3.13",)))
    env.runner.on(" install --quiet ", pip_installs)
    check.run(env.ctx, env.state)
    rebuilt(env, members)
    env.runner.commands.clear()
    assert check.run(env.ctx, env.state).main["installed"] == "pip"
    assert " -m venv --without-pip /ortdist/venv && " in env.only("probe.py").argv[2]


def test_a_failed_check_leaves_no_venv_to_update(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", python=("3.13",)))
    env.runner.on(" install --quiet ", pip_installs)
    check.run(env.ctx, env.state)
    env.runner.effects.clear()
    env.runner.on("probe.py", probe({**GOOD, "ok": False, "error": "ImportError: boom"}, returncode=1))
    rebuilt(env, {**LIBRARY, "onnxruntime/capi/libonnxruntime.so.1.21.0": b"\x7fELF broken"})
    with pytest.raises(CheckError):
        check.run(env.ctx, env.state)
    assert not (env.layout.recipe_work / "check-venv").exists()
    # An update cut short (its facts removed first) is not trusted either.
    env.runner.effects.clear()
    env.runner.on(" install --quiet ", pip_installs)
    check.run(env.ctx, env.state)
    (env.layout.recipe_work / "check-venv" / ".ortdist-installed.json").unlink()
    env.runner.commands.clear()
    assert check.run(env.ctx, env.state).main["installed"] == "pip"
