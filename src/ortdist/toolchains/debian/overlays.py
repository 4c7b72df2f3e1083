"""Another CPython in a directory of its own (a python overlay): unpacked from a Debian suite's
packages (the build machine's, or a cross target's architecture), or copied from this host's
pyenv/uv installation (for a cross target: its headers only, pyconfig.h set to the target's facts)."""

from __future__ import annotations

import re
import shlex
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ... import mirrors, registry, run, wheelhouse
from ...errors import ToolchainError
from ...inroot import in_root_python
from ...log import log as status
from ...paths import Cache
from .. import Bind
from ..host_python import copy_prefix, find_host_python
from ..spec import ToolchainSpec
from .apt import apt_state_dir, private_apt_options, relativize_symlinks, unpack_debs

# DebianSysroot.wrap: the host argv that runs a command inside a root (with binds).
Wrap = Callable[..., list[str]]


def unpack_debian_python(
    spec: ToolchainSpec, wrap: Wrap, build_root: Path, version: str, tmp: Path, log: TextIO, dpkg_arch: str = ""
) -> dict[str, str]:
    """The build root's apt, pointed at the version's suite alone, downloads exactly the listed
    packages (of ``dpkg_arch``: a cross target's; default the root's own); they are unpacked (files
    only) into ``tmp``. Returns package -> version."""
    facts = spec.extra_python[version]
    status.info(f"unpacking CPython {version} from Debian {facts.suite}" + (f" ({dpkg_arch})" if dpkg_arch else ""))
    with apt_state_dir(tmp) as state:
        for sub in ("lists/partial", "cache/archives/partial", "parts", "debs"):
            (state / sub).mkdir(parents=True)
        (state / "status").write_text("")
        (state / "sources.list").write_text(f"deb {mirrors.debian_archive(spec.mirror).url} {facts.suite} main\n")
        apt_state = Path("/ortdist/apt-state")
        options = [
            f"-oDir::Etc::SourceList={apt_state}/sources.list",
            f"-oDir::Etc::SourceParts={apt_state}/parts",
            # sid's Release file expires within days; the mirror's copy may be older than that. The
            # signature and the per-file hashes are still checked: only the freshness test is off.
            "-oAcquire::Check-Valid-Until=false",
            *([f"-oAPT::Architecture={dpkg_arch}", f"-oAPT::Architectures={dpkg_arch}"] if dpkg_arch else []),
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


# A pyconfig.h line that defines a macro or says it is left undefined, as configure writes them.
_PYCONFIG_MACRO = re.compile(r"^(?:#define (?P<defined>\w+)(?: .*)?|/\* #undef (?P<undefined>\w+) \*/)$", re.M)


def retarget_pyconfig(text: str, arch: str) -> str:
    """``text`` (a pyconfig.h) as CPython's configure writes it on ``arch`` Linux (data/pyconfig.toml)."""
    machine = registry.pyconfig_machines()[arch]

    def line(match: re.Match[str]) -> str:
        name = match["defined"] or match["undefined"]
        if name in machine.defined:
            return f"#define {name} 1"
        if name in machine.undefined:
            return f"/* #undef {name} */"
        if name in machine.values and match["defined"]:
            return f"#define {name} {machine.values[name]}"
        return match[0]

    return _PYCONFIG_MACRO.sub(line, text)


def host_headers_for(version: str, arch: str, tmp: Path) -> dict[str, str]:
    """The host CPython's headers under ``tmp/usr/include``, pyconfig.h retargeted to ``arch``: what
    a cross target's binding compiles against where no CPython of this version for that machine is
    reachable. No interpreter: its wheel cannot be run here (BuildPlan.python_not_run)."""
    host = find_host_python(version)
    status.info(f"CPython {host.full_version}'s headers from this host ({host.prefix}), pyconfig.h for {arch}")
    include = tmp / "usr" / "include" / f"python{version}"
    shutil.copytree(host.prefix / "include" / f"python{version}", include, symlinks=True)
    config = include / "pyconfig.h"
    config.write_text(retarget_pyconfig(config.read_text(encoding="utf-8"), arch), encoding="utf-8")
    return {f"cpython{version} headers (host: {host.prefix}; pyconfig.h for {arch})": host.full_version}


def fill_overlay(
    spec: ToolchainSpec, wrap: Wrap, build_root: Path, cache: Cache, version: str, tmp: Path, log: TextIO
) -> dict[str, object]:
    """A python overlay's files in ``tmp`` (its CPython, and numpy from PyPI for the binding's
    headers) and what its stamp records. A cross-only toolchain's CPythons are its target's: their
    bindings are that machine's (a host-only version gives its headers only)."""
    facts = spec.extra_python[version]
    triple = spec.python_target
    arch = registry.targets()[triple or spec.targets[0]].arch
    if facts.source == "host":
        installed = (
            host_headers_for(version, arch, tmp) if triple else copy_host_python(wrap, build_root, version, tmp, log)
        )
    else:
        dpkg_arch = spec.cross_targets[triple].dpkg_arch if triple else ""
        installed = unpack_debian_python(spec, wrap, build_root, version, tmp, log, dpkg_arch)
    house = cache.wheelhouse(version, arch)
    house.mkdir(parents=True, exist_ok=True)
    numpy = f"numpy=={facts.numpy}"
    run.capture(
        wheelhouse.pip_download_argv(house, version, [numpy], arch), error=ToolchainError, what=f"downloading {numpy}"
    )
    tag = f"cp{version.replace('.', '')}"
    wheels = sorted(house.glob(f"numpy-{facts.numpy}-{tag}-{tag}-*{arch}.whl"))
    if not wheels:
        raise ToolchainError(f"no {numpy} wheel for CPython {version} on {arch} in {house}", fix="check the pin")
    with zipfile.ZipFile(wheels[0]) as archive:
        archive.extractall(tmp / "site-packages")
    return {
        "python": version,
        "suite": facts.suite,
        "installed": installed,
        "source": facts.source,
        "numpy": facts.numpy,
        **({"arch": arch} if triple else {}),
    }
