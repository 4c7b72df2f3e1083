from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from ortdist import registry
from ortdist.errors import CheckError, DataError
from ortdist.smoke.env import choose
from ortdist.smoke.suite import (
    ModelFiles,
    devices,
    expectations,
    judge,
    judge_case,
    missing_ops,
    parse_smoke_facts,
    plan_cases,
    regressions,
    smoke_facts,
)
from ortdist.smoke.wheelinfo import WheelInfo, glibc_floor

FILES = [
    ModelFiles("model", "cnn", "/m/cnn.onnx", "/m/cnn.npz", 1e-4, 1e-4),
    ModelFiles("model", "transformer", "/m/t.onnx", "/m/t.npz", 1e-4, 1e-4),
    ModelFiles("node", "test_abs", "/n/abs.onnx", "/n/abs.npz", 1e-3, 1e-3),
]


def test_glibc_floor_from_platform_tags() -> None:
    assert glibc_floor("manylinux_2_27_x86_64.manylinux_2_28_x86_64") == (2, 27)
    assert glibc_floor("manylinux2014_x86_64") == (2, 17)
    assert glibc_floor("linux_x86_64") is None


def info(python: str = "3.13", glibc: tuple[int, int] | None = (2, 39)) -> WheelInfo:
    return WheelInfo(path=Path("/w/x.whl"), python=python, glibc=glibc, requires=(), record=None)


def test_environment_choice() -> None:
    assert choose(info(glibc=(2, 28)), ("3.13",), (2, 41), (2, 36), "/usr/bin/python3.13").kind == "host"
    root = choose(info(glibc=(2, 39)), ("3.13",), (2, 41), (2, 36), "/usr/bin/python3.13")
    assert root.kind == "root" and "host glibc 2.36 is too old" in root.reason
    assert choose(info(), ("3.13",), (2, 41), (2, 41), None).reason == "clean root (no host CPython 3.13)"
    with pytest.raises(CheckError, match=r"needs CPython 3\.9 with glibc >= 2\.39"):
        choose(info(python="3.9"), ("3.13",), (2, 41), (2, 36), None)


def test_expectations_are_data_keyed_by_provider() -> None:
    table = expectations()
    assert table["CPUExecutionProvider"].must_take == "all"
    assert table["XnnpackExecutionProvider"].must_take == "any"
    assert "Conv" in table["XnnpackExecutionProvider"].ops


def test_plan_cases_runs_every_model_on_every_claimed_ep() -> None:
    cases, unknown = plan_cases(["CPUExecutionProvider", "XnnpackExecutionProvider", "RknpuExecutionProvider"], FILES)
    by = {(c["provider"], c["name"]): c for c in cases}
    assert set(by) == {
        (provider, name)
        for provider in ("CPUExecutionProvider", "XnnpackExecutionProvider")
        for name in ("cnn", "transformer", "test_abs")
    }
    assert unknown == ["RknpuExecutionProvider"]
    # Placement is checked where smoke.toml says; elsewhere the model must only run and match.
    assert by[("XnnpackExecutionProvider", "cnn")]["must_take"] == "any"
    assert by[("XnnpackExecutionProvider", "transformer")]["must_take"] == "none"
    assert by[("CPUExecutionProvider", "transformer")]["must_take"] == "all"
    assert {c["must_take"] for c in cases if c["suite"] == "node"} == {"none"}
    # Only model cases of EPs that fuse what they take get the unoptimized attribution run.
    compiles = {(c["provider"], c["name"]): c["compiles"] for c in cases}
    assert compiles[("XnnpackExecutionProvider", "cnn")] is True
    assert compiles[("CPUExecutionProvider", "cnn")] is False
    assert compiles[("XnnpackExecutionProvider", "test_abs")] is False


@pytest.mark.parametrize("provider", sorted(expectations()))
def test_every_ep_is_planned_on_every_reference_model(provider: str) -> None:
    from ortdist.smoke.models import BUILDERS

    files = [ModelFiles("model", name, f"/m/{name}.onnx", f"/m/{name}.npz", 1e-4, 1e-4) for name in BUILDERS]
    cases, unknown = plan_cases([provider], files)
    assert not unknown
    assert [c["name"] for c in cases] == list(BUILDERS)
    placed = {c["name"] for c in cases if c["must_take"] != "none"}
    exp = expectations()[provider]
    assert placed == (set(exp.placement_models) if exp.must_take != "none" else set())


def case(**kw: Any) -> dict[str, Any]:
    base = {
        "suite": "model",
        "name": "cnn",
        "provider": "XnnpackExecutionProvider",
        "must_take": "any",
        "status": "ok",
        "outputs_ok": True,
        "max_abs_err": 0.0,
        "seconds": 0.001,
        "share": 0.5,
        "placement": {"conv1": "XnnpackExecutionProvider", "fc": "CPUExecutionProvider"},
    }
    return base | kw


