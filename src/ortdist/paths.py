"""Where things live: the project checkout, the cache outside it, and fixed paths inside roots."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Fixed mount points inside a build root. Keeping them identical across recipes and machines
# makes compiler command lines identical, so ccache hits survive `rm -rf` of the build tree.
IN_ROOT = Path("/ortdist")
IN_ROOT_SOURCE = IN_ROOT / "source"
IN_ROOT_DEPS = IN_ROOT / "deps"
IN_ROOT_BUILD = IN_ROOT / "build"
IN_ROOT_SHIMS = IN_ROOT / "shims"
IN_ROOT_CCACHE = IN_ROOT / "ccache"
IN_ROOT_WORK = IN_ROOT / "work"
IN_ROOT_WHEELHOUSE = IN_ROOT / "wheelhouse"
IN_ROOT_TARGET = IN_ROOT / "target"  # a cross target's sysroot
IN_ROOT_PYTHONS = IN_ROOT / "python"  # other CPython versions, one directory each
IN_ROOT_TOOLS_VENV = Path("/opt/ortdist-tools")
IN_ROOT_EP_WHEELS = Path("/opt/ortdist-wheels")  # PyPI SDK wheels, one directory per distribution
IN_ROOT_COMPILER = Path("/opt/ortdist-compiler")  # a toolchain's [compiler], unpacked


def in_root(value: str) -> str:
    """A toolchain define as seen inside the root: ``{shims}`` is where cmake-shims/ is bound,
    ``{wheels}`` where the toolchain's [ep_wheels] are unpacked (one directory per distribution),
    ``{compiler}`` where its [compiler] is unpacked, ``{deps}`` where dependency sources are bound
    (one directory per name)."""
    for placeholder, path in (
        ("{shims}", IN_ROOT_SHIMS),
        ("{wheels}", IN_ROOT_EP_WHEELS),
        ("{compiler}", IN_ROOT_COMPILER),
        ("{deps}", IN_ROOT_DEPS),
    ):
        value = value.replace(placeholder, str(path))
    return value


def project_root() -> Path:
    """The checkout holding recipes/, patches/ and toolchains/ (ORTDIST_PROJECT overrides)."""
    env = os.environ.get("ORTDIST_PROJECT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "recipes").is_dir() and (candidate / "toolchains").is_dir():
            return candidate
    return here


@dataclass(frozen=True)
class Cache:
    """The cache outside the repo: downloads, sysroots, patched sources, build trees, ccache."""

    root: Path

    @classmethod
    def default(cls) -> Cache:
        env = os.environ.get("ORTDIST_CACHE")
        if env:
            return cls(Path(env).resolve())
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return cls(Path(base) / "ortdist")

    @property
    def downloads(self) -> Path:
        return self.root / "downloads"

    @property
    def sysroots(self) -> Path:
        return self.root / "sysroots"

    @property
    def sources(self) -> Path:
        return self.root / "sources"

    def wheelhouse(self, python: str, arch: str = "x86_64") -> Path:
        tag = f"cp{python.replace('.', '')}"
        return self.root / "wheelhouse" / (tag if arch == "x86_64" else f"{tag}-{arch}")

    def work(self, recipe: str) -> Path:
        return self.root / "work" / recipe
