"""The README's set-up works with nothing but a stock Debian's own python3: ./nox on Debian 12 and 13
roots that have PEP 668's EXTERNALLY-MANAGED marker and no python3-venv (so no ensurepip), no pip,
no pipx: ./nox installs Debian's python3-venv with apt-get. Each root is a debootstrap minbase with
python3 and ca-certificates, kept in the cache (``<cache>/noxw-roots/<suite>``, a few minutes to
make once) and used through a fresh copy."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortdist import sources
from ortdist.fsutil import remove_tree, temp_sibling_dir
from ortdist.toolchains import Bind, load_toolchain
from ortdist.toolchains.debian import DebianSysroot

from . import scratch_cache

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap and chroot need root"),
]
PROJECT = Path(__file__).resolve().parents[2]
SUITES = {"bookworm": "3.11", "trixie": "3.13"}


def stock_root(suite: str) -> Path:
    """A minbase root of ``suite`` with python3 (as a stock install has it), made once per cache."""
    final = scratch_cache().root / "noxw-roots" / suite  # the tests' own cache, kept between runs
    if (final / "usr" / "bin" / "python3").is_file():
        return final
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (apt-get install debootstrap)")
    with temp_sibling_dir(final) as tmp:
        debootstrap = ["debootstrap", "--variant=minbase", "--include=python3,ca-certificates"]
        private = ["unshare", "--mount", "--propagation", "private", "--"]
        archive = sources.debian_mirror(load_toolchain(PROJECT, "debian-trixie").mirror)
        subprocess.run([*private, *debootstrap, suite, str(tmp), archive], check=True)
        tmp.rename(final)
    return final


@pytest.fixture(params=sorted(SUITES))
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    suite = str(request.param)
    copy = tmp_path / "root"
    subprocess.run(["cp", "-a", str(stock_root(suite)), str(copy)], check=True)
    shutil.copyfile("/etc/resolv.conf", copy / "etc" / "resolv.conf")
    # The host's trust store: a TLS-intercepting proxy the host trusts is trusted in the root too,
    # as on any machine set up for such a network.
    shutil.copyfile("/etc/ssl/certs/ca-certificates.crt", copy / "etc" / "ssl" / "certs" / "ca-certificates.crt")
    yield suite, copy
    remove_tree(copy)


def checkout(dest: Path) -> None:
    """The repo's tracked files, as a fresh clone has them."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT / name, dest / name)


def test_noxw_runs_nox_with_a_stock_debian_python(root: tuple[str, Path], tmp_path: Path) -> None:
    suite, path = root
    toolchain = DebianSysroot(load_toolchain(PROJECT, "debian-trixie"))
    repo = tmp_path / "repo"
    checkout(repo)

    def inside(script: str) -> subprocess.CompletedProcess[str]:
        argv = toolchain.wrap(path, ["/bin/sh", "-c", script], binds=[Bind(repo, Path("/repo"))], cwd=Path("/repo"))
        return subprocess.run(argv, text=True, capture_output=True, check=False)

    version = SUITES[suite]
    # What makes the README's old `python3 -m pip install nox` fail there, and what ./nox works around.
    assert (path / "usr" / "lib" / f"python{version}" / "EXTERNALLY-MANAGED").is_file()
    assert "No module named" in inside("python3 -m pip --version").stderr
    assert inside("python3 -c 'import ensurepip'").returncode != 0
    assert inside("command -v pipx").returncode != 0

    first = inside("python3 ./nox -l")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"creating .venv-nox/ with /usr/bin/python3 ({version}." in first.stderr
    assert "no ensurepip here (Debian's python3-venv is not installed): installing python3-venv" in first.stderr
    assert inside("python3 -c 'import ensurepip'").returncode == 0  # Debian's own, from its archive
    for session in ("* tests", "build-cpu-linux", "unit-debian-python"):
        assert session in first.stdout, first.stdout
    again = inside("python3 ./nox --version")
    assert again.returncode == 0 and "creating" not in again.stderr, again.stderr
    assert again.stdout.strip() == "2026.10.20" or again.stderr.strip().endswith("2026.10.20")
    # Nothing went into the system Python.
    assert inside("python3 -c 'import nox'").returncode != 0
    assert (repo / ".venv-nox" / "bin" / "python").is_file()
