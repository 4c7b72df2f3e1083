"""The WebAssembly module proven with onnxruntime-web's own JS: every model the build was cut for
runs in node (the clean root: nodejs and nothing of the build) on our module, outputs against ONNX's
reference evaluator; and a model outside the cut is refused, naming an operator the cut left out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ... import sources, web
from ...checks.c_smoke import CSmokeCase, c_smoke_cases, compare_case_outputs, write_case_inputs
from ...errors import CheckError
from ...fsutil import remove_tree
from ...manifest import Artifact
from ...paths import IN_ROOT
from ...reduce import convert
from ...smoke import browser
from ...toolchains import Bind
from ...toolchains.spec import CompatRoot
from ..context import BuildContext
from ..runner import Command
from ..state import BuildState, Models, WebPackage, WebSmoke
from ..step import StepDef

DATA = Path(__file__).resolve().parents[2] / "data" / "web_smoke"
RUNNER, PAGE = DATA / "run.mjs", DATA / "page.html"
IN_ROOT_WEB = IN_ROOT / "web"
OUTSIDE_MODEL = "transformer"  # a reference model whose attention and normalization the CNN cut lacks


def node_case(ctx: BuildContext, state: BuildState, smoke: Path, case: CSmokeCase) -> tuple[Path, dict[str, Any]]:
    """One case through run.mjs in the clean root: (its directory, result.json)."""
    here = smoke / "cases" / case.name
    remove_tree(here)
    write_case_inputs(case, here)
    spec = {
        "model": case.model.name,
        "inputs": [{"file": f"in_{i}.bin", "dims": list(a.shape)} for i, a in enumerate(case.inputs)],
        # for the browser page's own table; the verdict is compare_case_outputs'
        "expected": [np.asarray(a, dtype=np.float32).ravel().tolist() for a in case.expected or []],
    }
    (here / "case.json").write_text(json.dumps(spec), encoding="utf-8")
    entry = f"{IN_ROOT_WEB}/stock/package/{web.NODE_ENTRY}"
    argv = ["node", f"{IN_ROOT_WEB}/run.mjs", entry, f"{IN_ROOT_WEB}/ours/dist", f"{IN_ROOT_WEB}/cases/{case.name}"]
    with ctx.open_log(f"web-smoke-{case.name}") as log:
        root = ctx.toolchain.ensure_clean_root(ctx.cache, log)
        result = ctx.runner.capture(Command(tuple(argv), root, (Bind(smoke, IN_ROOT_WEB),)), check=False)
        log.write(result.stdout + result.stderr)
    said = here / "result.json"
    outcome = json.loads(said.read_text(encoding="utf-8")) if said.is_file() else {}
    if not outcome:
        raise CheckError(
            f"node did not run {case.model.name} (exit {result.returncode}): {(result.stderr or result.stdout)[-600:]}",
            where=str(case.model),
            fix=f"see {ctx.log_path(f'web-smoke-{case.name}')}",
        )
    return here, outcome


def outside_case(ctx: BuildContext, smoke: Path) -> tuple[CSmokeCase, list[str]]:
    """A reference model outside the cut, in ORT format, and the operators of it the cut lacks."""
    from ...smoke.models import BUILDERS

    ref = BUILDERS[OUTSIDE_MODEL]()
    onnx_dir = smoke / "outside" / "onnx"
    onnx_dir.mkdir(parents=True)
    (onnx_dir / f"{OUTSIDE_MODEL}.onnx").write_bytes(ref.model)
    with ctx.open_log("web-smoke-convert") as log:
        (converted,) = convert.convert_to_ort_format(
            [onnx_dir / f"{OUTSIDE_MODEL}.onnx"],
            smoke / "outside" / "ort",
            level=ctx.plan.recipe.reduce.optimization_level,
            target_arch=ctx.plan.target.arch,
            ort_version=ctx.plan.version.version,
            cache=ctx.cache,
            toolchain=ctx.toolchain,
            log=log,
        )
    import onnx

    graph = onnx.load_from_string(ref.model).graph
    return CSmokeCase(OUTSIDE_MODEL, converted, list(ref.inputs.values()), None), sorted(
        {n.op_type for n in graph.node}
    )


def run(ctx: BuildContext, state: BuildState) -> WebSmoke:
    package = state.get(WebPackage)
    smoke = ctx.layout.work.host / "web-smoke"
    remove_tree(smoke)
    (smoke / "cases").mkdir(parents=True)
    shutil.copyfile(RUNNER, smoke / RUNNER.name)
    shutil.copytree(package.stage, smoke / "ours")
    # As npm installs them: onnxruntime-web, and onnxruntime-common where its node build looks.
    version = ctx.plan.version.version
    (smoke / "stock" / "node_modules").mkdir(parents=True)
    for npm, into in (
        (web.STOCK[version], smoke / "stock" / "package"),
        (web.COMMON[version], smoke / "stock" / "node_modules" / web.COMMON[version].name),
    ):
        sources.unpack(sources.fetch(npm.pin, ctx.cache.downloads), into)
    results = []
    cases = c_smoke_cases(ctx.plan, ctx.layout.models.host, smoke)
    if not cases:
        raise CheckError(
            "the recipe names no model to run the module on", where=f"recipe {ctx.plan.recipe.name} [reduce] models"
        )
    for case in cases:
        here, outcome = node_case(ctx, state, smoke, case)
        if not outcome.get("ok"):
            raise CheckError(
                f"onnxruntime-web could not run {case.model.name} on the built module: {outcome.get('error')}",
                where=str(package.package),
                fix=f"see {ctx.log_path(f'web-smoke-{case.name}')}",
            )
        results.append({**compare_case_outputs(case, here), "runtime": "node", "ms": round(outcome["ms"], 2)})
    models = state.find(Models)
    cut = {op.split(":")[-1] for op in models.operators} if models else set()
    case, ops = outside_case(ctx, smoke)
    lacking = [op for op in ops if op not in cut]
    _, outcome = node_case(ctx, state, smoke, case)
    named = [op for op in lacking if op in str(outcome.get("error", ""))]
    if outcome.get("ok") or not named:
        raise CheckError(
            f"{case.model.name}, whose {', '.join(lacking) or 'operators'} the cut left out, "
            + ("ran" if outcome.get("ok") else f"failed without naming one: {outcome.get('error')}"),
            where=str(package.package),
            fix="the module holds more than the recipe's models need, or refuses models without saying why",
        )
    refused = {"model": case.model.name, "refused": True, "operators_named": named, "error": outcome["error"][:300]}
    in_chromium, png = in_browser(ctx, smoke, [*cases, case], lacking)
    remove_tree(smoke / "cases")
    shot = Artifact(png, "screenshot", extra={"what": "the web smoke page in headless Chromium"})
    return WebSmoke(runs={"node": (*results, refused), "chromium": in_chromium}, artifacts=(shot,))


def browser_root(ctx: BuildContext) -> CompatRoot:
    """The toolchain's [compat.<name>] with check = "web": where Chromium runs."""
    found = ctx.plan.toolchain.compat_roots("web")
    if not found:
        raise CheckError(
            f"toolchain {ctx.plan.toolchain.name} has no root for the browser",
            where=f"toolchains/{ctx.plan.toolchain.name}.toml",
            fix='add [compat.chromium] with check = "web" and packages = ["chromium", "fonts-dejavu-core"]',
        )
    return found[0]


