"""Fetch, verify and unpack sources: Debian orig tarballs, PyPI sdists, git tags, local trees.

A download is written to ``<name>.part`` and only renamed into the cache once its sha256
matches the pin; a mismatch, an error or an interrupt deletes it and extracts nothing. Unpacking goes to a temp sibling
directory that is renamed into place when complete.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import ssl
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from . import mirrors, run
from .errors import OrtdistError, SourceError
from .fsutil import sha256_file, temp_sibling_dir
from .log import log
from .registry import DebianSource, DependencySource


def debian_mirror(declared: str) -> str:
    """Debian's archive as this host names it (mirrors.debian_archive), else ``declared``: the
    toolchain's ``mirror``."""
    return mirrors.debian_archive(declared).url


@dataclass(frozen=True)
class Pinned:
    """A file to fetch: where from, what to call it, and the sha256 it must have."""

    url: str  # "" where no registry could be named (``unreachable`` says why): a cached copy still serves
    filename: str
    sha256: str
    origin: str  # where the pin is written, for error messages
    unreachable: OrtdistError | None = None


def debian_orig(source: DebianSource, archive: str, sha256_override: str = "") -> Pinned:
    """ORT's orig tarball from Debian's pool (``archive``: the toolchain's declared mirror)."""
    return Pinned(
        url=f"{debian_mirror(archive)}/{source.pool_path}",
        filename=source.orig_tarball,
        sha256=sha256_override or source.sha256,
        origin="recipe [source] sha256" if sha256_override else "ortdist/data/ort_versions.toml",
    )


def _open(url: str, cert: str) -> IO[bytes]:
    """urlopen with pip's CA bundle where pip names one (a company proxy's own CA)."""
    context = ssl.create_default_context(cafile=cert) if cert and url.startswith("https:") else None
    response: IO[bytes] = urllib.request.urlopen(url, timeout=60, context=context)
    return response


def pypi_sdist_url(project: str, filename: str) -> str:
    """Find ``filename`` on pip's index, then its extra indexes (PEP 503 HTML), and return its URL."""
    pip = mirrors.pip_index()
    tried = []
    for base in (pip.index.url, *pip.extra):
        index = f"{base}/{project}/"
        try:
            with _open(index, pip.cert) as resp:
                html = resp.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as exc:
            tried.append(f"{index} ({exc})")
            continue
        for href in re.findall(r'href="([^"]+)"', html):
            if href.split("#", 1)[0].rsplit("/", 1)[-1] == filename:
                return str(urllib.parse.urljoin(index, href.split("#", 1)[0]))
        tried.append(f"{index} (no such file)")
    raise SourceError(
        f"{filename} is not on pip's index ({pip.index.origin}): " + "; ".join(tried),
        fix="check the network and pip's index-url (pip config list), or set ORTDIST_PYPI_SIMPLE; check the "
        "pinned version in ort_versions.toml",
    )


def dependency(dep: DependencySource, archive: str) -> Pinned:
    """Where a dependency's pinned file comes from: pip's index, or Debian's pool (``archive``: the
    toolchain's declared mirror)."""
    origin = f"ortdist/data/ort_versions.toml deps.{dep.name}"
    url = (
        pypi_sdist_url(dep.pypi_sdist, dep.filename) if dep.pypi_sdist else f"{debian_mirror(archive)}/{dep.pool_path}"
    )
    return Pinned(url=url, filename=dep.filename, sha256=dep.sha256, origin=origin)


def unpack_dependency(archive: Path, dest: Path, subdir: str = "") -> None:
    """A dependency's tree in ``dest``: a tarball (only its top directory's ``subdir`` when one is
    named: one library of Boost's 700 MB tree) or a Debian binary package's files."""
    if archive.name.endswith(".deb"):
        with temp_sibling_dir(dest) as tmp:
            run.capture(["dpkg-deb", "-x", str(archive), str(tmp)], error=SourceError, what=f"unpacking {archive.name}")
            if subdir and not (tmp / subdir).is_dir():
                raise SourceError(
                    f"{archive.name} has no directory {subdir!r}",
                    where=str(archive),
                    fix="correct `subdir` of the dependency in ort_versions.toml (`dpkg-deb -c` lists the package)",
                )
            tmp.rename(dest)
        return
    if not subdir:
        unpack(archive, dest)
        return
    with temp_sibling_dir(dest) as tmp:
        try:
            with tarfile.open(archive) as tar:
                wanted = [m for m in tar if _below(m.name, subdir)]
                if not wanted:
                    raise SourceError(
                        f"{archive.name} has no directory {subdir!r} below its top directory",
                        where=str(archive),
                        fix="correct `subdir` of the dependency in ort_versions.toml",
                    )
                extract_all(tar, tmp, archive.name, wanted)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise unpack_error(archive.name, archive, exc) from exc
        tops = list(tmp.iterdir())
        if len(tops) != 1:
            raise SourceError(
                f"{archive.name} has {len(tops)} top directories holding {subdir!r}; expected one",
                where=str(archive),
                fix="name the dependency's whole tree (no `subdir`) or a file with a single top directory",
            )
        tops[0].rename(dest)


