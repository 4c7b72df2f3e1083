"""Which operators, opsets and element types a set of models needs: ORT's reduced-build config.

``ortdist analyze`` and reduced recipes use this. It reads ONNX models (with the ``onnx``
package) and ORT-format models (``ortformat``), walks every graph including subgraphs, and
merges any number of models and existing configs into one ``OpConfig`` without losing types.

The config format is ORT's (docs/Reduced_Operator_Kernel_build.md): ``domain;opset;Op1,Op2`` lines,
optionally with per-operator JSON type information appended to an op name. Opsets follow ORT's
own tools: an ONNX model contributes its imported opset per domain, an ORT-format model each
node's kernel ``since_version``; ORT matches either against the kernel's version range.

What ORT's graph optimizers insert at run time is not in an ONNX model: analyze the ORT-format
model written at the runtime's optimization level (``ortdist analyze`` converts ONNX models
first unless told not to), as ORT recommends.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..config import convert, dotted, where
from ..errors import DataError, ModelError
from ..registry import data_origin, load_data
from .ortformat import ELEMENT_TYPES, OrtGraph, read_ort_model

ONNX_DOMAIN = "ai.onnx"
DIRECTIVE_NO_OPS_MEANS_ALL = "!no_ops_specified_means_all_ops_are_required"
DIRECTIVE_GLOBAL_TYPES = "!globally_allowed_types"


@dataclass(frozen=True, kw_only=True)
class Tracking:
    """Which of an operator's inputs/outputs its typed kernels are specialised on (type_tracking.toml)."""

    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    triple: bool = False


@dataclass(frozen=True, kw_only=True)
class TypeTrackingFile:
    """data/type_tracking.toml: [input0] domain -> ops tracking input 0; [track."<domain>:<op>"] the rest."""

    input0: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    track: Mapping[str, Tracking] = field(default_factory=lambda: MappingProxyType({}))


def parse_type_tracking(data: dict[str, Any]) -> dict[str, Tracking]:
    """ "domain:op" -> Tracking, with the table's invariants checked."""
    origin = data_origin("type_tracking.toml")
    tables = convert(TypeTrackingFile, data, origin=origin, error=DataError)
    entries = [
        (dotted("input0", d), f"{d}:{op}", Tracking(inputs=(0,))) for d, ops in tables.input0.items() for op in ops
    ]
    entries += [(dotted("track", key), key, tracking) for key, tracking in tables.track.items()]
    table: dict[str, Tracking] = {}
    for place, key, tracking in entries:
        if key in table:
            raise DataError(f"operator {key} is listed twice", where=where(origin, place), fix="keep one entry")
        if key.count(":") != 1:
            raise DataError(f"key {key!r} is not 'domain:op'", where=where(origin, place), fix='e.g. "ai.onnx:Cast"')
        if not (tracking.inputs or tracking.outputs or tracking.triple):
            raise DataError(
                "a tracked operator must track an input, an output or a triple",
                where=where(origin, place),
                fix="set inputs, outputs or triple = true, or drop the entry (its kernels keep all types)",
            )
        table[key] = tracking
    return table


@functools.cache
def type_tracking() -> dict[str, Tracking]:
    """ "domain:op" -> Tracking, loaded from data/type_tracking.toml."""
    return parse_type_tracking(load_data("type_tracking.toml"))


