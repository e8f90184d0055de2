"""The contraction fusion: `sum(mul(A, B), dims)` whose product is used by nothing else runs as
BLAS-backed `np.matmul` calls, so the joint product (M·K·N for a matrix product, N·C_out·C_in·K·H·W
for a convolution) is never materialized (DESIGN §4, §7).

The pattern is the one every contraction lowers to, whoever wrote the graph:

    A = broadcast_in_dim(a, joint, dims_a)      # optional, fused when only the mul reads it
    B = broadcast_in_dim(b, joint, dims_b)      # optional, likewise
    P = mul(A, B)                               # read only by the sum
    S = sum(P, reduced)                         # the anchor

Every joint dimension becomes a label. An operand carries the labels of the dims it really
indexes: a broadcast dimension (new, stretched from size 1, or a zero stride of an array that is
already a broadcast view) does not index it. Labels then fall into batch (both operands, kept),
free (one operand, kept), contracted (both, reduced) and lone-reduced (one operand, reduced:
summed out of that operand first). The kept labels are split, in output order, into
`batch-like | M | N` with M from one operand and N from the other, so `np.matmul` writes the
output directly in its final layout.

Operands are merged into `[..., M, K]` / `[..., K, N]` matrices. When that merge cannot be a view
(a convolution's overlapping input windows, whose merge is im2col), the copy is made chunk by
chunk into one reused buffer of about `COPY_CHUNK_BYTES`, which stays in cache while BLAS reads
it: chunks split batch-like labels (each chunk writes its slice of the output), then the copied
operand's free labels (output rows), then contracted labels (chunks accumulate).

An epilogue may follow the sum in the same group: reshapes of the result and in-place add/mul
with a same-shape or 0-dim tensor or a number (a bias, a scale). It runs on each finished output
chunk while that is in cache, and the group returns one array of its own, never a view.

Not fused (the nodes run as they are): float16/bfloat16 products (prims.mul rounds each product
to the narrow type, which BLAS cannot reproduce; decompositions convert to float32 first), sums
with an `output_dtype` other than the product's, sums that reduce nothing, and products with
number or 0-dim operands.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from prims.common import number_as
from prims.registry import lookup

from ..ir.dtypes import DType
from ..ir.values import Value
from .fusion import FusedGroup, FusionContext, register_fusion

# Above this size an operand copy (im2col) is made in chunks into one reused buffer, sized to
# stay in a core's L2 cache while BLAS reads it back.
COPY_CHUNK_BYTES = 2 << 20
# With an epilogue (bias, scaling), the output is made in chunks of about this size, each
# finished by the epilogue while it is still in cache.
OUTPUT_CHUNK_BYTES = 1 << 20
# Chunks along a free axis keep at least this many output columns, so each matrix product stays
# large enough for BLAS to run at full speed.
MIN_CHUNK_COLUMNS = 512
# An output order whose best in-place matrix product is this many times smaller than the best
# product in another order is computed in that order and transposed (one output copy).
REORDER_GAIN = 16
# A transposing copy loops in Python over the destination's innermost axes of at most
# SHORT_AXIS entries, up to SHORT_AXIS_COPIES copies (see _copy).
SHORT_AXIS = 8
SHORT_AXIS_COPIES = 64
# ... for copies of at least this many elements (below, the Python loop costs more).
SHORT_AXIS_MIN_ELEMENTS = 1 << 14
# Matrix products with at least this many rows and columns run at about BLAS's full speed: a
# reordered output prefers keeping its layout to making its products larger than that.
FULL_SPEED_SIDE = 128
# A float32 product X[M, K] @ Y[K, N] of row-major X and K-contiguous Y (a linear layer's
# transposed weight) with at most SWAP_ROWS rows and at least twice as many columns runs as
# (Y^T @ X^T)^T: OpenBLAS's sgemm is up to 2x faster with the long side first (measured, 8x256
# @ 256x1024: 85-110 us against 165-230 us; from 256 rows on it gains nothing).
SWAP_ROWS = 128

# Applied to each finished part `out[index]` of a contraction's output (see ContractionKernel).
Epilogue = Callable[[tuple[slice, ...]], None]


# -- the runtime contraction -------------------------------------------------------------------


def contract(
    a: np.ndarray,
    a_labels: Sequence[int],
    b: np.ndarray,
    b_labels: Sequence[int],
    out_labels: Sequence[int],
    sizes: Sequence[int],
    out: np.ndarray | None = None,
    epilogue: Epilogue | None = None,
) -> np.ndarray:
    """sum over the labels not in `out_labels` of a * b, as einsum would (with numpy's matmul
    for the products). Each operand dim carries a label (an index into `sizes`, distinct within
    the operand); `out_labels` may name labels neither operand has (the result is broadcast
    along them) and leaving out such a label multiplies the result by its size. The result, of
    a's dtype, is written into `out` (C-contiguous, of the output's shape) or a fresh array;
    `epilogue(index)` is then applied to every part `out[index]` of it, once."""
    dtype = a.dtype
    out_shape = tuple(sizes[label] for label in out_labels)
    if out is None:
        out = np.empty(out_shape, dtype)
    key = (a.shape, a.strides, tuple(a_labels), b.shape, b.strides, tuple(b_labels), tuple(out_labels), tuple(sizes),
           dtype.str, out.strides, epilogue is not None, COPY_CHUNK_BYTES, OUTPUT_CHUNK_BYTES, MIN_CHUNK_COLUMNS,
           REORDER_GAIN, FULL_SPEED_SIDE, SWAP_ROWS)  # fmt: skip
    recipe = _RECIPES.get(key, _UNKNOWN)
    if recipe is _UNKNOWN:
        if len(_RECIPES) >= _RECIPE_LIMIT:
            _RECIPES.clear()
        recipe = _RECIPES[key] = _direct_recipe(
            a, a_labels, b, b_labels, out_labels, sizes, out, epilogue is not None
        )
    if recipe is not None:
        recipe.run(a, b, out, epilogue)
        return out
    a, a_labels = _drop_broadcast_dims(a, a_labels)
    b, b_labels = _drop_broadcast_dims(b, b_labels)
    reduced = set(range(len(sizes))) - set(out_labels)
    if math.prod(out_shape) == 0 or any(sizes[label] == 0 for label in reduced):
        out.fill(0)
        if epilogue is not None:
            epilogue(())
        return out
    multiplicity = math.prod(
        sizes[label] for label in reduced if label not in a_labels and label not in b_labels
    )
    a, a_labels = _sum_lone_labels(a, a_labels, b_labels, out_labels)
    b, b_labels = _sum_lone_labels(b, b_labels, a_labels, out_labels)
    present = [label for label in out_labels if label in a_labels or label in b_labels]
    scaled = multiplicity != 1 and dtype != np.bool_  # n copies of x sum to n·x; for bool (or) to x
    if len(present) == len(out_labels) and not scaled:
        _matmul_contraction(a, a_labels, b, b_labels, present, sizes, out, epilogue)
        return out
    if len(present) == len(out_labels):
        _matmul_contraction(a, a_labels, b, b_labels, present, sizes, out)
    else:  # labels neither operand has: broadcast along them
        partial = np.empty(tuple(sizes[label] for label in present), dtype)
        _matmul_contraction(a, a_labels, b, b_labels, present, sizes, partial)
        expanded = [sizes[label] if label in present else 1 for label in out_labels]
        np.copyto(out, partial.reshape(expanded))
    if scaled:
        with np.errstate(all="ignore"):
            np.multiply(out, np.asarray(multiplicity).astype(dtype), out=out)
    if epilogue is not None:
        epilogue(())
    return out


# -- the memoized direct case ----------------------------------------------------------------------
# Most contractions (every small one, and large ones whose operands merge without an oversized
# copy) end in one `np.matmul` on views of the operands. Deciding that takes longer than running
# it for small matrices, so the decisions are remembered per operand layout (shapes, strides,
# labels, dtype and the tuning constants), and a repeated call replays the same NumPy operations.

_UNKNOWN = object()
_RECIPE_LIMIT = 4096
_RECIPES: dict[tuple[Any, ...], _DirectRecipe | None] = {}


@attrs.frozen
class _DirectRecipe:
    """out = x @ y in one np.matmul: each operand indexed (its broadcast dims dropped), then
    transposed and reshaped into its matrix form, as `contract` would do it step by step. A
    product computed in another order of the output's labels (`reorder`) goes into a buffer of
    that order, then is copied into the output."""

    a_index: tuple[Any, ...] | None
    b_index: tuple[Any, ...] | None
    x_is_a: bool
    x_permutation: tuple[int, ...]
    x_matrix: tuple[int, ...]
    y_permutation: tuple[int, ...]
    y_matrix: tuple[int, ...]
    out_matrix: tuple[int, ...]
    swapped: bool = False  # computed as (y^T @ x^T)^T (SWAP_ROWS)
    reorder: _Reorder | None = None

    def run(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, epilogue: Epilogue | None) -> None:
        if self.a_index is not None:
            a = a[self.a_index]
        if self.b_index is not None:
            b = b[self.b_index]
        x, y = (a, b) if self.x_is_a else (b, a)
        x = x.transpose(self.x_permutation).reshape(self.x_matrix)
        y = y.transpose(self.y_permutation).reshape(self.y_matrix)
        target = out if self.reorder is None else np.empty(self.reorder.ordered_shape, out.dtype)
        if self.swapped:
            transposed = np.matmul(y.swapaxes(-1, -2), x.swapaxes(-1, -2))
            np.copyto(target.reshape(self.out_matrix), transposed.swapaxes(-1, -2))
        else:
            np.matmul(x, y, out=target.reshape(self.out_matrix))
        if self.reorder is not None:
            _copy(out.reshape(self.reorder.present_shape), target.transpose(self.reorder.to_out))
        if epilogue is not None:
            epilogue(())


@attrs.frozen
class _Reorder:
    """A product made in the label order of `ordered_shape`, then transposed by `to_out` into the
    output seen with its present labels only (`present_shape`)."""

    ordered_shape: tuple[int, ...]
    present_shape: tuple[int, ...]
    to_out: tuple[int, ...]


def _direct_recipe(
    a: np.ndarray,
    a_labels: Sequence[int],
    b: np.ndarray,
    b_labels: Sequence[int],
    out_labels: Sequence[int],
    sizes: Sequence[int],
    out: np.ndarray,
    with_epilogue: bool,
) -> _DirectRecipe | None:
    """The recipe of `contract` when it is one matrix product; None when it is not (empty
    sizes, lone labels, scaling, output labels broadcast to more than one element, chunking)."""
    a_index = _broadcast_index(a)
    b_index = _broadcast_index(b)
    a, a_labels = _drop_broadcast_dims(a, a_labels)
    b, b_labels = _drop_broadcast_dims(b, b_labels)
    reduced = set(range(len(sizes))) - set(out_labels)
    if math.prod(out.shape) == 0 or any(sizes[label] == 0 for label in reduced):
        return None
    for labels, other in ((a_labels, b_labels), (b_labels, a_labels)):
        if any(label not in other and label not in out_labels for label in labels):
            return None  # a lone label: summed out first
    if (
        math.prod(
            sizes[label] for label in reduced if label not in a_labels and label not in b_labels
        )
        != 1
    ):
        return None  # the result is scaled (bool too: kept on the general path)
    present = [label for label in out_labels if label in a_labels or label in b_labels]
    if any(sizes[label] != 1 for label in out_labels if label not in present):
        return None  # the result is broadcast along a label neither operand has
    layout = _choose_layout(present, a_labels, b_labels, sizes)
    reorder = None
    if layout.order != tuple(present):
        reorder = _Reorder(tuple(sizes[label] for label in layout.order), tuple(sizes[label] for label in present),
                           tuple(layout.order.index(label) for label in present))  # fmt: skip
    x, x_labels, y, y_labels = (
        (a, a_labels, b, b_labels) if layout.x_is_a else (b, b_labels, a, a_labels)
    )
    contracted = [label for label in x_labels if label in y_labels and label not in present]
    k = _contracted_order(contracted, x, x_labels, y, y_labels)
    xv = _arrange(x, x_labels, layout.p, layout.m + k)
    yv = _arrange(y, y_labels, layout.p, k + layout.n)
    np_, nm, nk = len(layout.p), len(layout.m), len(k)
    x_merged = _merged_shape(xv.shape, np_, nm)
    y_merged = _merged_shape(yv.shape, np_, nk)
    x_copy = xv.size * xv.itemsize if _needs_copy(xv, x_merged) else 0
    y_copy = yv.size * yv.itemsize if _needs_copy(yv, y_merged) else 0
    # A reordered product's copy into the output is an epilogue (run on chunks while in cache).
    out_bytes = out.nbytes if with_epilogue or reorder is not None else 0
    if _chunk_levels(xv, yv, np_, nm, nk, x_copy, y_copy, out_bytes):
        return None
    swapped = _swap_pays(np.reshape(xv, x_merged), np.reshape(yv, y_merged))
    return _DirectRecipe(
        a_index,
        b_index,
        layout.x_is_a,
        _permutation(x_labels, layout.p, layout.m + k),
        x_merged,
        _permutation(y_labels, layout.p, k + layout.n),
        y_merged,
        # Output labels of size 1 that neither operand has hold no elements of their own.
        _merged_shape(tuple(sizes[label] for label in layout.order), np_, nm),
        swapped,
        reorder,
    )


def _swap_pays(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether x @ y runs faster as (y^T @ x^T)^T (SWAP_ROWS): float32, x's rows and y's columns
    contiguous, few rows and at least twice as many columns."""
    if x.dtype != np.float32 or x.ndim < 2 or y.ndim < 2:
        return False
    rows, columns = x.shape[-2], y.shape[-1]
    itemsize = x.itemsize
    return (
        1 < rows <= SWAP_ROWS
        and columns >= 2 * rows
        and x.strides[-1] == itemsize
        and y.strides[-2] == itemsize
        and y.strides[-1] >= y.shape[-2] * itemsize
    )


