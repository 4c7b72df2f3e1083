"""Another CPython in a directory of its own (a python overlay): unpacked from a Debian suite's
packages, or copied from this host's pyenv/uv installation."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ... import run
from ...errors import ToolchainError
from ...inroot import in_root_python
from ...log import log as status
from .. import Bind
from ..host_python import copy_prefix, find_host_python
from ..spec import ToolchainSpec
from .apt import apt_state_dir, private_apt_options, relativize_symlinks, unpack_debs

# DebianSysroot.wrap: the host argv that runs a command inside a root (with binds).
Wrap = Callable[..., list[str]]


def unpack_debian_python(
    spec: ToolchainSpec, wrap: Wrap, build_root: Path, version: str, tmp: Path, log: TextIO
) -> dict[str, str]:
    """The build root's apt, pointed at the version's suite alone, downloads exactly the listed
    packages; they are unpacked (files only) into ``tmp``. Returns package -> version."""
    facts = spec.extra_python[version]
    status.info(f"unpacking CPython {version} from Debian {facts.suite}")
    with apt_state_dir(tmp) as state:
        for sub in ("lists/partial", "cache/archives/partial", "parts", "debs"):
            (state / sub).mkdir(parents=True)
        (state / "status").write_text("")
        (state / "sources.list").write_text(f"deb {spec.mirror} {facts.suite} main\n")
        apt_state = Path("/ortdist/apt-state")
        options = [
            f"-oDir::Etc::SourceList={apt_state}/sources.list",
            f"-oDir::Etc::SourceParts={apt_state}/parts",
            # sid's Release file expires within days; the mirror's copy may be older than that. The
            # signature and the per-file hashes are still checked: only the freshness test is off.
            "-oAcquire::Check-Valid-Until=false",
            *private_apt_options(apt_state),
        ]
        script = " && ".join(
            [
                shlex.join(["apt-get", *options, "update", "-q"]),
                f"cd {apt_state}/debs",
                shlex.join(["apt-get", *options, "download", "-q", *facts.packages]),
            ]
        )
        run.call(
            wrap(build_root, ["/bin/sh", "-c", script], binds=[Bind(state, apt_state)]),
            log=log,
            error=ToolchainError,
            what=f"downloading CPython {version} from Debian {facts.suite}",
        )
        versions = unpack_debs(state / "debs", tmp, log)
    missing = sorted(set(facts.packages) - set(versions))
    if missing:
        raise ToolchainError(
            f"Debian {facts.suite} did not provide {', '.join(missing)}",
            where=f"toolchains/{spec.name}/pythons.toml [{version!r}]",
            fix="check the package names against that suite",
        )
    relativize_symlinks(tmp)
    return versions


def copy_host_python(wrap: Wrap, build_root: Path, version: str, tmp: Path, log: TextIO) -> dict[str, str]:
    """The host's CPython prefix copied under ``tmp/usr``; its interpreter's RUNPATH (the host
    prefix's lib/, absent inside a root) becomes $ORIGIN/../lib, set by the build root's patchelf."""
    host = find_host_python(version)
    status.info(f"copying CPython {host.full_version} from this host ({host.prefix})")
    copy_prefix(host, tmp)
    inside = in_root_python(version)
    run.call(
        wrap(
            build_root,
            ["patchelf", "--set-rpath", "$ORIGIN/../lib", f"{inside}/usr/bin/python{version}"],
            binds=[Bind(tmp, inside)],
        ),
        log=log,
        error=ToolchainError,
        what=f"pointing CPython {version}'s interpreter at its own libpython",
    )
    return {f"cpython{version} (host: {host.prefix})": host.full_version}