@dataclass
class TypeUse:
    """The element types one operator is used with, per tracked input/output (or OneHot triples)."""

    inputs: dict[int, set[str]] = field(default_factory=dict)
    outputs: dict[int, set[str]] = field(default_factory=dict)
    triples: set[tuple[str, ...]] = field(default_factory=set)

    def merge(self, other: TypeUse) -> None:
        for mine, theirs in ((self.inputs, other.inputs), (self.outputs, other.outputs)):
            for index, types in theirs.items():
                mine.setdefault(index, set()).update(types)
        self.triples |= other.triples

    def entry(self) -> str:
        """The JSON ORT appends to the op name ('' when nothing was recorded)."""
        if self.triples:
            return json.dumps({"custom": [list(t) for t in sorted(self.triples)]})
        info: dict[str, dict[int, list[str]]] = {}
        for key, table in (("inputs", self.inputs), ("outputs", self.outputs)):
            kept = {i: sorted(types) for i, types in sorted(table.items()) if types}
            if kept:
                info[key] = kept
        return json.dumps(info) if info else ""

    @classmethod
    def from_entry(cls, text: str, where: str) -> TypeUse:
        try:
            info = json.loads(text)
            use = cls()
            for key, table in (("inputs", use.inputs), ("outputs", use.outputs)):
                for index, types in info.get(key, {}).items():
                    table[int(index)] = {str(t) for t in types}
            use.triples = {tuple(str(t) for t in triple) for triple in info.get("custom", [])}
        except (ValueError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"invalid type information {text!r}: {exc}",
                where=where,
                fix='write it as {"inputs": {"0": ["float"]}} (ORT\'s reduced-build config format)',
            ) from exc
        return use


@dataclass
class OpConfig:
    """A reduced-build operator config: domain -> opset -> ops, plus per-op types when tracked."""

    ops: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    types: dict[str, TypeUse] = field(default_factory=dict)  # "domain:op" -> types
    typed: bool = False
    directives: list[str] = field(default_factory=list)  # ORT's "!" lines, kept verbatim
    sources: list[str] = field(default_factory=list)  # models/configs this was made from
    # Every element type a model's values have (tracked ops or not); a config file records none.
    element_types: set[str] = field(default_factory=set)

    def add_op(self, domain: str, opset: int, op: str) -> None:
        self.ops.setdefault(domain, {}).setdefault(opset, set()).add(op)

    def add_types(self, domain: str, op: str, use: TypeUse) -> None:
        self.types.setdefault(f"{domain}:{op}", TypeUse()).merge(use)

    def merge(self, other: OpConfig) -> None:
        for domain, opsets in other.ops.items():
            for opset, ops in opsets.items():
                self.ops.setdefault(domain, {}).setdefault(opset, set()).update(ops)
        for key, use in other.types.items():
            self.types.setdefault(key, TypeUse()).merge(use)
        self.typed = self.typed or other.typed
        self.directives += [d for d in other.directives if d not in self.directives]
        self.sources += [s for s in other.sources if s not in self.sources]
        self.element_types |= other.element_types

    def ops_using(self, type_name: str) -> list[str]:
        """'domain:op' of each operator whose recorded types include ``type_name``."""
        return sorted(
            key
            for key, use in self.types.items()
            if any(type_name in types for types in (*use.inputs.values(), *use.outputs.values()))
            or any(type_name in triple for triple in use.triples)
        )

    def op_names(self) -> set[tuple[str, str]]:
        return {(d, op) for d, opsets in self.ops.items() for ops in opsets.values() for op in ops}

    def render(self) -> str:
        lines = ["# Generated by ortdist analyze from:", *(f"# - {s}" for s in self.sources)]
        lines += self.directives
        for domain in sorted(self.ops):
            for opset in sorted(self.ops[domain]):
                ops = sorted(self.ops[domain][opset])
                if not ops:
                    continue
                entries = [op + (self._entry(domain, op) if self.typed else "") for op in ops]
                lines.append(f"{domain};{opset};{','.join(entries)}")
        return "\n".join(lines) + "\n"

    def _entry(self, domain: str, op: str) -> str:
        use = self.types.get(f"{domain}:{op}")
        return use.entry() if use else ""