def _broadcast_index(x: np.ndarray) -> tuple[Any, ...] | None:
    """The index `_drop_broadcast_dims` applies to x (None: x is kept as it is)."""
    index = tuple(
        0 if size == 1 or (stride == 0 and size > 1) else slice(None)
        for size, stride in zip(x.shape, x.strides)
    )
    return index if any(item == 0 for item in index if type(item) is int) else None


def _permutation(
    labels: Sequence[int], p: tuple[int, ...], rest: tuple[int, ...]
) -> tuple[int, ...]:
    """The transpose `_arrange` applies (the labels x has, in the order p + rest)."""
    axis_of = {label: axis for axis, label in enumerate(labels)}
    return tuple(axis_of[label] for label in p + rest if label in axis_of)


def _drop_broadcast_dims(x: np.ndarray, labels: Sequence[int]) -> tuple[np.ndarray, list[int]]:
    """Size-1 dims and zero-stride dims index nothing: take element 0 and forget the label."""
    index: list[object] = []
    kept: list[int] = []
    for size, stride, label in zip(x.shape, x.strides, labels):
        if size == 1 or (stride == 0 and size > 1):
            index.append(0)
        else:
            index.append(slice(None))
            kept.append(label)
    if len(kept) == len(labels):
        return x, list(labels)
    return x[tuple(index)], kept


