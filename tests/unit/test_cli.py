from __future__ import annotations

import json
from pathlib import Path

import pytest

from ortdist.cli import main


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
