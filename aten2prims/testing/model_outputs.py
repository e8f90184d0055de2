"""Judging a whole model's outputs against torch's, with torch's float64 run of the same graph as
the reference (torch-free: arrays in, verdicts out).

Through many layers, rounding differences propagate: a deep model's float32 logits can differ
from torch eager's by more than assert_close allows while both are equally far from the float64
result (a ResNet-50: ours 4e-5 from torch, each ~3.5e-5 from float64), and an element of ours
can be farther from float64 than torch's same element while the output as a whole is as
accurate (a bfloat16 block: 8.3525 against torch's 8.3428, float64 8.3435). So an output passes
when it passes the tolerance rule against torch's result and the reference (`compare`, element
by element), or else when its largest error against the float64 run is within
`MODEL_ERROR_FACTOR` of torch's own largest error. `aten2prims check FILE` and
`tests/test_models.py` both judge models this way.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .compare import Comparison, compare

# How much larger than torch's own largest error against float64 ours may be, per output.
MODEL_ERROR_FACTOR = 2.0


@attrs.frozen
class OutputVerdict:
    """One model output's verdict: the tolerance rule's comparison, and the largest errors of
    ours and of torch's result against the float64 reference (None without one)."""

    comparison: Comparison
    our_error: float | None = None
    torch_error: float | None = None
    ok: bool = attrs.field(default=attrs.Factory(lambda self: self.comparison.ok, takes_self=True))

    def __bool__(self) -> bool:
        return self.ok

    @property
    def message(self) -> str:
        if self.our_error is None or self.torch_error is None:
            return self.comparison.message
        errors = (
            f"against float64 ours errs up to {self.our_error:.3g}, torch {self.torch_error:.3g}"
        )
        if self.comparison.ok:
            return f"{self.comparison.message}; {errors}"
        within = "within" if self.ok else "beyond"
        return f"{self.comparison.message}; {errors}: {within} {MODEL_ERROR_FACTOR:g}x torch's own"


def judge_output(
    ours: Any, theirs: Any, reference: Any = None, *, what: str, against: str = "torch"
) -> OutputVerdict:
    """Our output against torch's (`theirs`), with torch's float64 result as `reference` when
    there is one (None: the tolerance rule alone)."""
    floating = isinstance(ours, np.ndarray) and (
        np.issubdtype(ours.dtype, np.inexact) or ours.dtype.name == "bfloat16"
    )
    if reference is None or not floating or np.shape(reference) != np.shape(ours):
        return OutputVerdict(compare(ours, theirs, what=what, against=against))
    comparison = compare(ours, theirs, reference=reference, what=what, against=against)
    wide = np.complex128 if np.iscomplexobj(ours) else np.float64
    ref = np.asarray(reference).astype(wide)
    our_error = _largest_error(np.asarray(ours).astype(wide), ref)
    torch_error = _largest_error(np.asarray(theirs).astype(wide), ref)
    ok = comparison.ok or (
        comparison.reason == "value" and our_error <= MODEL_ERROR_FACTOR * torch_error
    )
    return OutputVerdict(comparison, our_error, torch_error, ok)


def _largest_error(values: np.ndarray, reference: np.ndarray) -> float:
    """The largest |values - reference| where both are finite (NaN and infinities are the
    tolerance rule's business)."""
    with np.errstate(invalid="ignore", over="ignore"):
        difference = np.abs(values - reference)
    return float(np.max(difference[np.isfinite(difference)], initial=0.0))