# --- config files -------------------------------------------------------------------------------
def _split_entries(text: str, where: str) -> list[str]:
    """Split 'A,B{"inputs": {"0": ["x", "y"]}},C' on the commas outside braces."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth < 0:
                raise ModelError("unbalanced '}' in the op list", where=where, fix="check the type JSON")
        elif char == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if depth:
        raise ModelError("unbalanced '{' in the op list", where=where, fix="check the type JSON")
    out.append(text[start:])
    return [e.strip() for e in out if e.strip()]


def parse_config(text: str, where: str) -> OpConfig:
    config = OpConfig(sources=[where])
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        here = f"{where}:{number}"
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            config.directives.append(line)
            continue
        parts = line.split(";", 2)
        if len(parts) != 3:
            raise ModelError(
                f"expected 'domain;opset[,opset...];Op1,Op2,...', got {line!r}",
                where=here,
                fix="see ORT's docs/Reduced_Operator_Kernel_build.md for the format",
            )
        domain, opsets, ops = parts
        try:
            versions = [int(v) for v in opsets.split(",")]
        except ValueError:
            raise ModelError(f"opset {opsets!r} is not a number", where=here, fix="e.g. ai.onnx;17;Conv") from None
        for entry in _split_entries(ops, here):
            name, brace, rest = entry.partition("{")
            name = name.strip()
            if not name.isidentifier():
                raise ModelError(f"{name!r} is not an operator name", where=here, fix="e.g. ai.onnx;17;Conv,Relu")
            for version in versions:
                config.add_op(domain, version, name)
            if brace:
                config.typed = True
                config.add_types(domain, name, TypeUse.from_entry(brace + rest, here))
    globally = [d for d in config.directives if d.startswith(DIRECTIVE_GLOBAL_TYPES)]
    if globally and config.types:
        raise ModelError(
            "per-operator types and !globally_allowed_types are mutually exclusive",
            where=where,
            fix="keep one of them (ORT refuses both)",
        )
    return config


# --- models -------------------------------------------------------------------------------------
def _record_types(
    config: OpConfig,
    domain: str,
    op: str,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    value_types: Mapping[str, str],
    where: str,
) -> None:
    tracking = type_tracking().get(f"{domain}:{op}")
    if tracking is None:
        return

    def type_of(name: str, role: str) -> str:
        found = value_types.get(name, "")
        if not found:
            raise ModelError(
                f"the element type of {role} {name!r} of a {domain}:{op} node is unknown",
                where=where,
                fix="give the model full type information (value_info), or analyze its ORT-format conversion",
            )
        return found

    use = TypeUse()
    if tracking.triple:
        if len(inputs) < 3:
            raise ModelError(
                f"a {domain}:{op} node has {len(inputs)} inputs, expected 3", where=where, fix="check the model"
            )
        # ORT's OneHot registration key: input 0 (indices), input 2 (values), input 1 (depth) types
        use.triples.add(tuple(type_of(inputs[i], f"input {i}") for i in (0, 2, 1)))
    for index in tracking.inputs:
        # Inputs that later opsets added may be absent in older ones (Slice-1): not an error.
        if index < len(inputs) and inputs[index]:
            use.inputs.setdefault(index, set()).add(type_of(inputs[index], f"input {index}"))
    for index in tracking.outputs:
        if index >= len(outputs):
            raise ModelError(f"a {domain}:{op} node has no output {index}", where=where, fix="check the model")
        use.outputs.setdefault(index, set()).add(type_of(outputs[index], f"output {index}"))
    config.add_types(domain, op, use)


def _walk_ort_graph(config: OpConfig, graph: OrtGraph, outer: Mapping[str, str], typed: bool, where: str) -> None:
    value_types = {**outer, **graph.value_types}
    config.element_types.update(t for t in graph.value_types.values() if t)
    for node in graph.nodes:
        config.add_op(node.domain, node.since_version, node.op_type)
        if typed:
            _record_types(config, node.domain, node.op_type, node.inputs, node.outputs, value_types, where)
        for subgraph in node.subgraphs:
            _walk_ort_graph(config, subgraph, value_types, typed, where)
    for op_id in graph.runtime_op_ids:
        # Saved runtime optimizations insert these ops when the session starts: they are needed too.
        parts = op_id.split(":")
        if len(parts) != 3 or not parts[2].isdigit():
            raise ModelError(f"malformed runtime optimization op id {op_id!r}", where=where, fix="re-convert the model")
        config.add_op(parts[0] or ONNX_DOMAIN, int(parts[2]), parts[1])


def analyze_ort(path: Path, typed: bool) -> OpConfig:
    model = read_ort_model(path.read_bytes(), str(path))
    config = OpConfig(typed=typed, sources=[str(path)])
    _walk_ort_graph(config, model.graph, {}, typed, str(path))
    return config


_ONNX_ELEMENT_TYPES = ELEMENT_TYPES  # ONNX's TensorProto.DataType numbers match ORT's TensorDataType


def _onnx_value_type(type_proto: Any) -> str:
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return _ONNX_ELEMENT_TYPES.get(type_proto.tensor_type.elem_type, "")
    if kind == "sequence_type":
        return _onnx_value_type(type_proto.sequence_type.elem_type)
    if kind == "optional_type":
        return _onnx_value_type(type_proto.optional_type.elem_type)
    if kind == "map_type":
        key = _ONNX_ELEMENT_TYPES.get(type_proto.map_type.key_type, "")
        return f"std::map<{key},{_onnx_value_type(type_proto.map_type.value_type)}>"
    return ""


def _walk_onnx_graph(
    config: OpConfig, graph: Any, opsets: Mapping[str, int], outer: Mapping[str, str], typed: bool, where: str
) -> None:
    import onnx

    value_types = dict(outer)
    if typed:
        for value in [*graph.input, *graph.output, *graph.value_info]:
            value_types[value.name] = _onnx_value_type(value.type)
        for init in graph.initializer:
            value_types[init.name] = _ONNX_ELEMENT_TYPES.get(init.data_type, "")
        config.element_types.update(t for t in value_types.values() if t)
    for node in graph.node:
        domain = node.domain or ONNX_DOMAIN
        if domain not in opsets:
            raise ModelError(
                f"node {node.name or node.op_type!r} uses domain {domain!r}, which the model does not import",
                where=where,
                fix="add an opset_import for the domain (onnx.checker.check_model reports this too)",
            )
        config.add_op(domain, opsets[domain], node.op_type)
        if typed:
            if node.op_type == "Constant" and node.output:
                value_types.setdefault(node.output[0], "")
            _record_types(config, domain, node.op_type, tuple(node.input), tuple(node.output), value_types, where)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                _walk_onnx_graph(config, attribute.g, opsets, value_types, typed, where)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    _walk_onnx_graph(config, subgraph, opsets, value_types, typed, where)


def analyze_onnx(path: Path, typed: bool) -> OpConfig:
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # protobuf's DecodeError, or an unreadable file
        raise ModelError(f"cannot read the ONNX model: {exc}", where=str(path), fix="check the file") from exc
    opsets = {(o.domain or ONNX_DOMAIN): o.version for o in model.opset_import}
    if not opsets:
        raise ModelError("the model imports no opset", where=str(path), fix="add an opset_import")
    if typed:
        # Types of intermediate values come from ONNX shape inference (ops it does not know stay
        # unknown, and a tracked one is reported: analyze the ORT-format model instead).
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    config = OpConfig(typed=typed, sources=[str(path)])
    _walk_onnx_graph(config, model.graph, opsets, {}, typed, str(path))
    return config


def analyze_file(path: Path, typed: bool) -> OpConfig:
    """One model (.onnx / .ort) or an existing config (.config / .txt)."""
    if not path.is_file():
        raise ModelError("no such file", where=str(path), fix="pass ONNX (.onnx), ORT-format (.ort) or .config files")
    suffix = path.suffix.lower()
    if suffix == ".ort":
        return analyze_ort(path, typed)
    if suffix == ".onnx":
        return analyze_onnx(path, typed)
    if suffix in (".config", ".txt"):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ModelError(
                f"not UTF-8 text: {exc}", where=str(path), fix="pass a config written by ortdist analyze"
            ) from exc
        config = parse_config(text, str(path))
        if typed and not config.typed and config.ops:
            raise ModelError(
                "the config has no type information, so merging it into a typed config would drop type reduction "
                "for its operators silently",
                where=str(path),
                fix="regenerate it with types (ortdist analyze --types), or analyze without --types",
            )
        return config
    raise ModelError(f"unknown file type {path.suffix!r}", where=str(path), fix="pass .onnx, .ort or .config files")


def analyze(paths: Iterable[Path], typed: bool) -> OpConfig:
    merged = OpConfig(typed=typed)
    for path in paths:
        merged.merge(analyze_file(path, typed))
    merged.typed = typed
    return merged
