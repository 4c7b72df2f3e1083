"""Is this file an ONNX model? Asked when a recipe or `ortdist analyze` names one, so a text file or a
truncated download is refused before the toolchain and source steps, not by the converter an hour later."""

from __future__ import annotations

from pathlib import Path


def onnx_problem(path: Path) -> str | None:
    """Why ``path`` is not an ONNX model, or None: it parses as a ModelProto with a graph and an IR
    version (external data is not read)."""
    if path.is_dir():
        return "is a directory, not an ONNX model file"
    if not path.is_file():
        return "does not exist"
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    import onnx
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError):
        return "is not an ONNX model: it does not parse as a protobuf ModelProto (truncated or another format)"
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        return "is not an ONNX model: no IR version, opset import or graph in it"
    return None
