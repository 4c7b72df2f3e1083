"""README.md and docs/: links that resolve, commands and files that exist, a README of one screen.

A page that names `ortdist frobnicate`, `nox -s frobnicate`, a moved file or a heading that was
renamed fails here, not in a newcomer's terminal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ortdist.cli import main

PROJECT = Path(__file__).resolve().parents[2]
PAGES = [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
COMMAND = re.compile(r"(?<![\w-])ortdist ((?:[a-z][a-z-]*)(?: (?:prepare|run|accept))?)\b")
SESSION = re.compile(r"nox -s ([\w-]+)(?![\w<-])")
REPO_PATH = re.compile(r"^(?:src|tests|recipes|toolchains|patches|docs|ci|\.ci)/[\w./-]*[\w/]$")
README_LINES = 60  # one screen: the two commands, what they leave in dist/, where to read more


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def code_of(page: Path) -> str:
    return "\n".join(m.group(0) for m in CODE.finditer(page.read_text(encoding="utf-8")))


def test_the_readme_fits_one_screen_and_links_every_docs_page() -> None:
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    assert "./nox -s build-cpu-linux" in readme and "./nox -s tests" in readme
    linked = {target.split("#")[0] for target in LINK.findall(readme)}
    assert {f"docs/{p.name}" for p in PAGES[1:]} <= linked


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_resolves(page: Path) -> None:
    dead = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
            dead.append(target)
    assert not dead, f"{page.name}: dead links {dead}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page: Path) -> None:
    named = {m.group(0)[1:-1] for m in re.finditer(r"`[^`\s]+`", page.read_text(encoding="utf-8"))}
    missing = sorted(p for p in named if REPO_PATH.match(p) and not (PROJECT / p).exists())
    assert not missing, f"{page.name} names files that do not exist: {missing}"


def documented_commands() -> list[str]:
    return sorted({m.group(1) for page in PAGES for m in COMMAND.finditer(code_of(page))})


def test_the_pages_document_the_commands_a_newcomer_needs() -> None:
    assert {"build", "plan", "smoke", "report", "publish", "device-proof run"} <= set(documented_commands())


@pytest.mark.parametrize("command", documented_commands())
def test_every_documented_ortdist_command_exists(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*command.split(), "--help"])
    assert done.value.code == 0, capsys.readouterr().err
    assert "usage: ortdist " + command in capsys.readouterr().out


def nox_sessions() -> set[str]:
    noxfile = (PROJECT / "noxfile.py").read_text(encoding="utf-8")
    named = set(re.findall(r"@nox\.session\([^)]*name=\"([\w-]+)\"", noxfile))
    named |= {
        m.group(2)
        for m in re.finditer(r"@nox\.session(\([^)]*\))?\ndef (\w+)", noxfile)
        if "name=" not in (m.group(1) or "")
    }
    named.add("unit-debian-python")  # name=DEBIAN_PYTHON_SESSION
    return named | {f"build-{r.stem}" for r in (PROJECT / "recipes").glob("*.toml")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_nox_session_exists(page: Path) -> None:
    sessions = nox_sessions()
    unknown = sorted({s for s in SESSION.findall(code_of(page)) if s not in sessions})
    assert not unknown, f"{page.name} names nox sessions that do not exist: {unknown}"
