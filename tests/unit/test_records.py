"""Every kind of JSON file ortdist reads back, with every way such a file goes bad: a named error
(which kind, which file, how to fix), never a traceback; and the readers that use the loader."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ortdist import records
from ortdist.cli import main
from ortdist.errors import CheckError, DataError, PublishError


def good(kind: records.Kind) -> dict[str, Any]:
    """A file of ``kind`` with every field it needs, of its first type."""
    sample: dict[type, Any] = {list: [], str: "x", bool: True, dict: {}, int: 1}
    return {**({"schema": kind.schema} if kind.schema else {}), **{n: sample[t[0]] for n, t in kind.fields.items()}}


def wrong(types: tuple[type, ...]) -> Any:
    return "text" if str not in types else 3


def defects(kind: records.Kind) -> list[tuple[str, Callable[[Path], None], str]]:
    """(name, how to make the file bad, what the error must say) for every defect that applies."""

    def write(text: str | bytes) -> Callable[[Path], None]:
        return lambda p: p.write_bytes(text if isinstance(text, bytes) else text.encode())

    cases: list[tuple[str, Callable[[Path], None], str]] = [
        ("directory", lambda p: p.mkdir(), "is a directory, not a file"),
        ("missing", lambda p: None, "does not exist"),
        ("empty", write(" \n"), "is empty"),
        ("not-utf8", write(b'{"a": "\xff"}'), "is not UTF-8"),
        ("not-json", write("{not json"), "is not valid JSON"),
        ("a-list", write("[1, 2]"), "is not a JSON object but a list"),
    ]
    if kind.schema is not None:
        cases.append(
            ("other-schema", write(json.dumps({**good(kind), "schema": kind.schema + 1})), "from another ortdist")
        )
    for name, types in kind.fields.items():
        cases.append((f"no-{name}", write(json.dumps({k: v for k, v in good(kind).items() if k != name})), repr(name)))
        bad = {**good(kind), name: wrong(types)}
        cases.append((f"{name}-wrong-type", write(json.dumps(bad)), f"has {name!r} as"))
    return cases


CASES = [(kind, *case) for kind in records.KINDS for case in defects(kind)]


@pytest.mark.parametrize(
    ("kind", "name", "make", "said"), CASES, ids=[f"{k.what.replace(' ', '-')}-{n}" for k, n, _, _ in CASES]
)
def test_every_bad_file_of_every_kind_is_a_named_error(
    kind: records.Kind, name: str, make: Callable[[Path], None], said: str, tmp_path: Path
) -> None:
    path = tmp_path / "file.json"
    make(path)
    with pytest.raises(CheckError) as e:
        records.load(path, kind, CheckError)
    assert said in e.value.message and kind.what in e.value.message
    assert e.value.where == str(path) and e.value.fix == kind.fix


@pytest.mark.parametrize("kind", records.KINDS, ids=[k.what for k in records.KINDS])
def test_a_good_file_of_every_kind_loads(kind: records.Kind, tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    path.write_text(json.dumps(good(kind)))
    assert records.load(path, kind) == good(kind)


def test_true_is_not_a_number_and_the_default_error_is_a_data_error(tmp_path: Path) -> None:
    kind = records.Kind("count file", {"count": (int,)})
    path = tmp_path / "c.json"
    path.write_text('{"count": true}')
    with pytest.raises(DataError, match="has 'count' as true or false, not a number"):
        records.load(path, kind)


def test_the_readers_use_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest of another schema stops the report and publish; a smoke report without its verdict
    stops publish; each names the file."""
    from ortdist import upload

    dist = tmp_path / "dist"
    (dist / "cpu-linux").mkdir(parents=True)
    manifest = dist / "cpu-linux" / "manifest.json"
    manifest.write_text(json.dumps({"schema": 2, "recipe": "cpu-linux", "artifacts": []}))
    assert main(["report", "--dist", str(dist)]) != 0
    assert f"{manifest}: the build manifest has schema 2, from another ortdist" in capsys.readouterr().err
    with pytest.raises(PublishError, match="schema 2"):
        upload.release_wheels(dist / "cpu-linux")
    report = tmp_path / "smoke" / "w.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"wheel": "w.whl", "wheel_sha256": "0" * 64}))
    wheel = upload.ReleaseWheel(tmp_path / "w.whl", "0" * 64, "3.13", "onnxruntime", "1.21.0")
    assert upload.smoke_problems([wheel], tmp_path / "smoke") == ["w.whl: the smoke report lacks the field 'passed'"]
