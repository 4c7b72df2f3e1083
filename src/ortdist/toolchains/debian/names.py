"""The roots under <cache>/sysroots: what each is made from (Origin) and its name.

Pure functions of the spec: each name carries a digest of what the root is made of, so a changed
input makes a new root beside the old one. CI derives its cache keys from the same names
(DebianSysroot.root_names, ci/cache.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...fsutil import sha256_text
from ..spec import CompatRoot, ToolchainSpec


@dataclass(frozen=True)
class Origin:
    """What a debootstrap root is made from: the suite, where from, and the digest its stamp records."""

    suite: str
    mirror: str
    components: tuple[str, ...]
    digest: str
    compat: str = ""  # the [compat.<name>] table it was made for


# Bumped when the way a target sysroot is laid out changes, so cached ones are re-made.
TARGET_LAYOUT = "merged-usr-1"
# The same for the compat roots of older systems.
COMPAT_LAYOUT = "compat-1"
# The same for the directories of other CPython versions.
PYTHON_LAYOUT = "python-overlay-1"
# The same for the trees of packages unpacked beside a build root (distcc).
TOOL_LAYOUT = "tool-tree-1"


def build_root_name(spec: ToolchainSpec) -> str:
    return f"{spec.name}-{spec.root_digest[:12]}"


def tool_tree_name(spec: ToolchainSpec, name: str, packages: Sequence[str], layout: str) -> str:
    """Packages unpacked beside the build root: named by that root (whose apt chose what it lacks),
    the packages and ``layout`` (the caller's version of what it adds to the tree)."""
    digest = sha256_text(TOOL_LAYOUT, layout, *packages)
    return f"{build_root_name(spec)}-{name}-{digest[:12]}"


def clean_root_name(spec: ToolchainSpec) -> str:
    digest = sha256_text(spec.suite, spec.mirror, *spec.clean_root_packages)
    return f"{spec.name}-clean-{digest[:12]}"


def compat_origin(spec: ToolchainSpec, compat: CompatRoot) -> Origin:
    mirror = compat.mirror or spec.mirror
    digest = sha256_text(COMPAT_LAYOUT, compat.suite, mirror, spec.variant, *compat.packages)
    return Origin(compat.suite, mirror, ("main",), digest, compat.name)


def compat_root_name(spec: ToolchainSpec, compat: CompatRoot) -> str:
    return f"compat-{compat.name}-{compat_origin(spec, compat).digest[:12]}"


def target_root_name(spec: ToolchainSpec, triple: str, clean: bool = False) -> str:
    cross = spec.cross_targets[triple]
    packages = cross.clean_packages if clean else cross.packages
    digest = sha256_text(TARGET_LAYOUT, spec.suite, spec.mirror, cross.dpkg_arch, *packages)
    return f"{spec.name}-{cross.dpkg_arch}-{'clean' if clean else 'target'}-{digest[:12]}"


def python_overlay_name(spec: ToolchainSpec, version: str, host: Sequence[str] = ()) -> str:
    """A Debian CPython's overlay is named by its suite and packages; a host one by what ``host``
    says of the installation found (``["host", prefix, full version]``: known only on that host)."""
    facts = spec.extra_python[version]
    if facts.source == "host" and not host:
        raise ValueError(f"CPython {version} of toolchain {spec.name} comes from the host: name the one found")
    origin = list(host) if facts.source == "host" else [spec.mirror, facts.suite, *facts.packages]
    digest = sha256_text(PYTHON_LAYOUT, *origin, f"numpy=={facts.numpy}")
    return f"{spec.name}-python{version}-{digest[:12]}"
