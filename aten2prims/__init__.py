"""aten2prims: lower Core ATen graphs to torch Prims and run them on NumPy.

    import aten2prims
    g = aten2prims.load("model.pt2")          # no torch needed; also text IR files
    lg = aten2prims.lower(g)                   # prims only
    outs = aten2prims.execute(lg, {"x": x})    # list of NumPy arrays
"""

from __future__ import annotations

from .errors import (
    DTypeError,
    Error,
    ExecutionError,
    LoadError,
    LoweringError,
    ParseError,
    SchemaError,
    ShapeError,
    UnsupportedOpError,
    VerificationError,
)
from .ir import DType, Graph, Node, TensorMeta, Value, parse

__version__ = "0.1.0"
