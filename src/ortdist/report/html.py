"""The page itself: a pure function of the collected reports (render), written atomically."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ..manifest import PREVIOUS_MANIFEST
from . import release
from .collect import RecipeReport, collect


def _mb(size: int) -> str:
    return f"{size / 1e6:.2f} MB"


def _e(value: object) -> str:
    return html.escape(str(value))


def _smoke_matrix(r: RecipeReport) -> str:
    rows = []
    for report in r.smoke:
        for v in report.get("models", []):
            latency = v.get("latency_ms")
            status = "skip" if v.get("skipped") else "pass" if v.get("passed") else "fail"
            rows.append(
                f"<tr class='{status}'><td>{_e(v['provider'].removesuffix('ExecutionProvider'))}</td>"
                f"<td>{_e(v['name'])}</td><td>{v.get('share', 0):.0%}</td><td>{v.get('max_abs_err', 0):.2g}</td>"
                f"<td>{v.get('seconds', 0) * 1000:.2f}</td><td>{'-' if latency is None else f'{latency:.3f}'}</td>"
                f"<td>{_e(status.upper() if status != 'fail' else 'FAIL: ' + v.get('message', ''))}</td></tr>"
            )
    if not rows:
        return "<p class='none'>No smoke report yet: <code>nox -s smoke -- dist/&lt;recipe&gt;/*.whl</code></p>"
    node = "; ".join(
        f"{p.removesuffix('ExecutionProvider')} {c['passed']} passed / {c['failed']} failed"
        for report in r.smoke
        for p, c in report.get("node_tests", {}).items()
    )
    return (
        "<table class='smoke-matrix'><thead><tr><th>EP</th><th>model</th><th>nodes on EP</th>"
        "<th>max abs err</th><th>first run ms</th><th>median ms</th><th>result</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table><p>ONNX node tests: {_e(node or 'not run')}</p>"
    )


def _delta(v: release.Versus) -> str:
    if v.same_bytes:
        return "identical (same sha256)"
    if not v.delta:
        return "same size, other bytes"
    return f"{v.delta:+,} B ({v.percent:+.2f}%)"


def _versus_previous(r: RecipeReport, artifact: dict[str, Any]) -> str:
    if r.previous is None:
        return "<td class='none'>no previous build</td>"
    v = release.versus_previous(artifact, r.previous)
    if v is None:
        return "<td class='none'>new</td>"
    return f"<td class='versus' title='{_e(v.reference)}'>{_e(_delta(v))}<br><small>was {v.size:,} B</small></td>"


def _versus_pypi(r: RecipeReport, artifact: dict[str, Any]) -> str:
    reference = r.pypi.get(artifact["path"])
    v = release.versus_pypi(artifact, reference) if reference else None
    if reference is None or v is None:
        if artifact["kind"] != "wheel":
            return "<td class='none'></td>"
        return "<td class='none' title='no PyPI wheel for it in data/pypi_wheels.toml'>-</td>"
    return (
        f"<td class='versus pypi' title='{_e(reference.file)}'>{_e(_delta(v))}<br>"
        f"<small>PyPI {reference.size:,} B</small></td>"
    )


def _artifacts(r: RecipeReport) -> str:
    """The artifacts, each against the previous build's and (wheels) PyPI's file."""
    rows = "".join(
        f"<tr><td>{_e(a['kind'])}</td><td>{_e(a['path'])}</td>"
        f"<td>{a['size']:,} B<br><small>{_mb(a['size'])}</small></td>"
        f"<td><code>{_e(a['sha256'][:16])}</code></td>{_versus_previous(r, a)}{_versus_pypi(r, a)}</tr>"
        for a in r.manifest.get("artifacts", [])
    )
    gone = release.dropped(r.manifest, r.previous)
    return (
        "<table class='artifacts'><thead><tr><th>kind</th><th>file</th><th>size</th><th>sha256</th>"
        f"<th>vs previous build</th><th>vs PyPI</th></tr></thead><tbody>{rows}</tbody></table>"
        + (f"<p>In the previous build, no longer built: {_e(', '.join(gone))}</p>" if gone else "")
    )


def _previous_note(r: RecipeReport) -> str:
    p = r.previous
    if p is None:
        return (
            f"<p class='none'>No previous build of this recipe to compare with: publishing keeps the "
            f"manifest it replaces as {PREVIOUS_MANIFEST}, so the next build is compared with this one.</p>"
        )
    changed = p.get("recipe_sha256") != r.manifest.get("recipe_sha256")
    return (
        f"<p class='previous'>Compared with the previous build of this recipe ({PREVIOUS_MANIFEST}: "
        f"ortdist {_e(p.get('ortdist_version', '?'))}, ONNX Runtime {_e(p.get('ort_version', '?'))}"
        + (", the recipe file has changed since" if changed else ", same recipe file")
        + ").</p>"
    )


_TL_NAME, _TL_SPAN, _TL_ROW, _TL_TEXT = 90, 600, 20, 160  # px: step names, all steps' time, a row, end labels


def _timeline(steps: list[release.Step]) -> str:
    """The steps as a timeline in inline SVG: one row per step in the order they ran, its bar
    starting where the steps before it ended and as long as its seconds (one scale for the whole
    build), labelled with the seconds; reused steps (cached or no-op) drawn hollow and labelled so."""
    total = sum(s.seconds for s in steps)
    scale = _TL_SPAN / total if total > 0 else 0.0
    rows = []
    for i, s in enumerate(steps):
        y, x, width = i * _TL_ROW, _TL_NAME + s.start * scale, s.seconds * scale
        kind = s.reuse.label if s.reuse else "work"
        tag = f" · {s.reuse.label}" if s.reuse else ""
        why = f" ({s.reuse.why})" if s.reuse else ""
        rows.append(
            f"<g class='step {kind}' data-step='{_e(s.name)}' data-seconds='{s.seconds}'>"
            f"<title>{_e(f'{s.name}: {s.seconds:.1f} s{why}')}</title>"
            f"<text class='name' x='0' y='{y + 14}'>{_e(s.name)}</text>"
            f"<rect class='tl-bar' x='{x:.2f}' y='{y + 3}' width='{width:.2f}' height='{_TL_ROW - 6}'/>"
            f"<text class='secs' x='{x + width + 4:.2f}' y='{y + 14}'>{s.seconds:.1f} s{_e(tag)}</text></g>"
        )
    axis_y = len(steps) * _TL_ROW + 4
    axis = (
        f"<line class='axis' x1='{_TL_NAME}' x2='{_TL_NAME + _TL_SPAN}' y1='{axis_y}' y2='{axis_y}'/>"
        f"<text class='axis' x='{_TL_NAME}' y='{axis_y + 14}'>0 s</text>"
        f"<text class='axis' x='{_TL_NAME + _TL_SPAN}' y='{axis_y + 14}' text-anchor='end'>{total:.1f} s</text>"
    )
    return (
        f"<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='{_TL_NAME + _TL_SPAN + _TL_TEXT}' "
        f"height='{axis_y + 20}' role='img' aria-label='build steps in the order they ran'>{''.join(rows)}{axis}</svg>"
        "<p class='legend'><span class='key work'></span> work <span class='key cached'></span> cached "
        "(every compile from the compiler cache) <span class='key no-op'></span> no-op (nothing to do)</p>"
    )


def _steps_table(r: RecipeReport, steps: list[release.Step]) -> str:
    total = sum(s.seconds for s in steps)

    def change(now: float, before: float | None) -> str:
        return "<td></td><td></td>" if before is None else f"<td>{before:.1f} s</td><td>{now - before:+.1f} s</td>"

    rows = "".join(
        f"<tr class='{s.reuse.label if s.reuse else 'work'}'><td>{_e(s.name)}</td><td>{s.seconds:.1f} s</td>"
        f"<td>{s.seconds / total if total else 0:.0%}</td>{change(s.seconds, s.previous)}"
        f"<td>{_e(f'{s.reuse.label}: {s.reuse.why}' if s.reuse else '')}</td></tr>"
        for s in steps
    )
    now_total = release.total_seconds(r.manifest)
    foot = (
        f"<tr class='total'><td>total</td><td>{now_total:.1f} s</td><td></td>"
        f"{change(now_total, release.total_seconds(r.previous))}<td></td></tr>"
        if now_total is not None
        else ""
    )
    return (
        "<table class='times'><thead><tr><th>step</th><th>time</th><th>share</th><th>previous</th><th>change</th>"
        f"<th>reused</th></tr></thead><tbody>{rows}{foot}</tbody></table>"
    )


def _cache(r: RecipeReport) -> str:
    """The compiler cache's hit rate, with the counts it comes from."""
    c = release.compiler_cache(r.manifest)
    if c is None:
        return "<p class='cache'>Compiler cache: no counters in the manifest (none used).</p>"
    misses = f"{c.misses:,} {'miss' if c.misses == 1 else 'misses'}"
    if c.rate is None:
        text = f"no compiles in this build (0 hits, {misses})"
    else:
        kinds = ", ".join(f"{v:,} {k.removesuffix('_hit').removesuffix('_cache')}" for k, v in c.hit_kinds.items())
        detail = f" ({kinds})" if len(c.hit_kinds) > 1 else ""
        text = f"{c.rate:.1%} hit rate: {c.hits:,} of {c.compiles:,} compiles from the cache{detail}, {misses}"
    return f"<p class='cache'>Compiler cache ({_e(c.name)}): {_e(text)}</p>"


