"""Plan the smoke cases for a wheel and judge the runner's results (both pure).

Facts about what each EP must prove live in ``data/smoke.toml``; nothing here names an EP.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .. import registry
from ..config import KEY, convert, where
from ..errors import DataError

MustTake = Literal["all", "any", "none"]
_ORIGIN = registry.data_origin("smoke.toml")


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """|got - expected| <= atol + rtol * |expected| for a reference model's outputs ([models.<name>])."""

    atol: float
    rtol: float


@dataclass(frozen=True, kw_only=True)
class Expectation:
    """What an EP must prove on the reference models ([providers.<ep>], ep a registry name)."""

    ep: str = field(metadata=KEY)
    placement_models: tuple[str, ...]  # where must_take is checked; every model runs on every EP
    must_take: MustTake
    ops: tuple[str, ...] = ()
    node_tests: bool = False
    compiles: bool = False
    note: str = ""
    device: str = ""  # a [devices] entry: the EP's cases need that device
    # Per model: the tolerance on this EP where its default math is less precise than float32
    # (CUDA multiplies float32 in TF32); replaces the model's own for this EP's cases.
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def provider(self) -> str:
        """The EP's provider class name (the registry's, so smoke.toml cannot disagree with it)."""
        return registry.providers()[self.ep].provider


@dataclass(frozen=True, kw_only=True)
class Device:
    """How the runner asks a vendor runtime whether the machine has the device ([devices.<name>])."""

    label: str
    # Sonames of the vendor runtime, newest first: the first the machine has counts the devices
    # (a CUDA 13 machine has libcudart.so.13 and no .so.12, and the reverse).
    runtime: tuple[str, ...]
    count: str
    error_string: str


@dataclass(frozen=True, kw_only=True)
class SmokeFacts:
    """data/smoke.toml."""

    models: Mapping[str, Tolerance]
    providers: Mapping[str, Expectation]
    devices: Mapping[str, Device] = field(default_factory=lambda: MappingProxyType({}))


def parse_smoke_facts(data: dict[str, Any]) -> SmokeFacts:
    """smoke.toml's tables, checked against the EP registry and each other."""
    facts = convert(SmokeFacts, data, origin=_ORIGIN, error=DataError)
    eps = registry.providers()
    for name, exp in facts.providers.items():
        if name not in eps:
            raise DataError(
                f"unknown EP {name!r}", where=where(_ORIGIN, f"providers.{name}"), fix="use a name of providers.toml"
            )
        for key, models in (("placement_models", exp.placement_models), ("tolerances", tuple(exp.tolerances))):
            unknown = sorted(set(models) - set(facts.models))
            if unknown:
                raise DataError(
                    f"unknown model(s) {unknown}",
                    where=where(_ORIGIN, f"providers.{name}.{key}"),
                    fix=f"reference models: {', '.join(facts.models)}",
                )
        if exp.device and exp.device not in facts.devices:
            raise DataError(
                f"unknown device {exp.device!r}",
                where=where(_ORIGIN, f"providers.{name}.device"),
                fix=f"add a [devices.{exp.device}] entry",
            )
        if exp.device and not eps[name].provider_library:
            raise DataError(
                "an EP on a device needs a provider_library in providers.toml to probe",
                where=where(_ORIGIN, f"providers.{name}.device"),
                fix=f"set provider_library of [{name}] in providers.toml, or drop device",
            )
    return facts


@functools.cache
def smoke_facts() -> SmokeFacts:
    return parse_smoke_facts(registry.load_data("smoke.toml"))


@functools.cache
def expectations() -> dict[str, Expectation]:
    """Per-provider expectations keyed by provider class name, checked against the EP registry."""
    return {exp.provider: exp for exp in smoke_facts().providers.values()}


@functools.cache
def devices() -> dict[str, dict[str, Any]]:
    """Device name -> the probe facts the runner is given (a JSON object)."""
    return {name: dataclasses.asdict(device) for name, device in smoke_facts().devices.items()}


def device_probes(claimed: list[str]) -> dict[str, dict[str, Any]]:
    """For the runner: provider -> what to load and ask before running its cases on a device."""
    table, eps = expectations(), registry.providers()
    out: dict[str, dict[str, Any]] = {}
    for provider in claimed:
        exp = table.get(provider)
        if exp is not None and exp.device:
            out[provider] = {"library": eps[exp.ep].provider_library, **devices()[exp.device]}
    return out