def unpack_error(what: str, archive: Path, exc: BaseException) -> SourceError:
    """A cached archive that would not unpack: corrupt or cut short, so fetch it again."""
    return SourceError(
        f"cannot unpack {what}: {exc}", where=str(archive), fix="delete the file from the cache so it is fetched again"
    )


def _below(name: str, subdir: str) -> bool:
    """Whether a member ``<top>/<rest>`` lies in ``subdir`` of the top directory."""
    parts = name.removeprefix("./").split("/", 1)
    return len(parts) == 2 and (parts[1] + "/").startswith(subdir.rstrip("/") + "/")


def verify(path: Path, pin: Pinned) -> None:
    actual = sha256_file(path)
    if actual != pin.sha256:
        raise SourceError(
            f"sha256 mismatch for {pin.filename}: expected {pin.sha256}, got {actual}",
            where=pin.url,
            fix=f"the file differs from the pin in {pin.origin}; if the pin is wrong, correct it there, "
            "otherwise the mirror served a different file: nothing was extracted",
        )


def fetch(pin: Pinned, downloads: Path) -> Path:
    """Return the cached, verified file, downloading it if needed."""
    downloads.mkdir(parents=True, exist_ok=True)
    final = downloads / pin.filename
    if final.is_file():
        try:
            verify(final, pin)
            return final
        except SourceError:
            final.unlink()  # a stale or corrupt cache entry: fetch again, verify again
    if not pin.url and pin.unreachable is not None:
        raise pin.unreachable
    # A unique temp file: two ortdist processes fetching the same file cannot interleave writes.
    fd, part_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".part", dir=downloads)
    os.close(fd)
    part = Path(part_name)
    log.info(f"fetching {pin.url}")
    try:
        try:
            with urllib.request.urlopen(pin.url, timeout=120) as resp, part.open("wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
        except (urllib.error.URLError, OSError) as exc:
            raise SourceError(
                f"download failed: {exc}",
                where=pin.url,
                fix="check the network, or the mirror apt, pip or npm is configured with (ORTDIST_DEBIAN_MIRROR, "
                "ORTDIST_PYPI_SIMPLE and ORTDIST_NPM_REGISTRY override them)",
            ) from exc
        verify(part, pin)
        part.rename(final)
    finally:
        part.unlink(missing_ok=True)  # a failed, mismatched or interrupted (Ctrl-C, SIGTERM) download
    return final


# tarfile's extraction filters arrived in 3.11.4 (and 3.12); Debian 12's own python3 is 3.11.2.
HAS_TAR_FILTER = hasattr(tarfile, "data_filter")


def _outside(path: Path, dest: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), dest]) != dest


def checked_member(member: tarfile.TarInfo, dest: Path, archive: str) -> tarfile.TarInfo:
    """``member`` as it may be extracted into ``dest``, or a SourceError naming the archive and the
    member. The checks of tarfile's "data" filter, made here so Python 3.11.0-3.11.3 (no filters)
    extracts as safely as newer ones, plus one more: an absolute name is refused, not made
    relative. Called right before each member is extracted, so a symlink an earlier member made
    is resolved as it is on disk (a check of all names up front can be fooled by a link chain).
    Returns a copy with setuid/setgid/sticky and group/other write bits cleared and the
    extracting user as owner, as the "data" filter does."""

    def refuse(reason: str) -> SourceError:
        return SourceError(
            f"refusing member {member.name!r} of {archive}: {reason}",
            where=archive,
            fix="this is not a plain source archive: check where the file and its pinned sha256 come from; "
            "nothing was extracted into the cache",
        )

    root = os.path.realpath(dest)
    name = member.name
    if name.startswith("/") or Path(name).is_absolute():
        raise refuse("absolute path")
    if _outside(Path(root, name), root):
        raise refuse("its path leads outside the destination")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise refuse("not a regular file, directory or link (a device, fifo or other special file)")
    if member.issym() or member.islnk():
        if Path(member.linkname).is_absolute():
            raise refuse(f"link to the absolute path {member.linkname!r}")
        base = Path(root, name).parent if member.issym() else Path(root)
        if _outside(base / member.linkname, root):
            raise refuse(f"link to {member.linkname!r}, outside the destination")
    safe = copy.copy(member)
    if member.isreg() or member.islnk():
        mode = member.mode & 0o755
        safe.mode = (mode if mode & 0o100 else mode & ~0o111) | 0o600
    elif member.isdir():
        safe.mode = 0o755
    safe.uid, safe.gid, safe.uname, safe.gname = os.geteuid(), os.getegid(), "", ""
    return safe


