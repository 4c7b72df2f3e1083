"""Small filesystem helpers for all-or-nothing results: temp siblings, renames, hashing."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from . import deflate
from .errors import OrtdistError


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_text(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` (deleting through a bind mount deletes the host's files)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    prefix = str(path.resolve())
    points = [line.split()[1].encode().decode("unicode_escape") for line in lines if len(line.split()) > 1]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


# Directories a run registered as its own (a recipe's dist/ directory given with --dist).
_REGISTERED_ROOTS: set[Path] = set()


def allow_removals_under(directory: Path) -> None:
    """Let this run delete below ``directory``: the recipe's dist directory, the device-proof bundle."""
    _REGISTERED_ROOTS.add(directory.resolve())


def removable_roots() -> tuple[Path, ...]:
    """Where ortdist may delete: below the cache, the project's dist/, the system temp directory,
    and the directories this run registered. Nothing else, whatever a recipe or argument says."""
    from .paths import Cache, project_root

    defaults = (Cache.default().root, project_root() / "dist", Path(tempfile.gettempdir()))
    return tuple(sorted({p.resolve() for p in defaults} | _REGISTERED_ROOTS))


def check_removable(path: Path) -> Path:
    """The resolved ``path`` if it lies strictly below a removable root; else an OrtdistError.

    The parent is resolved and the last component kept, so a symlink is judged (and removed) as
    the link itself, and ``..`` components cannot climb out of a root."""
    absolute = path.absolute()
    keep_last = absolute.name not in ("", ".", "..")
    resolved = absolute.parent.resolve() / absolute.name if keep_last else absolute.resolve()
    roots = removable_roots()
    if any(resolved != root and resolved.is_relative_to(root) for root in roots):
        return resolved
    raise OrtdistError(
        f"refusing to delete {path}: it is not below ortdist's cache, dist or temp directories",
        where=str(resolved),
        fix="this is a bug or a bad path (a recipe name or --dist/--out argument): ortdist only deletes below "
        + ", ".join(str(r) for r in roots),
    )


def unmount_below(path: Path) -> list[str]:
    """Lazily unmount everything mounted at or below ``path``, deepest first, and nothing else
    (what a killed debootstrap mounted in its target); returns what is still mounted there."""
    from . import run  # run -> children -> (nothing of ours): no cycle, but keep fsutil light to import

    for point in sorted(mounts_under(path), key=lambda p: p.count("/"), reverse=True):
        run.capture(["umount", "--lazy", point], check=False)
    return mounts_under(path)


def remove_tree(path: Path) -> None:
    """Delete a file or tree that ortdist made; every removal goes through here (see check_removable)."""
    path = check_removable(path)
    if not (path.is_symlink() or path.exists()):
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        mounted = mounts_under(path)
        if mounted:
            raise OrtdistError(
                f"refusing to delete {path}: {mounted[0]} is mounted below it",
                fix=f"unmount it first: umount -R {mounted[0]}",
            )
        shutil.rmtree(path)


