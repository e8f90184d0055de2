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


# -- element by element: no tensor-wide noise floor ----------------------------------------------


def test_an_element_is_held_to_torch_s_error_on_that_element_only() -> None:
    # torch errs by 0.5 on the first element: that excuses an error of up to 4 x 0.5 there, and
    # nothing at the second element, where torch is exact.
    reference = np.array([100.0, 0.01])
    torch_result = np.array([100.5, 0.01], np.float32)
    assert compare(np.array([101.9, 0.01], np.float32), torch_result, reference=reference)
    verdict = compare(np.array([100.0, 0.0], np.float32), torch_result, reference=reference)
    assert not verdict and verdict.mismatches == 1
    assert not compare(np.array([102.6, 0.01], np.float32), torch_result, reference=reference)


def test_nan_where_torch_has_a_number_fails_and_the_reverse() -> None:
    reference = np.array([1.0, 2.0])
    assert not compare(np.array([1.0, np.nan], F16), np.array([1.0, 2.0], F16), reference=reference)
    assert not compare(np.array([1.0, 2.0], F16), np.array([1.0, np.nan], F16))
    # ... except where ours is the reference (rounded to the result dtype)
    assert compare(np.array([1.0, 2.0], F16), np.array([1.0, np.nan], F16), reference=reference)
    assert not compare(np.array([1.0, 2.5], F16), np.array([1.0, np.nan], F16), reference=reference)


def test_a_number_where_torch_overflows_must_be_the_rounded_reference() -> None:
    reference = np.array([70000.0])  # beyond float16: torch's inf is right
    assert compare(np.array([np.inf], F16), np.array([np.inf], F16), reference=reference)
    assert not compare(np.array([0.0], F16), np.array([np.inf], F16), reference=reference)


def test_signed_zeros_are_compared_where_the_sign_is_defined() -> None:
    assert not compare(np.array([0.0], np.float32), np.array([-0.0], np.float32))
    assert compare(np.array([-0.0], np.float32), np.array([-0.0], np.float32))
    # torch's -0.0 where the reference gives +0.0 (an accumulation's zero): the sign is not
    # defined, either passes
    reference = np.array([0.0])
    assert compare(np.array([0.0], np.float32), np.array([-0.0], np.float32), reference=reference)
    reference = np.array([-0.0])
    assert not compare(
        np.array([0.0], np.float32), np.array([-0.0], np.float32), reference=reference
    )
    # torch's complex kernels leave the sign of a zero part undefined
    assert compare(np.array([complex(1, 0.0)]), np.array([complex(1, -0.0)]))


def test_a_sum_of_products_may_err_by_its_terms_magnitude() -> None:
    # An element 1.4 summed from terms of total magnitude 370: another summation order may err
    # by a few float32 epsilons of 370 (4.4e-5), though torch happens to be exact there.
    reference = np.array([1.4191501184355317])
    torch_result = np.array([1.4191501], np.float32)
    ours = np.array([1.4191889], np.float32)
    assert not compare(ours, torch_result, reference=reference)
    assert compare(ours, torch_result, reference=reference, sum_of_magnitudes=np.array([370.0]))
    assert not compare(
        np.array([1.4199], np.float32),
        torch_result,
        reference=reference,
        sum_of_magnitudes=np.array([370.0]),
    )


def test_the_float64_reference_promotes_an_integer_input_the_op_makes_floating() -> None:
    # irfft of this int32 column: torch's float32 transform gives 1.7839297 at position 1, the
    # exact value is 1.7839166 (the float32 one nearest it ours). A reference left with the
    # int32 input would be torch's float32 result itself, and ours would fail against it.
    # why: the reference is torch's to compute; only this test needs it here
    import torch

    from aten2prims.testing.record import AtenCall
    from aten2prims.testing.runner import float64_reference

    column = torch.tensor([210, 612, 545, 458, 486, 462], dtype=torch.int32)
    call = AtenCall("aten.fft_irfft.default", (column, 10, -1, "ortho"), {})
    (reference,) = float64_reference(call) or [None]
    assert reference is not None and reference.dtype == np.float64
    exact = torch.fft.irfft(column.to(torch.float64), n=10, norm="ortho").numpy()
    np.testing.assert_array_equal(reference, exact)
    assert torch.get_default_dtype() == torch.float32  # restored
    ours = exact.astype(np.float32)
    torch_result = torch.fft.irfft(column, n=10, norm="ortho").numpy()
    assert compare(ours, torch_result, reference=reference)
    # ours off by more than 4x torch's own error (1.3e-5) plus the tolerance there still fails
    wrong = ours.copy()
    wrong[1] += np.float32(1e-4)
    assert not compare(wrong, torch_result, reference=reference)
