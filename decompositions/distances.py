"""Pairwise distances between rows: `_cdist_forward` (two sets of rows) and `_pdist_forward` (the
pairs of one set), as torch's CPU distance kernels compute them.

p = 2 between many rows is one matrix product (`einsum`, a BLAS contraction in the executor), as
torch computes it; otherwise every difference is formed and its p-norm taken. `_pdist_forward`
lists its pairs with `nonzero` of the static upper-triangle mask.
"""

from __future__ import annotations

import math

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import Value
from aten2prims.promotion import broadcast_shapes, broadcast_to

from .common import along, full, index_ramp, keep_dims, slice_in_dim
from .linear import einsum
from .registry import register


def _p_norm(difference: Value, p: float, dim: int, *, max_skips_nan: bool = False) -> Value:
    """‖difference‖_p along dim as torch's distance kernels compute it: p = 0 sums min(ceil|d|, 1)
    (the count of nonzero entries; NaN propagates), 1, 2 and inf are the usual norms, other p are
    (Σ|d|^p)^(1/p). cdist's inf-norm keeps a running max from 0 that a NaN never replaces
    (`max_skips_nan`); pdist's propagates NaN."""
    if p == 2:
        return prims.sqrt(prims.sum(prims.mul(difference, difference), [dim]))
    magnitude = prims.abs(difference)
    if p == 0:
        return prims.sum(
            prims.minimum(prims.ceil(magnitude), full([], 1.0, magnitude.dtype)), [dim]
        )
    if p == 1:
        return prims.sum(magnitude, [dim])
    if math.isinf(p):
        if max_skips_nan:
            magnitude = prims.where(prims.eq(magnitude, magnitude), magnitude, 0.0)
        return prims.amax(magnitude, [dim])
    return prims.pow(prims.sum(prims.pow(magnitude, float(p)), [dim]), 1.0 / p)


def _check_distance_operand(op: str, name: str, x: Value) -> None:
    if x.dtype not in (DType.float32, DType.float64):
        raise DTypeError(
            f"{op}: expected {name} of dtype f32 or f64 (torch's CPU kernels), got {x.dtype.short}"
        )


def _check_p(op: str, p: float) -> None:
    if not p >= 0:
        raise ShapeError(f"{op}: expected a non-negative p, got {p}")


# Above this many rows on either side, compute_mode None/0 takes the matrix-product path for p = 2.
_MM_THRESHOLD = 25


@register("aten._cdist_forward.default")
def _cdist_forward(x1: Value, x2: Value, p: float, compute_mode: int | None) -> Value:
    """Distances between the rows of x1 [..., P, M] and x2 [..., R, M] (batch dims broadcast).
    For p = 2 torch uses ‖a‖² − 2a·b + ‖b‖² as one matrix product when compute_mode is 1, or
    None/0 with more than 25 rows on a side; so do we, with its clamp at 0 before the sqrt.
    Otherwise every difference is formed (a [..., P, R, M] intermediate)."""
    op = "aten._cdist_forward"
    for name, x in (("x1", x1), ("x2", x2)):
        _check_distance_operand(op, name, x)
        if x.ndim < 2:
            raise ShapeError(
                f"{op}: expected {name} with at least 2 dims, got shape {list(x.shape)}"
            )
    if x1.dtype is not x2.dtype or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"{op}: x1 {x1.dtype.short}{list(x1.shape)} and x2 {x2.dtype.short}{list(x2.shape)} must share dtype and row size"
        )
    _check_p(op, p)
    if compute_mode not in (None, 0, 1, 2):
        raise ShapeError(f"{op}: compute_mode must be None, 0, 1 or 2, got {compute_mode}")
    batch = tuple(broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    (rows1, width), rows2 = x1.shape[-2:], x2.shape[-2]
    a, b = broadcast_to(x1, (*batch, rows1, width)), broadcast_to(x2, (*batch, rows2, width))
    shape = [*batch, rows1, rows2]
    if rows1 == 0 or rows2 == 0 or width == 0:
        return full(shape, 0.0, x1.dtype)
    if p == 2 and (
        compute_mode == 1 or (compute_mode in (None, 0) and max(rows1, rows2) > _MM_THRESHOLD)
    ):
        return _euclidean_by_product(a, b)
    k = len(batch)
    spread = [*batch, rows1, rows2, width]
    difference = prims.sub(
        prims.broadcast_in_dim(a, spread, [*range(k), k, k + 2]),
        prims.broadcast_in_dim(b, spread, [*range(k), k + 1, k + 2]),
    )
    return _p_norm(difference, p, k + 2, max_skips_nan=True)


def _euclidean_by_product(a: Value, b: Value) -> Value:
    """torch's `_euclidean_dist`: [−2a, ‖a‖², 1] · [b, 1, ‖b‖²] over the row dim, clamped at 0,
    square-rooted."""
    last = a.ndim - 1

    def squared_norm(x: Value) -> Value:
        return keep_dims(prims.sum(prims.mul(x, x), [last]), [last], x.ndim)

    a_norm, b_norm = squared_norm(a), squared_norm(b)
    left = prims.cat([prims.mul(a, -2.0), a_norm, full(a_norm.shape, 1.0, a.dtype)], last)
    right = prims.cat([b, full(b_norm.shape, 1.0, b.dtype), b_norm], last)
    batch = "".join(chr(ord("a") + i) for i in range(last - 1))
    squared = einsum(f"{batch}PK,{batch}RK->{batch}PR", left, right)
    return prims.sqrt(prims.maximum(squared, full([], 0.0, squared.dtype)))


@register("aten._pdist_forward.default")
def _pdist_forward(self: Value, p: float = 2.0) -> Value:
    """The distances between rows i < j of self [N, M], in row-major order of (i, j): the pairs
    are the coordinates of the upper-triangle mask (`nonzero` with its static count)."""
    op = "aten._pdist_forward"
    _check_distance_operand(op, "self", self)
    if self.ndim != 2:
        raise ShapeError(f"{op}: expected a 2-D input, got shape {list(self.shape)}")
    _check_p(op, p)
    rows, width = self.shape
    pairs = rows * (rows - 1) // 2
    if pairs == 0 or width == 0:
        return full([pairs], 0.0, self.dtype)
    square = [rows, rows]
    upper = prims.gt(index_ramp(square, 1), index_ramp(square, 0))
    coordinates = prims.nonzero(upper, pairs)  # [pairs, 2]: (i, j)
    shape = [pairs, width]

    def rows_at(column: int) -> Value:
        index = prims.squeeze(slice_in_dim(coordinates, column, column + 1, 1, 1), [1])
        return prims.gather_nd(self, [along(index, shape, [0]), index_ramp(shape, 1)])

    return _p_norm(prims.sub(rows_at(0), rows_at(1)), p, 1)