@contextlib.contextmanager
def temp_sibling_dir(final: Path) -> Iterator[Path]:
    """A temp dir beside ``final``; the caller renames it into place on success, else it is removed.

    Being a sibling keeps the final rename on one filesystem, hence atomic.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
    finally:
        if tmp.exists():
            remove_tree(tmp)


def replace_dir(tmp: Path, final: Path) -> None:
    """Move ``tmp`` to ``final``, replacing an older ``final`` (a stale one from an older run)."""
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        final.rename(old)
        tmp.rename(final)
        remove_tree(old)
    else:
        tmp.rename(final)


@contextlib.contextmanager
def atomic_file(dest: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write ``dest`` through a temp file in the same directory, renamed into place when complete:
    readers see the old file or the whole new one, never a partial write."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, mode) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_copy(src: Path, dest: Path) -> None:
    with atomic_file(dest) as out, src.open("rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)


def atomic_write_text(dest: Path, text: str) -> None:
    with atomic_file(dest, "w") as out:
        out.write(text)


def write_if_changed(dest: Path, text: str) -> bool:
    """Write ``text`` only where it differs from what ``dest`` holds: a file ninja reads keeps its
    mtime, so nothing rebuilds for the same bytes. Returns whether it wrote."""
    if dest.is_file() and dest.read_text(encoding="utf-8") == text:
        return False
    dest.write_text(text, encoding="utf-8")
    return True


def sync_tree(src: Path, dest: Path) -> int:
    """Make ``dest`` hold exactly ``src``'s files, rewriting only those whose bytes differ, so
    ninja recompiles only what really changed. Returns how many files were written."""
    written = 0
    wanted = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    for rel in sorted(wanted):
        target = dest / rel
        data = (src / rel).read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written += 1
    if dest.is_dir():
        for path in sorted(dest.rglob("*"), reverse=True):
            if path.is_file() and path.relative_to(dest) not in wanted:
                path.unlink()
    return written


# gzip's level for archives: 8 gives cpu-linux's C archive 1.6 KB more than 9 (7,418,179 B) in 12% less
# time (1.79 against 2.03 s), as for the wheels (wheel/record.py).
TARBALL_LEVEL = 8


def deterministic_tarball(tree: Path, archive: Path, top: str, mtime: int) -> None:
    """A .tar.gz whose bytes depend only on the files: sorted, fixed owner, fixed times; one gzip
    stream made in pieces side by side, a large file's pieces the ones the wheels carry for that
    file (ortdist.deflate)."""
    tarred, large = io.BytesIO(), []
    with tarfile.open(fileobj=tarred, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(tree.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=f"{top}/{path.relative_to(tree)}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = mtime
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
                if info.size >= deflate.SHARED_AT:  # the file's bytes end where its 512-byte padding starts
                    large.append((tar.offset - -(-info.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE, info.size))
            else:
                tar.addfile(info)
    with atomic_file(archive) as raw:
        raw.write(deflate.gzip_bytes(tarred.getvalue(), TARBALL_LEVEL, mtime, large))


def same_file(a: Path, b: Path) -> bool:
    """One file under two names: equal resolved paths, or (both existing) the same inode."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def check_output_file(path: Path, inputs: Sequence[Path] = (), *, what: str = "output") -> None:
    """Refuse, before anything is read or written, an output that would replace one of the command's
    inputs, that is a directory, or whose directory is missing or not writable."""
    for source in inputs:
        if same_file(path, source):
            raise OrtdistError(
                f"the {what} would replace the input {source}",
                where=str(path),
                fix=f"write the {what} to another file",
            )
    if path.is_dir():
        raise OrtdistError(f"the {what} is a directory", where=str(path), fix="name a file, not a directory")
    check_writable_dir(path.parent, what=f"the {what}'s directory")


def check_output_dir(path: Path, inputs: Sequence[Path] = (), *, what: str = "output directory") -> None:
    """An output directory: not an input, a directory if it exists, else creatable (its parent exists)."""
    for source in inputs:
        if same_file(path, source):
            raise OrtdistError(f"the {what} is the input {source}", where=str(path), fix=f"name another {what}")
    if path.exists() and not path.is_dir():
        raise OrtdistError(f"the {what} is a file, not a directory", where=str(path), fix="name a directory")
    check_writable_dir(
        path if path.is_dir() else path.parent, what=f"the {what}" if path.is_dir() else f"the {what}'s parent"
    )


def check_writable_dir(directory: Path, *, what: str = "directory") -> None:
    if not directory.is_dir():
        raise OrtdistError(
            f"{what} does not exist" + (" (it is a file)" if directory.exists() else ""),
            where=str(directory),
            fix="create it first, or name a path in an existing directory",
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OrtdistError(f"{what} is not writable", where=str(directory), fix="choose a directory you can write to")