def _sum_lone_labels(
    x: np.ndarray, labels: list[int], other: Sequence[int], out_labels: Sequence[int]
) -> tuple[np.ndarray, list[int]]:
    """Labels only this operand has and the output drops are summed out of it first."""
    lone = [
        axis for axis, label in enumerate(labels) if label not in other and label not in out_labels
    ]
    if not lone:
        return x, labels
    with np.errstate(all="ignore"):
        summed = np.sum(x, axis=tuple(lone), dtype=x.dtype)  # bool: or; integers wrap
    return np.asarray(summed), [label for axis, label in enumerate(labels) if axis not in lone]


@attrs.frozen
class _Layout:
    """A matrix-product layout: output = X[P, M, K] @ Y[P, K, N] with P + M + N the output's
    label order (or `order`, then transposed into the output's)."""

    x_is_a: bool
    p: tuple[int, ...]
    m: tuple[int, ...]
    n: tuple[int, ...]
    score: int
    order: tuple[int, ...]


def _choose_layout(
    present: list[int], a_labels: list[int], b_labels: list[int], sizes: Sequence[int]
) -> _Layout:
    """The split of the output's labels into P | M | N with the largest matrices (M·N)
    (remembered: the general path asks at every call)."""
    return _layout_of(
        tuple(present),
        tuple(a_labels),
        tuple(b_labels),
        tuple(sizes),
        REORDER_GAIN,
        FULL_SPEED_SIDE,
    )


