"""The NumPy executor: plan once per graph, run kernels in order (DESIGN §7)."""

from . import contraction  # noqa: F401 - registers the contraction fusion
from .run import execute, plan_for

__all__ = ["execute", "plan_for"]
