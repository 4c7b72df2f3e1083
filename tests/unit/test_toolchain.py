from __future__ import annotations

import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.errors import RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.toolchains import Bind, load_toolchain, make_toolchain
from ortdist.toolchains.debian_sysroot import STAMP, DebianSysroot


def test_debian_trixie_spec(project: Path) -> None:
    spec = load_toolchain(project, "debian-trixie")
    assert spec.kind == "debian-sysroot" and spec.suite == "trixie"
    assert "libabsl-dev" in spec.packages
    assert "libxnnpack-dev" in spec.all_packages()
    assert spec.python == ("3.13",)
    assert (spec.shims["re2"] / "re2Config.cmake").is_file()
    assert spec.cmake["Protobuf_DIR"] == "{shims}/protobuf"


def test_digest_follows_spec_and_shims_but_the_root_only_its_packages(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    before = load_toolchain(tmp_path, "debian-trixie")
    shim = tmp_path / "toolchains" / "debian-trixie" / "cmake-shims" / "re2" / "re2Config.cmake"
    shim.write_text(shim.read_text() + "# changed\n")
    spec_file = tmp_path / "toolchains" / "debian-trixie.toml"
    spec_file.write_text(spec_file.read_text() + "\n# a comment\n")
    after = load_toolchain(tmp_path, "debian-trixie")
    assert before.digest != after.digest  # build trees are discarded
    assert before.root_digest == after.root_digest  # the 1 GB sysroot is kept
    cache = Cache(tmp_path / "cache")
    tc = DebianSysroot(after)
    assert tc.build_root_path(cache).name == f"debian-trixie-{after.root_digest[:12]}"
    assert tc.clean_root_path(cache) != tc.build_root_path(cache)
    spec_file.write_text(spec_file.read_text().replace('"ccache",', '"ccache", "less",'))
    assert load_toolchain(tmp_path, "debian-trixie").root_digest != before.root_digest


def test_ep_cmake_needs_ep_packages(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    spec_file = tmp_path / "toolchains" / "debian-trixie.toml"
    spec_file.write_text(spec_file.read_text() + '\n[ep_cmake.cuda]\nCUDAToolkit_ROOT = "/usr"\n')
    with pytest.raises(RecipeError, match=r"\[ep_cmake.cuda\] names an EP"):
        load_toolchain(tmp_path, "debian-trixie")


def test_wrap_runs_in_a_private_mount_namespace(project: Path) -> None:
    tc = make_toolchain(load_toolchain(project, "debian-trixie"))
    argv = tc.wrap(
        Path("/cache/root dir"),
        ["cmake", "--build", "/ortdist/build"],
        binds=[Bind(Path("/host/src"), Path("/ortdist/source")), Bind(Path("/host/shims"), Path("/s"), True)],
        env={"CCACHE_DIR": "/ortdist/ccache"},
        cwd=Path("/ortdist"),
    )
    assert argv[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    script = argv[-1]
    assert "mount --bind /host/src '/cache/root dir/ortdist/source'" in script
    assert "mount -o remount,bind,ro '/cache/root dir/s'" in script
    assert "mount -t proc proc '/cache/root dir/proc'" in script
    last = script.splitlines()[-1]
    assert last.startswith("exec chroot '/cache/root dir' /usr/bin/env -i ")
    assert "CCACHE_DIR=/ortdist/ccache" in last and "PATH=/usr/local/sbin" in last
    assert "cd /ortdist && exec cmake --build /ortdist/build" in last


def test_wrapped_commands_echo_as_the_inner_command(project: Path) -> None:
    from ortdist.run import format_command

    tc = make_toolchain(load_toolchain(project, "debian-trixie"))
    argv = tc.wrap(Path("/cache/sysroots/debian-trixie-abc"), ["ninja", "-C", "/ortdist/build"])
    assert format_command(argv) == "+ [debian-trixie-abc] ninja -C /ortdist/build"
    assert format_command(argv, full=True).startswith("+ unshare --mount")


def test_a_key_is_checked_in_the_file_that_has_it(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    parent = tmp_path / "toolchains" / "debian-trixie.toml"
    parent.write_text(parent.read_text().replace("[python_tools]", "[python_tool]"))
    with pytest.raises(RecipeError, match="unknown key 'python_tool'") as err:
        load_toolchain(tmp_path, "cuda12")  # the child names the parent with the typo
    assert err.value.where == f"{parent} key 'python_tool'"
    assert err.value.fix == "did you mean 'python_tools'?"


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ('python = []\ntargets = ["x86_64-unknown-linux-gnu"]\n', "", "missing required key(s) ['kind']"),
        ('kind = "k"\nplan_only = true\nneeds = "x"\npython = "3.13"\ntargets = []\n', "python", "must be a list"),
        ('kind = "k"\nplan_only = "yes"\n', "plan_only", "must be true or false"),
        ('kind = "k"\n[cross.t]\nhost = "h"\n', "cross.t", "missing required key(s) ['dpkg_arch'"),
        ('kind = "k"\n[clean_root]\npackage = []\n', "clean_root.package", "unknown key 'package'"),
        (
            'kind = "k"\nplan_only = true\nneeds = "x"\npython = []\ntargets = []\n[cmake]\nX = 1\n',
            "cmake.X",
            "must be a string",
        ),
    ],
)
def test_mistyped_toolchains_name_file_and_key(tmp_path: Path, text: str, key: str, message: str) -> None:
    (tmp_path / "toolchains").mkdir()
    path = tmp_path / "toolchains" / "t.toml"
    path.write_text(text)
    with pytest.raises(RecipeError) as err:
        load_toolchain(tmp_path, "t")
    assert message in err.value.message
    assert err.value.where == str(path) + (f" key '{key}'" if key else "")


def test_a_non_utf8_toolchain_is_a_recipe_error(tmp_path: Path) -> None:
    (tmp_path / "toolchains").mkdir()
    (tmp_path / "toolchains" / "t.toml").write_bytes(b'kind = "\xff"\n')
    with pytest.raises(RecipeError, match="not UTF-8 text"):
        load_toolchain(tmp_path, "t")


def test_cross_targets_are_typed(project: Path) -> None:
    spec = load_toolchain(project, "debian-trixie")
    arm = spec.cross_targets["aarch64-unknown-linux-gnu"]
    assert (arm.host, arm.dpkg_arch, arm.emulator) == ("x86_64-unknown-linux-gnu", "arm64", "qemu-aarch64")
    assert arm.env["_PYTHON_HOST_PLATFORM"] == "linux-aarch64"
    assert spec.cross_facts("aarch64-unknown-linux-gnu", "cmake")["CMAKE_SYSROOT"] == "/ortdist/target"
    assert load_toolchain(project, "cuda12").cross_targets == {}


def test_a_toolchain_kind_must_be_known(project: Path, tmp_path: Path) -> None:
    (tmp_path / "toolchains").mkdir()
    path = tmp_path / "toolchains" / "msvc.toml"
    path.write_text((project / "toolchains" / "msvc.toml").read_text().replace('kind = "msvc"', 'kind = "mscv"'))
    with pytest.raises(RecipeError, match="unknown toolchain kind 'mscv'") as err:
        load_toolchain(tmp_path, "msvc")
    assert err.value.where == f"{path} key 'kind'" and err.value.fix == "did you mean 'msvc'?"
    assert load_toolchain(project, "debian-trixie").has_root and not load_toolchain(project, "msvc").has_root


# --- root: refused without it, and a root once made is reused ---------------------------------------
ARM = "aarch64-unknown-linux-gnu"
# Each way into a root: the path it would return, and the call that ensures it.
ROOTS: dict[str, tuple[Callable[[DebianSysroot, Cache], Path], Callable[[DebianSysroot, Cache], Path]]] = {
    "build": (lambda tc, c: tc.build_root_path(c), lambda tc, c: tc.ensure_build_root(c, io.StringIO())),
    "clean": (lambda tc, c: tc.clean_root_path(c), lambda tc, c: tc.ensure_clean_root(c, io.StringIO())),
    "target": (
        lambda tc, c: tc.target_root_path(c, ARM),
        lambda tc, c: tc.ensure_target_root(c, tc.build_root_path(c), ARM, io.StringIO()),
    ),
    "clean-target": (
        lambda tc, c: tc.target_root_path(c, ARM, clean=True),
        lambda tc, c: tc.ensure_clean_target_root(c, tc.build_root_path(c), ARM, io.StringIO()),
    ),
    "python": (
        lambda tc, c: tc.python_overlay_path(c, "3.11"),
        lambda tc, c: tc.ensure_python_overlay(c, tc.build_root_path(c), "3.11", io.StringIO()),
    ),
}


def stamp(root: Path) -> Path:
    """What a finished root has: its stamp (so ensuring it again makes nothing)."""
    root.mkdir(parents=True)
    (root / STAMP).write_text('{"installed": {}}\n')
    return root


@pytest.mark.usefixtures("no_subprocess")
@pytest.mark.parametrize("made", [False, True], ids=["new", "existing"])
@pytest.mark.parametrize("kind", sorted(ROOTS))
def test_every_root_is_refused_without_root(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, made: bool
) -> None:
    """README: ortdist refuses to start a root-only step without root and says so; a root made
    earlier (by a sudo run) is no exception, since every command in it needs unshare + chroot."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    tc, cache = DebianSysroot(load_toolchain(project, "debian-trixie")), Cache(tmp_path / "cache")
    path_of, ensure = ROOTS[kind]
    if made:
        stamp(tc.build_root_path(cache))
        if kind != "build":
            stamp(path_of(tc, cache))
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ToolchainError) as err:
        ensure(tc, cache)
    assert "the debian-sysroot toolchain needs root" in err.value.message
    assert err.value.fix is not None and "sudo" in err.value.fix and "unshare --map-root-user" in err.value.fix
    assert err.value.exit_code == 6
    assert sorted(tmp_path.rglob("*")) == before  # nothing made, nothing run (no_subprocess)


@pytest.mark.usefixtures("no_subprocess")
@pytest.mark.parametrize("kind", sorted(ROOTS))
def test_a_root_once_made_is_reused_as_root(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """As root, the same stamped roots come back untouched, with no command run: rerunning a
    build never bootstraps again (and the refusal above is about the user, not the roots)."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    tc, cache = DebianSysroot(load_toolchain(project, "debian-trixie")), Cache(tmp_path / "cache")
    path_of, ensure = ROOTS[kind]
    root = stamp(path_of(tc, cache))
    assert ensure(tc, cache) == root
    assert [p.name for p in root.iterdir()] == [STAMP]