def test_judge_case_outcomes() -> None:
    assert judge_case(case()).passed
    silent = judge_case(case(placement={"conv1": "CPUExecutionProvider"}, share=0.0))
    assert not silent.passed and silent.message.startswith("silent fallback: no node ran on XnnpackExecutionProvider")
    whole = judge_case(case(must_take="all"))
    assert not whole.passed and "nodes fell back off XnnpackExecutionProvider: ['fc']" in whole.message
    wrong = judge_case(case(outputs_ok=False, max_abs_err=0.25))
    assert wrong.message == "outputs differ from the reference: max abs err 0.25"
    err = judge_case(case(status="error", error="NotImplemented: Could not find an implementation for Foo\nmore"))
    assert err.message == "NotImplemented: Could not find an implementation for Foo"


def test_judge_flags_claims_without_cases() -> None:
    result = {
        "available_providers": ["CPUExecutionProvider"],
        "cases": [case(provider="CPUExecutionProvider", must_take="all", placement={"a": "CPUExecutionProvider"})],
    }
    verdicts = judge(result, ["CPUExecutionProvider", "DnnlExecutionProvider"], [])
    assert [v.message for v in verdicts if not v.passed] == [
        "DnnlExecutionProvider is claimed but get_available_providers() lists only ['CPUExecutionProvider']"
    ]


def test_regressions_against_baseline() -> None:
    baseline = {"test_a": True, "test_b": True, "test_c": False}
    assert regressions({"test_a": True, "test_b": False, "test_c": False}, baseline) == ["test_b"]
    assert regressions({"test_a": True}, baseline) == ["test_b"]  # missing counts as failing


def test_missing_provider_library_is_named() -> None:
    from ortdist.smoke.suite import missing_library

    log = (
        "2026-11-22 [E:onnxruntime:Default, provider_bridge_ort.cc:1848 TryGetProviderInfo_CUDA] "
        "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: "
        "cannot open shared object file: No such file or directory\n"
    )
    assert missing_library(log) == "libcublasLt.so.12"
    fallback = case(
        provider="CUDAExecutionProvider", must_take="all", ort_log=log, placement={"conv1": "CPUExecutionProvider"}
    )
    assert judge_case(fallback).message == "CUDAExecutionProvider could not load: missing library libcublasLt.so.12"


def test_required_ops_must_land_on_the_ep() -> None:
    required = expectations()["XnnpackExecutionProvider"].ops
    assert "Conv" in required
    every = {f"n{i}": op for i, op in enumerate(required)}
    on_ep = case(ops=every, placement=dict.fromkeys(every, "XnnpackExecutionProvider"))
    result = {"available_providers": ["CPUExecutionProvider", "XnnpackExecutionProvider"], "cases": [on_ep]}
    assert all(v.passed for v in judge(result, ["XnnpackExecutionProvider"], []))
    conv_off = {n: ("CPUExecutionProvider" if op == "Conv" else "XnnpackExecutionProvider") for n, op in every.items()}
    result["cases"] = [case(ops=every, placement=conv_off)]  # the Conv node stayed on the CPU
    failing = [v.message for v in judge(result, ["XnnpackExecutionProvider"], []) if not v.passed]
    assert failing == ["no Conv node ran on XnnpackExecutionProvider in any reference model"]


def test_a_claimed_ep_with_nothing_to_run_still_fails_when_absent() -> None:
    verdicts = judge({"available_providers": ["CPUExecutionProvider"], "cases": []}, ["AzureExecutionProvider"], [])
    assert [v.message for v in verdicts if not v.passed] == [
        "AzureExecutionProvider is claimed but get_available_providers() lists only ['CPUExecutionProvider']"
    ]
    present = judge({"available_providers": ["AzureExecutionProvider"], "cases": []}, ["AzureExecutionProvider"], [])
    assert [(v.passed, v.skipped) for v in present] == [(True, True)]


def test_a_wheel_path_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    from ortdist.errors import PackageError
    from ortdist.smoke.wheelinfo import read_wheel

    with pytest.raises(PackageError, match="cannot read the wheel"):
        read_wheel(tmp_path / "onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl")


def test_latency_travels_from_case_to_table() -> None:
    from ortdist.smoke.report import table

    timed = judge_case(case(latency_ms=1.23456))
    untimed = judge_case(case())
    assert timed.latency_ms == pytest.approx(1.23456) and untimed.latency_ms is None
    lines = table([("w.whl", timed), ("w.whl", untimed)]).splitlines()
    assert "median ms" in lines[0]
    assert "1.235" in lines[1] and " - " in lines[2]


