"""A wheel too large for one call to the lent GPU machine (64 MiB with the working tree), carried
in pieces over consecutive calls while that machine stays up: cut here beside the bundle
(<bundle>.pieces/NN/, one folder per call), kept there by `gather` outside the working tree (which
each call replaces), and put back together by `run`, byte for byte the wheel in dist/ (its sha256).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..errors import CheckError
from ..fsutil import sha256_file

SUFFIX = ".pieces"
# Room for the manifest, which grows by a line per piece, beside the bundle and one piece in a call.
MANIFEST_ROOM = 64 * 1024


def piece_steps(bundle: Path, manifest: dict[str, Any]) -> str:
    """What to run where for a bundle whose wheel travels in pieces: one call per piece while the
    GPU machine stays up, the last one also running both proofs (SASS, then PTX)."""
    pieces, name = manifest["pieces"], bundle.name
    gather = f"PYTHONPATH=src python3 -m ortdist device-proof gather {bundle}"
    prove = f"PYTHONPATH=src python3 -m ortdist device-proof run {bundle}"
    lines = [
        f"ortdist: {bundle} ({manifest['bundle_bytes'] / 2**20:.1f} MiB) and {manifest['wheel']} "
        f"({sum(p['bytes'] for p in pieces) / 2**20:.1f} MiB) in {len(pieces)} pieces under {bundle}{SUFFIX}/",
        "on the GPU machine, one call per piece while it stays up (a call carries the bundle and one piece):",
    ]
    for number in range(len(pieces)):
        lines.append(f"  carry {bundle} {bundle}{SUFFIX}/{number:02d}:  {gather}")
    lines += [
        f"  then, in the last call: {prove} --out $OUT/sass && {prove} --force-ptx --no-latency --out $OUT/ptx",
        f"then here: ortdist device-proof accept {name} <folder>/sass, and the same for <folder>/ptx",
    ]
    return "\n".join(lines)


def pieces_dir(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + SUFFIX)


def split(wheel: Path, into: Path, most: int) -> list[dict[str, Any]]:
    """``wheel`` cut into pieces of at most ``most`` bytes, into/00/<wheel>.00, into/01/...: one
    folder per device call; each piece's sha256, so the far side knows what it holds."""
    pieces: list[dict[str, Any]] = []
    with wheel.open("rb") as source:
        while chunk := source.read(most):
            number = f"{len(pieces):02d}"
            piece = into / number / f"{wheel.name}.{number}"
            piece.parent.mkdir(parents=True)
            piece.write_bytes(chunk)
            pieces.append({"name": piece.name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    return pieces


def default_store(bundle: Path) -> Path:
    """Where `gather` keeps a wheel's pieces between calls: outside the working tree, which each
    call replaces, on the lent machine's own disk, which stays while the machine does."""
    return Path(tempfile.gettempdir()) / "ortdist-pieces" / bundle.name


def gather(bundle: Path, manifest: dict[str, Any], store: Path) -> list[str]:
    """Keep each piece of the bundle's wheel that this call carried (<bundle>.pieces/NN/) in
    ``store``, checked against the bundle manifest's sha256; returns the pieces the store lacks."""
    pieces = manifest.get("pieces") or []
    if not pieces:
        raise CheckError(
            "the bundle holds its whole wheel: there is nothing to gather", where=str(bundle), fix="run it directly"
        )
    store.mkdir(parents=True, exist_ok=True)
    carried = pieces_dir(bundle)
    for piece in pieces:
        for found in sorted(carried.glob(f"*/{piece['name']}")):
            if sha256_file(found) != piece["sha256"]:
                raise CheckError(
                    "this piece of the wheel is not the one the bundle was prepared with",
                    where=str(found),
                    fix="prepare the bundle again and carry its pieces from the start",
                )
            shutil.copyfile(found, store / piece["name"])
    return [p["name"] for p in pieces if not _holds(store / p["name"], p["sha256"])]


def _holds(path: Path, sha256: str) -> bool:
    return path.is_file() and sha256_file(path) == sha256


def assemble_wheel(bundle: Path, manifest: dict[str, Any], store: Path, work: Path) -> Path:
    """The bundle's wheel: in the bundle, or put together from the pieces ``store`` holds; either
    way byte for byte the one prepared (its sha256, which dist/ and `accept` hold too)."""
    pieces = manifest.get("pieces") or []
    wheel = bundle / str(manifest["wheel"])
    if pieces:
        lacking = [p["name"] for p in pieces if not _holds(store / p["name"], p["sha256"])]
        if lacking:
            raise CheckError(
                f"the wheel travels in {len(pieces)} pieces and {store} lacks {', '.join(lacking)}",
                where=str(store),
                fix="carry each <bundle>.pieces/NN with `device-proof gather` while the machine stays up, then run",
            )
        wheel = work / str(manifest["wheel"])
        with wheel.open("wb") as whole:
            for piece in pieces:
                whole.write((store / piece["name"]).read_bytes())
    if not wheel.is_file() or sha256_file(wheel) != manifest["wheel_sha256"]:
        raise CheckError("the bundle's wheel is not the one it was prepared from", where=str(wheel))
    return wheel