def extract_all(
    tar: tarfile.TarFile, dest: Path, archive: str, members: Iterable[tarfile.TarInfo] | None = None
) -> None:
    """Extract every member of ``tar`` (or ``members``) into ``dest``, each one checked first
    (``checked_member``); with tarfile's own "data" filter too where Python has it."""
    dest.mkdir(parents=True, exist_ok=True)
    for member in tar if members is None else members:
        safe = checked_member(member, dest, archive)
        if HAS_TAR_FILTER:
            try:
                tar.extract(member, dest, filter="data")
            except tarfile.FilterError as exc:
                raise checked_error(archive, exc) from exc
        else:
            tar.extract(safe, dest)


def checked_error(archive: str, exc: tarfile.TarError) -> SourceError:
    member = getattr(exc, "tarinfo", None)
    return SourceError(
        f"refusing member {getattr(member, 'name', '?')!r} of {archive}: {exc}",
        where=archive,
        fix="this is not a plain source archive: check where the file and its pinned sha256 come from",
    )


def unpack(archive: Path, dest: Path) -> None:
    """Unpack a tarball whose members share one top directory into ``dest`` (all or nothing)."""
    with temp_sibling_dir(dest) as tmp:
        try:
            with tarfile.open(archive) as tar:
                extract_all(tar, tmp, archive.name)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise unpack_error(archive.name, archive, exc) from exc
        entries = list(tmp.iterdir())
        if len(entries) == 1 and entries[0].is_dir():
            entries[0].rename(dest)
        else:
            tmp.rename(dest)


def unpack_stream(stream: IO[bytes], dest: Path, name: str) -> None:
    """Unpack a tarball read from ``stream`` (one inside a wheel), its one top directory becoming ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with temp_sibling_dir(dest) as tmp:
        try:
            with tarfile.open(fileobj=stream, mode="r|*") as tar:
                extract_all(tar, tmp, name)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SourceError(f"cannot unpack {name}: {exc}", where=name, fix="check the pinned file") from exc
        entries = list(tmp.iterdir())
        if len(entries) != 1 or not entries[0].is_dir():
            raise SourceError(f"{name} has no single top directory", where=name, fix="check the pinned file")
        entries[0].rename(dest)


def git_checkout(url: str, tag: str, commit: str, dest: Path) -> None:
    with temp_sibling_dir(dest) as tmp:
        run.capture(
            ["git", "clone", "--depth", "1", "--branch", tag, url, str(tmp / "src")],
            error=SourceError,
            what=f"git clone {url} {tag}",
        )
        head = run.capture(["git", "-C", str(tmp / "src"), "rev-parse", "HEAD"], error=SourceError).stdout.strip()
        if commit and head != commit:
            raise SourceError(
                f"tag {tag} resolves to {head}, not the pinned commit {commit}",
                where=url,
                fix="update [source] commit if the tag moved on purpose",
            )
        (tmp / "src").rename(dest)


def copy_tree(path: Path, dest: Path) -> None:
    if not (path / "cmake" / "CMakeLists.txt").is_file():
        raise SourceError(
            f"{path} is not an ONNX Runtime source tree (no cmake/CMakeLists.txt)",
            where="recipe [source] path",
            fix="point path at the root of an onnxruntime checkout",
        )
    with temp_sibling_dir(dest) as tmp:
        shutil.copytree(path, tmp / "src", symlinks=True, ignore=shutil.ignore_patterns(".git", "build"))
        (tmp / "src").rename(dest)
