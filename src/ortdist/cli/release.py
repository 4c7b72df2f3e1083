"""The release commands behind ``ortdist device-proof`` and ``ortdist publish``: a GPU wheel proven on
a lent machine, and smoke-tested wheels uploaded and installed back (cli/parser.py wires them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import pipeline
from ..errors import OrtdistError, PublishError
from ..fsutil import allow_removals_under, check_output_dir
from ..paths import Cache, project_root
from ..project import plan_for
from ..toolchains import make_toolchain

DEVICE_BUNDLE = ".device-proof"  # in the project root (ignored): it travels with the working tree


def cmd_device_proof(args: argparse.Namespace) -> int:
    """prepare (here) -> run (on the lent GPU machine, offline) -> accept (here); see smoke/device_proof.py."""
    from ..smoke import device_proof

    # Every folder an action is given is checked before it reads or makes anything.
    store = Path(args.store) if getattr(args, "store", None) else None
    if store is not None:
        check_output_dir(store, what="--store")
    if args.action == "run":
        check_output_dir(Path(args.out), what="--out")
        options = {"libraries_from": args.libraries, "force_ptx": args.force_ptx, "store": store}
        proof = device_proof.run(Path(args.bundle), Path(args.out), timing=args.latency, runs=args.runs, **options)
        return 0 if proof["passed"] else 1
    if args.action == "gather":
        store = store or device_proof.default_store(Path(args.bundle))
        lacking = device_proof.gather(Path(args.bundle), store)
        print(f"ortdist: {store} lacks {', '.join(lacking) or 'no piece of the wheel'}")
        return 0
    project = project_root()
    plan, _ = plan_for(args.recipe, project)
    recipe_dist = dist_root(args, project) / plan.recipe.name
    if args.action == "prepare":
        wheel = device_proof.pick_wheel(recipe_dist, args.python)
        allow_removals_under(project / DEVICE_BUNDLE)  # ortdist's own folder: prepare replaces a bundle whole
        bundle = project / DEVICE_BUNDLE / plan.recipe.name
        manifest = device_proof.prepare(wheel, bundle, Cache.default(), plan.recipe.name)
        if manifest.get("pieces"):
            # The GPU machine runs in its copy of the project: paths as seen from its root.
            print(
                device_proof.piece_steps(
                    bundle.relative_to(project) if bundle.is_relative_to(project) else bundle, manifest
                )
            )
            return 0
        print(
            f"ortdist: {bundle} ({manifest['bundle_bytes'] / 2**20:.1f} MiB): {wheel.name}, the reference models and "
            f"ONNX's node tests on {', '.join(manifest['device_providers'])} and the CPU EP\n"
            f"on the GPU machine, in this project's root (no network; its python{args.python}, numpy and onnx):\n"
            f"  PYTHONPATH=src python3 -m ortdist device-proof run {DEVICE_BUNDLE}/{plan.recipe.name} --out <folder>\n"
            f"then here: ortdist device-proof accept {plan.recipe.name} <folder>"
        )
        return 0
    filed = device_proof.accept(Path(args.folder), recipe_dist)
    print(f"ortdist: the device proof is filed as {filed}")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    """Upload a recipe's smoke-tested wheels with twine, then install each by name from the index
    into the clean root and run the reference models on it."""
    from .. import upload
    from ..smoke.env import IndexInstall
    from ..smoke.run_suite import smoke_wheel

    project = project_root()
    plan, _ = plan_for(args.recipe, project)
    dist = dist_root(args, project) / plan.recipe.name
    if not _is_http_url(args.repository_url):
        raise OrtdistError(
            f"--repository-url {args.repository_url!r} is not an http(s) URL",
            fix="pass the index's upload URL, e.g. http://127.0.0.1:8080/ (a pypiserver) or a Warehouse's .../legacy/",
        )
    if args.index_url and not _is_http_url(args.index_url):
        raise OrtdistError(f"--index-url {args.index_url!r} is not an http(s) URL", fix="pass the simple index's URL")
    # Refused before the lock and before anything runs: nothing built, or not smoke-tested.
    upload.check_smoked(upload.release_wheels(dist), dist / upload.SMOKE_DIR)
    toolchain = make_toolchain(plan.toolchain)
    cache = Cache.default()
    if args.verify:
        toolchain.preflight()  # the clean root needs root: refused now, not after the upload

    def verify(wheel: upload.ReleaseWheel, index_url: str, out_dir: Path) -> dict[str, object]:
        source = IndexInstall(index_url, f"{wheel.distribution}=={wheel.version}")
        report, _ = smoke_wheel(wheel.path, out_dir, cache, toolchain, with_node_tests=False, source=source)
        models = report["models"]
        return {
            "passed": report["passed"],
            "environment": report["environment"]["reason"],
            "installed_from": report.get("installed_from"),
            "models_passed": sum(1 for m in models if m["passed"] and not m["skipped"]),
            "models": len(models),
            "seconds": report["seconds"],
        }

    with pipeline.build_lock(cache, f"publishing {plan.recipe.name}"):  # the clean root is shared with builds
        result = upload.publish(
            dist,
            args.repository_url,
            index_url=args.index_url,
            skip_existing=args.skip_existing,
            verify=verify if args.verify else None,
        )
    record = result.record
    for name, outcome in record["verified"].items():
        status = "PASS" if outcome["passed"] else "FAIL"
        print(
            f"{status} {name}: installed by name from {record['index_url']} ({outcome['environment']}); "
            f"{outcome['models_passed']}/{outcome['models']} reference models"
        )
    times = ", ".join(f"{k} {v:.1f} s" for k, v in record["seconds"].items())
    print(f"published {len(record['uploaded'])} wheel(s), skipped {len(record['skipped'])}; {times}")
    print(f"  record: {result.path}")
    return 0 if result.passed else PublishError.exit_code


def dist_root(args: argparse.Namespace, project: Path) -> Path:
    """--dist (default: <project>/dist), refused when it is not a directory it can write to."""
    root = Path(args.dist) if args.dist else project / "dist"
    check_output_dir(root, what="--dist directory")
    return root


def _is_http_url(url: str) -> bool:
    return url.startswith(("http://", "https://")) and len(url.split("://", 1)[1].strip("/")) > 0


def smoke_dir(project: Path, wheel: Path, record: dict[str, object] | None) -> Path:
    """Our wheel's report goes to the smoke/ of the dist/<recipe>/ it sits in (where publish looks
    for it), else of <project>/dist/<recipe>/; a foreign wheel's to <project>/dist/smoke/."""
    if record is None:
        return project / "dist" / "smoke"
    if (wheel.parent / "manifest.json").is_file() and wheel.parent.name == record["recipe"]:
        return wheel.parent / "smoke"
    return project / "dist" / str(record["recipe"]) / "smoke"
