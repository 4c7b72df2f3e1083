"""Where downloads come from (ortdist/mirrors.py): pip's index, Debian's archive and npm's registry
as the host's own clients are configured, ortdist's variables first; and no registry's address
written anywhere in the project."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ortdist import mirrors, run
from ortdist.errors import SourceError

# `pip download --help` (pip 26.3) around the index option, wrapped as pip prints it.
PIP_HELP = """
  -i, --index-url <url>       Base URL of the Python Package Index (default
                              https://index.default.example/simple). This should point to a
                              repository compliant with PEP 503 (the simple
"""


def test_pip_index_follows_pips_own_precedence() -> None:
    config = "\n".join(
        [
            "global.index-url='http://global.example/simple/'",
            "download.index-url='http://download.example/simple'",
            "global.extra-index-url='file:///opt/pypi/simple http://extra.example/simple/'",
            "global.cert='/etc/ssl/certs/company.pem'",
        ]
    )
    found = mirrors.pip_index_from(config, PIP_HELP)
    assert found.index == mirrors.Mirror("http://download.example/simple", "pip's configuration (download.index-url)")
    assert found.extra == ("file:///opt/pypi/simple", "http://extra.example/simple")
    assert found.cert == "/etc/ssl/certs/company.pem"
    env = mirrors.pip_index_from(config + "\n:env:.index-url='http://env.example/simple'", PIP_HELP)
    assert env.index.url == "http://env.example/simple" and env.index.origin == "pip's configuration (:env:.index-url)"
    assert mirrors.pip_index_from("global.index-url='http://global.example/simple/'", "").index.url == (
        "http://global.example/simple"
    )


def test_without_a_configured_index_pips_own_default_serves() -> None:
    found = mirrors.pip_index_from("global.cert='/x.pem'", PIP_HELP)
    assert found.index == mirrors.Mirror("https://index.default.example/simple", "pip's default")
    with pytest.raises(SourceError, match="pip names no index"):
        mirrors.pip_index_from("", "no such option")


def test_the_real_pip_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's pip answers (its config list, else its help's default); ORTDIST_PYPI_SIMPLE wins."""
    asked: list[list[str]] = []

    def capture(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        asked.append(argv[1:])
        out = "global.index-url='http://company.example/pypi/simple'\n" if "config" in argv else PIP_HELP
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(run, "capture", capture)
    monkeypatch.setattr(mirrors, "HOST", mirrors.Host())
    mirrors.clear()
    assert mirrors.pip_index().index.url == "http://company.example/pypi/simple"
    assert asked == [["-m", "pip", "config", "list"], ["-m", "pip", "download", "--help"]]
    mirrors.clear()
    monkeypatch.setenv("ORTDIST_PYPI_SIMPLE", "http://ortdist.example/simple/")
    assert mirrors.pip_index().index == mirrors.Mirror("http://ortdist.example/simple", "ORTDIST_PYPI_SIMPLE")
    assert len(asked) == 2  # the variable needs no pip


DEB822 = """Types: deb
# a comment
URIs: http://apt.company.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://apt.company.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_apt_sources_name_the_debian_archive() -> None:
    suites = {"bullseye", "bookworm", "trixie"}
    assert mirrors.apt_archive_from({"/etc/apt/sources.list.d/debian.sources": DEB822}, suites) == mirrors.Mirror(
        "http://apt.company.example/debian", "/etc/apt/sources.list.d/debian.sources"
    )
    one_line = "deb [arch=amd64 signed-by=/k.gpg] http://cache.example:3142/debian trixie main # proxy\n"
    found = mirrors.apt_archive_from({"/etc/apt/sources.list": one_line}, suites)
    assert found == mirrors.Mirror("http://cache.example:3142/debian", "/etc/apt/sources.list")


@pytest.mark.parametrize(
    "files",
    [
        {"/etc/apt/sources.list": "deb http://archive.ubuntu.example/ubuntu noble main\n"},
        {"/etc/apt/sources.list": "deb http://security.example/debian-security bookworm-security main\n"},
        {"/etc/apt/sources.list": "deb-src http://apt.example/debian bookworm main\n"},
        {"/etc/apt/sources.list.d/d.sources": "Types: deb\nURIs: http://a.example/d\nSuites: sid\nEnabled: no"},
        {},
    ],
    ids=["another-distribution", "security-only", "sources-only", "disabled", "no-sources"],
)
def test_apt_sources_that_name_no_debian_archive_leave_the_toolchains(files: dict[str, str]) -> None:
    assert mirrors.apt_archive_from(files, {"bookworm", "trixie"}) is None


def test_the_hosts_apt_sources_are_read_in_apts_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "a-other.list").write_text("deb http://other.example/x nodistro main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list.d" / "z.list.disabled").write_text("deb http://ignored.example/debian trixie main\n")
    monkeypatch.setattr(mirrors, "APT_SOURCES", tmp_path)
    monkeypatch.setattr(mirrors, "HOST", mirrors.Host())
    mirrors.clear()
    assert mirrors.debian_archive("http://declared.example/debian").url == "http://apt.company.example/debian"
    (tmp_path / "sources.list").write_text("deb http://first.example/debian sid main\n")
    mirrors.clear()
    assert mirrors.debian_archive("http://declared.example/debian").origin == str(tmp_path / "sources.list")
    monkeypatch.setenv("ORTDIST_DEBIAN_MIRROR", "http://ortdist.example/debian/")
    mirrors.clear()
    assert mirrors.debian_archive("x") == mirrors.Mirror("http://ortdist.example/debian", "ORTDIST_DEBIAN_MIRROR")


def test_npm_is_asked_for_its_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mirrors, "HOST", mirrors.Host())
    monkeypatch.setattr(mirrors.shutil, "which", lambda name: "/usr/bin/npm")
    monkeypatch.setattr(
        run, "capture", lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "http://npm.company.example/\n", "")
    )
    mirrors.clear()
    assert mirrors.npm_registry() == mirrors.Mirror(
        "http://npm.company.example", "npm's configuration (npm config get registry)"
    )
    mirrors.clear()
    monkeypatch.setattr(mirrors.shutil, "which", lambda name: None)
    with pytest.raises(SourceError, match="no npm on this host") as err:
        mirrors.npm_registry()
    assert "ORTDIST_NPM_REGISTRY" in (err.value.fix or "")
    mirrors.clear()
    monkeypatch.setenv("ORTDIST_NPM_REGISTRY", "http://ortdist.example/npm/")
    assert mirrors.npm_registry().url == "http://ortdist.example/npm"  # no npm needed


# A registry's host name, in pieces so that this file does not hold one either.
REGISTRIES = re.compile(
    "|".join(
        re.escape(p) for p in ("pypi" + ".org", "pythonhosted" + ".org", "deb." + "debian.org", "registry." + "npmjs")
    )
)


def test_no_registry_address_is_written_in_the_project(project: Path) -> None:
    """Each client knows its default and the host its mirror: src/, docs/, tests/, the README and the
    bootstrap name none (the toolchains' `mirror` is the archive's identity in their digests)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=project, capture_output=True, text=True, check=True).stdout
    files = [
        p
        for p in tracked.split()
        if p.split("/")[0] in ("src", "docs", "tests", ".ci") or p in ("README.md", "nox", "noxfile.py")
    ]
    found = []
    for name in files:
        try:
            text = (project / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if REGISTRIES.search(line)]
    assert not found, f"registry addresses written in the project: {found}"
