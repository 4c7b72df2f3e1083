"""[compat.<name>] tables of a toolchain: read into CompatRoot, refused with file/key/fix when wrong,
outside both digests, each with a cached root of its own, and the compat step planned from them."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import run
from ortdist.errors import RecipeError, ToolchainError
from ortdist.paths import Cache
from ortdist.plan import make_plan
from ortdist.project import load_patches
from ortdist.recipe import Recipe
from ortdist.toolchains import load_toolchain, make_toolchain
from ortdist.toolchains.debian import STAMP, DebianSysroot
from ortdist.toolchains.spec import CompatRoot

PORTABLE = "portable-glibc2.17"


def copy_toolchains(project: Path, tmp_path: Path) -> Path:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    return tmp_path / "toolchains" / f"{PORTABLE}.toml"


def test_the_portable_toolchain_declares_bullseye_and_bookworm(project: Path) -> None:
    spec = load_toolchain(project, PORTABLE)
    assert spec.compat == {
        "bullseye-c": CompatRoot(name="bullseye-c", suite="bullseye", check="c", packages=("gcc", "libc6-dev")),
        "bookworm-wheel": CompatRoot(
            name="bookworm-wheel", suite="bookworm", check="wheel", packages=("python3", "python3-venv"), python="3.11"
        ),
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.compat["bullseye-c"].suite = "buster"  # type: ignore[misc]
    assert spec.compat["bullseye-c"].label == "compat root 'bullseye-c' (Debian bullseye)"
    assert load_toolchain(project, "debian-trixie").compat == {}


def test_compat_tables_are_in_neither_digest(project: Path, tmp_path: Path) -> None:
    """Adding, editing or dropping them keeps the build root and every build tree; any other edit
    still counts."""
    spec_file = copy_toolchains(project, tmp_path)
    before = load_toolchain(tmp_path, PORTABLE)
    text = spec_file.read_text()
    head, _, _ = text.partition("\n# Older systems")
    assert "[compat." not in head
    spec_file.write_text(head)  # as the file was before it had any
    without = load_toolchain(tmp_path, PORTABLE)
    assert (without.digest, without.root_digest) == (before.digest, before.root_digest)
    assert without.compat == {}
    spec_file.write_text(
        text.replace('suite = "bullseye"', 'suite = "buster"') + '\n[compat.x]\nsuite = "sid"\n'
        'check = "c"\npackages = ["gcc"]\n'
    )
    edited = load_toolchain(tmp_path, PORTABLE)
    assert edited.compat["bullseye-c"].suite == "buster" and "x" in edited.compat
    assert (edited.digest, edited.root_digest) == (before.digest, before.root_digest)
    # ...while a change to what the build is made of is still seen
    spec_file.write_text(text.replace('"ccache",', '"ccache", "less",'))
    changed = load_toolchain(tmp_path, PORTABLE)
    assert changed.digest != before.digest and changed.root_digest != before.root_digest
    spec_file.write_text(text + '\n[ep_packages]\nxnnpack = ["libxnnpack-dev"]\n')
    assert load_toolchain(tmp_path, PORTABLE).digest != before.digest  # a table after them still counts


def test_each_compat_root_is_keyed_by_what_it_is_made_of(project: Path, tmp_path: Path) -> None:
    spec_file = copy_toolchains(project, tmp_path)
    spec = load_toolchain(tmp_path, PORTABLE)
    tc = DebianSysroot(spec)
    cache = Cache(tmp_path / "cache")
    bullseye, bookworm = (tc.compat_root_path(cache, spec.compat[n]) for n in ("bullseye-c", "bookworm-wheel"))
    assert bullseye.parent == cache.sysroots and bullseye.name.startswith("compat-bullseye-c-")
    assert (
        bookworm.name.startswith("compat-bookworm-wheel-") and len({bullseye, bookworm, tc.clean_root_path(cache)}) == 3
    )
    spec_file.write_text(
        spec_file.read_text().replace('packages = ["gcc", "libc6-dev"]', 'packages = ["gcc", "libc6-dev", "file"]')
    )
    other = load_toolchain(tmp_path, PORTABLE)
    assert DebianSysroot(other).compat_root_path(cache, other.compat["bullseye-c"]) != bullseye
    assert DebianSysroot(other).compat_root_path(cache, other.compat["bookworm-wheel"]) == bookworm
    assert DebianSysroot(other).build_root_path(cache) == tc.build_root_path(cache)


def test_a_plan_only_toolchain_refuses_to_make_one(project: Path) -> None:
    tc = make_toolchain(load_toolchain(project, "macos-xcode"))
    compat = CompatRoot(name="old", suite="bullseye", check="c", packages=("gcc",))
    with pytest.raises(ToolchainError, match="cannot check a build on Debian bullseye with it yet"):
        tc.ensure_compat_root(Cache(Path("/nonexistent")), compat, io.StringIO())


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[compat.old]\nsuite = "bullseye"\ncheck = "c"\n', r"compat\.old': missing required key\(s\) \['packages'\]"),
        ('[compat.old]\nsuite = "bullseye"\ncheck = "rust"\npackages = ["x"]\n', r"'rust' is not one of 'c', 'wheel'"),
        ('[compat.old]\nsuite = "bullseye"\ncheck = "c"\npackages = ["x"]\npackges = []\n', "did you mean 'packages'"),
        (
            '[compat.old]\nsuite = "bullseye"\ncheck = "c"\npackages = []\n',
            r"compat\.old\.packages'.*needs the packages",
        ),
        ('[compat.old]\nsuite = "Bullseye 11"\ncheck = "c"\npackages = ["x"]\n', "is not a Debian suite name"),
        (
            '[compat.old]\nsuite = "bookworm"\ncheck = "wheel"\npackages = ["x"]\n',
            r"compat\.old\.python'.*needs the CPython",
        ),
        ('[compat.old]\nsuite = "bookworm"\ncheck = "wheel"\npackages = ["x"]\npython = "3"\n', "needs the CPython"),
        (
            '[compat.old]\nsuite = "bullseye"\ncheck = "c"\npackages = ["x"]\npython = "3.9"\n',
            'check "c" runs no Python',
        ),
        ('[compat.old]\nsuite = "bullseye"\ncheck = "c"\npackages = ["x"]\nmirror = "apt.example"\n', "not an http"),
        ('[compat.Old_Root]\nsuite = "bullseye"\ncheck = "c"\npackages = ["x"]\n', "is not lowercase letters"),
        ('[compat]\nold = "bullseye"\n', r"compat\.old': must be a table"),
    ],
)
def test_bad_compat_tables_are_refused_naming_file_and_key(
    project: Path, tmp_path: Path, table: str, message: str
) -> None:
    spec_file = copy_toolchains(project, tmp_path)
    spec_file.write_text(spec_file.read_text() + "\n" + table)
    with pytest.raises(RecipeError, match=message) as info:
        load_toolchain(tmp_path, PORTABLE)
    assert str(spec_file) in str(info.value) and "how to fix:" in str(info.value)


def test_plan_only_toolchains_take_no_compat_tables(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    spec_file = tmp_path / "toolchains" / "macos-xcode.toml"
    spec_file.write_text(spec_file.read_text() + '\n[compat.old]\nsuite = "bullseye"\ncheck = "c"\npackages = ["x"]\n')
    with pytest.raises(RecipeError, match="a plan_only toolchain has no roots"):
        load_toolchain(tmp_path, "macos-xcode")


def test_a_child_toolchain_inherits_and_overrides_compat_roots(project: Path, tmp_path: Path) -> None:
    copy_toolchains(project, tmp_path)
    (tmp_path / "toolchains" / "child.toml").write_text(
        f'extends = "{PORTABLE}"\n[compat.bullseye-c]\nsuite = "bullseye"\ncheck = "c"\npackages = ["clang"]\n'
    )
    child = load_toolchain(tmp_path, "child")
    assert child.compat["bullseye-c"].packages == ("clang",)
    assert child.compat["bookworm-wheel"] == load_toolchain(tmp_path, PORTABLE).compat["bookworm-wheel"]


# --- the plan -------------------------------------------------------------------------------------
def test_the_compat_step_runs_after_the_check_for_x86_64_linux(
    project: Path, recipe_from: Callable[..., Recipe]
) -> None:
    recipe = recipe_from(f'toolchain = "{PORTABLE}"\n[wheel]\npython = ["3.13", "3.11"]\n')
    plan = make_plan(recipe, load_toolchain(project, PORTABLE), load_patches(recipe, project))
    assert plan.steps[-4:] == ("check", "compat", "size", "publish")
    static = recipe_from(f'toolchain = "{PORTABLE}"\nlinkage = "static"\n[wheel]\nenabled = false\n')
    plan = make_plan(static, load_toolchain(project, PORTABLE), load_patches(static, project))
    assert plan.steps[-4:] == ("c_smoke", "compat", "size", "publish")  # the step itself says what is missing
    # no [compat] tables, no step
    recipe = recipe_from('[wheel]\npython = ["3.13"]\n')
    assert "compat" not in make_plan(recipe, load_toolchain(project, "debian-trixie"), ()).steps


def test_no_compat_step_for_other_targets(project: Path, tmp_path: Path, recipe_from: Callable[..., Recipe]) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    spec_file = tmp_path / "toolchains" / "debian-trixie.toml"
    spec_file.write_text(
        spec_file.read_text() + '\n[compat.old]\nsuite = "bullseye"\ncheck = "c"\npackages = ["gcc"]\n'
    )
    trixie = load_toolchain(tmp_path, "debian-trixie")
    arm = recipe_from('target = "aarch64-unknown-linux-gnu"\n[wheel]\npython = ["3.13"]\n')
    assert "compat" not in make_plan(arm, trixie, ()).steps  # the roots are x86_64 debootstraps
    native = recipe_from('[wheel]\npython = ["3.13"]\n')
    assert "compat" in make_plan(native, trixie, ()).steps


# --- the root -------------------------------------------------------------------------------------
def test_a_compat_root_is_made_from_its_own_suite_once(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """debootstrap of the table's suite (not the toolchain's trixie) with only its packages, the
    stamp saying which table it serves; made again only when its content digest no longer matches."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    ran: list[list[str]] = []

    def call(argv: list[str], **_: object) -> None:
        ran.append(list(argv))
        if "debootstrap" in argv:
            (Path(argv[-2]) / "etc").mkdir(parents=True)

    def capture(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "gcc\t4:10.2.1-1\nlibc6\t2.31-13+deb11u11\n", "")

    monkeypatch.setattr(run, "call", call)
    monkeypatch.setattr(run, "capture", capture)
    spec = load_toolchain(project, PORTABLE)
    tc, cache = DebianSysroot(spec), Cache(tmp_path / "cache")
    bullseye = dataclasses.replace(spec.compat["bullseye-c"], mirror="http://mirror.test/debian")
    root = tc.ensure_compat_root(cache, bullseye, io.StringIO())
    assert root == tc.compat_root_path(cache, bullseye) and root.name.startswith("compat-bullseye-c-")
    (debootstrap,) = [argv for argv in ran if "debootstrap" in argv]
    assert debootstrap[-4:] == ["--components=main", "bullseye", debootstrap[-2], "http://mirror.test/debian"]
    assert "--variant=minbase" in debootstrap
    installs = [a for a in ran if "apt-get install" in a[-1]]
    assert len(installs) == 1 and installs[0][-1].endswith("'apt-get install -y --no-install-recommends gcc libc6-dev'")
    stamp = json.loads((root / STAMP).read_text())
    assert stamp["suite"] == "bullseye" and stamp["compat"] == "bullseye-c"
    assert stamp["requested"] == ["gcc", "libc6-dev"] and stamp["installed"]["libc6"] == "2.31-13+deb11u11"
    assert stamp["digest"] != spec.root_digest
    ran.clear()
    assert tc.ensure_compat_root(cache, bullseye, io.StringIO()) == root and ran == []  # cached, verified
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ToolchainError, match="needs root"):
        DebianSysroot(spec).ensure_compat_root(cache, bullseye, io.StringIO())
