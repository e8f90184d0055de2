"""Checks for ops whose results torch specifies only in part, registered with
`@statistical_check(op)` and used by the runner instead of value equality:

- random ops (rand, randn, randperm, native_dropout): our random stream is NumPy's, not torch's,
  so results are judged by what the op promises — dtype, shape, range, a permutation, the
  deterministic part of dropout given our own mask — and by sample statistics within
  `SIGMAS` standard errors of the distribution's (the harness runs with a fixed seed, so a
  verdict is reproducible);
- sorting ops whose order of equal elements is unspecified (sort with stable=False, topk): the
  values must equal torch's exactly (for topk with sorted=False, as a multiset), and our indices
  must point at those values — each index in range, distinct along the dim, and
  self.gather(indices) == values. Ties are the only freedom this allows: where the values are
  distinct the indices are determined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..frontends.torch_interop import to_numpy, to_torch
from ..ir.dtypes import DType
from ..schema.registry import aten_schema
from .compare import Comparison, compare
from .record import AtenCall

# Random and unstable-order ops: checked by a registered statistical check instead of value
# equality (the runner reads this table).
StatisticalCheck = Callable[[AtenCall, list[Any], list[Any]], Comparison]
STATISTICAL_CHECKS: dict[str, StatisticalCheck] = {}


def statistical_check(op: str) -> Callable[[StatisticalCheck], StatisticalCheck]:
    def decorate(check: StatisticalCheck) -> StatisticalCheck:
        STATISTICAL_CHECKS[op] = check
        return check

    return decorate


SIGMAS = 5.0


def _arguments(call: AtenCall) -> dict[str, Any]:
    """The call's arguments by schema name, defaults filled in (tensors as NumPy arrays)."""
    import torch

    schema = aten_schema(call.op)
    assert schema is not None
    bound = schema.bind(call.args, call.kwargs, op=call.op)
    return {
        name: to_numpy(value) if isinstance(value, torch.Tensor) else value
        for name, value in zip(schema.argument_names, bound)
    }


def _ok(message: str) -> Comparison:
    return Comparison(True, "", message)


def _fail(message: str, reason: str = "value") -> Comparison:
    return Comparison(False, reason, message)


def _same_layout(ours: Any, theirs: Any, what: str) -> Comparison:
    if not isinstance(ours, np.ndarray) or ours.dtype != theirs.dtype:
        return _fail(
            f"{what}: dtype {getattr(ours, 'dtype', type(ours))} vs torch's {theirs.dtype}", "dtype"
        )
    if ours.shape != theirs.shape:
        return _fail(f"{what}: shape {list(ours.shape)} vs torch's {list(theirs.shape)}", "shape")
    return _ok(f"{what}: dtype and shape equal")


def _real_parts(array: np.ndarray) -> np.ndarray:
    """The samples as float64: a complex tensor's real and imaginary parts side by side."""
    if np.iscomplexobj(array):
        return np.concatenate([array.real.reshape(-1), array.imag.reshape(-1)]).astype(np.float64)
    return array.reshape(-1).astype(np.float64)


def _moments_agree(
    samples: np.ndarray, mean: float, variance: float, fourth_central: float, what: str
) -> Comparison:
    """The sample mean and variance within SIGMAS standard errors of the distribution's."""
    n = samples.size
    if n == 0:
        return _ok(f"{what}: no samples")
    if not np.isfinite(samples).all():
        return _fail(f"{what}: non-finite samples")
    sample_mean = float(samples.mean())
    mean_error = math.sqrt(variance / n)
    if abs(sample_mean - mean) > SIGMAS * mean_error:
        return _fail(
            f"{what}: mean {sample_mean:.4g} of {n} samples, expected {mean:.4g} ± {SIGMAS * mean_error:.3g}"
        )
    if n >= 2:
        sample_variance = float(samples.var(ddof=1))
        variance_error = math.sqrt(
            max(fourth_central - variance**2, 0.0) / n + 2 * variance**2 / (n - 1) / n
        )
        if abs(sample_variance - variance) > SIGMAS * variance_error:
            return _fail(
                f"{what}: variance {sample_variance:.4g} of {n} samples, expected {variance:.4g} ± "
                f"{SIGMAS * variance_error:.3g}"
            )
    return _ok(f"{what}: mean and variance within {SIGMAS:g} standard errors")


# -- random ops -----------------------------------------------------------------------------------


