from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import run, sources
from ortdist.recipe import Recipe, load_recipe

PROJECT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project() -> Path:
    return PROJECT


@pytest.fixture
def no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running a command or downloading anything fails the test (a refusal must come first)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a command or download was attempted: {args[:1]}")

    for name in ("call", "capture", "stream"):
        monkeypatch.setattr(run, name, refuse)
    monkeypatch.setattr(sources, "fetch", refuse)


@pytest.fixture
def write_recipe(tmp_path: Path) -> Callable[..., Path]:
    """Write a recipe file named after its ``name`` (default 'r') with the given TOML body."""

    def write(body: str, name: str = "r") -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(f'name = "{name}"\ndescription = "test recipe"\n{body}', encoding="utf-8")
        return path

    return write


@pytest.fixture
def recipe_from(write_recipe: Callable[..., Path]) -> Callable[..., Recipe]:
    def load(body: str = "", name: str = "r") -> Recipe:
        return load_recipe(write_recipe(body, name))

    return load


def _download_official_wheel(dest: Path, python: str | None = None) -> Path:
    """PyPI's onnxruntime 1.21.0 wheel (the control) for ``python`` (default: the running one)."""
    target = ["--python-version", python, "--platform", "manylinux_2_28_x86_64"] if python else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            *target,
            "onnxruntime==1.21.0",
            "-d",
            str(dest),
        ],
        check=True,
    )
    (wheel,) = dest.glob("onnxruntime-1.21.0-*.whl")
    return wheel


@pytest.fixture(scope="session")
def download_official_wheel() -> Callable[..., Path]:
    return _download_official_wheel
