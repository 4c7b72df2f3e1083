"""The bundle step: one libonnxruntime.a merged by ``ar -M`` from the CMake link graph (shared
dependencies swapped for their archives), with headers, pkg-config and an SBOM."""

from __future__ import annotations

import tarfile

import pytest

from ortdist.errors import BuildError
from ortdist.pipeline.runner import Command
from ortdist.pipeline.steps import bundle

from .conftest import MakeEnv
from .helpers import StepEnv, host_of, libraries, write_reply

ABSL = "/usr/lib/x86_64-linux-gnu/libabsl_base.so.20240722.0.0"


def ready(env: StepEnv) -> StepEnv:
    roots = env.put_roots()
    env.put_source()
    env.layout.work.host.mkdir(parents=True)
    lib = (roots.target or roots.build) / "usr" / "lib"
    for arch in ("x86_64-linux-gnu", "aarch64-linux-gnu"):
        (lib / arch).mkdir(parents=True)
        (lib / arch / "libabsl_base.a").write_bytes(b"!<arch>\n")
    env.runner.on("ar -M", merges)
    env.runner.on("--prefix", installs_headers)
    return env


def merges(cmd: Command) -> None:
    archive = cmd.argv[2].rsplit(" ", 1)[-1]  # ... && ranlib <archive>
    host_of(cmd, archive).write_bytes(b"!<arch>\n" + b"x" * 100)


def installs_headers(cmd: Command) -> None:
    include = host_of(cmd, cmd.argv[-1]) / "include" / "onnxruntime"
    include.mkdir(parents=True)
    (include / "onnxruntime_c_api.h").write_text("/* api */\n")


def test_the_link_graph_is_merged_into_one_archive(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"))
    write_reply(
        env.layout.build.host,
        libraries(
            "libonnxruntime_session.a", "libonnxruntime_providers.a", ABSL, "-lpthread", "-Wl,--as-needed", "-ldl"
        ),
    )
    out = bundle.run(env.ctx, env.state)
    merge, headers = env.runner.commands
    assert merge.argv == (
        "/bin/sh",
        "-c",
        "ar -M < /ortdist/work/bundle.mri && ranlib /ortdist/work/static/lib/libonnxruntime.a",
    )
    assert (env.layout.work.host / "bundle.mri").read_text() == (
        "CREATE /ortdist/work/static/lib/libonnxruntime.a\n"
        "ADDLIB /ortdist/build/libonnxruntime_session.a\n"
        "ADDLIB /ortdist/build/libonnxruntime_providers.a\n"
        "ADDLIB /usr/lib/x86_64-linux-gnu/libabsl_base.a\n"
        "SAVE\nEND\n"
    )
    assert headers.argv == ("cmake", "--install", "/ortdist/build", "--prefix", "/ortdist/work/bundle-prefix")
    assert not (env.layout.work.host / "bundle-prefix").exists()
    assert out.system_libs == ("pthread", "dl")
    assert out.archives_merged == {"ort:session": 1, "ort:providers": 1, "abseil": 1}
    assert out.bytes == 108 and out.stage == env.layout.work.host / "static"
    pc = (out.stage / "lib" / "pkgconfig" / "libonnxruntime.pc").read_text()
    assert "Libs.private: -lstdc++ -lpthread -ldl\n" in pc and "Version: 1.21.0" in pc
    (artifact,) = out.artifacts
    assert artifact.source == env.layout.out.host / "onnxruntime-slim-linux-1.21.0-static.tar.gz"
    assert (artifact.kind, artifact.extra) == ("static-library", {"linked_only_with": ["pthread", "dl"]})
    with tarfile.open(artifact.source) as tar:
        names = set(tar.getnames())
    top = "onnxruntime-slim-linux-1.21.0-static"
    assert {
        f"{top}/lib/libonnxruntime.a",
        f"{top}/lib/pkgconfig/libonnxruntime.pc",
        f"{top}/include/onnxruntime/onnxruntime_c_api.h",
        f"{top}/share/doc/onnxruntime/ortdist.cdx.json",
    } <= names
    assert out.manifest()["static_library"]["archives_merged"] == out.archives_merged


def test_a_shared_only_dependency_is_refused_before_merging(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux"))
    write_reply(
        env.layout.build.host, libraries("libonnxruntime_session.a", "/usr/lib/x86_64-linux-gnu/libcpuinfo.so.0")
    )
    with pytest.raises(BuildError, match=r"no static archive to bundle:\n    /usr/lib/x86_64-linux-gnu/libcpuinfo\.so"):
        bundle.run(env.ctx, env.state)
    assert env.runner.commands == []


def test_a_tree_without_a_file_api_reply_is_configured_once_more(make_env: MakeEnv) -> None:
    """Trees configured before ortdist queried CMake's file API get their reply from one cmake run."""
    env = ready(make_env("slim-linux"))
    env.runner.on(
        "cmake /ortdist/build",
        lambda cmd: write_reply(host_of(cmd, "/ortdist/build"), libraries("libonnxruntime_session.a")),
    )
    out = bundle.run(env.ctx, env.state)
    assert env.runner.commands[0].argv == ("cmake", "/ortdist/build")
    assert out.archives_merged == {"ort:session": 1}


def test_an_lto_cross_build_compiles_its_own_archives_to_one_object(make_env: MakeEnv) -> None:
    env = ready(make_env("slim-linux-aarch64"))
    dep = "/ortdist/target/usr/lib/aarch64-linux-gnu/libabsl_base.so.20240722"
    write_reply(env.layout.build.host, libraries("libonnxruntime_session.a", "libonnxruntime_mlas.a", dep, "-lm"))
    out = bundle.run(env.ctx, env.state)
    lto, merge, _ = env.runner.commands
    assert lto.argv[:3] == ("aarch64-linux-gnu-g++", "--sysroot=/ortdist/target", "-r")
    assert "-Os" in lto.argv and "--sysroot=/ortdist/target" in lto.argv  # MinSizeRel, cross
    whole = lto.argv[lto.argv.index("-Wl,--whole-archive") + 1 : lto.argv.index("-Wl,--no-whole-archive")]
    assert whole == ("/ortdist/build/libonnxruntime_session.a", "/ortdist/build/libonnxruntime_mlas.a")
    assert lto.argv[lto.argv.index("-o") + 1] == "/ortdist/work/onnxruntime-lto.o"
    assert merge.argv[2].startswith("aarch64-linux-gnu-ar -M < ") and "aarch64-linux-gnu-ranlib" in merge.argv[2]
    assert (env.layout.work.host / "bundle.mri").read_text() == (
        "CREATE /ortdist/work/static/lib/libonnxruntime.a\n"
        "ADDMOD /ortdist/work/onnxruntime-lto.o\n"
        "ADDLIB /ortdist/target/usr/lib/aarch64-linux-gnu/libabsl_base.a\n"
        "SAVE\nEND\n"
    )
    # The components merged are still counted from the link graph, LTO or not.
    assert out.archives_merged == {"ort:session": 1, "ort:mlas": 1, "abseil": 1}
    assert out.system_libs == ("m",)