def test_a_branch_that_did_not_run_is_neither_absorbed_nor_counted() -> None:
    from ortdist.smoke.proof import compiled_share

    model = {"if": "If", "then_conv": "Conv", "then_relu": "Relu", "else_neg": "Neg"}
    ran = {"if": "CPUExecutionProvider", "then_conv": "CPUExecutionProvider", "then_relu": "CPUExecutionProvider"}
    # The EP fused then_conv + then_relu; else_neg is missing because the else branch never ran.
    plain = {"if": "CPUExecutionProvider", "DNNL_7_0": "DnnlExecutionProvider"}
    absorbed, share = compiled_share(plain, ran, model, "DnnlExecutionProvider")
    assert absorbed == {"then_conv": "Conv", "then_relu": "Relu"}
    assert share == pytest.approx(2 / 3)
    # Kernels named after model nodes count too; nothing that ran on the CPU does.
    kernels = {"if": "CPUExecutionProvider", "then_conv_token_1": "XnnpackExecutionProvider"}
    kernels |= {"then_relu": "CPUExecutionProvider"}
    absorbed, share = compiled_share(kernels, ran, model, "XnnpackExecutionProvider")
    assert absorbed == {} and share == pytest.approx(1 / 3)
    absorbed, share = compiled_share(plain, {}, model, "DnnlExecutionProvider")
    assert absorbed == {} and share == 0.0


def test_a_compiling_ep_is_credited_with_the_nodes_its_partitions_absorbed() -> None:
    from ortdist.smoke.proof import absorbed_nodes

    model = {"conv1": "Conv", "relu1": "Relu", "fc": "Gemm", "flatten": "Flatten"}
    # Optimizations off: the EP's compiled nodes replace conv1/relu1/fc; flatten stayed on the CPU.
    plain = {"Dnnl_DNNL_123_0": "DnnlExecutionProvider", "flatten": "CPUExecutionProvider"}
    assert absorbed_nodes(plain, model, "DnnlExecutionProvider") == {"conv1": "Conv", "relu1": "Relu", "fc": "Gemm"}
    # A kernel EP keeps node names (NHWC conversion adds a _token_<n> suffix): nothing is absorbed.
    kernels = {
        "conv1_token_3": "XnnpackExecutionProvider",
        "relu1": "XnnpackExecutionProvider",
        "fc": "CPUExecutionProvider",
        "flatten": "CPUExecutionProvider",
    }
    assert absorbed_nodes(kernels, model, "XnnpackExecutionProvider") == {}
    # XNNPACK fusing Conv+Relu into one node of its own: both count as taken, Gemm stays off.
    fused = {"XnnpackExecutionProvider_Conv_0": "XnnpackExecutionProvider", "fc": "CPUExecutionProvider"}
    fused |= {"flatten_token_9": "CPUExecutionProvider"}
    assert absorbed_nodes(fused, model, "XnnpackExecutionProvider") == {"conv1": "Conv", "relu1": "Relu"}
    # Required ops count absorbed nodes, and only for the EP that absorbed them.
    dnnl = case(
        provider="DnnlExecutionProvider",
        placement={"Dnnl_DNNL_123_0": "DnnlExecutionProvider", "flatten": "CPUExecutionProvider"},
        ops={"Dnnl_DNNL_123_0": "DNNL_123_0", "flatten": "Flatten"},
        absorbed={"conv1": "Conv", "fc": "Gemm"},
    )
    assert missing_ops([dnnl], "DnnlExecutionProvider", ("Conv", "MatMul")) == ["MatMul"]
    assert missing_ops([dnnl], "XnnpackExecutionProvider", ("Conv",)) == ["Conv"]


