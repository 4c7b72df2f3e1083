"""Layout: every tree's host and in-root path from one table, and the binds derived from it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from ortdist.pipeline.layout import Layout, Place, Roots
from ortdist.toolchains import Bind

from .conftest import MakeEnv


def test_trees_live_in_the_cache_at_fixed_in_root_paths(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux")
    layout, cache, plan = env.layout, env.ctx.cache, env.plan
    assert layout.source == Place(
        cache.sources / f"onnxruntime-1.21.0-{plan.source_key}", PurePosixPath("/ortdist/source")
    )
    assert layout.build == Place(cache.root / "work" / "cpu-linux" / "build", PurePosixPath("/ortdist/build"))
    assert layout.work.inside == PurePosixPath("/ortdist/work")
    assert layout.out == layout.work / "out"
    assert layout.models.host == cache.root / "work" / "cpu-linux" / "work" / "models"
    onnx = layout.deps["onnx"]
    assert onnx.inside == PurePosixPath("/ortdist/deps/onnx")
    assert onnx.host.parent == cache.sources and onnx.host.name.startswith("onnx-1.17.0-")
    assert layout.compiler_cache == Place(cache.root / "ccache", PurePosixPath("/ortdist/ccache"))
    assert layout.tools is None  # ccache comes from the sysroot
    assert layout.logs == env.ctx.layout.dist / "logs"


def test_the_compiler_cache_can_be_pointed_elsewhere(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = make_env("cpu-linux")
    monkeypatch.setenv("ORTDIST_COMPILER_CACHE_DIR", str(tmp_path / "cold"))
    layout = Layout.for_plan(env.plan, env.ctx.cache, env.layout.dist)
    assert layout.compiler_cache.host == tmp_path / "cold"


def test_binds_mount_every_tree_and_the_roots_extras_read_only(make_env: MakeEnv, tmp_path: Path) -> None:
    env = make_env("cpu-linux")
    layout = env.layout
    roots = Roots(build=tmp_path / "b", target=tmp_path / "t", pythons={"3.11": tmp_path / "py311"})
    binds = layout.binds(roots)
    by_inside = {str(b.inside): b for b in binds}
    assert by_inside["/ortdist/source"] == Bind(layout.source.host, Path("/ortdist/source"))
    assert by_inside["/ortdist/build"] == Bind(layout.build.host, Path("/ortdist/build"))
    assert by_inside["/ortdist/work"] == Bind(layout.work.host, Path("/ortdist/work"))
    assert by_inside["/ortdist/deps/onnx"].host == layout.deps["onnx"].host
    # portable-glibc2.17 compiles every dependency: each of the plan's is bound at its own name;
    # nothing comes from the root's -dev packages, so there are no shims.
    assert set(layout.deps) == {dep.name for dep in env.plan.deps}
    for dep in env.plan.deps:
        assert by_inside[f"/ortdist/deps/{dep.name}"] == Bind(
            layout.deps[dep.name].host, Path(f"/ortdist/deps/{dep.name}")
        )
    assert not {str(b.inside) for b in binds if str(b.inside).startswith("/ortdist/shims/")}
    assert by_inside["/ortdist/target"] == Bind(tmp_path / "t", Path("/ortdist/target"), read_only=True)
    assert by_inside["/ortdist/python/3.11"] == Bind(tmp_path / "py311", Path("/ortdist/python/3.11"), read_only=True)
    assert "/ortdist/target" not in {str(b.inside) for b in layout.binds(Roots(build=tmp_path / "b"))}


def test_a_debian_trixie_layout_binds_its_shims_read_only(make_env: MakeEnv, tmp_path: Path) -> None:
    """debian-trixie finds the root's libraries through cmake-shims/: bound read-only; only onnx's
    source tree is bound."""
    env = make_env("cpu-linux-gcc14-lto")
    binds = env.layout.binds(Roots(build=tmp_path / "b"))
    shims = [b for b in binds if str(b.inside).startswith("/ortdist/shims/")]
    assert shims, "debian-trixie has shims"
    assert all(b.read_only for b in shims)
    assert {str(b.inside) for b in shims} == {f"/ortdist/shims/{name}" for name in env.plan.toolchain.shims}
    assert [str(b.inside) for b in binds if str(b.inside).startswith("/ortdist/deps/")] == ["/ortdist/deps/onnx"]


def test_two_deps_from_one_tarball_get_a_tree_each(make_env: MakeEnv) -> None:
    """protobuf and utf8_range come from the same orig tarball, but one is the whole tree and the
    other only a subdir of it: each gets its own cache directory, named by dep, version and pin."""
    layout = make_env("cpu-linux").layout
    protobuf, utf8 = layout.deps["protobuf"], layout.deps["utf8_range"]
    assert protobuf.host != utf8.host
    assert protobuf.host.name.startswith("protobuf-3.21.12-") and utf8.host.name.startswith("utf8_range-3.21.12-")
    assert len({place.host for place in layout.deps.values()}) == len(layout.deps)


def test_host_path_of_an_in_root_path(make_env: MakeEnv, tmp_path: Path) -> None:
    layout = make_env("slim-linux-aarch64").layout
    roots = Roots(build=tmp_path / "b", target=tmp_path / "t")
    assert layout.host_path("/ortdist/build/libx.a", roots) == layout.build.host / "libx.a"
    assert layout.host_path("/ortdist/work/static/lib", roots) == layout.work.host / "static" / "lib"
    assert layout.host_path("/ortdist/target/usr/lib/libz.a", roots) == tmp_path / "t" / "usr" / "lib" / "libz.a"
    assert (
        layout.host_path("/usr/lib/x86_64-linux-gnu/libz.a", roots)
        == tmp_path / "b" / "usr/lib/x86_64-linux-gnu/libz.a"
    )
    # Without a target sysroot, /ortdist/target is just a path in the build root.
    native = Roots(build=tmp_path / "b")
    assert layout.host_path("/ortdist/target/x", native) == tmp_path / "b" / "ortdist" / "target" / "x"