@functools.lru_cache(maxsize=_RECIPE_LIMIT)
def _layout_of(
    present: tuple[int, ...],
    a_labels: tuple[int, ...],
    b_labels: tuple[int, ...],
    sizes: tuple[int, ...],
    reorder_gain: int,
    full_speed_side: int,
) -> _Layout:
    best: _Layout | None = None
    for x_is_a in (True, False):
        x_labels, y_labels = (a_labels, b_labels) if x_is_a else (b_labels, a_labels)
        x_only = set(x_labels) - set(y_labels)
        y_only = set(y_labels) - set(x_labels)
        count = len(present)
        for i in range(count + 1):
            for j in range(i, count + 1):
                m, n = present[i:j], present[j:]
                if all(label in x_only for label in m) and all(label in y_only for label in n):
                    score = math.prod(sizes[label] for label in m) * math.prod(
                        sizes[label] for label in n
                    )
                    if best is None or score > best.score:
                        best = _Layout(x_is_a, present[:i], tuple(m), tuple(n), score, present)
    assert best is not None  # P = everything, M = N = () always qualifies
    # Another order of the output may allow much larger matrices (then one copy into the output,
    # chunk by chunk: _matmul_contraction). Such an order keeps a prefix of the output's labels
    # as P (its chunks are then slices of the output) and takes M from the operand owning the
    # first label after it (the order stays close to the output's). Among the orders giving
    # REORDER_GAIN times larger matrices than the output's own, the one with the largest
    # matrices up to FULL_SPEED_SIDE per side wins, then the one keeping the longest prefix.
    batch = [label for label in present if label in a_labels and label in b_labels]
    reordered: _Layout | None = None
    best_key = (0, -1)
    for i in range(len(present) + 1):
        rest = [label for label in present[i:] if label not in batch]
        if not rest:
            break
        x_is_a = rest[0] in a_labels
        x_labels = a_labels if x_is_a else b_labels
        m = tuple(label for label in rest if label in x_labels)
        n = tuple(label for label in rest if label not in x_labels)
        rows, columns = (
            math.prod(sizes[label] for label in m),
            math.prod(sizes[label] for label in n),
        )
        key = (min(rows, full_speed_side) * min(columns, full_speed_side), i)
        if rows * columns > reorder_gain * best.score and key > best_key:
            p = tuple(present[:i]) + tuple(label for label in batch if label not in present[:i])
            reordered, best_key = _Layout(x_is_a, p, m, n, rows * columns, p + m + n), key
    return reordered if reordered is not None else best


def _matmul_contraction(
    a: np.ndarray,
    a_labels: list[int],
    b: np.ndarray,
    b_labels: list[int],
    present: list[int],
    sizes: Sequence[int],
    out: np.ndarray,
    epilogue: Epilogue | None = None,
) -> None:
    """Into `out` (labels `present`, in order): the contraction of a and b by matrix products,
    then the epilogue."""
    layout = _choose_layout(present, a_labels, b_labels, sizes)
    x, x_labels, y, y_labels = (
        (a, a_labels, b, b_labels) if layout.x_is_a else (b, b_labels, a, a_labels)
    )
    contracted = [label for label in x_labels if label in y_labels and label not in present]
    k = _contracted_order(contracted, x, x_labels, y, y_labels)
    # Unmerged views: X as [P..., M..., K...], Y as [P..., K..., N...], missing P labels as size 1.
    xv = _arrange(x, x_labels, layout.p, layout.m + k)
    yv = _arrange(y, y_labels, layout.p, k + layout.n)
    if layout.order == tuple(present):
        _product(xv, yv, out, len(layout.p), len(layout.m), len(k), epilogue)
        return
    # Computed in `layout.order`, each finished chunk copied into `out` while it is in cache.
    ordered = np.empty(tuple(sizes[label] for label in layout.order), out.dtype)
    target = out.transpose([present.index(label) for label in layout.order])
    to_out = [layout.order.index(label) for label in present]

    def copy_chunk(index: tuple[slice, ...]) -> None:
        _copy(target[index], ordered[index])
        if epilogue is not None:
            full = index + (slice(None),) * (len(layout.order) - len(index))
            epilogue(tuple(full[axis] for axis in to_out))

    _product(xv, yv, ordered, len(layout.p), len(layout.m), len(k), copy_chunk)