@dataclass(frozen=True)
class ModelFiles:
    """A model and its inputs/expected outputs as files the runner can read (paths as seen by it)."""

    suite: str  # "model" or "node"
    name: str
    model: str
    data: str
    atol: float
    rtol: float
    nodes: dict[str, str] = field(default_factory=dict)  # model node name -> op type (model suite)
    # A reduced build must refuse a model outside its operator set with this ORT status, naming one
    # of these operators (the model's operators the build has no kernel for) as the one it lacks.
    expect_error: str = ""
    refused_ops: tuple[str, ...] = ()


def plan_cases(claimed: list[str], files: list[ModelFiles]) -> tuple[list[dict[str, Any]], list[str]]:
    """Cases for the runner, and the claimed providers the suite has no expectations for.

    Every reference model runs on every claimed EP, as a user calls it (the EP first, the CPU as
    fallback): a session that cannot be created or an output off the reference fails, wherever the
    nodes land. Where the EP must take nodes (must_take) is checked on its placement_models only."""
    table = expectations()
    cases: list[dict[str, Any]] = []
    unknown: list[str] = []
    for provider in claimed:
        exp = table.get(provider)
        if exp is None:
            unknown.append(provider)
            continue
        for f in files:
            if f.suite == "model" or exp.node_tests:
                placement_checked = f.suite == "model" and f.name in exp.placement_models
                own = exp.tolerances.get(f.name) if f.suite == "model" else None
                cases.append(
                    {
                        "suite": f.suite,
                        "name": f.name,
                        "model": f.model,
                        "data": f.data,
                        "atol": own.atol if own else f.atol,
                        "rtol": own.rtol if own else f.rtol,
                        "provider": provider,
                        "must_take": exp.must_take if placement_checked else "none",
                        "nodes": f.nodes,
                        "compiles": exp.compiles and f.suite == "model",
                        "expect_error": f.expect_error,
                        "refused_ops": list(f.refused_ops),
                    }
                )
    return cases, unknown


@dataclass(frozen=True)
class Verdict:
    suite: str
    name: str
    provider: str
    passed: bool
    skipped: bool
    message: str
    share: float
    max_abs_err: float
    seconds: float
    latency_ms: float | None = None

    @classmethod
    def failure(cls, name: str, provider: str, message: str, suite: str = "model") -> Verdict:
        """A failure that is about the wheel as a whole, not one run of a model."""
        return cls(suite, name, provider, False, False, message, 0.0, 0.0, 0.0)


# ORT's words when no kernel is registered for a node (session_state.cc / kernel lookup).
_NO_KERNEL = re.compile(r"(\w+) : Could not find an implementation for (\w+)\(\d+\) node with name")
_MISSING_LIB = re.compile(r"([\w.+-]+\.so[\w.]*): cannot open shared object file")


def missing_library(log: str) -> str | None:
    """The shared library ORT's log says it could not load, if any."""
    m = _MISSING_LIB.search(log)
    return m.group(1) if m else None


