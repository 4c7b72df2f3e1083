"""Smoke reports: JSON and JUnit XML per wheel, and a table for the terminal."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from .suite import Verdict


def junit_xml(
    wheel: str, verdicts: list[Verdict], node: dict[str, dict[str, bool]], regressed: dict[str, list[str]]
) -> str:
    suite = ET.Element("testsuite", name=f"ortdist smoke {wheel}")
    failures = skipped = total = 0
    for v in verdicts:
        total += 1
        case = ET.SubElement(suite, "testcase", classname=f"{v.provider}.models", name=v.name, time=f"{v.seconds:.4f}")
        if not v.passed:
            failures += 1
            ET.SubElement(case, "failure", message=v.message)
        elif v.skipped:
            skipped += 1
            ET.SubElement(case, "skipped", message=v.message)
    for provider, outcomes in node.items():
        for name, ok in sorted(outcomes.items()):
            total += 1
            case = ET.SubElement(suite, "testcase", classname=f"{provider}.node_tests", name=name)
            if name in regressed.get(provider, []):
                failures += 1
                ET.SubElement(case, "failure", message="passes on the baseline wheel, fails on this one")
            elif not ok:
                skipped += 1
                ET.SubElement(case, "skipped", message="fails on this wheel (and on the baseline, if one was given)")
    suite.set("tests", str(total))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode") + "\n"


def write_reports(
    out_dir: Path,
    report: dict[str, Any],
    verdicts: list[Verdict],
    node: dict[str, dict[str, bool]],
    regressed: dict[str, list[str]],
) -> None:
    stem = Path(report["wheel"]).stem
    atomic_write_text(out_dir / f"{stem}.json", json.dumps(report, indent=1, sort_keys=True) + "\n")
    atomic_write_text(out_dir / f"{stem}.junit.xml", junit_xml(report["wheel"], verdicts, node, regressed))


def table(rows: list[tuple[str, Verdict]]) -> str:
    header = ("wheel", "EP", "model", "on EP", "max abs err", "time ms", "median ms", "result")
    lines = [header]
    for wheel, v in rows:
        lines.append(
            (
                wheel,
                v.provider.removesuffix("ExecutionProvider"),
                v.name,
                f"{v.share:.0%}",
                f"{v.max_abs_err:.2g}",
                f"{v.seconds * 1000:.2f}",
                "-" if v.latency_ms is None else f"{v.latency_ms:.3f}",
                ("SKIP: " + v.message.removeprefix("skipped: "))
                if v.skipped
                else "PASS"
                if v.passed
                else f"FAIL: {v.message}",
            )
        )
    widths = [max(len(r[i]) for r in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in lines)