def in_browser(
    ctx: BuildContext, smoke: Path, cases: list[CSmokeCase], lacking: list[str]
) -> tuple[tuple[dict[str, Any], ...], Path]:
    """The same cases on a page in headless Chromium (the clean root), served from 127.0.0.1 with
    onnxruntime-web's browser build: each model runs alike, the one outside the cut is refused."""
    shutil.copyfile(PAGE, smoke / PAGE.name)
    names = ",".join(c.name for c in cases)
    png = ctx.layout.out.host / f"{ctx.plan.recipe.name}.browser.png"
    overlay = ctx.layout.work.host / "web-browser"
    remove_tree(overlay)
    with ctx.open_log("web-smoke-chromium") as log, browser.serving(smoke) as port:
        root = ctx.toolchain.ensure_compat_root(ctx.cache, browser_root(ctx), log)
        url = f"http://127.0.0.1:{port}/page.html?cases={names}&entry=/stock/package/{web.BROWSER_ENTRY}"
        title = browser.screenshot_page(ctx.toolchain, root, [], overlay, url, png, "done", log)
    remove_tree(overlay)
    said = smoke / browser.RESULT
    if not said.is_file():
        raise CheckError(
            f"the page in Chromium reported nothing (its title: {title!r})",
            where=url,
            fix=f"see {ctx.log_path('web-smoke-chromium')} and the screenshot {png}",
        )
    outcomes = {r["case"]: r for r in json.loads(said.read_text(encoding="utf-8"))}
    results: list[dict[str, Any]] = []
    for case in cases:
        outcome = outcomes.get(case.name, {})
        if case.expected is None:  # the model outside the cut
            named = [op for op in lacking if op in str(outcome.get("error", ""))]
            if outcome.get("ok") or not named:
                raise CheckError(
                    f"in Chromium, {case.model.name} "
                    + ("ran" if outcome.get("ok") else f"failed without naming an operator: {outcome.get('error')}"),
                    where=url,
                )
            results.append({"model": case.model.name, "refused": True, "operators_named": named})
            continue
        if not outcome.get("ok"):
            raise CheckError(f"in Chromium, {case.model.name} did not run: {outcome.get('error')}", where=url)
        here = smoke / "cases" / case.name / "chromium"
        here.mkdir()
        for i, values in enumerate(outcome["outputs"]):
            (here / f"out_{i}.bin").write_bytes(np.asarray(values, dtype=np.float32).tobytes())
        results.append({**compare_case_outputs(case, here), "runtime": "chromium", "ms": round(outcome["ms"], 2)})
    return tuple(results), png


STEP = StepDef(run, reusable=True)
