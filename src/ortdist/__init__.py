"""ortdist: build ONNX Runtime distributions from declarative recipes."""

from __future__ import annotations

__version__ = "0.1.0"