def _build_facts(r: RecipeReport) -> str:
    steps = release.timeline(r.manifest, r.previous)
    return f"{_timeline(steps)}{_cache(r)}{_steps_table(r, steps)}"


def _published(r: RecipeReport) -> str:
    """publish.json: the index the wheels went to, and each one installed back by name and run."""
    p = r.published
    if not p:
        return "<p class='none'>Not published: <code>nox -s publish -- RECIPE --repository-url URL</code></p>"
    verified = p.get("verified", {})
    rows = "".join(
        f"<tr class='{'pass' if v.get('passed') else 'fail'}'><td>{_e(name)}</td>"
        f"<td>{_e((v.get('installed_from') or {}).get('url', '-'))}</td>"
        f"<td>{_e(v.get('models_passed'))}/{_e(v.get('models'))}</td><td>{_e(v.get('environment'))}</td></tr>"
        for name, v in verified.items()
    )
    seconds = ", ".join(f"{_e(k)} {float(v):.1f} s" for k, v in p.get("seconds", {}).items())
    return (
        f"<p>Uploaded {len(p.get('uploaded', []))} wheel(s) to <code>{_e(p.get('repository_url'))}</code>"
        f" ({len(p.get('skipped', {}))} already there); {seconds}.</p>"
        + (
            "<table class='published'><thead><tr><th>wheel</th><th>installed by name from</th>"
            f"<th>reference models</th><th>where</th></tr></thead><tbody>{rows}</tbody></table>"
            if rows
            else ""
        )
    )


