"""[ep_bundle]: the vendor runtime an EP's provider library loads (OpenVINO's), carried beside it in
every package of the build, the wheels' capi/ and the C library archive's lib/ alike."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import PackageError
from ..paths import IN_ROOT_EP_WHEELS
from .context import BuildContext
from .state import BuildState


def copy_ep_bundle(ctx: BuildContext, state: BuildState, directory: Path) -> list[Path]:
    """Each [ep_bundle] file copied from the root's unpacked wheels into ``directory`` (where the
    provider library is) under its own name: the provider's RUNPATH of $ORIGIN finds them there."""
    copied = []
    for ep, files in ctx.plan.ep_bundle.items():
        for relative in files:
            source = ctx.layout.host_path(str(IN_ROOT_EP_WHEELS / relative), state.roots)
            if not source.is_file():
                raise PackageError(
                    f"[ep_bundle.{ep}] {relative} is not in the build root's unpacked wheels",
                    where=str(source),
                    fix=f"correct [ep_bundle.{ep}] in toolchains/{ctx.plan.toolchain.name}.toml (or the wheel pin)",
                )
            copied.append(Path(shutil.copy2(source, directory / Path(relative).name)))
    return copied
