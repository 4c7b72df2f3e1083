from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist.errors import RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.toolchains import Bind, load_toolchain, make_toolchain
from ortdist.toolchains.debian import STAMP, DebianSysroot, RootRecipe, wheels
from ortdist.toolchains.debian.wheels import install_compiler


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
    # /sys too, read-only: cpuinfo on arm64 reads the CPU lists there (a check under qemu aborted without)
    assert "mount -t sysfs -o ro sysfs '/cache/root dir/sys'" in script
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
    parent = tmp_path / "toolchains" / "portable-glibc2.17.toml"
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


# --- portable-glibc2.17: a compiler from a pinned wheel, unpacked into the build root -------------------
PORTABLE = "portable-glibc2.17"
ARCHIVE = "ppbt/_toolchain/x86_64-linux-gnu.tar.xz"


def test_portable_spec(project: Path) -> None:
    """The compiler, its glibc and every dependency from source: what cpu-linux's wheels rely on."""
    spec = load_toolchain(project, PORTABLE)
    assert spec.has_root and spec.deps_from_source and spec.glibc == "2.17"
    assert spec.compiler is not None
    assert (spec.compiler.wheel, spec.compiler.version, spec.compiler.glibc) == ("ppbt", "0.1.8", "2.17")
    assert spec.compiler.archive == ARCHIVE
    assert dict(spec.compiler.links) == {
        "newer-binutils/as": "/usr/bin/as",
        "python-multiarch/x86_64-linux-gnu": "/usr/include/x86_64-linux-gnu",
    }
    assert spec.cmake["CMAKE_CXX_COMPILER"] == "{compiler}/bin/x86_64-linux-gnu-g++"
    assert not spec.shims
    # No library of the root is linked: none of debian-trixie's -dev packages is installed.
    assert not [p for p in spec.all_packages() if p.endswith("-dev") and p != "python3-dev"]
    trixie = load_toolchain(project, "debian-trixie")
    assert trixie.compiler is None and not trixie.deps_from_source


def test_the_compiler_pin_names_the_root(project: Path, tmp_path: Path) -> None:
    """The unpacked compiler is part of the build root: another wheel or another link is another
    root; a [cmake] change only keys the build trees."""
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    spec_file = tmp_path / "toolchains" / f"{PORTABLE}.toml"
    text = spec_file.read_text()
    before = load_toolchain(tmp_path, PORTABLE)
    for old, new in (
        ('version = "0.1.8"', 'version = "0.1.9"'),
        ('"newer-binutils/as" = "/usr/bin/as"', '"newer-binutils/as" = "/usr/bin/x86_64-linux-gnu-as"'),
    ):
        spec_file.write_text(text.replace(old, new))
        assert load_toolchain(tmp_path, PORTABLE).root_digest != before.root_digest, new
    spec_file.write_text(text.replace('FETCHCONTENT_FULLY_DISCONNECTED = "ON"', 'FETCHCONTENT_QUIET = "OFF"'))
    after = load_toolchain(tmp_path, PORTABLE)
    assert after.root_digest == before.root_digest and after.digest != before.digest


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        ('sha256 = "cdc534b5', 'sha256 = "CDC534B5', "compiler.sha256", "must state the wheel's sha256"),
        ('sha256 = "cdc534b53f052ff3', 'sha256 = "', "compiler.sha256", "must state the wheel's sha256"),
        (
            'archive = "ppbt/_toolchain/x86_64-linux-gnu.tar.xz"\n',
            "",
            "compiler",
            "missing required key(s) ['archive']",
        ),
        (
            'glibc = "2.17"\n\n[compiler.links]',
            "glibc = 2.17\n\n[compiler.links]",
            "compiler.glibc",
            "must be a string",
        ),
        (
            'glibc = "2.17"\n\n[compiler.links]',
            'glibc = "2.28"\n\n[compiler.links]',
            "glibc",
            "glibc = '2.17' but [compiler] has a glibc 2.28 sysroot",
        ),
    ],
    ids=["uppercase-sha256", "short-sha256", "no-archive", "glibc-not-a-string", "glibc-disagrees"],
)
def test_a_bad_compiler_table_is_refused(
    project: Path, tmp_path: Path, old: str, new: str, key: str, message: str
) -> None:
    """An unpinned or mistyped [compiler] is refused at load, naming the file and key, before
    anything is downloaded into a root."""
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    spec_file = tmp_path / "toolchains" / f"{PORTABLE}.toml"
    text = spec_file.read_text()
    assert old in text
    spec_file.write_text(text.replace(old, new))
    with pytest.raises(RecipeError) as err:
        load_toolchain(tmp_path, PORTABLE)
    assert message in err.value.message
    assert err.value.where == f"{spec_file} key '{key}'"


