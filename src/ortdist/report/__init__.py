"""dist/report.html: one static page for a set of builds, readable offline.

For every recipe in dist/, as a release page: a timeline of the build's steps in the order they
ran (steps that reused earlier work drawn apart from real work, see ``release.reuse``), the
compiler-cache hit rate, the artifacts each against the previous build of the recipe and, for
wheels, against PyPI's (``release``); the smoke matrix (EP x reference model: share of nodes on
the EP, max error, median latency), the older systems the build was proven on, what takes the
space in the wheel (a bar chart), and the SBOM summary; benchmark results when
dist/bench/results.md exists. Collecting reads files; rendering is a pure function of the
collected data. The timeline is inline SVG written here; the space chart is drawn in the browser
from data embedded in the page (no network). The page's script records what the browser laid out
(``data-rendered``, the timeline's step order and bar widths), so a headless Chromium can prove it.
"""

from __future__ import annotations

from .browser import chromium_render
from .collect import RecipeReport, collect, input_files, wheel_space
from .html import render, write_report

__all__ = ["RecipeReport", "chromium_render", "collect", "input_files", "render", "wheel_space", "write_report"]
