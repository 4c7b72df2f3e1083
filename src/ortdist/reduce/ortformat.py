"""A reader for ORT-format models (``.ort``, flatbuffers, schema ``ort.fbs`` of ORT 1.21).

Only what the analysis needs: the opset imports, and per graph its value types and nodes with
their attributes' subgraphs, plus the op ids that saved runtime optimizations would insert. The
flatbuffers wire format is simple enough to walk with ``struct`` (tables, vtables, vectors,
strings, unions), which keeps ``ortdist analyze`` free of ORT's generated Python classes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import ModelError

FILE_IDENTIFIER = b"ORTM"

# Field slots, in declaration order of ort.fbs (a union takes two slots: its type, then its value).
INFERENCE_SESSION_MODEL = 1
MODEL_OPSET_IMPORT, MODEL_GRAPH = 1, 7
OPSET_DOMAIN, OPSET_VERSION = 0, 1
GRAPH_NODE_ARGS, GRAPH_NODES, GRAPH_RUNTIME_OPTIMIZATIONS = 1, 2, 8
NODE_DOMAIN, NODE_SINCE_VERSION, NODE_OP_TYPE = 2, 3, 5
NODE_INPUTS, NODE_OUTPUTS, NODE_ATTRIBUTES = 8, 9, 10
VALUE_INFO_NAME, VALUE_INFO_TYPE = 0, 2
TYPE_INFO_VALUE_TYPE, TYPE_INFO_VALUE = 1, 2
TENSOR_TYPE_ELEM_TYPE = 0
SEQUENCE_ELEM_TYPE = 0
MAP_KEY_TYPE, MAP_VALUE_TYPE = 0, 1
ATTRIBUTE_TYPE, ATTRIBUTE_G, ATTRIBUTE_GRAPHS = 2, 7, 12
RUNTIME_OPTIMIZATIONS_RECORDS = 0
CONTAINER_ENTRY_RECORDS = 1
RECORD_PRODUCED_OP_IDS = 3

UNION_TENSOR, UNION_SEQUENCE, UNION_MAP = 1, 2, 3
ATTRIBUTE_TYPE_GRAPH, ATTRIBUTE_TYPE_GRAPHS = 5, 10

# TensorDataType -> the C++ type name ORT's kernel registrations (and reduced-build configs) use.
ELEMENT_TYPES = {
    1: "float",
    2: "uint8_t",
    3: "int8_t",
    4: "uint16_t",
    5: "int16_t",
    6: "int32_t",
    7: "int64_t",
    8: "std::string",
    9: "bool",
    10: "MLFloat16",
    11: "double",
    12: "uint32_t",
    13: "uint64_t",
    16: "BFloat16",
    17: "Float8E4M3FN",
    18: "Float8E4M3FNUZ",
    19: "Float8E5M2",
    20: "Float8E5M2FNUZ",
}


@dataclass(frozen=True)
class OrtNode:
    domain: str
    op_type: str
    since_version: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    subgraphs: tuple[OrtGraph, ...]


@dataclass(frozen=True)
class OrtGraph:
    value_types: dict[str, str]  # value name -> element type (C++ name), "" when not a known tensor type
    nodes: tuple[OrtNode, ...]
    runtime_op_ids: tuple[str, ...] = field(default=())  # "domain:op:since_version" from saved optimizations


@dataclass(frozen=True)
class OrtModel:
    opsets: dict[str, int]
    graph: OrtGraph


class _Buffer:
    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.where = where

    def _unpack(self, fmt: str, pos: int) -> int:
        try:
            value: int = struct.unpack_from(fmt, self.data, pos)[0]
        except struct.error as exc:
            raise ModelError(
                f"truncated or corrupt ORT-format model (read past the end at byte {pos})",
                where=self.where,
                fix="re-convert the model (ortdist analyze converts ONNX models itself)",
            ) from exc
        return value

    def u8(self, pos: int) -> int:
        return self._unpack("<B", pos)

    def i32(self, pos: int) -> int:
        return self._unpack("<i", pos)

    def u32(self, pos: int) -> int:
        return self._unpack("<I", pos)

    def i64(self, pos: int) -> int:
        return self._unpack("<q", pos)

    def field_pos(self, table: int, slot: int) -> int:
        """Absolute position of a table field, 0 when absent (default value)."""
        vtable = table - self.i32(table)
        vtable_size = self._unpack("<H", vtable)
        entry = 4 + 2 * slot
        if entry >= vtable_size:
            return 0
        offset = self._unpack("<H", vtable + entry)
        return table + offset if offset else 0

    def deref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def table(self, table: int, slot: int) -> int:
        pos = self.field_pos(table, slot)
        return self.deref(pos) if pos else 0

    def string_at(self, pos: int) -> str:
        length = self.u32(pos)
        return self.data[pos + 4 : pos + 4 + length].decode("utf-8")

    def string(self, table: int, slot: int) -> str:
        pos = self.field_pos(table, slot)
        return self.string_at(self.deref(pos)) if pos else ""

    def vector(self, table: int, slot: int) -> list[int]:
        """Positions of the offset elements (tables or strings) of a vector field."""
        pos = self.field_pos(table, slot)
        if not pos:
            return []
        vec = self.deref(pos)
        return [self.deref(vec + 4 + 4 * i) for i in range(self.u32(vec))]

    def scalar(self, table: int, slot: int, reader: str, default: int = 0) -> int:
        pos = self.field_pos(table, slot)
        return int(getattr(self, reader)(pos)) if pos else default


def _element_type(buf: _Buffer, type_info: int) -> str:
    if not type_info:
        return ""
    kind = buf.scalar(type_info, TYPE_INFO_VALUE_TYPE, "u8")
    value = buf.table(type_info, TYPE_INFO_VALUE)
    if kind == UNION_TENSOR and value:
        return ELEMENT_TYPES.get(buf.scalar(value, TENSOR_TYPE_ELEM_TYPE, "i32"), "")
    if kind == UNION_SEQUENCE and value:  # ORT tracks the element type of a sequence's tensors
        return _element_type(buf, buf.table(value, SEQUENCE_ELEM_TYPE))
    if kind == UNION_MAP and value:
        key = ELEMENT_TYPES.get(buf.scalar(value, MAP_KEY_TYPE, "i32"), "")
        return f"std::map<{key},{_element_type(buf, buf.table(value, MAP_VALUE_TYPE))}>"
    return ""


def _graph(buf: _Buffer, graph: int) -> OrtGraph:
    types = {}
    for value_info in buf.vector(graph, GRAPH_NODE_ARGS):
        types[buf.string(value_info, VALUE_INFO_NAME)] = _element_type(buf, buf.table(value_info, VALUE_INFO_TYPE))
    nodes = []
    for node in buf.vector(graph, GRAPH_NODES):
        subgraphs = []
        for attribute in buf.vector(node, NODE_ATTRIBUTES):
            kind = buf.scalar(attribute, ATTRIBUTE_TYPE, "i32")
            if kind == ATTRIBUTE_TYPE_GRAPH:
                subgraphs.append(_graph(buf, buf.table(attribute, ATTRIBUTE_G)))
            elif kind == ATTRIBUTE_TYPE_GRAPHS:
                subgraphs += [_graph(buf, g) for g in buf.vector(attribute, ATTRIBUTE_GRAPHS)]
        nodes.append(
            OrtNode(
                domain=buf.string(node, NODE_DOMAIN) or "ai.onnx",
                op_type=buf.string(node, NODE_OP_TYPE),
                since_version=buf.scalar(node, NODE_SINCE_VERSION, "i32"),
                inputs=tuple(buf.string_at(s) for s in buf.vector(node, NODE_INPUTS)),
                outputs=tuple(buf.string_at(s) for s in buf.vector(node, NODE_OUTPUTS)),
                subgraphs=tuple(subgraphs),
            )
        )
    op_ids: list[str] = []
    optimizations = buf.table(graph, GRAPH_RUNTIME_OPTIMIZATIONS)
    if optimizations:
        for entry in buf.vector(optimizations, RUNTIME_OPTIMIZATIONS_RECORDS):
            for record in buf.vector(entry, CONTAINER_ENTRY_RECORDS):
                op_ids += [buf.string_at(s) for s in buf.vector(record, RECORD_PRODUCED_OP_IDS)]
    return OrtGraph(value_types=types, nodes=tuple(nodes), runtime_op_ids=tuple(op_ids))


def read_ort_model(data: bytes, where: str) -> OrtModel:
    if data[4:8] != FILE_IDENTIFIER:
        raise ModelError(
            "not an ORT-format model (the flatbuffer identifier 'ORTM' is missing)",
            where=where,
            fix="pass an .onnx model, or an .ort file written by ONNX Runtime",
        )
    try:
        return _read(data, where)
    except (UnicodeDecodeError, RecursionError, IndexError) as exc:
        raise ModelError(
            f"corrupt ORT-format model ({type(exc).__name__})",
            where=where,
            fix="re-convert the model (ortdist analyze converts ONNX models itself)",
        ) from exc


def _read(data: bytes, where: str) -> OrtModel:
    buf = _Buffer(data, where)
    session = buf.deref(0)
    model = buf.table(session, INFERENCE_SESSION_MODEL)
    if not model:
        raise ModelError("the ORT-format file holds no model", where=where, fix="re-convert the model")
    opsets = {
        (buf.string(o, OPSET_DOMAIN) or "ai.onnx"): buf.scalar(o, OPSET_VERSION, "i64")
        for o in buf.vector(model, MODEL_OPSET_IMPORT)
    }
    graph = buf.table(model, MODEL_GRAPH)
    if not graph:
        raise ModelError("the ORT-format model has no graph", where=where, fix="re-convert the model")
    return OrtModel(opsets=opsets, graph=_graph(buf, graph))