def _copy(destination: np.ndarray, source: np.ndarray) -> None:
    """np.copyto(destination, source) for a transposing copy. NumPy runs its inner loop along the
    destination's innermost axis; when that axis is short (an interleaved phase of a transposed
    convolution has 2 entries) the per-loop overhead dominates, so such axes are looped over
    here and each copy runs along a longer axis (measured 6x faster for 2 entries)."""
    short: list[int] = []
    count = 1
    for axis in sorted(range(destination.ndim), key=lambda a: abs(destination.strides[a])):
        length = destination.shape[axis]
        if length == 1:
            continue
        if (
            length > SHORT_AXIS
            or count * length > SHORT_AXIS_COPIES
            or len(short) == destination.ndim - 1
        ):
            break
        short.append(axis)
        count *= length
    if not short or destination.size < SHORT_AXIS_MIN_ELEMENTS:
        np.copyto(destination, source)
        return
    for position in itertools.product(*(range(destination.shape[axis]) for axis in short)):
        index: list[Any] = [slice(None)] * destination.ndim
        for axis, i in zip(short, position):
            index[axis] = i
        np.copyto(destination[tuple(index)], source[tuple(index)])


def _contracted_order(
    contracted: list[int], x: np.ndarray, x_labels: list[int], y: np.ndarray, y_labels: list[int]
) -> tuple[int, ...]:
    """Contracted labels in the memory order (outermost first) of the larger operand, so that
    merging them is a view whenever that operand's layout allows it."""
    big, big_labels = (x, x_labels) if x.size >= y.size else (y, y_labels)
    strides = {label: abs(stride) for label, stride in zip(big_labels, big.strides)}
    return tuple(sorted(contracted, key=lambda label: -strides[label]))


def _arrange(
    x: np.ndarray, labels: list[int], p: tuple[int, ...], rest: tuple[int, ...]
) -> np.ndarray:
    """x's axes in the order p + rest; a p label x lacks becomes a size-1 axis (a view)."""
    axis_of = {label: axis for axis, label in enumerate(labels)}
    mine = [label for label in p + rest if label in axis_of]
    view = x.transpose([axis_of[label] for label in mine])
    return view.reshape([x.shape[axis_of[label]] if label in axis_of else 1 for label in p + rest])


def _product(
    xv: np.ndarray,
    yv: np.ndarray,
    out: np.ndarray,
    np_: int,
    nm: int,
    nk: int,
    epilogue: Epilogue | None = None,
) -> None:
    """out[P..., M..., N...] = sum over K of xv[P..., M..., K...] * yv[P..., K..., N...], then
    `epilogue(index)` on each finished chunk `out[index]` while it is still in cache."""
    x_merged = _merged_shape(xv.shape, np_, nm)
    y_merged = _merged_shape(yv.shape, np_, nk)
    x_copy = xv.size * xv.itemsize if _needs_copy(xv, x_merged) else 0
    y_copy = yv.size * yv.itemsize if _needs_copy(yv, y_merged) else 0
    out_bytes = out.nbytes if epilogue is not None else 0
    levels = _chunk_levels(xv, yv, np_, nm, nk, x_copy, y_copy, out_bytes)
    if not levels:  # one call; numpy copies what it must
        out_mat = out.reshape(_merged_shape(out.shape, np_, nm))
        np.matmul(np.reshape(xv, x_merged), np.reshape(yv, y_merged), out=out_mat)
        if epilogue is not None:
            epilogue(())
        return
    buffers = _Buffers()
    partial: np.ndarray | None = None
    summed = [position for position, level in enumerate(levels) if level.out_axis is None]
    for starts in itertools.product(*(range(0, level.length, level.step) for level in levels)):
        xs, ys = xv, yv
        index = [slice(None)] * out.ndim
        for level, start in zip(levels, starts):
            stop = min(start + level.step, level.length)
            xs = _take(xs, level.x_axis, start, stop)
            ys = _take(ys, level.y_axis, start, stop)
            if level.out_axis is not None:
                index[level.out_axis] = slice(start, stop)
        target = out[tuple(index)]
        x_mat = buffers.merged("x", xs, np_, nm)
        y_mat = buffers.merged("y", ys, np_, nk)
        # Output chunks are views: only P and outer free axes are chunked, so this never copies.
        out_mat = np.reshape(target, _merged_shape(target.shape, np_, nm), copy=False)
        if all(starts[position] == 0 for position in summed):
            np.matmul(x_mat, y_mat, out=out_mat)
        else:  # a later chunk of a contracted axis: accumulate
            if partial is None or partial.shape != out_mat.shape:
                partial = np.empty(out_mat.shape, out.dtype)
            np.matmul(x_mat, y_mat, out=partial)
            np.add(out_mat, partial, out=out_mat)
        if epilogue is not None and all(
            starts[position] + levels[position].step >= levels[position].length
            for position in summed
        ):
            epilogue(tuple(index))


@attrs.frozen
class _Level:
    """One chunked axis: its position in X's, Y's and the output's unmerged views (None where the
    view lacks it; out_axis None for a contracted axis, whose chunks accumulate), its length and
    chunk step."""

    x_axis: int | None
    y_axis: int | None
    out_axis: int | None
    length: int
    step: int


