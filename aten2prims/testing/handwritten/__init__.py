"""Hand-written samples for overloads OpInfo does not reach (or reaches too thinly), one module
per decomposition module. Each generator is registered with `@handwritten(op, dtypes)` (from
`registry`) and yields `AtenCall`s with real torch tensors; torch is imported
inside the generators only."""

# Importing the modules registers their generators in HANDWRITTEN.
from . import indexing, linear, normalization, pointwise, pooling, reductions, selection, views
from .registry import HANDWRITTEN, handwritten

__all__ = [
    "HANDWRITTEN",
    "handwritten",
    "indexing",
    "linear",
    "normalization",
    "pointwise",
    "pooling",
    "reductions",
    "selection",
    "views",
]