def judge_case(case: dict[str, Any], require_devices: bool = False) -> Verdict:
    """One case: a reference model must run, match, and sit on its EP as the expectation says."""

    def verdict(passed: bool, message: str, skipped: bool = False) -> Verdict:
        return Verdict(
            case["suite"],
            case["name"],
            case["provider"],
            passed,
            skipped,
            message,
            float(case.get("share", 0.0)),
            float(case.get("max_abs_err", 0.0)),
            float(case.get("seconds", 0.0)),
            case.get("latency_ms"),
        )

    if case["status"] == "unavailable":
        return verdict(False, f"{case['provider']} is claimed but not available in this wheel")
    if case["status"] == "no_device":
        if require_devices:
            return verdict(False, f"{case['reason']}, on a machine that must have one (--require-device)")
        # Reported as skipped, never as passed: nothing was proven on this machine.
        return verdict(True, f"skipped: {case['reason']}", skipped=True)
    expected_error = case.get("expect_error", "")
    if expected_error:
        refused: list[str] = case.get("refused_ops") or []
        if case["status"] != "error":
            return verdict(False, f"a model outside the reduced operator set ran; expected {expected_error}")
        first = case.get("error", "").splitlines()[0][:200] if case.get("error") else ""
        lacking = _NO_KERNEL.search(case.get("error", ""))
        if lacking and lacking.group(1) == expected_error and lacking.group(2) in refused:
            return verdict(True, f"refused as expected: no kernel for {lacking.group(2)} ({first})")
        return verdict(False, f"failed, but not for want of a kernel for {' or '.join(refused) or '?'}: {first}")
    lib = missing_library(case.get("ort_log", "") + "\n" + case.get("error", ""))
    if lib and case["status"] in ("error", "ok") and case["provider"] != "CPUExecutionProvider":
        off_ep = not any(p == case["provider"] for p in case.get("placement", {}).values())
        if case["status"] == "error" or off_ep:
            return verdict(False, f"{case['provider']} could not load: missing library {lib}")
    if case["status"] == "error":
        return verdict(False, case["error"].splitlines()[0][:300])
    if not case["outputs_ok"]:
        return verdict(False, f"outputs differ from the reference: max abs err {case['max_abs_err']:.3g}")
    placement: dict[str, str] = case.get("placement", {})
    off = sorted(n for n, p in placement.items() if p != case["provider"])
    if case["must_take"] == "all" and (off or not placement):
        return verdict(False, f"nodes fell back off {case['provider']}: {off[:8]}" if off else "no nodes profiled")
    if case["must_take"] == "any" and not any(p == case["provider"] for p in placement.values()):
        return verdict(
            False, f"silent fallback: no node ran on {case['provider']} (all on {sorted(set(placement.values()))})"
        )
    return verdict(True, "ok")


def missing_ops(cases: list[dict[str, Any]], provider: str, required: tuple[str, ...]) -> list[str]:
    """Required op types that no model case placed on ``provider``."""
    model_cases = [c for c in cases if c["suite"] == "model" and c["provider"] == provider]
    placed = {
        c.get("ops", {}).get(node) for c in model_cases for node, p in c.get("placement", {}).items() if p == provider
    }
    # Nodes a compiling EP absorbed into its fused partitions (see proof.absorbed_nodes).
    placed |= {op for c in model_cases for op in c.get("absorbed", {}).values()}
    return [op for op in required if op not in placed]


def judge(
    result: dict[str, Any], claimed: list[str], unknown: list[str], require_devices: bool = False
) -> list[Verdict]:
    """Model cases are pass/fail; node tests are recorded (conformance is judged against a baseline)."""
    cases = result.get("cases", [])
    verdicts = [judge_case(c, require_devices) for c in cases if c["suite"] == "model"]
    table = expectations()
    for provider in claimed:
        exp = table.get(provider)
        if exp and exp.ops and any(c["provider"] == provider and c["status"] == "ok" for c in cases):
            lacking = missing_ops(cases, provider, exp.ops)
            if lacking:
                verdicts.append(
                    Verdict.failure(
                        "ops", provider, f"no {', '.join(lacking)} node ran on {provider} in any reference model"
                    )
                )
        available_here = provider in result.get("available_providers", [])
        if exp and not exp.placement_models and not exp.node_tests and available_here:
            verdicts.append(Verdict("model", "-", provider, True, True, f"skipped: {exp.note}", 0.0, 0.0, 0.0))
    for provider in unknown:
        verdicts.append(
            Verdict.failure("*", provider, f"no smoke expectations for {provider}: add it to ortdist/data/smoke.toml")
        )
    available = result.get("available_providers", [])
    for provider in claimed:
        if provider not in available and not any(v.provider == provider and not v.passed for v in verdicts):
            verdicts.append(
                Verdict.failure(
                    "*", provider, f"{provider} is claimed but get_available_providers() lists only {available}"
                )
            )
    return verdicts


def node_test_outcomes(result: dict[str, Any]) -> dict[str, dict[str, bool]]:
    """provider -> node test name -> passed."""
    out: dict[str, dict[str, bool]] = {}
    for case in result.get("cases", []):
        if case["suite"] == "node" and case["status"] != "no_device":
            passed = case["status"] == "ok" and bool(case.get("outputs_ok"))
            out.setdefault(case["provider"], {})[case["name"]] = passed
    return out


def regressions(ours: dict[str, bool], baseline: dict[str, bool]) -> list[str]:
    """Node tests that pass on the baseline (the official wheel) and fail on ours."""
    return sorted(name for name, ok in baseline.items() if ok and not ours.get(name, False))
