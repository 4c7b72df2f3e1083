"""`ortdist publish`: a recipe's smoke-tested wheels to a package index with twine, then proof
that the index serves them: each is installed by name and version into the clean root and runs
the reference models.

Everything that decides is pure (which wheels may go, which the index already has, twine's argv);
the side effects are three: reading the index's simple page, running twine, and the smoke suite.
Credentials are twine's business (TWINE_USERNAME / TWINE_PASSWORD or keyring): ortdist never
reads a password from a recipe or puts one on a command line.
"""

from __future__ import annotations

import base64
import html.parser
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import records, run
from .errors import PublishError
from .fsutil import atomic_write_text, sha256_file
from .log import log
from .manifest import MANIFEST
from .wheelnames import wheel_name

# Where a publish leaves its record (beside manifest.json; a later build replaces it with the
# artifacts it describes) and where the smoke reports of the installed wheels go.
PUBLISH_RECORD = "publish.json"
INDEX_SMOKE_DIR = "smoke-from-index"
SMOKE_DIR = "smoke"


@dataclass(frozen=True)
class ReleaseWheel:
    """A wheel of dist/<recipe>/ as its manifest lists it."""

    path: Path
    sha256: str
    python: str
    distribution: str
    version: str


@dataclass(frozen=True)
class IndexFile:
    """A file the index's simple page lists, with the sha256 its link carries (if any)."""

    name: str
    sha256: str | None = None


@dataclass(frozen=True)
class UploadPlan:
    upload: tuple[ReleaseWheel, ...]
    # Wheels the index already has under the same file name, with what the index says it holds.
    skipped: tuple[tuple[ReleaseWheel, IndexFile], ...]


def release_wheels(dist: Path) -> list[ReleaseWheel]:
    """The wheels the recipe's manifest lists, each present with the bytes the manifest recorded."""
    manifest_file = dist / MANIFEST
    if not manifest_file.is_file():
        raise PublishError(
            "no manifest.json: nothing has been built here",
            where=str(dist),
            fix=f"build the recipe first (`nox -s build-{dist.name}`), or pass the --dist it was built into",
        )
    manifest = records.load(manifest_file, records.MANIFEST, PublishError)
    try:
        entries = [a for a in manifest["artifacts"] if a["kind"] == "wheel"]
    except (KeyError, TypeError) as exc:
        raise PublishError(
            f"not a manifest ortdist wrote: {exc}", where=str(manifest_file), fix="rebuild the recipe"
        ) from exc
    if manifest.get("cuda_recipe_architectures"):
        raise PublishError(
            f"its CUDA code covers {', '.join(manifest.get('cuda_architectures', []))} only (built with "
            f"--cuda-architectures), not the recipe's {', '.join(manifest['cuda_recipe_architectures'])}",
            where=str(manifest_file),
            fix=f"rebuild without --cuda-architectures (`ortdist build {dist.name}`): a release ships every "
            "architecture the recipe promises",
        )
    if not entries:
        raise PublishError(
            "the build made no wheel (its recipe has no [wheel] table)",
            where=str(manifest_file),
            fix="publish a recipe that builds wheels; C archives are not uploaded to package indexes",
        )
    wheels = []
    for entry in entries:
        path = dist / str(entry["path"])
        parsed = wheel_name(path.name)
        if parsed is None or not path.is_file():
            raise PublishError(
                "the manifest lists this wheel, but it is missing" if parsed else "not a wheel file name",
                where=str(path),
                fix="rebuild the recipe; dist/ was changed after the build",
            )
        if sha256_file(path) != entry["sha256"]:
            raise PublishError(
                "the wheel's bytes are not the ones the build recorded (sha256 differs from manifest.json)",
                where=str(path),
                fix="rebuild the recipe; never edit dist/ by hand",
            )
        wheels.append(ReleaseWheel(path, str(entry["sha256"]), str(entry["python"]), parsed[0], parsed[1]))
    return wheels


def smoke_problems(wheels: Sequence[ReleaseWheel], smoke_dir: Path) -> list[str]:
    """Why each wheel may not be published: no smoke report, a failed one, or one of other bytes."""
    problems = []
    for wheel in wheels:
        report_file = smoke_dir / f"{wheel.path.stem}.json"
        if not report_file.is_file():
            problems.append(f"{wheel.path.name}: no smoke report ({report_file})")
            continue
        try:
            report = records.load(report_file, records.SMOKE_REPORT, PublishError)
        except PublishError as exc:
            problems.append(f"{wheel.path.name}: {exc.message}")
            continue
        if report["wheel_sha256"] != wheel.sha256:
            problems.append(f"{wheel.path.name}: its smoke report is of another build of it (sha256 differs)")
        elif report.get("passed") is not True:
            problems.append(f"{wheel.path.name}: its smoke report says FAIL ({report_file})")
    return problems


