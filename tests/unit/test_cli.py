from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ortdist.cli import main
from ortdist.errors import ToolchainError
from ortdist.paths import Cache


def test_plan_prints_json(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert main(["plan", "cpu-linux"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["recipe"] == "cpu-linux"
    assert plan["provider_names"] == ["CPUExecutionProvider"]


def test_bad_recipe_exits_2_with_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    monkeypatch.chdir(project)
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\ndescription = "x"\nexecution_providers = ["cpu", "cuda2"]\n')
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad} key 'execution_providers[1]': unknown execution provider 'cuda2'" in err
    assert "did you mean 'cuda'?" in err


def test_schema_check_passes_on_the_committed_schema(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert main(["schema", "--check"]) == 0


def test_providers_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers"]) == 0
    out = capsys.readouterr().out
    assert "XnnpackExecutionProvider" in out and "CPUExecutionProvider" in out


def test_patches_check_of_an_unknown_series_fails(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    assert main(["patches", "check", "1.21"]) == 5
    assert "no patch series '1.21'" in capsys.readouterr().err


@pytest.mark.usefixtures("no_subprocess")
def test_build_without_root_is_refused_and_says_so(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: ortdist refuses to start a root-only step without root and says so, here even
    with the build root already made by an earlier (sudo) run in the same cache."""
    from ortdist.toolchains import load_toolchain
    from ortdist.toolchains.debian import STAMP, DebianSysroot

    monkeypatch.chdir(project)
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    made = DebianSysroot(load_toolchain(project, "debian-trixie")).build_root_path(Cache(tmp_path / "cache"))
    made.mkdir(parents=True)
    (made / STAMP).write_text('{"installed": {}}\n')
    assert main(["build", "cpu-linux", "--dist", str(tmp_path / "dist")]) == ToolchainError.exit_code
    err = capsys.readouterr().err
    assert "the debian-sysroot toolchain needs root" in err and "sudo" in err
    # refused before any step, before the lock: nothing written to dist/ or the cache
    assert "== toolchain" not in err
    assert not (tmp_path / "dist").exists()
    assert not (tmp_path / "cache" / "build.lock").exists()


@pytest.mark.usefixtures("no_subprocess")
def test_analyze_refuses_non_root_before_downloading_a_converter(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Converting with another ORT version than this Python's runs in the clean root: without root
    that is refused before anything is downloaded (no_subprocess fails the test on any command)."""
    from ortdist.smoke.models import BUILDERS

    monkeypatch.chdir(project)
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    model = tmp_path / "cnn.onnx"
    model.write_bytes(BUILDERS["cnn"]().model)
    assert main(["analyze", str(model), "--ort-version", "1.20.0"]) == ToolchainError.exit_code
    assert "needs root" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()