def fake_compiler_wheel(directory: Path) -> Path:
    """A ppbt-like wheel: a tar.xz with one top directory (a relative symlink in it), at ARCHIVE."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        files = {
            "x86_64-linux-gnu/bin/x86_64-linux-gnu-g++": b"#!g++",
            "x86_64-linux-gnu/x86_64-linux-gnu/sysroot/usr/include/stdio.h": b"/* glibc 2.17 */",
        }
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("x86_64-linux-gnu/bin/x86_64-linux-gnu-c++")
        link.type, link.linkname = tarfile.SYMTYPE, "x86_64-linux-gnu-g++"
        tar.addfile(link)
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / "ppbt-0.1.8-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(ARCHIVE, buffer.getvalue())
        zf.writestr("ppbt-0.1.8.dist-info/METADATA", "Name: ppbt\nVersion: 0.1.8\n")
    return wheel


@pytest.mark.usefixtures("no_subprocess")
def test_the_compiler_is_unpacked_into_the_root_with_its_links(project: Path, tmp_path: Path) -> None:
    """The wheel's toolchain tarball becomes <root>/opt/ortdist-compiler (where {compiler} points);
    each [compiler.links] entry is a symlink there to the root's path. A pinned wheel already in
    the download cache is used as it is (no_subprocess: nothing is run or fetched)."""
    spec = load_toolchain(project, PORTABLE)
    assert spec.compiler is not None
    wheel = fake_compiler_wheel(tmp_path / "made")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    cache = Cache(tmp_path / "cache")
    house = cache.downloads / "ep-wheels" / f"ppbt-0.1.8-{digest[:12]}"
    house.mkdir(parents=True)
    shutil.copy(wheel, house / wheel.name)
    spec = dataclasses.replace(spec, compiler=dataclasses.replace(spec.compiler, sha256=digest))
    root, log = tmp_path / "root", io.StringIO()
    install_compiler(spec, cache, root, log)
    compiler = root / "opt" / "ortdist-compiler"
    assert (compiler / "bin" / "x86_64-linux-gnu-g++").read_bytes() == b"#!g++"
    assert (compiler / "bin" / "x86_64-linux-gnu-c++").readlink() == Path("x86_64-linux-gnu-g++")
    assert (compiler / "x86_64-linux-gnu" / "sysroot" / "usr" / "include" / "stdio.h").is_file()
    assert (compiler / "newer-binutils" / "as").readlink() == Path("/usr/bin/as")
    assert (compiler / "python-multiarch" / "x86_64-linux-gnu").readlink() == Path("/usr/include/x86_64-linux-gnu")
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["ortdist-compiler"]  # no temp dir left
    assert f"unpacking {ARCHIVE} of {wheel.name} into /opt/ortdist-compiler" in log.getvalue()


@pytest.mark.usefixtures("no_subprocess")
def test_a_toolchain_without_a_compiler_installs_none(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    install_compiler(load_toolchain(project, "debian-trixie"), Cache(tmp_path / "c"), root, io.StringIO())
    assert list(root.iterdir()) == []
    assert not (tmp_path / "c").exists()


def test_a_compiler_archive_missing_from_its_wheel_is_refused(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong ``archive`` path names the wheel and the file to correct, and unpacks nothing."""
    spec = load_toolchain(project, PORTABLE)
    assert spec.compiler is not None
    spec = dataclasses.replace(spec, compiler=dataclasses.replace(spec.compiler, archive="ppbt/_toolchain/arm.tar.xz"))
    wheel = fake_compiler_wheel(tmp_path / "made")
    monkeypatch.setattr(wheels, "pinned_wheel", lambda *a, **k: wheel)
    root = tmp_path / "root"
    with pytest.raises(ToolchainError, match=re.escape(f"{wheel.name} has no ppbt/_toolchain/arm.tar.xz")) as err:
        install_compiler(spec, Cache(tmp_path / "c"), root, io.StringIO())
    assert err.value.fix == f"correct [compiler] archive in toolchains/{PORTABLE}.toml"
    assert not (root / "opt" / "ortdist-compiler").exists()


