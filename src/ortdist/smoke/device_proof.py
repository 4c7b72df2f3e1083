"""The device proof: a wheel's accelerator EP run on a machine lent for minutes, with no network and
nothing but its own Python, numpy and onnx.

Three steps, so the lent minutes go to running and nothing else:

- ``prepare`` (the build machine): a bundle directory holding the wheel, the smoke runner with the
  reference models and ONNX's node tests (converted here, with onnx 1.17; one zip), and the latency
  script.
  It travels with the working tree, so it must stay under the transfer limit.
- ``run`` (the lent machine): installs the wheel with pip, no index and no dependencies (the
  machine's numpy is used); runs the runner on every case; judges it with the smoke suite's own
  rules under --require-device (a skipped device case fails); generates the real-size models there
  (smoke/realsize.py needs only numpy and onnx) and times them on the EP and on the CPU EP of the
  same machine; writes device-proof.json and a log into the folder it is given.
- ``accept`` (the build machine): checks that the JSON proves the very wheel in dist/<recipe>/ (its
  sha256) and files it as dist/<recipe>/device-proof/device-proof.json, which the report shows.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

from .. import __version__, records
from ..errors import CheckError
from ..fsutil import remove_tree, sha256_file
from ..paths import Cache
from . import pieces
from .ondevice import (
    MANIFEST,
    RESULT,
    SMOKE_ZIP,
    _judge,
    compare_outputs,
    device_providers,
    read_manifest,
    run,
    summary,
)
from .pieces import default_store, piece_steps, pieces_dir
from .run_suite import _node_files, write_reference_models, write_runner
from .wheelinfo import read_wheel

FILED = f"device-proof/{RESULT}"  # under dist/<recipe>/: what `accept` files and the report reads
# The lent machine takes the working tree and the carried paths up to 64 MiB together; the bundle
# leaves the rest of the tree (the project's own files, about 2 MiB) its room.
BUNDLE_LIMIT = 60 * 1024 * 1024
# A wheel that does not fit (a release CUDA wheel, 200+ MB) travels in pieces (smoke/pieces.py).


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def pick_wheel(recipe_dist: Path, python: str) -> Path:
    """dist/<recipe>/'s wheel for CPython ``python`` (one, or a clear error)."""
    tag = "cp" + python.replace(".", "")
    found = sorted(recipe_dist.glob(f"*-{tag}-{tag}-*.whl"))
    if len(found) != 1:
        have = ", ".join(p.name for p in sorted(recipe_dist.glob("*.whl"))) or "none"
        raise CheckError(
            f"expected one {tag} wheel in {recipe_dist}, found {len(found)} (wheels there: {have})",
            where=str(recipe_dist),
            fix=f"build the recipe first (./nox -s build-<recipe>), with {python} in its [wheel] python",
        )
    return found[0]


def prepare(wheel: Path, bundle: Path, cache: Cache, recipe: str) -> dict[str, Any]:
    """Write the bundle for ``wheel`` into ``bundle`` (replaced); returns its manifest."""
    info = read_wheel(wheel)
    claimed = info.claimed_providers
    if claimed is None:
        raise CheckError(
            f"{wheel.name} has no ortdist build record, so it claims no EP to prove",
            where=str(wheel),
            fix="prepare the proof of a wheel ortdist built (dist/<recipe>/)",
        )
    on_device = device_providers(claimed)
    if not on_device:
        raise CheckError(
            f"{wheel.name} claims {', '.join(claimed)}: none of them needs a device",
            where=str(wheel),
            fix="the CPU EPs are proven by the build's own checks and `ortdist smoke`",
        )
    remove_tree(bundle)
    remove_tree(pieces_dir(bundle))
    smoke = bundle / "smoke"
    smoke.mkdir(parents=True)
    shutil.copyfile(wheel, bundle / wheel.name)
    # Paths as the runner sees them: relative to its working directory, the bundle's copy of smoke/.
    here = Path()
    files = write_reference_models(smoke, here)
    node_files, node_skipped = _node_files(cache, smoke, here)
    write_runner(smoke, claimed, files + node_files)
    with zipfile.ZipFile(bundle / SMOKE_ZIP, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(smoke.rglob("*")):
            archive.write(path, path.relative_to(smoke).as_posix())
    remove_tree(smoke)
    timing = bundle / "latency"
    timing.mkdir()
    package = Path(__file__).parent
    shutil.copyfile(package.parent / "bench" / "latency.py", timing / "latency.py")
    for helper in ("runner.py", "proof.py"):
        shutil.copyfile(package / helper, timing / helper)
    manifest = {
        "recipe": recipe,
        "wheel": wheel.name,
        "wheel_sha256": sha256_file(wheel),
        "python": info.python,
        "claimed": claimed,
        "device_providers": on_device,
        "node_tests_skipped_by_converter": node_skipped,
        "ortdist": __version__,
    }
    rest = _dir_bytes(bundle) - wheel.stat().st_size
    if rest + wheel.stat().st_size > BUNDLE_LIMIT:
        if rest > BUNDLE_LIMIT // 2:
            remove_tree(bundle)
            raise CheckError(
                f"the proof bundle without its wheel is {rest / 2**20:.1f} MiB, over half the "
                f"{BUNDLE_LIMIT / 2**20:.0f} MiB the device machine takes in one call",
                where=str(bundle),
                fix="the smoke models and node tests grew: keep the bundle's own files small",
            )
        (bundle / wheel.name).unlink()
        manifest["pieces"] = pieces.split(wheel, pieces_dir(bundle), BUNDLE_LIMIT - rest - pieces.MANIFEST_ROOM)
    (bundle / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    manifest["bundle_bytes"] = _dir_bytes(bundle)
    return manifest


def gather(bundle: Path, store: Path) -> list[str]:
    """On the lent machine: keep the pieces of the bundle's wheel this call carried (pieces.gather)."""
    return pieces.gather(bundle, read_manifest(bundle), store)


# --- on the lent machine ---------------------------------------------------------------------


def accept(result_dir: Path, recipe_dist: Path) -> Path:
    """File a device run's JSON under dist/<recipe>/device-proof/ once it names that recipe's wheel."""
    source = result_dir / RESULT
    if not source.is_file():
        raise CheckError(f"no {RESULT} in {result_dir}", fix="pass the folder the device run wrote (its --out)")
    proof = records.load(source, records.DEVICE_PROOF, CheckError)
    named, sha256 = proof["wheel"], proof["wheel_sha256"]
    wheel = recipe_dist / named
    if not wheel.is_file() or sha256_file(wheel) != sha256:
        raise CheckError(
            f"the proof is of {proof['wheel']} (sha256 {proof['wheel_sha256'][:12]}…), "
            f"which {recipe_dist} does not hold",
            where=str(source),
            fix="rebuilding changed the wheel: prepare, run and accept the proof again",
        )
    dest = (recipe_dist / FILED).parent
    dest.mkdir(parents=True, exist_ok=True)
    for name in (RESULT, "device-proof.log"):
        if (result_dir / name).is_file():
            shutil.copyfile(result_dir / name, dest / name)
    return dest / RESULT


# The three steps under one name for the CLI; the run side is ondevice.py.
__all__ = [
    "FILED",
    "MANIFEST",
    "RESULT",
    "_judge",
    "accept",
    "compare_outputs",
    "default_store",
    "gather",
    "pick_wheel",
    "piece_steps",
    "pieces_dir",
    "prepare",
    "run",
    "summary",
]
