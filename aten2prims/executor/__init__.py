"""The NumPy executor: plan once per graph, run kernels in order (DESIGN §7)."""

from . import contraction, gather  # noqa: F401 - register the contraction and gather fusions
from .run import execute, plan_for

__all__ = ["execute", "plan_for"]
