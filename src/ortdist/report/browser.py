"""A real headless Chromium runs the page's script: the tests read what it laid out."""

from __future__ import annotations

from pathlib import Path

from ..errors import CheckError


def chromium_render(page: Path, screenshot: Path | None = None) -> str:
    """The page's DOM after a real headless Chromium ran its script; optionally a PNG of it.

    Debian's `chromium` is installed on demand (apt) like the other host tools."""
    from .. import run
    from ..hosttools import require_host_tools

    require_host_tools("chromium")
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1300,3000"]
    url = page.resolve().as_uri()
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        run.capture([*base, f"--screenshot={screenshot}", url], error=CheckError, what="chromium screenshot")
    dom: str = run.capture([*base, "--dump-dom", url], error=CheckError, what="chromium --dump-dom").stdout
    return dom