def _device_proof(r: RecipeReport) -> str:
    """device-proof.json (``ortdist device-proof accept``): the wheel on a real accelerator."""
    p = r.device_proof
    if not p:
        return "<p class='none'>Not proven on a device: <code>ortdist device-proof prepare RECIPE</code></p>"
    machine = p.get("machine", {})
    models = "".join(
        f"<tr class='{'pass' if m.get('passed') else 'fail'}'>"
        f"<td>{_e(m.get('provider'))}</td><td>{_e(m.get('name'))}</td>"
        f"<td>{float(m.get('share', 0.0)):.0%}</td><td>{_e(m.get('message'))}</td></tr>"
        for m in p.get("models", [])
    )
    nodes = ", ".join(
        f"{_e(k)}: {_e(v.get('passed'))} passed, {_e(v.get('failed'))} failed"
        for k, v in p.get("node_tests", {}).items()
    )
    latency = p.get("latency", {})
    rows = "".join(
        f"<tr><td>{_e(x.get('variant'))}</td><td>{_e(x.get('provider'))}</td>"
        f"<td>{float(x.get('median_ms', 0)):.2f} ms</td>"
        f"<td>x{_e(x.get('speedup_vs_cpu'))}</td><td>{_e(x.get('matches_cpu', 'reference'))}</td></tr>"
        for x in latency.get("rows", [])
    )
    return (
        f"<p class='{'pass' if p.get('passed') else 'fail'}'>{'Passed' if p.get('passed') else 'FAILED'} on "
        f"{_e(', '.join(machine.get('gpus', [])) or '?')} ({_e(machine.get('cpu_cores'))} CPU cores, Python "
        f"{_e(machine.get('python'))}, numpy {_e(machine.get('numpy'))}) with <code>{_e(p.get('wheel'))}</code>. "
        f"Node tests: {nodes}.</p>"
        "<table class='device-proof'><thead><tr><th>EP</th><th>model</th><th>nodes on EP</th><th>result</th></tr>"
        f"</thead><tbody>{models}</tbody></table>"
        + (
            "<table class='device-latency'><thead><tr><th>model</th><th>EP</th>"
            f"<th>median of {_e(latency.get('runs'))}</th><th>vs CPU EP ({_e(latency.get('threads'))} threads)</th>"
            "<th>outputs match CPU fp32</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            if rows
            else ""
        )
    )


