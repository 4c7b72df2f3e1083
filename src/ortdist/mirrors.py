"""Where ortdist's downloads come from: what the host's own package clients are configured with.

A team behind a company mirror has already told pip (pip.conf, PIP_INDEX_URL), apt (its sources)
and npm (.npmrc) where to go, so ortdist asks them rather than keep registry addresses of its own:
pip's index from ``pip config list`` (else pip's own default, read from pip), Debian's archive from
the host's apt sources where they name a Debian suite (else the toolchain's ``mirror``), npm's
registry from ``npm config get registry``. ortdist's variables still win: ORTDIST_PYPI_SIMPLE,
ORTDIST_DEBIAN_MIRROR, ORTDIST_NPM_REGISTRY. What pip itself downloads (wheels, tools) it fetches
with that same configuration; this module answers for what ortdist fetches directly (orig
tarballs, sdists, npm tarballs, debootstrap's archive). Every input is pinned by sha256, so any
mirror is safe; the manifest records each input's URL.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import registry, run
from .errors import SourceError

APT_SOURCES = Path("/etc/apt")
# Debian's own names for its suites besides the codenames (data/debian_suites.toml).
DEBIAN_ALIASES = ("oldstable", "stable", "testing", "unstable", "sid", "experimental")
# pip's precedence for `pip download`: the environment, then the command's section, then [global].
_PIP_SCOPES = (":env:", "download.", "global.")
_PIP_LINE = re.compile(r"^(?P<key>[^=\s]+)=(?P<quote>['\"])(?P<value>.*)(?P=quote)$")
_PIP_DEFAULT = re.compile(r"--index-url <url>.*?\(default\s+(?P<url>\S+?)\)", re.S)


@dataclass(frozen=True)
class Mirror:
    """Where to fetch from (no trailing slash) and where that was read, for messages and records."""

    url: str
    origin: str


@dataclass(frozen=True)
class PipIndex:
    """pip's index, the extra indexes searched after it, and the CA bundle pip verifies with."""

    index: Mirror
    extra: tuple[str, ...] = ()
    cert: str = ""


def _pip_values(config_list: str) -> dict[str, str]:
    """``pip config list`` output (key='value' lines) as a dict."""
    out = {}
    for line in config_list.splitlines():
        m = _PIP_LINE.match(line.strip())
        if m:
            out[m["key"]] = m["value"]
    return out


def _pip_get(values: Mapping[str, str], name: str) -> tuple[str, str] | None:
    for scope in _PIP_SCOPES:
        key = f"{scope}{'.' if scope == ':env:' else ''}{name}"
        if values.get(key):
            return key, values[key]
    return None


def pip_index_from(config_list: str, download_help: str) -> PipIndex:
    """pip's index as ``pip config list`` and ``pip download --help`` give it (pure)."""
    values = _pip_values(config_list)
    found = _pip_get(values, "index-url")
    if found:
        index = Mirror(found[1].rstrip("/"), f"pip's configuration ({found[0]})")
    else:
        m = _PIP_DEFAULT.search(download_help)
        if m is None:
            raise SourceError(
                "pip names no index: its configuration has no index-url and its help no default",
                fix="set PIP_INDEX_URL (or index-url in pip.conf), or ORTDIST_PYPI_SIMPLE",
            )
        index = Mirror(m["url"].rstrip("/"), "pip's default")
    extra = _pip_get(values, "extra-index-url")
    cert = _pip_get(values, "cert")
    return PipIndex(index, tuple(u.rstrip("/") for u in extra[1].split()) if extra else (), cert[1] if cert else "")


def _deb822(text: str) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(types, URIs, suites) of each enabled stanza of a deb822 .sources file."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        yield fields.get("types", "").split(), fields.get("uris", "").split(), fields.get("suites", "").split()


