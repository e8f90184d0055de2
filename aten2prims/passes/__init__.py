"""Graph passes: lowering to prims, dead code elimination."""

from .dce import eliminate_dead_code
from .lower import lower

__all__ = ["eliminate_dead_code", "lower"]
