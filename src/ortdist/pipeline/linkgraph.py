"""The shared library's CMake link graph (file API reply): what the static archive bundles and
what the size report attributes bytes to."""

from __future__ import annotations

from .. import bundle
from ..errors import BuildError
from .context import BuildContext
from .layout import Roots


def link_graph(ctx: BuildContext, roots: Roots) -> bundle.LinkGraph:
    reply = ctx.layout.build.host / ".cmake" / "api" / "v1" / "reply"

    def read(name: str) -> str:
        if not name:
            return "\n".join(sorted(p.name for p in reply.iterdir())) if reply.is_dir() else ""
        return (reply / name).read_text(encoding="utf-8")

    if not read(""):  # a tree configured before ortdist queried the file API
        with ctx.open_log("configure-file-api") as log:
            ctx.runner.call(
                ctx.in_root(roots, ["cmake", str(ctx.layout.build.inside)]), log=log, error=BuildError, what="cmake"
            )
    return bundle.link_graph(
        bundle.read_reply(read),
        str(ctx.layout.build.inside),
        lambda p: ctx.layout.host_path(p, roots).is_file(),
    )