def check_smoked(wheels: Sequence[ReleaseWheel], smoke_dir: Path) -> None:
    problems = smoke_problems(wheels, smoke_dir)
    if problems:
        raise PublishError(
            "refusing to publish wheels that have not passed the smoke suite:\n    " + "\n    ".join(problems),
            where=str(smoke_dir.parent),
            fix=f"run `nox -s smoke -- {smoke_dir.parent}/*.whl` and publish once it passes",
        )


def default_index_url(repository_url: str) -> str:
    """The simple index beside an upload URL: a Warehouse's (https://upload.<host>/legacy/ ->
    https://<host>/simple/, as PyPI and TestPyPI are laid out), else <url>/simple/ (pypiserver, and
    Artifactory's api/pypi/<repo>/); devpi and others need --index-url."""
    parts = urllib.parse.urlsplit(repository_url)
    if parts.path.rstrip("/").endswith("/legacy") and parts.netloc.startswith("upload."):
        return f"{parts.scheme}://{parts.netloc.removeprefix('upload.')}/simple/"
    return repository_url.rstrip("/") + "/simple/"


def project_page(index_url: str, distribution: str) -> str:
    return f"{index_url.rstrip('/')}/{distribution}/"


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[IndexFile] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag != "a" or not href:
            return
        url, _, fragment = href.partition("#")
        name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        digest = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        self.files.append(IndexFile(name, digest))


def parse_simple_page(text: str) -> list[IndexFile]:
    """The files of a PEP 503 project page (HTML), with their sha256 fragments."""
    parser = _Links()
    parser.feed(text)
    return parser.files


def file_version(filename: str, distribution: str) -> str | None:
    """The version in a wheel's or sdist's file name, if it is ``distribution``'s."""
    parsed = wheel_name(filename)
    if parsed is not None:
        return parsed[1] if parsed[0] == distribution else None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            name, _, version = filename.removesuffix(suffix).rpartition("-")
            normalised = name.replace("_", "-").replace(".", "-").lower()
            return version if normalised == distribution else None
    return None


def plan_upload(
    wheels: Sequence[ReleaseWheel], existing: Sequence[IndexFile], *, skip_existing: bool, where: str
) -> UploadPlan:
    """Pure: refuse a version the index already has (unless ``skip_existing``: then the files it
    has are left alone, and the others added to that version)."""
    on_index = {f.name: f for f in existing}
    versions = {(w.distribution, w.version) for w in wheels}
    same_version = sorted(f.name for f in existing if any(file_version(f.name, d) == v for d, v in versions))
    if same_version and not skip_existing:
        listed = ", ".join(same_version[:6]) + (f" and {len(same_version) - 6} more" if len(same_version) > 6 else "")
        version = ", ".join(sorted(f"{d} {v}" for d, v in versions))
        raise PublishError(
            f"{version} is already on the index ({listed}); a published version is never replaced",
            where=where,
            fix="bump the version, or pass --skip-existing to upload only the files the index lacks",
        )
    skipped = tuple((w, on_index[w.path.name]) for w in wheels if w.path.name in on_index)
    upload = tuple(w for w in wheels if w.path.name not in on_index)
    return UploadPlan(upload=upload, skipped=skipped)


def twine_check_argv(files: Sequence[Path]) -> list[str]:
    return [sys.executable, "-m", "twine", "check", "--strict", *map(str, files)]


def twine_upload_argv(files: Sequence[Path], repository_url: str) -> list[str]:
    """--non-interactive: a missing credential is an error, not a prompt that hangs CI."""
    return [
        sys.executable,
        "-m",
        "twine",
        "upload",
        "--non-interactive",
        "--disable-progress-bar",
        "--repository-url",
        repository_url,
        *map(str, files),
    ]


Fetch = Callable[[str], tuple[int, str]]


def http_get(url: str) -> tuple[int, str]:
    """GET a simple page: (status, text); 404 is an answer (the project is new), not an error.
    Twine's credentials, when set, are sent too (private indexes guard reads as well)."""
    request = urllib.request.Request(url, headers={"Accept": "text/html"})
    user, password = os.environ.get("TWINE_USERNAME"), os.environ.get("TWINE_PASSWORD")
    if user and password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return int(resp.status), resp.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PublishError(
            f"cannot reach the index: {reason}",
            where=url,
            fix="check the URL and that the index is running (pass --index-url if its simple index lives elsewhere)",
        ) from exc


