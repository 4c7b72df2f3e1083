from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from ortdist.checks.clean_root import verify_check_result
from ortdist.fsutil import deterministic_tarball
from ortdist.manifest import Artifact, publish, read_manifest


def test_publish_writes_artifacts_then_manifest(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a-1.0-cp313-cp313-manylinux_2_39_x86_64.whl").write_bytes(b"wheel bytes")
    (work / "lib.tar.gz").write_bytes(b"lib bytes")
    dist = tmp_path / "dist" / "r"
    dist.mkdir(parents=True)
    (dist / "stale-0.9.whl").write_bytes(b"old")
    (dist / "logs").mkdir()
    entries = publish(
        dist,
        [
            Artifact(
                work / "a-1.0-cp313-cp313-manylinux_2_39_x86_64.whl", "wheel", tag="cp313-cp313-manylinux_2_39_x86_64"
            ),
            Artifact(work / "lib.tar.gz", "c-library"),
        ],
        {"recipe": "r"},
    )
    manifest = read_manifest(dist)
    assert manifest["recipe"] == "r"
    assert manifest["artifacts"] == entries
    wheel = entries[0]
    assert wheel["sha256"] == hashlib.sha256(b"wheel bytes").hexdigest()
    assert wheel["size"] == len(b"wheel bytes") and wheel["tag"] == "cp313-cp313-manylinux_2_39_x86_64"
    assert sorted(p.name for p in dist.iterdir()) == sorted(["logs", "manifest.json", "lib.tar.gz", wheel["path"]])


def test_interrupted_publish_leaves_no_manifest_and_no_partial_file(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.whl").write_bytes(b"x" * 1000)
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "manifest.json").write_text(json.dumps({"artifacts": []}))
    with pytest.raises(FileNotFoundError):
        publish(dist, [Artifact(work / "a.whl", "wheel"), Artifact(work / "vanished.tar.gz", "c-library")], {})
    names = sorted(p.name for p in dist.iterdir())
    # A complete copy of the first; no manifest, no .part leftovers; the last published manifest
    # kept as the previous one, for the next publish to leave as it is.
    assert names == ["a.whl", "previous-manifest.json"]
    assert (dist / "a.whl").read_bytes() == b"x" * 1000
    assert json.loads((dist / "previous-manifest.json").read_text()) == {"artifacts": []}
    publish(dist, [Artifact(work / "a.whl", "wheel")], {"recipe": "r"})
    assert json.loads((dist / "previous-manifest.json").read_text()) == {"artifacts": []}


def test_publishing_keeps_the_manifest_it_replaces_as_the_previous_one(tmp_path: Path) -> None:
    """dist/<recipe>/previous-manifest.json: what the report compares a build with (one build back)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.whl").write_bytes(b"first")
    dist = tmp_path / "dist"
    publish(dist, [Artifact(work / "a.whl", "wheel")], {"recipe": "r", "build_times_s": {"build": 9.0}})
    assert not (dist / "previous-manifest.json").exists()
    first = read_manifest(dist)
    (work / "a.whl").write_bytes(b"second, larger")
    publish(dist, [Artifact(work / "a.whl", "wheel")], {"recipe": "r", "build_times_s": {"build": 0.3}})
    assert json.loads((dist / "previous-manifest.json").read_text()) == first
    second = read_manifest(dist)
    assert second["artifacts"][0]["size"] == len(b"second, larger")
    publish(dist, [Artifact(work / "a.whl", "wheel")], {"recipe": "r", "build_times_s": {"build": 0.2}})
    assert json.loads((dist / "previous-manifest.json").read_text()) == second  # one build back, not the first
    assert sorted(p.name for p in dist.iterdir()) == ["a.whl", "manifest.json", "previous-manifest.json"]


def test_deterministic_tarball_is_byte_identical(tmp_path: Path) -> None:
    tree = tmp_path / "install"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "libx.so").write_bytes(b"\x7fELF")
    (tree / "include").mkdir()
    (tree / "include" / "x.h").write_text("int x;\n")
    deterministic_tarball(tree, tmp_path / "one.tar.gz", "x-1.0", 1700000000)
    (tree / "include" / "x.h").touch()  # mtime changes must not matter
    deterministic_tarball(tree, tmp_path / "two.tar.gz", "x-1.0", 1700000000)
    assert (tmp_path / "one.tar.gz").read_bytes() == (tmp_path / "two.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "one.tar.gz") as tar:
        assert tar.getnames() == ["x-1.0/include", "x-1.0/include/x.h", "x-1.0/lib", "x-1.0/lib/libx.so"]
        member = tar.getmember("x-1.0/include/x.h")
        assert (member.uid, member.mtime) == (0, 1700000000)
        extracted = tar.extractfile(member)
        assert extracted is not None and extracted.read() == b"int x;\n"


GOOD = {
    "ok": True,
    "available_providers": ["CPUExecutionProvider"],
    "outputs": {"probs": {"max_abs_err": 1e-7, "nan_pattern_matches": True}},
    "node_providers": {"mm": "CPUExecutionProvider"},
}


def test_check_result_good() -> None:
    assert verify_check_result(GOOD, ["CPUExecutionProvider"]) == []


def test_check_result_names_what_is_wrong() -> None:
    assert verify_check_result(GOOD, ["CPUExecutionProvider", "XnnpackExecutionProvider"]) == [
        "claims XnnpackExecutionProvider but get_available_providers() lists only ['CPUExecutionProvider']"
    ]
    broken = {"error": "Traceback...\nImportError: libre2.so.11: cannot open shared object file\n"}
    assert verify_check_result(broken, ["CPUExecutionProvider"]) == [
        "import/inference failed: ImportError: libre2.so.11: cannot open shared object file"
    ]
    nan = {**GOOD, "outputs": {"max": {"max_abs_err": 0.0, "nan_pattern_matches": False}}}
    assert "NaN positions differ" in verify_check_result(nan, ["CPUExecutionProvider"])[0]
    far = {**GOOD, "outputs": {"probs": {"max_abs_err": 0.5, "nan_pattern_matches": True}}}
    assert "max abs error 0.5 > 1e-5" in verify_check_result(far, ["CPUExecutionProvider"])[0]
    empty = {**GOOD, "node_providers": {}}
    assert verify_check_result(empty, ["CPUExecutionProvider"]) == ["the profile recorded no node placements"]


def test_stale_temps_of_a_killed_run_are_swept(tmp_path: Path) -> None:
    from ortdist.pipeline.driver import remove_stale_temps

    (tmp_path / ".onnxruntime-1.21.0.whl.abc123.part").write_bytes(b"half")
    (tmp_path / ".src-1.tmp-xyz").mkdir()
    (tmp_path / "onnxruntime-1.21.0.whl").write_bytes(b"whole")
    (tmp_path / "logs").mkdir()
    remove_stale_temps(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "onnxruntime-1.21.0.whl"]
