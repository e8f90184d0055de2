"""Decomposition rules: every Core ATen overload (and a few non-core ones torch.export keeps)
expressed in prims.

Importing this package registers every rule in `RULES`, one module per part of an op family."""

from . import indexing, linear, normalization, pointwise, pooling, reductions, views  # noqa: F401 - registration
from .registry import (
    RULES,
    Rule,
    RuleRegistry,
    active_registry,
    aten,
    call,
    declared_result_metas,
    register,
)

__all__ = [
    "RULES",
    "Rule",
    "RuleRegistry",
    "active_registry",
    "aten",
    "call",
    "declared_result_metas",
    "register",
]
