"""Hand-written samples for overloads OpInfo does not reach (or reaches too thinly), one module
per decomposition module. Each generator is registered with `@handwritten(op, dtypes)` (from
`aten2prims.testing.samples`) and yields `AtenCall`s with real torch tensors; torch is imported
inside the generators only."""

from . import indexing, linear, normalization, pointwise, pooling, reductions, views  # noqa: F401 - registration