def _one_line(text: str) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(types, URIs, suites) of each ``deb [options] uri suite components`` line."""
    for line in text.splitlines():
        line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()  # type: ignore[assignment]
        if len(line) >= 3:
            yield [line[0]], [line[1]], [line[2]]


def apt_archive_from(files: Mapping[str, str], suites: Collection[str]) -> Mirror | None:
    """The first apt source (files in apt's order) that serves one of Debian's ``suites`` (its
    updates and backports count; the security archive is another one): its URI, or None."""
    for path, text in files.items():
        entries = _deb822(text) if path.endswith(".sources") else _one_line(text)
        for types, uris, entry_suites in entries:
            if "deb" not in types or not uris:
                continue
            if any(s.split("-")[0] in suites and not s.endswith("-security") for s in entry_suites):
                return Mirror(uris[0].rstrip("/"), path)
    return None


def _apt_files(base: Path) -> dict[str, str]:
    """sources.list, then sources.list.d/*.list and *.sources in name order, as apt reads them."""
    paths = [base / "sources.list"]
    directory = base / "sources.list.d"
    if directory.is_dir():
        paths += sorted(p for p in directory.iterdir() if p.suffix in (".list", ".sources"))
    out = {}
    for path in paths:
        try:
            out[str(path)] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return out


class Host:
    """What this machine's package clients say: the one place this module asks them (the unit tests
    put a stand-in here)."""

    def pip(self, *args: str) -> str:
        return run.capture([sys.executable, "-m", "pip", *args], check=False).stdout

    def npm_registry(self) -> str | None:
        npm = shutil.which("npm")
        if npm is None:
            return None
        return run.capture([npm, "config", "get", "registry"], error=SourceError, what="asking npm").stdout

    def apt_sources(self) -> dict[str, str]:
        return _apt_files(APT_SOURCES)


HOST = Host()


@functools.cache
def pip_index() -> PipIndex:
    """The PyPI index ortdist reads sdists from: ORTDIST_PYPI_SIMPLE, else pip's own answer."""
    if os.environ.get("ORTDIST_PYPI_SIMPLE"):
        return PipIndex(Mirror(os.environ["ORTDIST_PYPI_SIMPLE"].rstrip("/"), "ORTDIST_PYPI_SIMPLE"))
    return pip_index_from(HOST.pip("config", "list"), HOST.pip("download", "--help"))


@functools.cache
def debian_archive(declared: str) -> Mirror:
    """Debian's archive: ORTDIST_DEBIAN_MIRROR, else the host's apt sources where they name a
    Debian suite, else ``declared`` (the toolchain's ``mirror``)."""
    if os.environ.get("ORTDIST_DEBIAN_MIRROR"):
        return Mirror(os.environ["ORTDIST_DEBIAN_MIRROR"].rstrip("/"), "ORTDIST_DEBIAN_MIRROR")
    found = apt_archive_from(HOST.apt_sources(), {*registry.debian_suites(), *DEBIAN_ALIASES})
    return found or Mirror(declared.rstrip("/"), "the toolchain's mirror")


@functools.cache
def npm_registry() -> Mirror:
    """npm's registry: ORTDIST_NPM_REGISTRY, else what this host's npm is configured with."""
    if os.environ.get("ORTDIST_NPM_REGISTRY"):
        return Mirror(os.environ["ORTDIST_NPM_REGISTRY"].rstrip("/"), "ORTDIST_NPM_REGISTRY")
    url = HOST.npm_registry()
    if url is None:
        raise SourceError(
            "no npm on this host to ask for its registry (onnxruntime-web's package comes from it)",
            fix="install npm (its registry setting, .npmrc, is then used), or set ORTDIST_NPM_REGISTRY",
        )
    return Mirror(url.strip().rstrip("/"), "npm's configuration (npm config get registry)")


def clear() -> None:
    """Forget what was asked (the answers are kept for the process: a build asks once)."""
    for cached in (pip_index, debian_archive, npm_registry):
        cached.cache_clear()
