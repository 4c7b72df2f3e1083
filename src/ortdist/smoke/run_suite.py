"""Smoke-test one wheel: plan, run in a fresh environment, judge, report."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, TextIO

from .. import registry
from ..errors import CheckError
from ..fsutil import remove_tree, sha256_file
from ..log import log
from ..paths import Cache
from ..toolchains import Toolchain
from . import env, node_tests
from .models import reference_models, save_case, tolerances
from .report import write_reports
from .suite import ModelFiles, Verdict, device_probes, judge, node_test_outcomes, plan_cases, regressions
from .wheelinfo import WheelInfo, linux_platform, read_project, read_wheel

NODE_TESTS_DIR = "node-tests-onnx-1.17.0"


def write_reference_models(workdir: Path, visible: Path, names: list[str] | None = None) -> list[ModelFiles]:
    """The reference models (all, or ``names``) with their inputs and expected outputs under
    ``workdir/models``, as runner files named as the runner sees them (under ``visible``)."""
    tol = tolerances()
    files: list[ModelFiles] = []
    for m in reference_models(names):
        save_case(workdir / "models" / m.name, m.model, m.inputs, m.expected)
        seen = visible / "models" / m.name
        files.append(
            ModelFiles(
                "model",
                m.name,
                str(seen / "model.onnx"),
                str(seen / "data.npz"),
                tol[m.name].atol,
                tol[m.name].rtol,
                m.nodes,
            )
        )
    return files


def _node_files(cache: Cache, workdir: Path, visible: Path) -> tuple[list[ModelFiles], int]:
    """The node tests as runner files, and how many the converter had to skip."""
    source = cache.root / "smoke" / NODE_TESTS_DIR
    skipped = len(node_tests.convert(source))
    shutil.copytree(source, workdir / "node")
    files = [
        ModelFiles(
            "node",
            d.name,
            str(visible / "node" / d.name / "model.onnx"),
            str(visible / "node" / d.name / "data.npz"),
            1e-3,
            1e-3,
        )  # ONNX's backend-test tolerances
        for d in sorted((workdir / "node").iterdir())
        if d.is_dir()
    ]
    return files, skipped


def write_runner(
    workdir: Path,
    candidates: list[str],
    files: list[ModelFiles],
    latency: dict[str, int] | None = None,
    save_outputs: bool = False,
) -> list[str]:
    """The runner's plan (every file's cases on each candidate EP), runner.py and proof.py, in
    ``workdir``; returns the candidates the suite has no expectations for."""
    cases, unknown = plan_cases(candidates, files)
    plan = {"cases": cases, "latency": latency, "save_outputs": save_outputs, "devices": device_probes(candidates)}
    (workdir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    package = Path(__file__).parent
    shutil.copyfile(package / "runner.py", workdir / "runner.py")
    shutil.copyfile(package / "proof.py", workdir / "proof.py")
    return unknown


REDUCED_REFUSAL = "NOT_IMPLEMENTED"  # ORT's status for a node no kernel is registered for


def _reduced_files(
    record: dict[str, Any], workdir: Path, visible: Path, cache: Cache, toolchain: Toolchain, log: TextIO
) -> list[ModelFiles]:
    """A reduced wheel runs the reference models it was cut for, and one model outside its operator
    set that it must refuse, both in ORT format (converted at the recorded optimization level)."""
    from ..recipe.model import REFERENCE_PREFIX as prefix
    from ..reduce import convert as reduce_convert

    reduced = record["reduced"]
    names = [m.removeprefix(prefix) for m in reduced["models"] if m.startswith(prefix)]
    if not names:
        raise CheckError(
            "this reduced wheel was cut for no reference model, so the suite has nothing it can check outputs of",
            where=record.get("recipe", "?"),
            fix="add a 'reference:<name>' model to the recipe's [reduce] models",
        )
    operators = set(reduced["operators"])
    refs = {m.name: m for m in reference_models()}
    outside = next(
        (m for m in refs.values() if m.name not in names and not {f"ai.onnx:{op}" for op in m.op_types} <= operators),
        None,
    )
    chosen = [refs[n] for n in names] + ([outside] if outside else [])
    onnx_dir = workdir / "reduced-onnx"
    onnx_dir.mkdir(parents=True)
    for m in chosen:
        save_case(workdir / "models" / m.name, m.model, m.inputs, m.expected)
        (onnx_dir / f"{m.name}.onnx").write_bytes(m.model)
    arch = registry.targets()[record["target"]].arch
    reduce_convert.convert_to_ort_format(
        [onnx_dir / f"{m.name}.onnx" for m in chosen],
        workdir / "reduced-ort",
        level=reduced["optimization_level"],
        target_arch=arch,
        ort_version=record["ort_version"],
        cache=cache,
        toolchain=toolchain,
        log=log,
    )
    tol = tolerances()
    return [
        ModelFiles(
            "model",
            m.name,
            str(visible / "reduced-ort" / f"{m.name}.ort"),
            str(visible / "models" / m.name / "data.npz"),
            tol[m.name].atol,
            tol[m.name].rtol,
            {},  # node names change in the optimized ORT-format model
            expect_error=REDUCED_REFUSAL if m is outside else "",
            refused_ops=tuple(sorted(op for op in m.op_types if f"ai.onnx:{op}" not in operators))
            if m is outside
            else (),
        )
        for m in chosen
    ]


def where_to_run(info: WheelInfo, toolchain: Toolchain, prefer_root: bool = False) -> env.Choice:
    """Host, clean root or emulator for this wheel; a CheckError when nothing here can run it.
    The clean root runs its suite's glibc, which may be newer than what the toolchain's output
    needs (portable-glibc2.17 builds in a trixie root)."""
    suite = registry.debian_suites().get(toolchain.spec.suite)
    root_glibc = suite.glibc if suite else toolchain.spec.glibc
    glibc_major, glibc_minor = (int(x) for x in root_glibc.split(".")[:2])
    targets = registry.targets()
    emulated = {targets[t].arch: t for t in toolchain.spec.cross_targets if t in targets}
    if not linux_platform(info.platform):
        runnable = ", ".join(f"manylinux/linux_{arch}" for arch in dict.fromkeys([env.HOST_ARCH, *emulated]))
        raise CheckError(
            f"platform tag {info.platform!r} is not one this machine runs (it runs {runnable})",
            where=str(info.path),
            fix="smoke-test the wheel on its own platform",
        )
    return env.choose(
        info,
        toolchain.spec.python_versions,
        (glibc_major, glibc_minor),
        env.host_glibc(),
        env.host_python(info.python),
        emulated,
        emulated_python=toolchain.spec.emulated_python,
        prefer_root=prefer_root,
    )


def check_runnable(wheel: Path, toolchain: Toolchain) -> None:
    """The argument checks of `ortdist smoke`: a readable wheel this machine can run (nothing written)."""
    if not wheel.is_file():
        raise CheckError(
            "is a directory, not a wheel" if wheel.is_dir() else "no such wheel",
            where=str(wheel),
            fix="pass .whl files (a glob that matched nothing stays literal in the shell)",
        )
    if where_to_run(read_wheel(wheel), toolchain).kind != "host":
        toolchain.preflight()  # the clean root needs root: refused now, not after the lock


def smoke_wheel(
    wheel: Path,
    out_dir: Path,
    cache: Cache,
    toolchain: Toolchain,
    baseline: dict[str, dict[str, bool]] | None = None,
    with_node_tests: bool = True,
    latency: dict[str, int] | None = None,
    save_outputs: Path | None = None,
    require_devices: bool = False,
    source: env.IndexInstall | None = None,
) -> tuple[dict[str, Any], list[Verdict]]:
    """``source``: install the wheel's project from an index by name (in the clean root) rather
    than the file, and fail unless pip installed exactly the file's bytes."""
    started = time.monotonic()
    info = read_wheel(wheel)
    wheel_sha256 = sha256_file(wheel)
    choice = where_to_run(info, toolchain, prefer_root=source is not None)
    log.info(f"smoke {wheel.name}: {choice.reason}")
    workdir = cache.root / "smoke" / "runs" / wheel.stem
    remove_tree(workdir)
    workdir.mkdir(parents=True)
    visible = workdir if choice.kind == "host" else env.IN_ROOT_SMOKE
    out_dir.mkdir(parents=True, exist_ok=True)
    reduced = (info.record or {}).get("reduced")
    if reduced:
        # ONNX's node tests exercise every operator; a reduced build has a handful by design.
        with (out_dir / f"{wheel.stem}.models.log").open("w", encoding="utf-8") as models_log:
            files = _reduced_files(info.record or {}, workdir, visible, cache, toolchain, models_log)
        node_skipped = 0
    else:
        node_files, node_skipped = _node_files(cache, workdir, visible) if with_node_tests else ([], 0)
        files = write_reference_models(workdir, visible) + node_files
    claimed = info.claimed_providers
    # A foreign wheel claims whatever it reports available: try every EP the registry knows.
    candidates = claimed if claimed is not None else [ep.provider for ep in registry.providers().values()]
    unknown = write_runner(workdir, candidates, files, latency, save_outputs is not None)
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / f"{wheel.stem}.log").open("w", encoding="utf-8") as run_log:
        code = env.run_in_env(choice, info, workdir, cache, toolchain, run_log, source)
    result_file = workdir / "result.json"
    result: dict[str, Any] = json.loads(result_file.read_text()) if result_file.is_file() else {}
    if "import_error" in result or not result_file.is_file():
        progress = workdir / "progress.jsonl"
        if not result and progress.is_file():
            crashes = progress.read_text(encoding="utf-8").count('"crashed: ')
            problem = f"the runner crashed in {crashes} cases, more than the {env.MAX_CRASHES} allowed"
        else:
            last = (result.get("import_error") or "no result (see log)").strip().splitlines()[-1]
            problem = f"the wheel cannot be imported: {last}"
        verdicts = [Verdict.failure("import", "-", problem)]
        claimed_final: list[str] = claimed or []
    else:
        available = result.get("available_providers", [])
        claimed_final = claimed if claimed is not None else [p for p in candidates if p in available]
        result["cases"] = [c for c in result["cases"] if c["provider"] in claimed_final]
        verdicts = judge(result, claimed_final, [u for u in unknown if u in claimed_final], require_devices)
    if save_outputs is not None and (workdir / "outputs").is_dir():
        remove_tree(save_outputs)
        shutil.copytree(workdir / "outputs", save_outputs)
    installed_from: dict[str, Any] | None = None
    if source is not None and (workdir / env.INSTALL_REPORT).is_file():
        url, digest = env.installed_file(
            json.loads((workdir / env.INSTALL_REPORT).read_text(encoding="utf-8")), read_project(wheel)
        )
        installed_from = {"index_url": source.index_url, "requirement": source.requirement}
        installed_from |= {"url": url, "sha256": digest}
        if digest != wheel_sha256:
            verdicts.append(
                Verdict.failure(
                    "installed file", "-", f"the index served other bytes than {wheel.name} (sha256 {digest})"
                )
            )
    elif source is not None:
        problem = f"pip did not install {source.requirement} from {source.index_url} (see {wheel.stem}.log)"
        verdicts.append(Verdict.failure("installed file", "-", problem))
    node = node_test_outcomes(result)
    regressed = {p: regressions(node.get(p, {}), baseline.get(p, {})) for p in node} if baseline else {}
    for provider, names in regressed.items():
        for name in names:
            verdicts.append(Verdict.failure(name, provider, "regression: passes on the baseline wheel", suite="node"))
    passed = bool(verdicts) and all(v.passed for v in verdicts) and code in (0, 1)
    report = {
        "wheel": wheel.name,
        "wheel_sha256": wheel_sha256,
        **({"installed_from": installed_from} if source is not None else {}),
        "environment": {
            "kind": choice.kind,
            "reason": choice.reason,
            "python": result.get("python"),
            "machine": result.get("machine"),
        },
        "version": result.get("version"),
        "claimed": claimed_final,
        "claims_from": "build record" if claimed is not None else "get_available_providers()",
        "available_providers": result.get("available_providers"),
        "devices": result.get("devices", {}),
        "passed": passed,
        "seconds": round(time.monotonic() - started, 1),
        "models": [v.__dict__ for v in verdicts if v.suite == "model"],
        "node_tests": {
            p: {
                "passed": sum(o.values()),
                "failed": sum(not x for x in o.values()),
                "failed_names": sorted(n for n, ok in o.items() if not ok),
            }
            for p, o in node.items()
        },
        "node_test_outcomes": node,
        "regressions": regressed,
        "node_tests_skipped_by_converter": node_skipped,
        "reduced": bool(reduced),
    }
    write_reports(out_dir, report, verdicts, node, regressed)
    if code not in (0, 1):
        raise CheckError(
            f"the smoke runner crashed (exit {code})", where=wheel.name, fix=f"see {out_dir / (wheel.stem + '.log')}"
        )
    return report, verdicts