def _chunk_levels(
    xv: np.ndarray,
    yv: np.ndarray,
    np_: int,
    nm: int,
    nk: int,
    x_copy: int,
    y_copy: int,
    out_bytes: int,
) -> list[_Level]:
    """Nested chunks so that each chunk copies at most about COPY_CHUNK_BYTES of operand (im2col)
    and, when an epilogue follows, writes at most about OUTPUT_CHUNK_BYTES of output. Chunked, in
    order: the batch-like (P) axes, outermost first; then the free axes of the copied operand (Y's
    when nothing is copied) in output order, an inner one only once the outer ones are down to
    single indices (so output chunks stay views), keeping at least MIN_CHUNK_COLUMNS output
    columns; then, for copies only, the contracted axes (chunks accumulate)."""
    copy = x_copy + y_copy
    if copy <= COPY_CHUNK_BYTES and out_bytes <= OUTPUT_CHUNK_BYTES:
        return []
    big_is_x = copy > 0 and x_copy >= y_copy
    big = xv if big_is_x else yv
    big_axis = 0 if big_is_x else 1
    if big_is_x:
        free = [(np_ + j, None, np_ + j) for j in range(nm)]
    else:
        free = [(None, np_ + nk + j, np_ + nm + j) for j in range(yv.ndim - np_ - nk)]
    contracted = [(np_ + nm + j, np_ + j, None) for j in range(nk)]
    levels: list[_Level] = []

    def over() -> bool:
        return copy > COPY_CHUNK_BYTES or out_bytes > OUTPUT_CHUNK_BYTES

    def split(roles: tuple[int | None, int | None, int | None], length: int, minimum: int) -> int:
        nonlocal copy, out_bytes
        shares_copy = roles[big_axis] is not None and big.shape[roles[big_axis]] == length  # type: ignore[index]
        step = length
        if shares_copy and copy > COPY_CHUNK_BYTES:
            step = min(step, int(COPY_CHUNK_BYTES * length // copy))
        if roles[2] is not None and out_bytes > OUTPUT_CHUNK_BYTES:
            step = min(step, int(OUTPUT_CHUNK_BYTES * length // out_bytes))
        step = min(length, max(1, step, minimum))
        if step < length:
            levels.append(_Level(*roles, length, step))
            copy = copy * step // length if shares_copy else copy
            out_bytes = out_bytes * step // length if roles[2] is not None else out_bytes
        return step

    out_shape = [max(xv.shape[a], yv.shape[a]) for a in range(np_)]
    for axis in sorted(range(np_), key=lambda a: -abs(big.strides[a]) if big.shape[a] > 1 else 0):
        if over() and out_shape[axis] > 1:
            split((axis, axis, axis), out_shape[axis], 1)
    for position, roles in enumerate(free):
        if not over():
            break
        inner = math.prod(big.shape[r[big_axis]] for r in free[position + 1 :])  # type: ignore[index]
        length = big.shape[roles[big_axis]]  # type: ignore[index]
        if length > 1 and split(roles, length, -(-MIN_CHUNK_COLUMNS // max(inner, 1))) > 1:
            break
    for roles in sorted(contracted, key=lambda r: -abs(big.strides[r[big_axis]])):  # type: ignore[index]
        if copy <= COPY_CHUNK_BYTES:
            break
        length = big.shape[roles[big_axis]]  # type: ignore[index]
        if length > 1:
            split(roles, length, 1)
    return levels


def _merged_shape(shape: tuple[int, ...], np_: int, first: int) -> tuple[int, ...]:
    """[P..., G1..., G2...] -> [P..., prod(G1), prod(G2)] where G1 has `first` axes."""
    return (*shape[:np_], math.prod(shape[np_ : np_ + first]), math.prod(shape[np_ + first :]))


def _needs_copy(view: np.ndarray, shape: tuple[int, ...]) -> bool:
    try:
        np.reshape(view, shape, copy=False)
    except ValueError:
        return True
    return False


def _take(x: np.ndarray, axis: int | None, start: int, stop: int) -> np.ndarray:
    if axis is None or x.shape[axis] == 1:  # an axis the view lacks, or broadcast: every chunk
        return x
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


class _Buffers:
    """One reusable staging buffer per operand for the chunk copies; an operand the chunking
    does not slice is merged (copied) once."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}
        self._last: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def merged(self, key: str, view: np.ndarray, np_: int, first: int) -> np.ndarray:
        last = self._last.get(key)
        if last is not None and last[0] is view:
            return last[1]
        shape = _merged_shape(view.shape, np_, first)
        try:
            matrix = np.reshape(view, shape, copy=False)
        except ValueError:
            buffer = self._buffers.get(key)
            if buffer is None or buffer.size < view.size:
                buffer = np.empty(view.size, view.dtype)
                self._buffers[key] = buffer
            staging = buffer[: view.size].reshape(view.shape)
            np.copyto(staging, view)
            matrix = staging.reshape(shape)
        self._last[key] = (view, matrix)
        return matrix


# -- the fusion rule ---------------------------------------------------------------------------

# Reshapes (prims registered with `reshape=True`: the contiguous result of the contraction in
# another shape, row-major order kept), and elementwise prims applied in place on it, may follow
# the sum in the fused group (an epilogue: a convolution's or a linear layer's bias, addmm's
# alpha). The group then ends at the last of them (its step runs there) and its kernel returns
# one fresh array, never a view.
_IN_PLACE: dict[str, np.ufunc] = {"prims.add": np.add, "prims.mul": np.multiply}


def _is_reshape(op: str) -> bool:
    definition = lookup(op)
    return definition is not None and definition.reshape


@attrs.frozen
class _OperandSpec:
    """A mul operand as the kernel receives it: the array is reshaped to `shape` (its size-1
    dims dropped), whose dims carry `labels` (joint dims)."""

    shape: tuple[int, ...]
    labels: tuple[int, ...]


@attrs.frozen
class _Epilogue:
    """One step after the sum: a reshape to `shape` (`ufunc` None), or `ufunc(result, other)` in
    place, `other` being the kernel's extra operand number `operand` or the number `number`."""

    shape: tuple[int, ...]
    ufunc: np.ufunc | None = None
    operand: int | None = None
    number: Any = None


@attrs.frozen
class ContractionKernel:
    """The fused kernel of one broadcast/mul/sum group and its epilogue: `contract` on the mul's
    operands, into a fresh array of the group's result shape; then the epilogue in place."""

    fresh_result = True  # returns one new array (inplace.py may then reuse it)

    operands: tuple[_OperandSpec, _OperandSpec]
    out_labels: tuple[int, ...]
    sizes: tuple[int, ...]
    epilogue: tuple[_Epilogue, ...] = ()
    # Per operand layout (strides, dtype, tuning constants): the direct recipe of `contract`, or
    # None when the call takes the general path. Filled by the calls themselves.
    _direct: dict[tuple[Any, ...], _DirectCall | None] = attrs.field(
        factory=dict, eq=False, repr=False
    )

    def __call__(self, a: np.ndarray, b: np.ndarray, *others: np.ndarray) -> np.ndarray:
        key = (
            a.strides,
            b.strides,
            a.dtype,
            COPY_CHUNK_BYTES,
            OUTPUT_CHUNK_BYTES,
            MIN_CHUNK_COLUMNS,
            REORDER_GAIN,
            FULL_SPEED_SIDE,
            SWAP_ROWS,
        )
        direct = self._direct.get(key, _UNKNOWN)
        if direct is _UNKNOWN:
            direct = self._direct[key] = self._direct_call(a, b)
        if direct is not None:
            return direct(a, b, others)
        return self._general(a, b, others)

    def _direct_call(self, a: np.ndarray, b: np.ndarray) -> _DirectCall | None:
        (sa, sb) = self.operands
        out_shape = tuple(self.sizes[label] for label in self.out_labels)
        has_steps = any(step.ufunc is not None for step in self.epilogue)
        out = np.empty(out_shape, a.dtype)
        recipe = _direct_recipe(a.reshape(sa.shape), sa.labels, b.reshape(sb.shape), sb.labels, self.out_labels,
                                self.sizes, out, has_steps)  # fmt: skip
        if recipe is None:
            return None
        numbers = {
            position: number_as(step.number, DType.from_numpy(a.dtype))
            for position, step in enumerate(self.epilogue)
            if step.ufunc is not None and step.operand is None
        }
        return _DirectCall(self, recipe, out_shape, numbers)

    def _general(self, a: np.ndarray, b: np.ndarray, others: tuple[np.ndarray, ...]) -> np.ndarray:
        (sa, sb) = self.operands
        shape = (
            self.epilogue[-1].shape
            if self.epilogue
            else tuple(self.sizes[label] for label in self.out_labels)
        )
        result = np.empty(shape, a.dtype)
        # The epilogue runs on the contraction's own shape: reshapes keep row-major order, so
        # each in-place operand is reshaped (a view, for broadcast biases too) to that shape.
        out = result.reshape([self.sizes[label] for label in self.out_labels])
        steps = [
            (step.ufunc, self._operand(step, others, out.shape, a.dtype))
            for step in self.epilogue
            if step.ufunc is not None
        ]

        def epilogue(index: tuple[slice, ...]) -> None:
            part = out[index]
            with np.errstate(all="ignore"):
                for ufunc, other in steps:
                    ufunc(part, other[index] if other.ndim else other, out=part)

        contract(
            a.reshape(sa.shape),
            sa.labels,
            b.reshape(sb.shape),
            sb.labels,
            self.out_labels,
            self.sizes,
            out=out,
            epilogue=epilogue if steps else None,
        )
        return result

    @staticmethod
    def _operand(
        step: _Epilogue, others: tuple[np.ndarray, ...], shape: tuple[int, ...], dtype: np.dtype
    ) -> np.ndarray:
        if step.operand is None:
            return number_as(step.number, DType.from_numpy(dtype))
        other = others[step.operand]
        return other if other.ndim == 0 else other.reshape(shape)


class _DirectCall:
    """A ContractionKernel call on operands of one layout, when `contract` is one matrix product:
    its recipe replayed into a fresh result, then the epilogue applied once to the whole result
    (what the general path does when nothing is chunked)."""

    __slots__ = ("a_shape", "b_shape", "out_shape", "recipe", "result_shape", "steps")

    def __init__(self, kernel: ContractionKernel, recipe: _DirectRecipe, out_shape: tuple[int, ...],
                 numbers: dict[int, np.ndarray]) -> None:  # fmt: skip
        self.a_shape = kernel.operands[0].shape
        self.b_shape = kernel.operands[1].shape
        self.recipe = recipe
        self.out_shape = out_shape
        self.result_shape = kernel.epilogue[-1].shape if kernel.epilogue else out_shape
        # (ufunc, extra operand index or None, the number when it is None)
        self.steps = tuple(
            (step.ufunc, step.operand, numbers.get(position))
            for position, step in enumerate(kernel.epilogue)
            if step.ufunc is not None
        )

    def __call__(self, a: np.ndarray, b: np.ndarray, others: tuple[np.ndarray, ...]) -> np.ndarray:
        result = np.empty(self.result_shape, a.dtype)
        out = result.reshape(self.out_shape)
        self.recipe.run(a.reshape(self.a_shape), b.reshape(self.b_shape), out, None)
        for ufunc, operand, number in self.steps:
            if operand is None:
                ufunc(out, number, out=out)
            else:
                other = others[operand]
                ufunc(out, other if other.ndim == 0 else other.reshape(self.out_shape), out=out)
        return result


def _operand_spec(source: Value, joint: tuple[int, ...], dims: Sequence[int]) -> _OperandSpec:
    """`source` seen in the joint shape, its dim i at joint dim dims[i]; size-1 dims index nothing."""
    kept = [(size, joint_dim) for size, joint_dim in zip(source.shape, dims) if size != 1]
    return _OperandSpec(tuple(size for size, _ in kept), tuple(joint_dim for _, joint_dim in kept))


def _contraction_rule(context: FusionContext, index: int) -> FusedGroup | None:
    if context.node(index).op != "prims.sum":
        return None
    return _group(context, index, _chain_after(context, index))


def _group(context: FusionContext, sum_index: int, chain: list[int]) -> FusedGroup | None:
    """The broadcast/mul/sum group anchored at node `sum_index`, with the epilogue `chain`."""
    node = context.node(sum_index)
    if len(node.args) != 1:
        return None
    found = context.defining_node(node.args[0])
    if found is None or found[1].op != "prims.mul":
        return None
    mul_index, mul = found
    product = mul.results[0]
    joint = product.shape
    if product.dtype.is_low_precision or node.kwargs.get("output_dtype") not in (
        None,
        product.dtype,
    ):
        return None
    dims = node.kwargs.get("dims")
    reduced = set(range(len(joint))) if dims is None else {d for d in dims if d < len(joint)}
    if not reduced:
        return None
    members = {mul_index, sum_index}
    if not context.internal(mul_index, members):
        return None
    sources: list[Value] = []
    specs: list[_OperandSpec] = []
    for operand in mul.args:
        if type(operand) is not Value or not operand.is_tensor or operand.ndim != len(joint):
            return None
        source, spec = operand, _operand_spec(operand, joint, range(len(joint)))
        producer = context.defining_node(operand)
        if producer is not None and producer[1].op == "prims.broadcast_in_dim":
            broadcast_index, broadcast = producer
            inner = broadcast.args[0]
            if type(inner) is Value and context.internal(
                broadcast_index, members | {broadcast_index}
            ):
                members.add(broadcast_index)
                source = inner
                spec = _operand_spec(inner, joint, broadcast.kwargs["broadcast_dimensions"])
        sources.append(source)
        specs.append(spec)
    out_labels = tuple(d for d in range(len(joint)) if d not in reduced)
    epilogue: list[_Epilogue] = []
    previous = node.results[0]
    for position in chain:
        step = context.node(position)
        shape = step.results[0].shape
        if _is_reshape(step.op):
            epilogue.append(_Epilogue(shape))
        else:
            other = next(a for a in step.args if a is not previous)
            if type(other) is Value:
                epilogue.append(_Epilogue(shape, _IN_PLACE[step.op], operand=len(sources) - 2))
                sources.append(other)
            else:
                epilogue.append(_Epilogue(shape, _IN_PLACE[step.op], number=other))
        previous = step.results[0]
    members.update(chain)
    kernel = ContractionKernel((specs[0], specs[1]), out_labels, tuple(joint), tuple(epilogue))
    return FusedGroup(tuple(sorted(members)), tuple(sources), kernel)


def _next_in_chain(context: FusionContext, index: int) -> int | None:
    """The epilogue node after node `index`: the only reader of its result, when that reader is a
    reshape of it, or an add/mul of it with a number or a same-shape (or 0-dim) tensor that can
    run in place."""
    result = context.node(index).results[0]
    readers = context.users.get(result, [])
    if result in context.outputs or len(readers) != 1 or readers[0] in context.claimed:
        return None
    reader = context.node(readers[0])
    if _is_reshape(reader.op):
        return readers[0]
    if reader.op not in _IN_PLACE or result.dtype.is_complex or result.dtype.is_low_precision:
        return None  # complex add/mul have their own semantics (prims/elementwise.py)
    others = [a for a in reader.args if a is not result]
    if len(reader.args) != 2 or len(others) != 1 or reader.results[0].shape != result.shape:
        return None
    other = others[0]
    if type(other) is Value:
        if (
            not other.is_tensor
            or other.dtype is not result.dtype
            or other.shape not in (result.shape, ())
        ):
            return None
    elif type(other) not in (bool, int, float):
        return None
    return readers[0]


def _chain_after(context: FusionContext, sum_index: int) -> list[int]:
    chain: list[int] = []
    current = _next_in_chain(context, sum_index)
    while current is not None:
        chain.append(current)
        current = _next_in_chain(context, current)
    return chain


register_fusion(_contraction_rule)
