"""The SBOM every artifact carries, from the plan, the recipe and what the steps recorded."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from .. import sbom
from ..wheel import record
from .context import BuildContext
from .state import BuildState, Source

# Where the C library archives carry their SBOM.
SBOM_IN_ARCHIVE = Path("share/doc/onnxruntime") / sbom.SBOM_NAME


def sbom_inputs(ctx: BuildContext, state: BuildState, bundled: list[sbom.BundledFile]) -> sbom.SbomInputs:
    roots = state.roots
    return sbom.SbomInputs(
        plan=ctx.plan,
        recipe_path=f"recipes/{ctx.recipe_path.name}",
        recipe_text=ctx.recipe_path.read_text(encoding="utf-8"),
        recipe_sha256=ctx.recipe_sha256,
        source=state.get(Source).record,
        root_packages=roots.packages,
        source_date_epoch=ctx.source_date_epoch(),
        bundled=bundled,
        target_packages=roots.target_packages,
        target_arch=ctx.cross.dpkg_arch if ctx.cross else "",
    )


def add_wheel_sbom(ctx: BuildContext, state: BuildState, wheel: Path) -> None:
    """PEP 770: the repaired wheel's SBOM, naming each grafted library and its Debian package."""
    owners = ctx.toolchain.library_packages(state.roots.build)
    versions = state.roots.packages
    bundled = []
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            top = name.split("/", 1)[0]
            if top.endswith(".libs") and not name.endswith("/"):
                package = owners.get(sbom.original_soname(name.rsplit("/", 1)[-1]))
                bundled.append(
                    sbom.BundledFile(
                        path=name,
                        sha256=hashlib.sha256(zf.read(name)).hexdigest(),
                        package=package,
                        package_version=versions.get(package) if package else None,
                    )
                )
    plan = ctx.plan
    subject = {
        "name": plan.distribution,
        "version": plan.version.version,
        "purl": f"pkg:pypi/{plan.distribution}@{plan.version.version}",
        "description": f"wheel {wheel.name}",
    }
    document = sbom.make_sbom(sbom_inputs(ctx, state, bundled), subject)
    record.add_to_dist_info(wheel, {f"sboms/{sbom.SBOM_NAME}": sbom.dumps(document).encode()}, ctx.source_date_epoch())
