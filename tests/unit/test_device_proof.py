"""The device proof's pure parts and its bundle: what travels, how a run is judged, what is filed."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortdist.errors import CheckError
from ortdist.fsutil import sha256_file
from ortdist.paths import Cache
from ortdist.smoke import device_proof, pieces, realsize
from ortdist.smoke.run_suite import NODE_TESTS_DIR

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def fake_wheel(directory: Path, eps: list[tuple[str, str]], python: str = "312") -> Path:
    """A wheel with ortdist's build record claiming ``eps`` (name, provider)."""
    path = directory / f"onnxruntime_gpu-1.21.0-cp{python}-cp{python}-manylinux_2_17_x86_64.whl"
    record = {"recipe": "cuda13-linux", "execution_providers": [{"name": n, "provider": p} for n, p in eps]}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("onnxruntime_gpu-1.21.0.dist-info/METADATA", "Name: onnxruntime-gpu\nVersion: 1.21.0\n")
        zf.writestr("onnxruntime_gpu-1.21.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("onnxruntime/ortdist_build.json", json.dumps(record))
    return path


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    """A cache whose node tests are already converted: two tests (the converter's output layout)."""
    cache = Cache(root=tmp_path / "cache")
    node = cache.root / "smoke" / NODE_TESTS_DIR
    for name in ("test_add", "test_relu"):
        (node / name).mkdir(parents=True)
        (node / name / "model.onnx").write_bytes(b"model")
        (node / name / "data.npz").write_bytes(b"data")
    (node / "skipped.json").write_text(json.dumps({"test_optional": "non-tensor"}))
    return cache


def test_the_bundle_holds_the_wheel_and_a_runner_plan_with_relative_paths(tmp_path: Path, cache: Cache) -> None:
    wheel = fake_wheel(tmp_path, [("cpu", CPU), ("cuda", CUDA)])
    bundle = tmp_path / "bundle"
    manifest = device_proof.prepare(wheel, bundle, cache, "cuda13-linux")
    assert manifest["wheel_sha256"] == sha256_file(bundle / wheel.name) == sha256_file(wheel)
    assert manifest["device_providers"] == [CUDA] and manifest["node_tests_skipped_by_converter"] == 1
    assert json.loads((bundle / device_proof.MANIFEST).read_text())["python"] == "3.12"
    with zipfile.ZipFile(bundle / device_proof.SMOKE_ZIP) as archive:
        members = set(archive.namelist())
        plan = json.loads(archive.read("plan.json"))
    assert {"runner.py", "proof.py"} <= members and not (bundle / "smoke").exists()
    cases = plan["cases"]
    # every path is relative to the runner's directory, so the bundle runs wherever it is unpacked
    assert all(not Path(c["model"]).is_absolute() and Path(c["model"]).as_posix() in members for c in cases)
    cuda_models = {c["name"]: c["must_take"] for c in cases if c["provider"] == CUDA and c["suite"] == "model"}
    assert cuda_models["cnn"] == "all" and cuda_models["control_flow"] == "none"
    node = {(c["provider"], c["name"]) for c in cases if c["suite"] == "node"}
    assert node == {(p, n) for p in (CPU, CUDA) for n in ("test_add", "test_relu")}
    assert plan["devices"][CUDA]["runtime"][0] == "libcudart.so.13"
    assert {p.name for p in (bundle / "latency").iterdir()} == {"latency.py", "runner.py", "proof.py"}


def test_a_wheel_without_a_device_ep_has_nothing_to_prove(tmp_path: Path, cache: Cache) -> None:
    wheel = fake_wheel(tmp_path, [("cpu", CPU)])
    with pytest.raises(CheckError, match="none of them needs a device"):
        device_proof.prepare(wheel, tmp_path / "bundle", cache, "cpu-linux")
    assert not (tmp_path / "bundle").exists()


def _padded(wheel: Path, size: int) -> Path:
    """The wheel grown to about ``size`` bytes by an incompressible member (a release CUDA wheel)."""
    with zipfile.ZipFile(wheel, "a", zipfile.ZIP_STORED) as zf:
        zf.writestr("onnxruntime/capi/libonnxruntime_providers_cuda.so", np.random.default_rng(0).bytes(size))
    return wheel


def test_a_wheel_over_the_transfer_limit_travels_in_pieces_put_back_together_there(
    tmp_path: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = f"{sys.version_info.major}{sys.version_info.minor}"
    wheel = _padded(fake_wheel(tmp_path, [("cpu", CPU), ("cuda", CUDA)], python=here), 600_000)
    bundle = tmp_path / "bundle"
    (tmp_path / "small").mkdir()
    small = fake_wheel(tmp_path / "small", [("cuda", CUDA)])
    rest = device_proof.prepare(small, bundle, cache, "x")["bundle_bytes"] - small.stat().st_size
    monkeypatch.setattr(device_proof, "BUNDLE_LIMIT", rest + pieces.MANIFEST_ROOM + 250_000)
    manifest = device_proof.prepare(wheel, bundle, cache, "cuda13-linux")
    parts = manifest["pieces"]
    # What one call carries, the bundle and one piece, fits the limit.
    assert len(parts) == 3 and all(p["bytes"] + manifest["bundle_bytes"] <= device_proof.BUNDLE_LIMIT for p in parts)
    assert sum(p["bytes"] for p in parts) == wheel.stat().st_size and not (bundle / wheel.name).exists()
    carried = device_proof.pieces_dir(bundle)
    assert sorted(p.name for p in carried.iterdir()) == [f"{i:02d}" for i in range(len(parts))]
    said = device_proof.piece_steps(Path(".device-proof/cuda13-linux"), manifest)
    assert said.count("device-proof gather .device-proof/cuda13-linux") == len(parts) and "--force-ptx" in said

    # One call per piece: each carries the bundle and one folder of <bundle>.pieces.
    store, held = tmp_path / "store", sorted(carried.iterdir())
    moved = tmp_path / "not-carried"
    carried.rename(moved)
    for number, folder in enumerate(held):
        carried.mkdir()
        (moved / folder.name).rename(carried / folder.name)
        lacking = device_proof.gather(bundle, store)
        assert lacking == [p["name"] for p in parts[number + 1 :]]
        if lacking:
            with pytest.raises(CheckError, match=f"lacks {lacking[0]}"):
                device_proof.run(bundle, tmp_path / "out", store=store)
        (carried / folder.name).rename(moved / folder.name)
        carried.rmdir()
    work = tmp_path / "work"
    work.mkdir()
    whole = pieces.assemble_wheel(bundle, json.loads((bundle / device_proof.MANIFEST).read_text()), store, work)
    assert sha256_file(whole) == sha256_file(wheel) == manifest["wheel_sha256"]

    # A piece with other bytes is refused where it lies; a damaged one in the store is not used.
    (store / parts[-1]["name"]).write_bytes(b"damaged")
    with pytest.raises(CheckError, match=f"lacks {parts[-1]['name']}"):
        pieces.assemble_wheel(bundle, manifest, store, work)
    carried.mkdir()
    (carried / "00").mkdir()
    (carried / "00" / parts[0]["name"]).write_bytes(b"other")
    with pytest.raises(CheckError, match="not the one the bundle was prepared with"):
        device_proof.gather(bundle, store)


def test_a_bundle_whose_own_files_leave_no_room_for_pieces_is_refused_and_removed(
    tmp_path: Path, cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_proof, "BUNDLE_LIMIT", 1000)
    with pytest.raises(CheckError, match=r"without its wheel is .* over half the") as caught:
        device_proof.prepare(fake_wheel(tmp_path, [("cuda", CUDA)]), tmp_path / "bundle", cache, "cuda13-linux")
    assert "keep the bundle's own files small" in str(caught.value.fix)
    assert not (tmp_path / "bundle").exists()


def test_pick_wheel_names_what_is_there(tmp_path: Path) -> None:
    fake_wheel(tmp_path, [("cuda", CUDA)], python="313")
    with pytest.raises(CheckError, match=r"expected one cp312 wheel .* found 0 \(wheels there: onnxruntime_gpu"):
        device_proof.pick_wheel(tmp_path, "3.12")
    assert device_proof.pick_wheel(tmp_path, "3.13").name.endswith("cp313-cp313-manylinux_2_17_x86_64.whl")


def case(provider: str, status: str, **more: Any) -> dict[str, Any]:
    return {"suite": "model", "name": "cnn", "provider": provider, "must_take": "all", "status": status, **more}


MANIFEST = {"recipe": "cuda13-linux", "claimed": [CPU, CUDA], "node_tests_skipped_by_converter": 0}
RECORD = {"recipe": "cuda13-linux"}
OK = {"outputs_ok": True, "max_abs_err": 0.0, "share": 1.0}


def test_a_device_case_skipped_for_want_of_a_gpu_fails_the_proof() -> None:
    result = {
        "version": "1.21.0",
        "record": RECORD,
        "available_providers": [CUDA, CPU],
        "cases": [
            case(CPU, "ok", placement={"conv": CPU}, **OK),
            case(CUDA, "no_device", reason="no GPU (cudaGetDeviceCount: 100, no CUDA-capable device is detected)"),
        ],
    }
    report = device_proof._judge(MANIFEST, result)
    assert not report["passed"]
    failed = [m for m in report["models"] if not m["passed"]]
    assert [m["provider"] for m in failed] == [CUDA] and "--require-device" in failed[0]["message"]


def test_every_model_on_its_ep_passes_and_node_tests_are_counted_per_ep() -> None:
    node = [
        {"suite": "node", "name": "test_add", "provider": p, "status": "ok", "outputs_ok": ok}
        for p, ok in ((CPU, True), (CUDA, True))
    ] + [{"suite": "node", "name": "test_relu", "provider": CUDA, "status": "error", "error": "boom"}]
    result = {
        "version": "1.21.0",
        "record": RECORD,
        "available_providers": [CUDA, CPU],
        "cases": [case(CPU, "ok", placement={"c": CPU}, **OK), case(CUDA, "ok", placement={"c": CUDA}, **OK), *node],
    }
    report = device_proof._judge(MANIFEST, result)
    assert report["passed"], report["models"]
    assert report["node_tests"] == {CPU: {"passed": 1, "failed": 0}, CUDA: {"passed": 1, "failed": 1}}
    assert report["node_test_failures"][CUDA] == ["test_relu"]


def test_the_machines_own_onnxruntime_is_not_the_wheel() -> None:
    result = {"version": "1.30.0", "record": None, "cases": [case(CUDA, "ok", placement={"c": CUDA}, **OK)]}
    report = device_proof._judge(MANIFEST, result)
    assert not report["passed"] and "another onnxruntime (1.30.0)" in report["models"][0]["message"]


def test_outputs_are_compared_relative_to_the_largest_reference_value() -> None:
    want = [np.array([100.0, -50.0]), np.array([1.0])]
    assert device_proof.compare_outputs([np.array([100.5, -50.0]), np.array([1.0])], want) == pytest.approx(0.005)
    assert device_proof.compare_outputs([np.array([100.0, -50.0]), np.array([1.25])], want) == pytest.approx(0.25)
    with pytest.raises(ValueError):  # a missing output is not a match
        device_proof.compare_outputs([np.array([100.0, -50.0])], want)


def test_the_fp16_variant_has_no_float32_left_and_stays_a_valid_model() -> None:
    import onnx
    from onnx import TensorProto

    for model in (
        realsize.resnet(blocks=(1,), width=4, image=16, classes=3),
        realsize.bert(layers=1, hidden=8, heads=2, ffn=16, seq=4, vocab=10),
    ):
        half = realsize.half(model)
        graph = half.model.graph
        assert half.name == f"{model.name}_fp16"
        assert all(i.data_type != TensorProto.FLOAT for i in graph.initializer)
        assert any(i.data_type == TensorProto.FLOAT16 for i in graph.initializer)
        assert all(v.type.tensor_type.elem_type != TensorProto.FLOAT for v in (*graph.input, *graph.output))
        assert graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
        assert all(a.dtype != np.float32 for a in half.inputs.values())
        onnx.checker.check_model(half.model, full_check=True)
        # the float model is untouched
        assert model.model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT


def proof_of(wheel: Path) -> dict[str, Any]:
    return {"wheel": wheel.name, "wheel_sha256": sha256_file(wheel), "passed": True}


def test_accept_files_the_proof_of_the_dist_wheel(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "cuda13-linux"
    dist.mkdir(parents=True)
    wheel = fake_wheel(dist, [("cuda", CUDA)])
    run = tmp_path / "run"
    run.mkdir()
    (run / device_proof.RESULT).write_text(json.dumps(proof_of(wheel)))
    (run / "device-proof.log").write_text("log")
    filed = device_proof.accept(run, dist)
    assert filed == dist / device_proof.FILED and json.loads(filed.read_text())["passed"]
    assert (filed.parent / "device-proof.log").read_text() == "log"


def test_accept_refuses_a_proof_of_other_bytes(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel = fake_wheel(dist, [("cuda", CUDA)])
    run = tmp_path / "run"
    run.mkdir()
    (run / device_proof.RESULT).write_text(json.dumps(proof_of(wheel) | {"wheel_sha256": "0" * 64}))
    with pytest.raises(CheckError, match=r"which .* does not hold"):
        device_proof.accept(run, dist)
    assert not (dist / "device-proof").exists()
    with pytest.raises(CheckError, match=r"no device-proof\.json"):
        device_proof.accept(tmp_path, dist)


def test_the_cli_prepares_from_dist_and_says_what_to_run_there(
    project: Path, tmp_path: Path, cache: Cache, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortdist import cli

    monkeypatch.chdir(project)
    monkeypatch.setattr(Cache, "default", staticmethod(lambda: cache))
    monkeypatch.setattr(cli.release, "DEVICE_BUNDLE", str(tmp_path / "bundle"))
    dist = tmp_path / "dist"
    assert cli.main(["device-proof", "prepare", "cuda13-linux", "--dist", str(dist)]) == CheckError.exit_code
    assert "expected one cp312 wheel" in capsys.readouterr().err
    (dist / "cuda13-linux").mkdir(parents=True)
    fake_wheel(dist / "cuda13-linux", [("cpu", CPU), ("cuda", CUDA)])
    assert cli.main(["device-proof", "prepare", "cuda13-linux", "--dist", str(dist)]) == 0
    said = capsys.readouterr().out
    assert "python3 -m ortdist device-proof run" in said and "accept cuda13-linux" in said
    assert (tmp_path / "bundle" / "cuda13-linux" / device_proof.MANIFEST).is_file()
    # A release wheel over one call's limit: prepared in pieces, one call printed per piece.
    monkeypatch.setattr(device_proof, "BUNDLE_LIMIT", 1024 * 1024)
    wheel = next((dist / "cuda13-linux").glob("*.whl"))
    _padded(wheel, 2 * 1024 * 1024)
    assert cli.main(["device-proof", "prepare", "cuda13-linux", "--dist", str(dist)]) == 0
    said = capsys.readouterr().out
    pieces_dir = tmp_path / "bundle" / "cuda13-linux.pieces"
    count = len(list(pieces_dir.iterdir()))
    assert count >= 3 and said.count("device-proof gather") == count and "--force-ptx" in said
    assert not (tmp_path / "bundle" / "cuda13-linux" / wheel.name).exists()


def test_a_bundle_for_another_python_is_refused_before_anything_runs(tmp_path: Path, cache: Cache) -> None:
    bundle = tmp_path / "bundle"
    device_proof.prepare(fake_wheel(tmp_path, [("cuda", CUDA)], python="39"), bundle, cache, "cuda13-linux")
    with pytest.raises(CheckError, match=r"the bundle's wheel is for CPython 3\.9"):
        device_proof.run(bundle, tmp_path / "out")
    assert not (tmp_path / "out").exists()