def test_a_crashing_case_is_recorded_and_the_runner_resumes_after_it(tmp_path: Path) -> None:
    import json

    from ortdist.smoke.env import crash_signal, record_crash

    cases = [
        {"suite": "node", "name": f"t{i}", "provider": "DnnlExecutionProvider", "must_take": "none"} for i in range(3)
    ]
    (tmp_path / "plan.json").write_text(json.dumps({"cases": cases}))
    assert not record_crash(tmp_path, 136)  # no case in flight: a crash outside the cases
    (tmp_path / "running.txt").write_text("1")
    assert record_crash(tmp_path, 136)
    assert not (tmp_path / "running.txt").exists()
    (line,) = (tmp_path / "progress.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["index"] == 1 and entry["case"]["name"] == "t1"
    assert entry["case"]["error"] == "crashed: the interpreter died with SIGFPE in this case"
    assert crash_signal(-11) == "SIGSEGV" and crash_signal(139) == "SIGSEGV" and crash_signal(3) == "exit status 3"
    (tmp_path / "running.txt").write_text("")  # killed before the index was written
    assert not record_crash(tmp_path, 137)


def test_the_runner_is_restarted_after_each_crash_until_it_ends_on_its_own(tmp_path: Path) -> None:
    """One loop for compat, the smoke env and the device proof: a crash in a case restarts the
    runner after it; exit 0/1 ends it; a crash outside any case, or too many, ends it too."""
    import json

    from ortdist.smoke.env import MAX_CRASHES, run_until_settled

    cases = [{"suite": "model", "name": f"m{i}", "provider": "CPUExecutionProvider"} for i in range(40)]
    (tmp_path / "plan.json").write_text(json.dumps({"cases": cases}))
    codes = iter([139, 136, 1])

    def crashing_twice() -> int:
        (tmp_path / "running.txt").write_text("0")  # the runner marks the case it is in
        return next(codes)

    assert run_until_settled(crashing_twice, tmp_path) == 1
    assert len((tmp_path / "progress.jsonl").read_text().splitlines()) == 2
    calls: list[int] = []

    def always_crashing() -> int:
        calls.append(1)
        (tmp_path / "running.txt").write_text("3")
        return 139

    assert run_until_settled(always_crashing, tmp_path) == 139 and len(calls) == MAX_CRASHES + 1
    assert run_until_settled(lambda: 134, tmp_path) == 134  # died outside a case: not restarted


def test_smoke_facts_load_and_devices_stay_plain_objects_for_the_runner() -> None:
    facts = smoke_facts()
    assert facts.models["qdq_cnn"].atol == 0.0500001 and facts.models["control_flow"].rtol == 0.0
    assert expectations()["XnnpackExecutionProvider"].ops == ("Conv", "Gemm", "MaxPool", "QLinearConv")
    assert expectations()["CUDAExecutionProvider"].device == "cuda"
    assert devices()["cuda"] == {
        "label": "GPU",
        "runtime": ("libcudart.so.13", "libcudart.so.12"),
        "count": "cudaGetDeviceCount",
        "error_string": "cudaGetErrorString",
    }


@pytest.mark.parametrize(
    ("mutate", "key", "message"),
    [
        (lambda d: d["providers"]["cpu"].update(must_take="most"), "providers.cpu.must_take", "is not one of"),
        (lambda d: d["providers"]["cpu"].update(placement_model=[]), "providers.cpu.placement_model", "did you mean"),
        (lambda d: d["providers"].update(cpx=d["providers"]["cpu"]), "providers.cpx", "unknown EP 'cpx'"),
        (
            lambda d: d["providers"]["cpu"].update(placement_models=["cnm"]),
            "providers.cpu.placement_models",
            "unknown model(s) ['cnm']",
        ),
        (lambda d: d["providers"]["cuda"].update(device="tpu"), "providers.cuda.device", "unknown device 'tpu'"),
        (
            lambda d: d["providers"]["cuda"].update(tolerances={"transformr": {"atol": 1e-3, "rtol": 0.0}}),
            "providers.cuda.tolerances",
            "unknown model(s) ['transformr']",
        ),
        (lambda d: d["providers"]["xnnpack"].update(device="cuda"), "providers.xnnpack.device", "provider_library"),
        (lambda d: d["devices"]["cuda"].pop("count"), "devices.cuda", "missing required key(s) ['count']"),
        (lambda d: d["models"]["cnn"].update(atol="1e-4"), "models.cnn.atol", "must be a number"),
    ],
)
def test_bad_smoke_facts_are_refused(mutate: Any, key: str, message: str) -> None:
    data = copy.deepcopy(registry.load_data("smoke.toml"))
    mutate(data)
    with pytest.raises(DataError) as info:
        parse_smoke_facts(data)
    assert message in str(info.value)
    assert info.value.where == f"ortdist/data/smoke.toml key '{key}'"


def test_an_ep_tolerance_replaces_the_models_own_for_that_ep_only() -> None:
    """CUDA's TF32 float32 MatMuls get the looser tolerance smoke.toml gives them; the CPU EP keeps
    the model's own, and a model the EP has no entry for keeps it on every EP."""
    files = [ModelFiles("model", n, f"{n}.onnx", f"{n}.npz", 1e-4, 1e-4) for n in ("transformer", "cnn")]
    cases, _ = plan_cases(["CPUExecutionProvider", "CUDAExecutionProvider"], files)
    tol = {(c["provider"], c["name"]): (c["atol"], c["rtol"]) for c in cases}
    assert tol[("CUDAExecutionProvider", "transformer")] == (5e-3, 5e-3)
    assert tol[("CPUExecutionProvider", "transformer")] == (1e-4, 1e-4)
    assert tol[("CUDAExecutionProvider", "cnn")] == (1e-4, 1e-4)
