"""Plans built with some of the plan builder's switches changed (`aten2prims.executor.plan`'s
module-level settings: FUSE_ATTENTION, MERGE_SIBLING_PRODUCTS, FOLD_SCALES, FOLD_RECIPROCALS,
FUSION_RULES, ...). Plans are cached per graph: build a new graph inside."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from aten2prims.executor import plan as plan_module


@contextlib.contextmanager
def plan_switches(**settings: Any) -> Iterator[None]:
    """Inside, the plan builder's settings named by `settings` have those values; restored on
    leaving. A name the builder does not have is an error (a renamed switch would otherwise
    leave a test comparing a plan with itself)."""
    for name in settings:
        if not hasattr(plan_module, name):
            raise AttributeError(f"aten2prims.executor.plan has no setting {name}")
    saved = {name: getattr(plan_module, name) for name in settings}
    for name, value in settings.items():
        setattr(plan_module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(plan_module, name, value)
