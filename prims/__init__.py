"""The Prims opset of torch 2.13 (plus a few justified extension prims), each one a schema, a
meta rule and a vectorized NumPy kernel. Calling `prims.<name>(...)` inside a `Builder` (or a
decomposition rule) appends a node and returns a symbolic tensor:

    from prims import Builder
    import prims
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), f32))
        y = prims.exp(x)
"""

from __future__ import annotations

from typing import Any

from . import (  # noqa: F401 - each module registers its prims
    complex_parts,
    conversion,
    creation,
    elementwise,
    fft,
    indexing,
    linalg,
    misc,
    omitted,
    reductions,
    shape,
)
from .builder import Builder, current_builder, emit, make_builder
from .registry import PRIMS, PrimDef, lookup

_BUILDERS = {name: make_builder(definition) for name, definition in PRIMS.items()}
globals().update(_BUILDERS)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'prims' has no prim {name!r}")


__all__ = ["Builder", "PRIMS", "PrimDef", "current_builder", "emit", "lookup", *sorted(_BUILDERS)]
