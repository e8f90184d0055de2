"""The NumPy executor: plan once per graph (`plan.py`), run kernels in order (`run.py`)."""

from .run import execute, plan_for

__all__ = ["execute", "plan_for"]