@statistical_check("aten.rand.default")
def check_rand(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    layout = _same_layout(ours[0], theirs[0], "rand")
    if not layout:
        return layout
    samples = _real_parts(ours[0])
    if samples.size and not (samples.min() >= 0.0 and samples.max() < 1.0):
        return _fail(f"rand: samples span [{samples.min()}, {samples.max()}], outside [0, 1)")
    return _moments_agree(samples, 0.5, 1 / 12, 1 / 80, "rand")


@statistical_check("aten.randn.default")
def check_randn(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    layout = _same_layout(ours[0], theirs[0], "randn")
    if not layout:
        return layout
    # A complex standard normal has independent parts of variance 1/2.
    variance = 0.5 if np.iscomplexobj(ours[0]) else 1.0
    return _moments_agree(_real_parts(ours[0]), 0.0, variance, 3 * variance**2, "randn")


@statistical_check("aten.randperm.default")
def check_randperm(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    layout = _same_layout(ours[0], theirs[0], "randperm")
    if not layout:
        return layout
    n = _arguments(call)["n"]
    if not np.array_equal(np.sort(ours[0].astype(np.float64)), np.arange(n, dtype=np.float64)):
        return _fail(f"randperm: the result is not a permutation of 0..{n - 1}")
    return _ok(f"randperm: a permutation of 0..{n - 1}")


@statistical_check("aten.native_dropout.default")
def check_native_dropout(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    for index, what in enumerate(("output", "mask")):
        layout = _same_layout(ours[index], theirs[index], f"native_dropout {what}")
        if not layout:
            return layout
    arguments = _arguments(call)
    x, p, train = arguments["input"], arguments["p"], arguments["train"]
    output, mask = ours
    if x.size == 0:
        return _ok("native_dropout: empty input")
    if train is False:  # deterministic: the input and an all-true mask
        verdict = compare(output, theirs[0], what="native_dropout output")
        return verdict if not verdict else compare(mask, theirs[1], what="native_dropout mask")
    # Given our mask, the output is determined: torch's own input.mul(mask).mul_(scale).
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    expected = to_numpy(to_torch(x).mul(to_torch(mask)).mul_(scale))
    verdict = compare(output, expected, what="native_dropout output (given our mask)")
    if not verdict:
        return verdict
    kept, n = int(mask.sum()), mask.size
    spread = SIGMAS * math.sqrt(n * p * (1 - p))
    if abs(kept - n * (1 - p)) > spread:
        return _fail(
            f"native_dropout: kept {kept} of {n} elements, expected {n * (1 - p):.4g} ± {spread:.3g}"
        )
    return _ok(f"native_dropout: output consistent with the mask; kept {kept} of {n}")


# -- sorting: the order of ties is unspecified -------------------------------------------------------


def _as_ordered(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float32) if DType.from_numpy(array.dtype).is_low_precision else array


def _same_elements(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise a == b, NaN equal to NaN."""
    equal = a == b
    if DType.from_numpy(a.dtype).is_floating:
        equal |= np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return equal


def _indices_point_at_values(
    source: np.ndarray, values: np.ndarray, indices: np.ndarray, dim: int, what: str
) -> Comparison:
    """indices are in range and distinct along dim, and source.gather(dim, indices) == values."""
    if source.ndim == 0:
        if indices.size and indices.reshape(-1)[0] != 0:
            return _fail(f"{what}: index {indices} into a 0-dim tensor")
        return _ok(f"{what}: indices consistent")
    size = source.shape[dim]
    if indices.size and (indices.min() < 0 or indices.max() >= size):
        return _fail(f"{what}: an index lies outside [0, {size})")
    ordered = np.sort(indices, axis=dim)
    if indices.shape[dim] > 1 and (np.diff(ordered, axis=dim) == 0).any():
        return _fail(f"{what}: an index repeats along dimension {dim}")
    pointed = np.take_along_axis(source, indices, dim)
    wrong = ~_same_elements(pointed, values)
    if wrong.any():
        first = [int(i) for i in np.argwhere(wrong)[0]]
        return _fail(
            f"{what}: at {first} the index points at {pointed[tuple(first)]!r}, the value is {values[tuple(first)]!r}"
        )
    return _ok(f"{what}: indices point at the values (ties may be ordered differently from torch)")


@statistical_check("aten.sort.default")
def check_sort(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    verdict = compare(ours[0], theirs[0], what="sort values")
    if not verdict:
        return verdict
    layout = _same_layout(ours[1], theirs[1], "sort indices")
    if not layout:
        return layout
    arguments = _arguments(call)
    source = arguments["self"]
    dim = arguments["dim"] % max(source.ndim, 1)
    return _indices_point_at_values(source, ours[0], ours[1], dim, "sort indices")


@statistical_check("aten.topk.default")
def check_topk(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    arguments = _arguments(call)
    source = arguments["self"]
    dim = arguments["dim"] % max(source.ndim, 1)
    our_values, their_values = ours[0], theirs[0]
    if not arguments["sorted"] and source.ndim:
        # Unsorted results: compare the selected values as multisets.
        their_values = np.take_along_axis(
            their_values, np.argsort(_as_ordered(their_values), axis=dim, kind="stable"), dim
        )
        our_values = np.take_along_axis(
            our_values, np.argsort(_as_ordered(our_values), axis=dim, kind="stable"), dim
        )
    verdict = compare(our_values, their_values, what="topk values")
    if not verdict:
        return verdict
    layout = _same_layout(ours[1], theirs[1], "topk indices")
    if not layout:
        return layout
    return _indices_point_at_values(source, ours[0], ours[1], dim, "topk indices")
