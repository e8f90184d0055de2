"""Hand-written samples for overloads OpInfo does not reach (or reaches too thinly).

Each generator is registered with `@handwritten(op, dtypes)` and yields `AtenCall`s with real
torch tensors; torch is imported inside the generators only."""

from __future__ import annotations
