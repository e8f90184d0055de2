"""Family E: reductions (sum, prod, mean, var, amax/amin, any, argmax/argmin, max/min.dim), cumsum and softmax."""

from __future__ import annotations
