"""The tolerance rule's edges where torch itself is wrong against the float64 reference."""

from __future__ import annotations

import numpy as np

from aten2prims.testing.compare import compare

F16 = np.float16


def test_an_element_equal_to_an_infinite_reference_passes_where_torch_gives_nan() -> None:
    ours = np.array([1.0, np.inf], F16)
    torch_result = np.array([1.0, np.nan], F16)
    assert compare(ours, torch_result, reference=np.array([1.0, np.inf]))


def test_anything_else_against_an_infinite_reference_fails_where_torch_gives_nan() -> None:
    torch_result = np.array([1.0, np.nan], F16)
    reference = np.array([1.0, np.inf])
    for wrong in (65504.0, -np.inf, 0.0):  # (NaN matches torch: the plain rule passes it)
        verdict = compare(np.array([1.0, wrong], F16), torch_result, reference=reference)
        assert not verdict, wrong
        assert verdict.mismatches == 1


def test_without_a_reference_inf_against_torch_nan_fails() -> None:
    assert not compare(np.array([np.inf], F16), np.array([np.nan], F16))