def index_files(index_url: str, distribution: str, fetch: Fetch = http_get) -> list[IndexFile]:
    url = project_page(index_url, distribution)
    status, text = fetch(url)
    if status == 404:
        return []
    if status != 200:
        raise PublishError(
            f"the index answered HTTP {status} for the project's simple page",
            where=url,
            fix="pass --index-url with the index's simple URL (PEP 503), and credentials in TWINE_USERNAME/PASSWORD",
        )
    return parse_simple_page(text)


def check_twine() -> None:
    probe = run.capture([sys.executable, "-c", "import twine"], check=False)
    if probe.returncode != 0:
        raise PublishError(
            f"twine is not installed for {sys.executable}",
            fix="run `nox -s publish -- RECIPE --repository-url URL` (it installs the pinned twine)",
        )


@dataclass(frozen=True)
class PublishResult:
    record: dict[str, Any]
    path: Path

    @property
    def passed(self) -> bool:
        return all(v["passed"] for v in self.record["verified"].values())


def publish(
    dist: Path,
    repository_url: str,
    *,
    index_url: str | None,
    skip_existing: bool,
    verify: Callable[[ReleaseWheel, str, Path], dict[str, Any]] | None,
    fetch: Fetch = http_get,
) -> PublishResult:
    """Gate, check, upload, then ``verify`` each wheel the index now serves (installed by name and
    version, in ``dist``/smoke-from-index/). The record lands in ``dist``/publish.json."""
    started = time.monotonic()
    wheels = release_wheels(dist)
    check_smoked(wheels, dist / SMOKE_DIR)
    check_twine()
    index = index_url or default_index_url(repository_url)
    seconds: dict[str, float] = {}
    with log.step("twine check"):
        t = time.monotonic()
        run.capture(twine_check_argv([w.path for w in wheels]), error=PublishError, what="twine check")
        seconds["check"] = round(time.monotonic() - t, 1)
    distributions = sorted({w.distribution for w in wheels})
    existing = [f for d in distributions for f in index_files(index, d, fetch)]
    plan = plan_upload(wheels, existing, skip_existing=skip_existing, where=index)
    for wheel, held in plan.skipped:
        same = "identical" if held.sha256 == wheel.sha256 else f"DIFFERENT bytes (sha256 {held.sha256 or 'not given'})"
        (log.info if held.sha256 == wheel.sha256 else log.warning)(
            f"{wheel.path.name}: already on the index, {same}; skipped"
        )
    if plan.upload:
        with log.step(f"upload {len(plan.upload)} wheel(s) to {repository_url}"):
            t = time.monotonic()
            run.call(
                twine_upload_argv([w.path for w in plan.upload], repository_url),
                error=PublishError,
                what="twine upload (credentials come from TWINE_USERNAME/TWINE_PASSWORD or keyring)",
            )
            seconds["upload"] = round(time.monotonic() - t, 1)
    served = {f.name: f for d in distributions for f in index_files(index, d, fetch)}
    missing = [w.path.name for w in wheels if w.path.name not in served]
    if missing:
        raise PublishError(
            f"the upload succeeded but the index does not list {', '.join(missing)}",
            where=project_page(index, distributions[0]),
            fix="check --index-url: it must be the simple index of the repository uploaded to",
        )
    verified: dict[str, Any] = {}
    if verify is not None:
        t = time.monotonic()
        for wheel in wheels:
            with log.step(f"install {wheel.distribution}=={wheel.version} from the index for CPython {wheel.python}"):
                verified[wheel.path.name] = verify(wheel, index, dist / INDEX_SMOKE_DIR)
        seconds["verify"] = round(time.monotonic() - t, 1)
    seconds["total"] = round(time.monotonic() - started, 1)
    record = {
        "repository_url": repository_url,
        "index_url": index,
        "uploaded": [w.path.name for w in plan.upload],
        "skipped": {w.path.name: {"index_sha256": f.sha256, "same": f.sha256 == w.sha256} for w, f in plan.skipped},
        "served_sha256": {w.path.name: served[w.path.name].sha256 for w in wheels},
        "verified": verified,
        "seconds": seconds,
    }
    path = dist / PUBLISH_RECORD
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return PublishResult(record, path)
