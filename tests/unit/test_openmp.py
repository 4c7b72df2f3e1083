"""[openmp]: libgomp built in the root for a compiler wheel without one (toolchains/debian/openmp.py),
and the plan's rule that an EP whose pinned sources need OpenMP wants such a toolchain."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ortdist import run, sources
from ortdist.errors import RecipeError, SourceError
from ortdist.paths import Cache
from ortdist.project import plan_for
from ortdist.recipe import Recipe
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian.openmp import GCC_TREE, build_script, install_openmp, unpack_gcc_tree

OPENMP = "portable-glibc2.17-openmp"
MEMBER = "gcc-11-11.3.0/gcc-11.3.0-dfsg.tar.xz"


def tar_bytes(files: dict[str, bytes], mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith("configure") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def gcc_orig(path: Path, leave_out: str = "") -> Path:
    """A Debian-like gcc-11 orig: a tar.gz wrapping the GCC source tar.xz (GCC_TREE and more)."""
    tree = {f"gcc-11.3.0/{p}{'configure' if p.endswith('/') else ''}": p.encode() for p in GCC_TREE if p != leave_out}
    tree["gcc-11.3.0/libstdc++-v3/configure"] = b"not wanted"
    tree["gcc-11.3.0/gcc/c-parser.cc"] = b"not wanted"
    inner = tar_bytes(tree, "w:xz")
    path.write_bytes(tar_bytes({MEMBER: inner, "gcc-11-11.3.0/newlib-4.1.0.tar.xz": b"x"}, "w:gz"))
    return path


def test_only_what_libgomps_configure_reads_is_unpacked(tmp_path: Path) -> None:
    dest = tmp_path / "src"
    unpack_gcc_tree(gcc_orig(tmp_path / "gcc.tar.gz"), MEMBER, dest)
    assert (dest / "libgomp" / "configure").read_bytes() == b"libgomp/"
    assert (dest / "libgomp" / "configure").stat().st_mode & 0o100  # run as ../src/libgomp/configure
    assert (dest / "gcc" / "BASE-VER").read_bytes() == b"gcc/BASE-VER"
    assert not (dest / "libstdc++-v3").exists() and not (dest / "gcc" / "c-parser.cc").exists()
    assert not (dest / "gcc-11.3.0").exists()  # the top directory is dropped


@pytest.mark.parametrize(
    ("member", "leave_out", "message"),
    [
        ("gcc-11-11.3.0/gcc-12.tar.xz", "", "has no gcc-11-11.3.0/gcc-12.tar.xz"),
        (MEMBER, "config-ml.in", "lacks config-ml.in"),
    ],
    ids=["no-such-member", "not-a-gcc-tree"],
)
def test_a_wrong_member_or_tree_is_refused(tmp_path: Path, member: str, leave_out: str, message: str) -> None:
    with pytest.raises(SourceError, match=message) as err:
        unpack_gcc_tree(gcc_orig(tmp_path / "gcc.tar.gz", leave_out), member, tmp_path / "src")
    assert "[openmp]" in (err.value.fix or "")


def test_the_build_script_uses_the_toolchains_compiler_and_checks_the_static_link(project: Path) -> None:
    """libgomp is configured for PIC and static only with the toolchain's own compiler and flags
    (newer binutils first), installed where GCC looks (its libgcc directory, include/ for omp.h) with
    a spec that adds -ldl -lpthread; the script fails if -fopenmp would still need libgomp.so."""
    script = build_script(load_toolchain(project, OPENMP))
    assert "cc=/opt/ortdist-compiler/bin/x86_64-linux-gnu-gcc" in script
    assert "-B/opt/ortdist-compiler/newer-binutils/" in script
    assert 'libdir=$(dirname "$("$cc" -print-libgcc-file-name)")' in script
    assert "--with-pic --enable-static --disable-shared" in script
    assert '"$libdir/libgomp.a"' in script and '"$libdir/include/omp.h"' in script
    assert "-lgomp -ldl -lpthread" in script
    assert "-fopenmp -fPIC -shared -o libcheck.so" in script and "NEEDED.*libgomp" in script


def test_libgomp_is_built_in_the_root_from_the_pinned_tarball(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orig is fetched against its pinned sha256, the tree unpacked under the root's /tmp, the
    script run in the root (wrap), and the work directory removed afterwards."""
    spec = load_toolchain(project, OPENMP)
    assert spec.openmp is not None
    orig = gcc_orig(tmp_path / spec.openmp.file)
    fetched: list[sources.Pinned] = []

    def fetch(pin: sources.Pinned, downloads: Path) -> Path:
        fetched.append(pin)
        return orig

    calls: list[tuple[list[str], bool]] = []

    def call(argv: Sequence[str], **kwargs: Any) -> None:
        calls.append((list(argv), (root / "tmp" / "ortdist-openmp" / "src" / "libgomp" / "configure").is_file()))

    monkeypatch.setattr(sources, "fetch", fetch)
    monkeypatch.setattr(run, "call", call)
    root, log = tmp_path / "root", io.StringIO()
    wrapped: Callable[[Path, Sequence[str]], list[str]] = lambda r, argv: ["chroot", str(r), *argv]  # noqa: E731
    install_openmp(spec, Cache(tmp_path / "cache"), root, log, wrapped)
    (pin,) = fetched
    assert pin.sha256 == spec.openmp.sha256 and pin.url.endswith("/pool/main/g/gcc-11/gcc-11_11.3.0.orig.tar.gz")
    assert "toolchains/portable-glibc2.17-openmp.toml [openmp]" in pin.origin
    ((argv, unpacked),) = calls
    assert argv[:4] == ["chroot", str(root), "bash", "-euo"] and argv[-1] == build_script(spec)
    assert unpacked  # the tree was there when the script ran
    assert not (root / "tmp" / "ortdist-openmp").exists()
    assert "building libgomp 11.3.0" in log.getvalue()


