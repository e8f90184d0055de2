"""Family E: elementwise arithmetic, comparisons, math functions, activations, copies and conversions."""

from __future__ import annotations
