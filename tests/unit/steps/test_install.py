"""The install step: ``cmake --install`` of the build tree into a fresh install tree, packed as a
reproducible C library archive with the SBOM inside."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable

import pytest

from ortdist.errors import PackageError
from ortdist.pipeline.runner import Command
from ortdist.pipeline.steps import install

from ..test_elf import shared_object
from .conftest import MakeEnv
from .helpers import SOURCE_EPOCH, SOURCE_RECORD, StepEnv, host_of


def ready(env: StepEnv) -> StepEnv:
    env.put_roots()
    env.put_source()
    env.layout.work.host.mkdir(parents=True)
    return env


def installs(cmd: Command) -> None:
    prefix = host_of(cmd, "/ortdist/work/install")
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libonnxruntime.so.1.21.0").write_bytes(shared_object(soname="libonnxruntime.so.1"))
    (prefix / "include").mkdir()
    (prefix / "include" / "onnxruntime_c_api.h").write_text("/* api */\n")


def test_the_install_tree_becomes_the_c_library_archive(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    stale = env.layout.work.host / "install" / "lib" / "libold.so"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier install")
    env.runner.on("cmake --install", installs)
    out = install.run(env.ctx, env.state)
    (cmd,) = env.runner.commands
    assert cmd.argv == ("cmake", "--install", "/ortdist/build", "--strip")  # Release ships stripped
    assert cmd.root == env.state.roots.build
    assert out.archive == env.layout.out.host / "onnxruntime-cpu-linux-1.21.0.tar.gz"
    (artifact,) = out.artifacts
    assert (artifact.source, artifact.kind, artifact.extra) == (
        out.archive,
        "c-library",
        {"execution_providers": ["cpu"]},
    )
    with tarfile.open(out.archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        top = "onnxruntime-cpu-linux-1.21.0"
        assert set(members) == {
            f"{top}/{p}"
            for p in (
                "include",
                "include/onnxruntime_c_api.h",
                "lib",
                "lib/libonnxruntime.so.1.21.0",
                "share",
                "share/doc",
                "share/doc/onnxruntime",
                "share/doc/onnxruntime/ortdist.cdx.json",
            )
        }
        assert {m.mtime for m in members.values()} == {SOURCE_EPOCH}
        sbom = tar.extractfile(f"{top}/share/doc/onnxruntime/ortdist.cdx.json")
        assert sbom is not None
        document = json.loads(sbom.read())
    assert document["metadata"]["component"]["name"] == top
    assert SOURCE_RECORD["url"] in json.dumps(document)


def test_a_build_with_symbols_installs_unstripped(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux", strip=False))
    install.run(env.ctx, env.state)
    assert env.runner.commands[0].argv == ("cmake", "--install", "/ortdist/build")


def test_a_failed_install_is_a_package_error(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux"))
    env.runner.on("cmake --install", returncode=2)
    with pytest.raises(PackageError, match="cmake --install failed with exit code 2"):
        install.run(env.ctx, env.state)
    assert not (env.layout.out.host / "onnxruntime-cpu-linux-1.21.0.tar.gz").exists()


def test_an_installed_library_asking_for_an_executable_stack_is_not_archived(make_env: MakeEnv) -> None:
    from ..test_executable_stack import PF_R, PF_W, PF_X, PT_GNU_STACK, elf64

    def installs_executable_stack(cmd: Command) -> None:
        installs(cmd)
        lib = host_of(cmd, "/ortdist/work/install") / "lib" / "libonnxruntime.so.1.21.0"
        lib.write_bytes(elf64((PT_GNU_STACK, PF_R | PF_W | PF_X)))

    env = ready(make_env("cpu-linux"))
    env.runner.on("cmake --install", installs_executable_stack)
    with pytest.raises(PackageError, match=r"lib/libonnxruntime\.so\.1\.21\.0 ask\(s\) for an executable stack"):
        install.run(env.ctx, env.state)
    assert not (env.layout.out.host / "onnxruntime-cpu-linux-1.21.0.tar.gz").exists()


def installs_needing(needed: tuple[str, ...], versions: dict[str, tuple[str, ...]]) -> Callable[[Command], None]:
    def run(cmd: Command) -> None:
        installs(cmd)
        lib = host_of(cmd, "/ortdist/work/install") / "lib" / "libonnxruntime.so.1.21.0"
        lib.write_bytes(shared_object(needed, versions, soname="libonnxruntime.so.1"))

    return run


def test_a_portable_library_needing_more_than_glibc_is_not_archived(make_env: MakeEnv) -> None:
    """Every dependency is compiled in: the archive promises glibc 2.17 and its libraries, no more."""
    env = ready(make_env("cpu-linux"))
    env.runner.on("cmake --install", installs_needing(("libstdc++.so.6", "libc.so.6"), {"libc.so.6": ("GLIBC_2.28",)}))
    with pytest.raises(PackageError) as info:
        install.run(env.ctx, env.state)
    assert "lib/libonnxruntime.so.1.21.0: needs libstdc++.so.6" in str(info.value)
    assert "needs GLIBC_2.28 from libc.so.6, newer than the GLIBC 2.17" in str(info.value)
    assert not (env.layout.out.host / "onnxruntime-cpu-linux-1.21.0.tar.gz").exists()


def test_a_debian_trixie_library_links_the_roots_libraries_by_design(make_env: MakeEnv) -> None:
    env = ready(make_env("cpu-linux-gcc14-lto"))
    needs = ("libre2.so.11", "libstdc++.so.6", "libc.so.6")
    env.runner.on("cmake --install", installs_needing(needs, {"libc.so.6": ("GLIBC_2.38",)}))
    install.run(env.ctx, env.state)  # an archive for Debian trixie: not held to a portable promise