@pytest.mark.usefixtures("no_subprocess")
def test_a_toolchain_without_openmp_builds_none(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()

    def wrap(root: Path, argv: Sequence[str]) -> list[str]:
        raise AssertionError("nothing runs in the root")

    install_openmp(load_toolchain(project, "portable-glibc2.17"), Cache(tmp_path / "c"), root, io.StringIO(), wrap)
    assert list(root.iterdir()) == [] and not (tmp_path / "c").exists()


def test_the_openmp_table_names_a_root_of_its_own(project: Path) -> None:
    """[openmp] is in the root digest: the OpenMP toolchain's root is another than its parent's,
    whose root (and every portable build tree) keeps its name."""
    parent, child = load_toolchain(project, "portable-glibc2.17"), load_toolchain(project, OPENMP)
    assert child.openmp is not None and parent.openmp is None
    assert child.compiler == parent.compiler and child.cmake == parent.cmake
    assert child.root_digest != parent.root_digest


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ('sha256 = "6190E4', "openmp.sha256", "must state the orig tarball's sha256"),
        ('extends = "debian-trixie"', "openmp", "builds libgomp for the toolchain's [compiler], and there is none"),
    ],
    ids=["uppercase-sha256", "no-compiler"],
)
def test_a_bad_openmp_table_is_refused(project: Path, tmp_path: Path, text: str, key: str, message: str) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    path = tmp_path / "toolchains" / f"{OPENMP}.toml"
    original = path.read_text()
    old = 'sha256 = "6190e4' if "sha256" in text else 'extends = "portable-glibc2.17"'
    assert old in original
    path.write_text(original.replace(old, text))
    with pytest.raises(RecipeError) as err:
        load_toolchain(tmp_path, OPENMP)
    assert message in err.value.message and err.value.where.endswith(f"key '{key}'")


def test_dnnl_on_a_compiler_without_openmp_is_refused_and_says_which_toolchain(
    project: Path, recipe_from: Callable[..., Recipe], tmp_path: Path
) -> None:
    from ortdist.plan import make_plan

    recipe = recipe_from('execution_providers = ["cpu", "dnnl"]\ntoolchain = "portable-glibc2.17"\n')
    with pytest.raises(RecipeError, match="its pinned sources need an OpenMP runtime") as err:
        make_plan(recipe, load_toolchain(project, "portable-glibc2.17"), ())
    assert "portable-glibc2.17-openmp" in (err.value.fix or "")
    plan, _ = plan_for("dnnl-linux", project)
    assert plan.toolchain.name == OPENMP
    assert plan.cmake_defines["FETCHCONTENT_SOURCE_DIR_ONEDNN"] == "/ortdist/deps/onednn"
    assert "0011" in {p.name[:4] for p in plan.patches}
    digest = hashlib.sha256((project / "patches" / "1.21.0" / plan.patches[-1].name).read_bytes()).hexdigest()
    assert plan.patches[-1].sha256 == digest


def test_the_hash_check_refuses_a_tampered_orig(tmp_path: Path) -> None:
    """The pin is a sha256: an orig with other bytes is refused before anything is unpacked."""
    spec_pin = sources.Pinned(url="http://x/gcc.tar.gz", filename="gcc.tar.gz", sha256="0" * 64, origin="[openmp]")
    orig = gcc_orig(tmp_path / "gcc.tar.gz")
    with pytest.raises(SourceError, match="sha256"):
        sources.verify(orig, spec_pin)