def _compat(r: RecipeReport) -> str:
    """The manifest's compat entries: each older system the build was proven on, and with what."""
    rows = []
    for c in r.manifest.get("compat", []):
        details = c.get("details", {})
        if c.get("check") == "c":
            what = f"C program built with {details.get('gcc', '?')} against the shipped library"
        else:
            providers = ", ".join(p.removesuffix("ExecutionProvider") for p in details.get("available_providers", []))
            what = f"{details.get('wheel', 'wheel')} on {details.get('python', '?')}: reference models on {providers}"
        if c.get("not_run"):
            what = f"not run: {c['not_run']}"
        status = "pass" if c.get("ok") else "skip" if c.get("not_run") else "fail"
        rows.append(
            f"<tr class='{status}'><td>{_e(c.get('name'))}</td><td>Debian {_e(c.get('suite'))}</td>"
            f"<td>{_e(c.get('glibc'))}</td><td>{_e(what)}</td><td>{float(c.get('seconds', 0)):.1f} s</td>"
            f"<td>{status.upper()}</td></tr>"
        )
    if not rows:
        return "<p class='none'>No older systems checked (the toolchain has no [compat] roots).</p>"
    return (
        "<table class='compat'><thead><tr><th>root</th><th>system</th><th>glibc</th><th>proven</th>"
        f"<th>time</th><th>result</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _sbom_summary(r: RecipeReport) -> str:
    s = r.sbom
    if not s:
        return "<p class='none'>No SBOM in these artifacts.</p>"
    patches = "".join(f"<li>{_e(p)}</li>" for p in s["source"]["patches"])
    bundled = len(s["bundled"])
    origins = sorted({(b["from"] or "unknown").split(" ")[0] for b in s["bundled"]})
    return (
        f"<ul class='sbom'><li>source: onnxruntime {_e(s['source']['version'])}, sha256 "
        f"<code>{_e(s['source']['sha256'])}</code></li><li>patches:<ul>{patches}</ul></li>"
        f"<li>compiled in: {_e(', '.join(s['deps']))}</li><li>toolchain: {_e(s['toolchain'])}</li>"
        + (f"<li>compiler: {_e(s['compiler'])}</li>" if s.get("compiler") else "")
        + f"<li>bundled libraries: {bundled} from {_e(', '.join(origins) or '-')}</li></ul>"
    )


def _bench(dist: Path) -> str:
    table = dist / "bench" / "results.md"
    if not table.is_file():
        return ""
    return f"<section id='bench'><h2>Benchmarks</h2><pre>{_e(table.read_text(encoding='utf-8'))}</pre></section>"


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
h1{margin-bottom:0}section.recipe{border-top:2px solid #ccc;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
tr.pass td:last-child{color:#070}tr.fail td{background:#fdd}tr.skip td:last-child{color:#777}
svg.space text,svg.timeline text{font-size:12px}small,td.none{color:#777}
svg.timeline .work rect,.key.work{fill:#4a7bd0;background:#4a7bd0}
svg.timeline .cached rect,.key.cached{fill:#d4ead4;background:#d4ead4;stroke:#3a8a3a;border:1px dashed #3a8a3a}
svg.timeline .no-op rect,.key.no-op{fill:none;stroke:#888;border:1px dashed #888}
svg.timeline rect{stroke-dasharray:3 2}svg.timeline line.axis{stroke:#999}
svg.timeline .cached text,svg.timeline .no-op text,tr.cached td,tr.no-op td{fill:#777;color:#777;font-style:italic}
.key{display:inline-block;width:14px;height:10px;margin-left:1em}tr.total td{font-weight:bold}
"""

_SCRIPT = """
for (const el of document.querySelectorAll('svg.space')) {
  const data = JSON.parse(el.dataset.bars);
  const max = Math.max(...data.map(d => d[1]));
  const ns = 'http://www.w3.org/2000/svg';
  data.forEach(([label, bytes], i) => {
    const y = i * 24 + 4;
    const bar = document.createElementNS(ns, 'rect');
    bar.setAttribute('class', 'bar'); bar.setAttribute('x', 260); bar.setAttribute('y', y);
    bar.setAttribute('height', 18); bar.setAttribute('width', Math.max(1, 420 * bytes / max));
    bar.setAttribute('fill', '#4a7bd0');
    const name = document.createElementNS(ns, 'text');
    name.setAttribute('x', 0); name.setAttribute('y', y + 14); name.textContent = label;
    const size = document.createElementNS(ns, 'text');
    size.setAttribute('x', 266 + 420 * bytes / max); size.setAttribute('y', y + 14);
    size.textContent = (bytes / 1e6).toFixed(2) + ' MB';
    el.append(bar, name, size);
  });
  el.setAttribute('height', data.length * 24 + 8);
  el.dataset.rendered = String(data.length);
}
// The timeline is inline SVG; record what the browser laid out: the steps in document order and
// each bar's rendered width in px, so a headless browser's DOM proves order and proportions.
for (const el of document.querySelectorAll('svg.timeline')) {
  const steps = [...el.querySelectorAll('g.step')];
  el.dataset.order = steps.map(g => g.dataset.step).join(' ');
  el.dataset.widths = steps.map(g => g.querySelector('rect').getBoundingClientRect().width.toFixed(1)).join(' ');
  el.dataset.rendered = String(steps.length);
}
"""


def _pythons(m: dict[str, Any]) -> str:
    """The wheels' Pythons, and loudly the recipe's ones a --python choice left out."""
    built = m.get("python") or []
    if not built:
        return ""
    left = m.get("python_not_built") or []
    note = (
        f" <strong style='color:#a00'>Not built (chosen on the command line with --python): Python "
        f"{_e(', '.join(left))}; this is not the recipe's whole release.</strong>"
        if left
        else ""
    )
    return f"<p>Wheels for Python {_e(', '.join(built))}.{note}</p>"


def _cuda(m: dict[str, Any]) -> str:
    """The GPUs a CUDA build promises, what its libraries carry (read from their fatbins by the size
    step), and loudly a --cuda-architectures build that is not the recipe's release."""
    promised = m.get("cuda_architectures")
    if not promised:
        return ""
    narrowed = m.get("cuda_recipe_architectures") or []
    note = (
        f" <strong style='color:#a00'>Built with --cuda-architectures: the recipe ships "
        f"{_e(', '.join(narrowed))}; this is not its release.</strong>"
        if narrowed
        else ""
    )
    rows = "".join(
        f"<tr><td>{_e(lib['library'])}</td><td>{_e(arch)}</td><td>{'PTX' if arch.startswith('compute_') else 'SASS'}"
        f"</td><td>{_mb(stored)}</td></tr>"
        for lib in (m.get("size") or {}).get("cuda_device_code", [])
        for arch, stored in lib["bytes_per_arch"].items()
    )
    table = (
        "<table class='cuda'><thead><tr><th>library</th><th>architecture</th><th>code</th><th>stored</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
        if rows
        else ""
    )
    return f"<p>CUDA code for {_e(', '.join(promised))} (CMake architectures).{note}</p>{table}"


def render(reports: list[RecipeReport], bench_html: str = "") -> str:
    sections = []
    for r in reports:
        m = r.manifest
        bars = json.dumps(sorted(r.space.items(), key=lambda kv: -kv[1]))
        largest = "".join(f"<tr><td>{_e(n)}</td><td>{_mb(s)}</td></tr>" for n, s in r.largest)
        sections.append(
            f"<section class='recipe' id='{_e(r.recipe)}'><h2>{_e(r.recipe)}</h2>"
            f"<p>{_e(m.get('description', ''))}</p>"
            f"<p>ONNX Runtime {_e(m.get('ort_version'))} for {_e(m.get('target'))}; EPs: "
            f"{_e(', '.join(m.get('provider_names', [])))}; {_e(m.get('build_type'))}</p>{_pythons(m)}{_cuda(m)}"
            f"<h3>Artifacts</h3>{_previous_note(r)}{_artifacts(r)}"
            f"<h3>Build steps, in the order they ran</h3>{_build_facts(r)}"
            f"<h3>Smoke matrix</h3>{_smoke_matrix(r)}"
            f"<h3>On a device</h3>{_device_proof(r)}"
            f"<h3>Older systems</h3>{_compat(r)}"
            f"<h3>Published</h3>{_published(r)}"
            f"<h3>What takes the space in the wheel (uncompressed)</h3>"
            f"<svg class='space' width='800' height='10' data-bars='{_e(bars)}'></svg>"
            f"<table class='largest'><thead><tr><th>largest members</th><th>size</th></tr></thead>"
            f"<tbody>{largest}</tbody></table>"
            f"<h3>SBOM</h3>{_sbom_summary(r)}</section>"
        )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>ortdist build report</title>"
        f"<style>{_STYLE}</style></head><body><h1>ortdist build report</h1>"
        f"<p>{len(reports)} build(s): {_e(', '.join(r.recipe for r in reports))}</p>"
        f"{''.join(sections)}{bench_html}<script>{_SCRIPT}</script></body></html>\n"
    )


def write_report(dist: Path, out: Path) -> Path:
    from ..fsutil import atomic_write_text

    bench = _bench(dist)  # the benchmark builds into its own cache dir: dist/ may hold only bench/
    atomic_write_text(out, render(collect(dist, require=not bench), bench))
    return out