def test_the_compiler_wheel_is_downloaded_hash_pinned(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip gets the [compiler] pin with --require-hashes; a download that does not match is
    removed and the error points at [compiler]."""
    from ortdist import run

    calls: list[list[str]] = []
    requirements: list[str] = []

    def fake_capture(argv: list[str], **_kw: object) -> None:
        calls.append(argv)
        requirements.append(Path(argv[argv.index("-r") + 1]).read_text())
        fake_compiler_wheel(Path(argv[argv.index("--dest") + 1]))  # not the pinned file

    monkeypatch.setattr(run, "capture", fake_capture)
    spec = load_toolchain(project, PORTABLE)
    assert spec.compiler is not None
    with pytest.raises(ToolchainError, match=r"ppbt==0\.1\.8: the download does not match the pinned sha256") as err:
        install_compiler(spec, Cache(tmp_path / "c"), tmp_path / "root", io.StringIO())
    assert err.value.fix is not None and f"[compiler] in toolchains/{PORTABLE}.toml" in err.value.fix
    (argv,) = calls
    assert requirements == [f"ppbt==0.1.8 --hash=sha256:{spec.compiler.sha256}\n"]
    assert "--require-hashes" in argv and "--no-deps" in argv
    assert argv[argv.index("--python-version") + 1] == "3.13"  # the root's own CPython
    assert not Path(argv[argv.index("-r") + 1]).exists()  # the mismatching download went with its directory
    assert not (tmp_path / "root").exists()


# --- one root description: every kind of root goes through make_root --------------------------------
@pytest.fixture
def as_root(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[DebianSysroot, Path]:
    """The trixie backend run as root, and where a new kind of root would go."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    return DebianSysroot(load_toolchain(project, "debian-trixie")), tmp_path / "sysroots" / "kind-0123"


@pytest.mark.usefixtures("no_subprocess")
def test_a_root_recipe_is_made_once_stamped_and_then_reused(as_root: tuple[DebianSysroot, Path]) -> None:
    tc, final = as_root
    calls: list[Path] = []

    def make(tmp: Path) -> dict[str, object]:
        calls.append(tmp)
        assert tmp != final and not final.exists()  # filled beside, renamed into place once whole
        (tmp / "usr").mkdir()
        (tmp / "usr" / "file").write_text("content")
        return {"installed": {"pkg": "1.0"}, "arch": "arm64"}

    recipe = RootRecipe(final, "creating kind", make)
    assert tc.make_root(recipe) == final
    assert json.loads((final / STAMP).read_text()) == {
        "toolchain": "debian-trixie",
        "installed": {"pkg": "1.0"},
        "arch": "arm64",
    }
    assert tc.installed_packages(final) == {"pkg": "1.0"}
    # Reused: by this process, and by a new one that checks the recorded content...
    assert tc.make_root(recipe) == final and DebianSysroot(tc.spec).make_root(recipe) == final
    assert len(calls) == 1
    # ...but a root whose content changed is made again.
    (final / "usr" / "file").write_text("changed")
    assert DebianSysroot(tc.spec).make_root(recipe) == final
    assert len(calls) == 2 and (final / "usr" / "file").read_text() == "content"


@pytest.mark.usefixtures("no_subprocess")
def test_a_root_whose_making_fails_leaves_nothing(as_root: tuple[DebianSysroot, Path]) -> None:
    tc, final = as_root

    def make(tmp: Path) -> dict[str, object]:
        (tmp / "half").write_text("made")
        raise ToolchainError("apt-get install failed", fix="see the log")

    with pytest.raises(ToolchainError, match="apt-get install failed"):
        tc.make_root(RootRecipe(final, "", make))
    assert not final.exists() and list(final.parent.iterdir()) == []


def test_a_debootstrapped_root_runs_its_commands_in_order_and_stamps_what_dpkg_installed(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean root through the one path, every command recorded instead of run: debootstrap
    from the toolchain's suite, apt inside the new root, dpkg's versions into the stamp."""
    from ortdist import run
    from ortdist.toolchains.debian import sysroot

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(sysroot, "require_host_tools", lambda *tools: None)
    monkeypatch.setattr(sysroot.shutil, "copyfile", lambda src, dst: Path(dst).write_text("nameserver 127.0.0.1\n"))
    recorded: list[str] = []

    def call(cmd: list[str], **_kw: object) -> None:
        recorded.append(getattr(cmd, "shown", " ".join(cmd)))
        if cmd[:5] == ["unshare", "--mount", "--propagation", "private", "--"] and "debootstrap" in cmd:
            (Path(cmd[-2]) / "etc").mkdir(parents=True)  # what debootstrap leaves: a root

    def capture(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        recorded.append(getattr(cmd, "shown", " ".join(cmd)))
        return subprocess.CompletedProcess(cmd, 0, "python3\t3.13.5-1\npython3-venv\t3.13.5-1\n", "")

    monkeypatch.setattr(run, "call", call)
    monkeypatch.setattr(run, "capture", capture)
    tc, cache = DebianSysroot(load_toolchain(project, "debian-trixie")), Cache(tmp_path / "cache")
    root = tc.ensure_clean_root(cache, io.StringIO())
    assert root == tc.clean_root_path(cache)
    debootstrap = recorded[0].split()
    assert debootstrap[5:9] == ["debootstrap", "--variant=minbase", "--components=main", "trixie"]
    # The toolchain's mirror (the unit tests' host names no Debian archive in its apt sources).
    assert Path(debootstrap[9]).parent == root.parent and debootstrap[10] == tc.spec.mirror
    tmp_name = recorded[1].split("]")[0].lstrip("[")
    assert recorded[1:] == [
        f"[{tmp_name}] apt-get update",
        f"[{tmp_name}] apt-get install -y --no-install-recommends {' '.join(tc.spec.clean_root_packages)}",
        f"[{tmp_name}] apt-get clean",
        f"[{tmp_name}] dpkg-query -W -f '${{Package}}\t${{Version}}\n'",
    ]
    stamp_facts = json.loads((root / STAMP).read_text())
    assert stamp_facts["toolchain"] == "debian-trixie" and stamp_facts["suite"] == "trixie"
    assert stamp_facts["requested"] == list(tc.spec.clean_root_packages)
    assert stamp_facts["installed"] == {"python3": "3.13.5-1", "python3-venv": "3.13.5-1"}
    assert stamp_facts["digest"] == tc.spec.root_digest
    # Made once: the same call again runs nothing.
    recorded.clear()
    assert tc.ensure_clean_root(cache, io.StringIO()) == root and recorded == []


@pytest.mark.parametrize(
    ("new", "key", "message"),
    [
        (
            '[ep_bundle]\nopenvino = ["openvino/openvino/libs/libtbb.so.12", "other/libtbb.so.12"]\n',
            "ep_bundle.openvino",
            "names libtbb.so.12 twice",
        ),
        ('[ep_bundle]\nopenvino = ["/opt/libtbb.so.12"]\n', "ep_bundle.openvino", "a path must be relative"),
        ('[ep_bundle]\ndnnl = ["openvino/libdnnl.so"]\n', "", "[ep_bundle.dnnl] names an EP this toolchain has no"),
    ],
    ids=["a-name-twice", "an-absolute-path", "an-ep-without-wheels"],
)
def test_a_bad_bundle_is_refused(project: Path, tmp_path: Path, new: str, key: str, message: str) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    path = tmp_path / "toolchains" / "openvino.toml"
    text = path.read_text()
    start, end = text.index("[ep_bundle]"), text.index("[ep_cmake.openvino]")
    path.write_text(text[:start] + new + "\n" + text[end:])
    with pytest.raises(RecipeError) as err:
        load_toolchain(tmp_path, "openvino")
    assert message in err.value.message
    assert err.value.where.endswith(f"key '{key}'") if key else "openvino.toml" in err.value.where
