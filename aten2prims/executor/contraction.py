"""The contraction engine: the sum over some labels of the product of two arrays (an einsum of
two operands), computed by matrix products (`blas.matmul`: MKL's gemm or NumPy's) so that
the joint product (M·K·N for a matrix product, N·C_out·C_in·K·H·W for a convolution) is never
materialized. NumPy arrays only: which graphs lead here is `contraction_fusion.py`'s business.

Every dimension of the joint product is a label (an index into `sizes`). An operand carries the
labels of the dims it really indexes: a broadcast dimension (size 1, or a zero stride of an array
that is already a broadcast view) does not index it. Labels then fall into batch (both operands,
kept), free (one operand, kept), contracted (both, reduced) and lone-reduced (one operand,
reduced: summed out of that operand first). The kept labels are split, in output order, into
`batch-like | M | N` with M from one operand and N from the other, so the product writes the
output directly in its final layout (or, when another order allows much larger matrices, in that
order, then copied into the output).

Operands are merged into `[..., M, K]` / `[..., K, N]` matrices. When that merge cannot be a view
(a convolution's overlapping input windows, whose merge is im2col), the copy is made chunk by
chunk into one reused buffer of about `ContractionTuning.copy_chunk_bytes`, which stays in cache
while BLAS reads it: chunks split batch-like labels (each chunk writes its slice of the output),
then the copied operand's free labels (output rows), then contracted labels (chunks accumulate).
An epilogue (a caller's function of an output part) runs on each finished output chunk while
that is in cache. A copied operand that is a stride-1 convolution's windows is, while a gemm
through ctypes accumulates (`blas.gemm_in_use`: MKL's, or NumPy's OpenBLAS), not copied at all:
its products read it at each kernel offset and accumulate (`_Shifted`).

`plan_contraction` decides all of this from the operands' layout alone (shapes, strides, dtype)
and returns a `ContractionRecipe`; `recipe.run` executes it on any operands of that layout.
Deciding takes longer than running a small product, so callers remember recipes per layout.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from .blas import GEMM_MIN_CALL_MACS, gemm_in_use, matmul, matmul_sum
from .kept_buffers import kept_buffer
from .strided import strided_view
from .threads import even_parts, run_parts


@attrs.frozen(cache_hash=True)
class ContractionTuning:
    """The engine's chunk sizes and thresholds (measured with OpenBLAS on one core)."""

    # Above this size an operand copy (im2col) is made in chunks into one reused buffer, sized to
    # stay in a core's L2 cache while BLAS reads it back.
    copy_chunk_bytes: int = 2 << 20
    # With an epilogue (bias, scaling) or a reordered output, the output is made in chunks of
    # about this size, each finished while it is still in cache.
    output_chunk_bytes: int = 1 << 20
    # Chunks along a free axis keep at least this many output columns, so each matrix product
    # stays large enough for BLAS to run at full speed.
    min_chunk_columns: int = 512
    # An output order whose best in-place matrix product is this many times smaller than the
    # best product in another order is computed in that order and transposed (one output copy).
    reorder_gain: int = 16
    # Matrix products with at least this many rows and columns run at about BLAS's full speed: a
    # reordered output prefers keeping its layout to making its products larger than that.
    full_speed_side: int = 128
    # A float32 product X[M, K] @ Y[K, N] of row-major X and K-contiguous Y (a linear layer's
    # transposed weight) with at most `swap_rows` rows and at least twice as many columns runs as
    # (Y^T @ X^T)^T: OpenBLAS's sgemm is up to 2x faster with the long side first (measured,
    # 8x256 @ 256x1024: 85-110 us against 165-230 us; from 256 rows on it gains nothing). Only
    # NumPy's products swap (blas.matmul): MKL runs either order alike, with no copy.
    swap_rows: int = 128
    # A transposing copy loops in Python over the destination's innermost axes of at most
    # `short_axis` entries, up to `short_axis_copies` copies (see _copy) ...
    short_axis: int = 8
    short_axis_copies: int = 64
    # ... for copies of at least this many elements (below, the Python loop costs more).
    short_axis_min_elements: int = 1 << 14
    # An unchunked product of at least twice this many multiply-adds is made in parts (each at
    # least this large and `min_part_rows` rows or columns wide, at most `max_parts`), which a
    # call's threads share (BLAS itself runs on one thread).
    part_macs: int = 1 << 23
    min_part_rows: int = 64
    max_parts: int = 4
    # ... along the rows only where each part keeps at least this many, or the columns make
    # fewer parts: OpenBLAS makes products of a few hundred rows more slowly, and a part of the
    # columns reads x whole, a part of the rows y (one thread, whole / in 4 parts of the rows /
    # of the columns: 512x1024 @ 1024x256 1.33 / 1.74 / 1.50 ms, 784x1536 @ 1536x384 4.83 /
    # 5.50 / 4.95, 3136x768 @ 768x192 4.74 / 4.92 / 6.18, 12544x384 @ 384x96 5.39 / 5.52 /
    # 11.3).
    row_part_min_rows: int = 512
    # A convolution's shifted products (`_Shifted`) need at least this many (widened) output
    # columns per product: below, MKL's per-call packing of the kernel slice costs more than
    # the im2col copy it saves (8x256x14x14: 222 columns, 19 ms against im2col's 17; 8x128x28x28:
    # 838 columns, 14.6 against 19). OpenBLAS (AMD EPYC) broke even from about 3M multiply-adds
    # per product, as this and the call size ask (64 channels: 800 columns 1.14x faster than
    # im2col, 512 0.91x).
    shifted_min_columns: int = 512
    # ... and are made in at least this many tasks (bands of an image, when the batch has fewer
    # images) for the call's threads: each band costs its own calls (one 64x64 56x56 image in
    # three bands took 2.42 ms against 2.05 in one, at one thread).
    shifted_min_tasks: int = 2


DEFAULT_TUNING = ContractionTuning()

# Applied to each finished part `out[index]` of a contraction's output, once per part.
Epilogue = Callable[[tuple[slice, ...]], None]


def contract(
    a: np.ndarray,
    a_labels: Sequence[int],
    b: np.ndarray,
    b_labels: Sequence[int],
    out_labels: Sequence[int],
    sizes: Sequence[int],
    out: np.ndarray | None = None,
    epilogue: Epilogue | None = None,
    tuning: ContractionTuning = DEFAULT_TUNING,
) -> np.ndarray:
    """sum over the labels not in `out_labels` of a * b, as einsum would (with blas.matmul
    for the products). Each operand dim carries a label (an index into `sizes`, distinct within
    the operand); `out_labels` may name labels neither operand has (the result is broadcast
    along them) and leaving out such a label multiplies the result by its size. The result, of
    a's dtype, is written into `out` (C-contiguous, of the output's shape) or a fresh array;
    `epilogue(index)` is then applied to every part `out[index]` of it, once. (Plans on every
    call: a caller repeating a layout keeps the recipe of `plan_contraction` instead.)"""
    if out is None:
        out = np.empty(tuple(sizes[label] for label in out_labels), a.dtype)
    recipe = plan_contraction(
        a,
        a_labels,
        b,
        b_labels,
        out_labels,
        sizes,
        with_epilogue=epilogue is not None,
        tuning=tuning,
    )
    recipe.run(a, b, out, epilogue)
    return out


# -- the recipe ---------------------------------------------------------------------------------------


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


@attrs.frozen
class _Reorder:
    """A product made in another order of the output's present labels: a buffer of
    `ordered_shape`, seen in the output's order through the transpose `to_out`; `from_out` is
    the inverse transpose (the output seen in the product's order)."""

    ordered_shape: tuple[int, ...]
    to_out: tuple[int, ...]
    from_out: tuple[int, ...]


@attrs.frozen
class _Shifted:
    """A copied operand Y[P..., K..., N...] that is a sliding window (a stride-1 convolution's
    input windows, dilated or not) computed without copying it: its contracted axes split into
    R (the outer ones that merge into one row axis: the input channels) and S (the kernel
    offsets). For each S index (`s_shape`, `s_strides`: Y's), Y is read as one matrix
    [R, columns] whose columns are the N axes *widened* to the input's pitches (`pitches`, in
    elements: the padded row length for the rows of an image), so an output band of N's outer
    axis is one run of columns — the columns between rows (the padding's) are computed into
    a scratch buffer and dropped. X, packed once per call as [S, P..., M, R] (`x_order`),
    gives the matching [M, R] slice, and the products of all S indices accumulate into the
    scratch (gemm's beta = 1), which is then copied into the output band: `bands` of N's outer
    axis, each chunk (P index, band) one task of the call's threads."""

    x_order: tuple[int, ...]
    x_packed: tuple[int, ...]
    s_shape: tuple[int, ...]
    s_strides: tuple[int, ...]  # Y's byte strides along S
    row_stride: int  # bytes between Y's merged R rows
    rows: int  # the merged R length
    pitches: tuple[int, ...]
    bands: tuple[tuple[int, int], ...]  # each band's rows of N's outer axis
    columns: int  # the widest band's columns


@attrs.frozen
class ContractionRecipe:
    """How one layout of operands is contracted, step by step:

    1. `empty`: the output is all zeros (an output or reduced label of size 0); nothing else;
    2. each operand indexed by `a_index` / `b_index` (its broadcast dims dropped), then its lone
       reduced axes `a_summed` / `b_summed` summed out;
    3. X and Y (a and b, or b and a: `x_is_a`) transposed into the unmerged views
       X[P..., M..., K...] and Y[P..., K..., N...] (`x_view`, `y_view`; P labels an operand
       lacks are size-1 axes), merged into matrices (`x_matrix`, `y_matrix`) and multiplied:
       in one `blas.matmul` when `levels` is empty (NumPy's as (Y^T @ X^T)^T when `swapped`),
       else chunk by chunk along `levels`;
    4. the product lands in the output seen with its present labels only (`present_shape`:
       labels neither operand has are dropped), directly or, with `reorder`, through a buffer
       in another order copied into it chunk by chunk;
    5. labels neither operand has of size > 1: the product went into a buffer of
       `present_shape`, broadcast into the output (seen as `broadcast_shape`); a reduced label
       neither operand has multiplies the result by its size (`scale`).

    The epilogue runs on each finished output chunk when `epilogue_per_chunk` (the output is
    the product's own: no broadcast, no scale; the chunk's index spread over the output's dims
    by `present_axes` when it has size-1 dims the product lacks, such as a convolution's
    group), on each part of a product made in parts when `part_indices` says where the parts
    are in the output, else once on the whole output at the end."""

    tuning: ContractionTuning
    empty: bool = False
    a_index: tuple[Any, ...] | None = None
    b_index: tuple[Any, ...] | None = None
    a_summed: tuple[int, ...] = ()
    b_summed: tuple[int, ...] = ()
    x_is_a: bool = True
    x_permutation: tuple[int, ...] = ()
    x_view: tuple[int, ...] = ()
    x_matrix: tuple[int, ...] = ()
    y_permutation: tuple[int, ...] = ()
    y_view: tuple[int, ...] = ()
    y_matrix: tuple[int, ...] = ()
    product_shape: tuple[int, ...] = ()  # the product: the present labels in its own order
    out_matrix: tuple[int, ...] = ()  # the product as matrices
    batch_axes: int = 0  # len(P)
    rows_axes: int = 0  # len(M)
    contracted_axes: int = 0  # len(K)
    levels: tuple[_Level, ...] = ()
    swapped: bool = False
    # An unchunked product made in parts (threads.py): the axis of `out_matrix` split (a batch
    # axis, the rows or the columns) and each part's bounds; a plan-time choice, so every
    # thread count makes the same products.
    parts: tuple[int, tuple[tuple[int, int], ...]] | None = None
    # Per part: its index into the output, when the product is the output's own (no reorder,
    # broadcast or scale) and every part is a basic index of it; the epilogue then runs on each
    # part right after its product, in the same parallel region while the part is in cache
    # (else once on the whole output, afterwards).
    part_indices: tuple[tuple[slice, ...], ...] | None = None
    reorder: _Reorder | None = None
    present_shape: tuple[int, ...] = ()
    broadcast_shape: tuple[int, ...] | None = None
    scale: int = 1
    epilogue_per_chunk: bool = True
    # The output dim of each present label, when the output has others (all of size 1): a
    # chunk's index (of `present_shape`) becomes the output's by these (None: the same dims).
    present_axes: tuple[int, ...] | None = None
    # Y's windows as shifted products (`_Shifted`), taken instead of `levels` while a gemm
    # accumulates through ctypes (`blas.gemm_in_use`; through np.matmul's product and add they
    # measured slower than im2col's copies).
    shifted: _Shifted | None = None

    def run(
        self, a: np.ndarray, b: np.ndarray, out: np.ndarray, epilogue: Epilogue | None = None
    ) -> None:
        """Into `out` (C-contiguous, of the output's shape): the contraction of a and b (of the
        layout this recipe was planned for), then the epilogue."""
        if self.empty:
            out.fill(0)
            if epilogue is not None:
                epilogue(())
            return
        x = self.arranged(a if self.x_is_a else b, self.x_is_a)
        y = self.arranged(b if self.x_is_a else a, not self.x_is_a)
        # The product's target: the output (its labels neither operand has are size 1, so it
        # has the present labels' row-major layout) or a buffer broadcast into it afterwards.
        target = out if self.broadcast_shape is None else np.empty(self.present_shape, out.dtype)
        inner = epilogue if self.epilogue_per_chunk else None
        if inner is not None and self.present_axes is not None:
            inner = spread_epilogue(inner, self.present_axes, out.ndim)
        in_parts = epilogue is not None and self.part_indices is not None
        if self.reorder is None:
            self._product(x, y, target, epilogue if in_parts else inner)
        else:
            ordered = kept_buffer("ordered", self.reorder.ordered_shape, out.dtype)
            copier = self._copier(ordered, target.reshape(self.present_shape), inner)
            self._product(x, y, ordered, copier)
        if self.broadcast_shape is not None:
            np.copyto(out, target.reshape(self.broadcast_shape))
        if self.scale != 1:
            with np.errstate(all="ignore"):
                np.multiply(out, np.asarray(self.scale).astype(out.dtype), out=out)
        if epilogue is not None and not self.epilogue_per_chunk and not in_parts:
            epilogue(())

    def arranged(self, operand: np.ndarray, of_a: bool) -> np.ndarray:
        """Operand a (`of_a`) or b as the product reads it: its broadcast dims dropped, its lone
        labels summed out, transposed to x's [P, M, K] or y's [P, K, N] dims (a view unless a
        sum is made)."""
        index, summed = (self.a_index, self.a_summed) if of_a else (self.b_index, self.b_summed)
        if index is not None:
            operand = operand[index]
        if summed:
            operand = _sum_axes(operand, summed)
        return operand.transpose(self.x_permutation if of_a == self.x_is_a else self.y_permutation)

    def _copier(
        self, ordered: np.ndarray, target: np.ndarray, epilogue: Epilogue | None
    ) -> Epilogue:
        """The epilogue of a reordered product: each finished chunk copied into the output while
        it is in cache, then the output's own epilogue on that part of it."""
        assert self.reorder is not None
        destination = target.transpose(self.reorder.from_out)
        to_out = self.reorder.to_out
        tuning = self.tuning

        def copy_chunk(index: tuple[slice, ...]) -> None:
            _copy(destination[index], ordered[index], tuning)
            if epilogue is not None:
                full = index + (slice(None),) * (len(to_out) - len(index))
                epilogue(tuple(full[axis] for axis in to_out))

        return copy_chunk

    def _matmul(self, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        matmul(x, y, out, swap_for_numpy=self.swapped)

    def _matmul_in_parts(
        self,
        x: np.ndarray,
        y: np.ndarray,
        out: np.ndarray,
        axis: int,
        bounds: tuple[tuple[int, int], ...],
        epilogue: Epilogue | None = None,
    ) -> None:
        """x @ y into out, one product per slice `bounds` of out's `axis` (a batch axis, the
        rows or the columns: never the contracted one), on the call's threads; with an
        epilogue, each part's own (`part_indices`) right after its product."""

        def part(a: np.ndarray, start: int, stop: int, along: int) -> np.ndarray:
            if a.shape[along] == 1 and out.shape[along] != 1:  # broadcast along a batch axis
                return a
            index: list[Any] = [slice(None)] * a.ndim
            index[along] = slice(start, stop)
            return a[tuple(index)]

        x_axis = axis if axis != out.ndim - 1 else None
        y_axis = axis if axis != out.ndim - 2 else None

        def task(number: int, start: int, stop: int) -> Callable[[], None]:
            def run() -> None:
                self._matmul(
                    x if x_axis is None else part(x, start, stop, x_axis),
                    y if y_axis is None else part(y, start, stop, y_axis),
                    part(out, start, stop, axis),
                )
                if epilogue is not None:
                    assert self.part_indices is not None  # the caller checked
                    epilogue(self.part_indices[number])

            return run

        run_parts([task(number, start, stop) for number, (start, stop) in enumerate(bounds)])

    def _product(
        self, x: np.ndarray, y: np.ndarray, out: np.ndarray, epilogue: Epilogue | None
    ) -> None:
        """out[P..., M..., N...] = sum over K of X[P..., M..., K...] * Y[P..., K..., N...] for
        the transposed operands x and y (`out` holds the product's elements in row-major order),
        then `epilogue(index)` on each finished chunk `out[index]` (of `product_shape`) while it
        is still in cache."""
        if self.shifted is not None and gemm_in_use():
            _shifted_product(
                x.reshape(self.x_view),
                y.reshape(self.y_view),
                out.reshape(self.product_shape),
                self.batch_axes,
                self.rows_axes,
                self.shifted,
                epilogue,
            )
            return
        if not self.levels:  # one call per part; an operand no matrix view reads is copied
            x = _as_matrix("x matrix", x, self.x_matrix)
            y = _as_matrix("y matrix", y, self.y_matrix)
            target = out.reshape(self.out_matrix)
            if self.parts is None:
                self._matmul(x, y, target)
            elif epilogue is not None and self.part_indices is not None:
                self._matmul_in_parts(x, y, target, *self.parts, epilogue)
                return
            else:
                self._matmul_in_parts(x, y, target, *self.parts)
            if epilogue is not None:
                epilogue(())
            return
        _chunked_product(
            x.reshape(self.x_view),
            y.reshape(self.y_view),
            out.reshape(self.product_shape),
            self.batch_axes,
            self.rows_axes,
            self.contracted_axes,
            self.levels,
            epilogue,
        )


def _as_matrix(key: str, array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`array` reshaped to `shape`: a view where its strides allow, else a copy in this thread's
    kept buffer `key` (a window's im2col matrix: a fresh array would be allocated, and
    page-faulted, at every call, as the product of a segment's part made whole would be)."""
    try:
        return np.reshape(array, shape, copy=False)
    except ValueError:
        staging = kept_buffer(key, array.shape, array.dtype)
        np.copyto(staging, array)
        return staging.reshape(shape)


def spread_epilogue(epilogue: Epilogue, axes: tuple[int, ...], ndim: int) -> Epilogue:
    """`epilogue` of an output with size-1 dims the product lacks, called with indices of the
    product's dims (at output dims `axes`)."""

    def spread(index: tuple[slice, ...]) -> None:
        full: list[Any] = [slice(None)] * ndim
        for axis, item in zip(axes, index):
            full[axis] = item
        epilogue(tuple(full))

    return spread


def _copy(destination: np.ndarray, source: np.ndarray, tuning: ContractionTuning) -> None:
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
            length > tuning.short_axis
            or count * length > tuning.short_axis_copies
            or len(short) == destination.ndim - 1
        ):
            break
        short.append(axis)
        count *= length
    if not short or destination.size < tuning.short_axis_min_elements:
        np.copyto(destination, source)
        return
    for position in itertools.product(*(range(destination.shape[axis]) for axis in short)):
        index: list[Any] = [slice(None)] * destination.ndim
        for axis, i in zip(short, position):
            index[axis] = i
        np.copyto(destination[tuple(index)], source[tuple(index)])


def _sum_axes(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(x, axis=axes, dtype=x.dtype))  # bool: or; integers wrap


# -- planning -----------------------------------------------------------------------------------------


def plan_contraction(
    a: np.ndarray,
    a_labels: Sequence[int],
    b: np.ndarray,
    b_labels: Sequence[int],
    out_labels: Sequence[int],
    sizes: Sequence[int],
    *,
    with_epilogue: bool = False,
    tuning: ContractionTuning = DEFAULT_TUNING,
) -> ContractionRecipe:
    """The recipe of `contract` for operands of a's and b's layout (shapes, strides, dtype; their
    values are not read, except that lone reduced labels are summed out here to see the layout
    of the sums), with an epilogue or not."""
    dtype = a.dtype
    a_index = _broadcast_index(a)
    b_index = _broadcast_index(b)
    a, a_kept = _drop_broadcast_dims(a, a_labels)
    b, b_kept = _drop_broadcast_dims(b, b_labels)
    reduced = set(range(len(sizes))) - set(out_labels)
    if any(sizes[label] == 0 for label in out_labels) or any(
        sizes[label] == 0 for label in reduced
    ):
        return ContractionRecipe(tuning, empty=True)
    # n copies of x sum to n·x; for bool (or) to x
    scale = math.prod(
        sizes[label] for label in reduced if label not in a_kept and label not in b_kept
    )
    if dtype == np.bool_:
        scale = 1
    a_summed = _lone_axes(a_kept, b_kept, out_labels)
    if a_summed:
        a = _sum_axes(a, a_summed)
        a_kept = [label for axis, label in enumerate(a_kept) if axis not in a_summed]
    b_summed = _lone_axes(b_kept, a_kept, out_labels)
    if b_summed:
        b = _sum_axes(b, b_summed)
        b_kept = [label for axis, label in enumerate(b_kept) if axis not in b_summed]
    present = [label for label in out_labels if label in a_kept or label in b_kept]
    present_shape = tuple(sizes[label] for label in present)
    broadcast_shape = None
    if any(sizes[label] != 1 for label in out_labels if label not in present):
        broadcast_shape = tuple(sizes[label] if label in present else 1 for label in out_labels)
    # Labels neither operand has are broadcast into (sizes > 1: a buffer, copied whole) or
    # of size 1 (the chunks' indices then spread over the output's dims).
    per_chunk = broadcast_shape is None and scale == 1
    present_axes = (
        tuple(list(out_labels).index(label) for label in present)
        if per_chunk and len(present) != len(out_labels)
        else None
    )
    layout = _layout_of(tuple(present), tuple(a_kept), tuple(b_kept), tuple(sizes), tuning)
    reorder = None
    if layout.order != tuple(present):
        reorder = _Reorder(
            tuple(sizes[label] for label in layout.order),
            tuple(layout.order.index(label) for label in present),
            tuple(present.index(label) for label in layout.order),
        )
    x, x_labels, y, y_labels = (a, a_kept, b, b_kept) if layout.x_is_a else (b, b_kept, a, a_kept)
    contracted = [label for label in x_labels if label in y_labels and label not in present]
    k = _contracted_order(contracted, x, x_labels, y, y_labels)
    xv = _arrange(x, x_labels, layout.p, layout.m + k)
    yv = _arrange(y, y_labels, layout.p, k + layout.n)
    np_, nm, nk = len(layout.p), len(layout.m), len(k)
    x_matrix = _merged_shape(xv.shape, np_, nm)
    y_matrix = _merged_shape(yv.shape, np_, nk)
    x_merged = _merged_in_place(xv, x_matrix)
    y_merged = _merged_in_place(yv, y_matrix)
    x_copy = 0 if x_merged is not None else xv.size * xv.itemsize
    y_copy = 0 if y_merged is not None else yv.size * yv.itemsize
    # A reordered product's copy into the output is an epilogue (run on chunks while in cache).
    out_bytes = math.prod(present_shape) * dtype.itemsize
    if not (with_epilogue and per_chunk) and reorder is None:
        out_bytes = 0
    levels = _chunk_levels(xv, yv, np_, nm, nk, x_copy, y_copy, out_bytes, tuning)
    shifted = _shifted_plan(xv, yv, np_, nm, nk, tuning) if y_copy and not x_copy else None
    # (a merge that copies gives C-contiguous matrices: their layout, from pages never touched)
    swapped = not levels and _swap_pays(
        np.empty(x_matrix, xv.dtype) if x_merged is None else x_merged,
        np.empty(y_matrix, yv.dtype) if y_merged is None else y_merged,
        tuning,
    )
    out_matrix = _merged_shape(tuple(sizes[label] for label in layout.order), np_, nm)
    parts = None if levels else _product_parts(x_matrix, y_matrix, out_matrix, tuning)
    product_shape = tuple(sizes[label] for label in layout.order)
    return ContractionRecipe(
        tuning,
        a_index=a_index,
        b_index=b_index,
        a_summed=a_summed,
        b_summed=b_summed,
        x_is_a=layout.x_is_a,
        x_permutation=_permutation(x_labels, layout.p, layout.m + k),
        x_view=xv.shape,
        x_matrix=x_matrix,
        y_permutation=_permutation(y_labels, layout.p, k + layout.n),
        y_view=yv.shape,
        y_matrix=y_matrix,
        product_shape=product_shape,
        out_matrix=out_matrix,
        batch_axes=np_,
        rows_axes=nm,
        contracted_axes=nk,
        levels=tuple(levels),
        swapped=swapped,
        parts=parts,
        part_indices=_part_indices(
            parts,
            product_shape,
            np_,
            nm,
            present,
            out_labels,
            sizes,
            reorder is None and scale == 1,
        ),
        reorder=reorder,
        present_shape=present_shape,
        broadcast_shape=broadcast_shape,
        scale=scale,
        epilogue_per_chunk=per_chunk,
        present_axes=present_axes,
        shifted=shifted,
    )


def _product_parts(
    x_matrix: tuple[int, ...],
    y_matrix: tuple[int, ...],
    out_matrix: tuple[int, ...],
    tuning: ContractionTuning,
) -> tuple[int, tuple[tuple[int, int], ...]] | None:
    """How a product of these matrices splits into parts (`ContractionRecipe.parts`): along the
    outermost batch axis both operands have whole or broadcast, else along the rows where
    each part keeps `row_part_min_rows` of them (or the columns cannot be split), else the
    columns, into parts of at least `part_macs` multiply-adds (and `min_part_rows` rows or
    columns); None when it is too small to split."""
    macs = math.prod(out_matrix) * x_matrix[-1]
    wanted = min(tuning.max_parts, macs // tuning.part_macs)
    if wanted < 2:
        return None
    rows, columns = out_matrix[-2], out_matrix[-1]
    batch = len(out_matrix) - 2
    if (
        batch
        and out_matrix[0] >= 2
        and all(m[0] in (1, out_matrix[0]) for m in (x_matrix, y_matrix))
    ):
        axis, length, least = 0, out_matrix[0], 1
    else:
        least = tuning.min_part_rows
        by_rows = even_parts(min(wanted, rows // least))
        tall = by_rows >= 2 and rows // by_rows >= tuning.row_part_min_rows
        if tall or even_parts(min(wanted, columns // least)) < 2:
            axis, length = batch, rows
        else:
            axis, length = batch + 1, columns
    count = even_parts(min(wanted, length // least))
    if count < 2:
        return None
    return axis, tuple((i * length // count, (i + 1) * length // count) for i in range(count))


def _part_indices(
    parts: tuple[int, tuple[tuple[int, int], ...]] | None,
    product_shape: tuple[int, ...],
    batch_axes: int,
    rows_axes: int,
    present: Sequence[int],
    out_labels: Sequence[int],
    sizes: Sequence[int],
    own: bool,
) -> tuple[tuple[slice, ...], ...] | None:
    """The parts (`_product_parts`: slices of the product matrices' batch, rows or columns
    axis) as basic indices of the output, when the product is the output's own (`own`: in the
    output's order, the labels it lacks of size 1) and each part is one: a slice of merged rows
    or columns must keep the inner axes whole. None otherwise."""
    if (
        parts is None
        or not own
        or any(sizes[label] != 1 for label in out_labels if label not in present)
    ):
        return None
    axis, bounds = parts
    if axis < batch_axes:  # the batch axes are the product's own
        first, inner = axis, 1
    else:
        first = batch_axes if axis == batch_axes else batch_axes + rows_axes
        stop = first + rows_axes if axis == batch_axes else len(product_shape)
        if stop <= first:
            return None
        inner = math.prod(product_shape[first + 1 : stop])
    if any(start % inner or end % inner for start, end in bounds):
        return None
    at = list(out_labels).index(present[first])
    return tuple(
        (slice(None),) * at + (slice(start // inner, end // inner),) for start, end in bounds
    )


def _lone_axes(
    labels: Sequence[int], other: Sequence[int], out_labels: Sequence[int]
) -> tuple[int, ...]:
    """Axes of labels only this operand has and the output drops: summed out of it first."""
    return tuple(
        axis for axis, label in enumerate(labels) if label not in other and label not in out_labels
    )


def batch_labels(
    out_labels: Sequence[int],
    a_labels: Sequence[int],
    b_labels: Sequence[int],
    sizes: Sequence[int],
    tuning: ContractionTuning = DEFAULT_TUNING,
) -> tuple[int, ...]:
    """The output labels a product of operands labelled so makes as its batch (P, `_layout_of`):
    a slice along one of them is a slice of the batch of the same matrix products, where a
    slice along a matrix dim (M, N) makes smaller products, each reading the other operand
    whole again."""
    present = tuple(label for label in out_labels if label in a_labels or label in b_labels)
    return _layout_of(present, tuple(a_labels), tuple(b_labels), tuple(sizes), tuning).p


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


def _layout_of(
    present: tuple[int, ...],
    a_labels: tuple[int, ...],
    b_labels: tuple[int, ...],
    sizes: tuple[int, ...],
    tuning: ContractionTuning,
) -> _Layout:
    """The split of the output's labels into P | M | N with the largest matrices (M·N), or the
    reordered layout described below."""
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
    # chunk by chunk). Such an order keeps a prefix of the output's labels as P (its chunks are
    # then slices of the output) and takes M from the operand owning the first label after it (the order stays close to the output's). Among the orders giving
    # `reorder_gain` times larger matrices than the output's own, the one with the largest
    # matrices up to `full_speed_side` per side wins, then the one keeping the longest prefix.
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
        side = tuning.full_speed_side
        key = (min(rows, side) * min(columns, side), i)
        if rows * columns > tuning.reorder_gain * best.score and key > best_key:
            p = tuple(present[:i]) + tuple(label for label in batch if label not in present[:i])
            reordered, best_key = _Layout(x_is_a, p, m, n, rows * columns, p + m + n), key
    return reordered if reordered is not None else best


def _swap_pays(x: np.ndarray, y: np.ndarray, tuning: ContractionTuning) -> bool:
    """Whether x @ y runs faster as (y^T @ x^T)^T (`ContractionTuning.swap_rows`): float32, x's
    rows and y's columns contiguous, few rows and at least twice as many columns."""
    if x.dtype != np.float32 or x.ndim < 2 or y.ndim < 2:
        return False
    rows, columns = x.shape[-2], y.shape[-1]
    itemsize = x.itemsize
    return (
        1 < rows <= tuning.swap_rows
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
    index: list[Any] = []
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


def _shifted_plan(
    xv: np.ndarray, yv: np.ndarray, np_: int, nm: int, nk: int, tuning: ContractionTuning
) -> _Shifted | None:
    """Y's windows as shifted products (`_Shifted`), or None when Y is not such a window or
    its products would be too small to pay: float32/float64, non-negative strides, N's inner
    axis contiguous and each outer one a whole pitch at least as long as the widened axes
    inside it (so output positions get distinct columns), R's rows at least a band's columns
    apart, and every product of at least `shifted_min_columns` columns and gemm's call size."""
    if yv.dtype not in (np.float32, np.float64) or xv.dtype != yv.dtype:
        return None
    itemsize = yv.itemsize
    n_axes = list(range(np_ + nk, yv.ndim))
    if not n_axes or nk < 2 or any(stride < 0 for stride in yv.strides):
        return None
    lengths = [yv.shape[axis] for axis in n_axes]
    if yv.strides[n_axes[-1]] != itemsize and lengths[-1] > 1:
        return None
    pitches: list[int] = []
    extent = 1  # the widened columns of the axes inside this one
    for axis in reversed(n_axes):
        stride, length = yv.strides[axis], yv.shape[axis]
        pitch = stride // itemsize if length > 1 else extent
        if stride % itemsize or pitch < extent:
            return None
        pitches.insert(0, pitch)
        extent += (length - 1) * pitch
    # R: the outermost contracted axes that merge into one; S: the rest (the kernel offsets)
    k_axes = list(range(np_, np_ + nk))
    r_count = 1
    while r_count < nk and yv.strides[k_axes[r_count - 1]] == (
        yv.strides[k_axes[r_count]] * yv.shape[k_axes[r_count]]
    ):
        r_count += 1
    if r_count == nk:
        return None  # Y merges: nothing to shift
    r_axes, s_axes = k_axes[:r_count], k_axes[r_count:]
    rows = math.prod(yv.shape[axis] for axis in r_axes)
    m = math.prod(xv.shape[np_ : np_ + nm])
    inner = extent - (lengths[0] - 1) * pitches[0]  # one row of N's outer axis, widened
    # Each product needs `shifted_min_columns` columns and gemm's call size: at least `least`
    # rows of N's outer axis per band.
    least_columns = max(tuning.shifted_min_columns, -(-GEMM_MIN_CALL_MACS // (m * rows)))
    least = max(1, -(-(least_columns - inner) // pitches[0]) + 1)
    if least > lengths[0]:
        return None
    # Bands of about `output_chunk_bytes`, and `shifted_min_tasks` tasks for the call's threads
    # where the batch has fewer images (a batch of one image is cut in two), evened out.
    images = math.prod(max(a, b) for a, b in zip(xv.shape[:np_], yv.shape[:np_]))
    band = max(
        least,
        min(
            tuning.output_chunk_bytes // (m * pitches[0] * itemsize),
            -(-lengths[0] * images // tuning.shifted_min_tasks),
        ),
    )
    count = lengths[0] // min(band, lengths[0])  # bands of at least `band` rows each
    bands = tuple((i * lengths[0] // count, (i + 1) * lengths[0] // count) for i in range(count))
    columns = (max(stop - start for start, stop in bands) - 1) * pitches[0] + inner
    row_stride = yv.strides[r_axes[-1]]
    if row_stride < columns * itemsize:
        return None
    s_shape = tuple(yv.shape[axis] for axis in s_axes)
    # X [P..., M..., K...] packed as [S, P..., M, R]: the X axes of S, then the others in order
    x_s_axes = [np_ + nm + (axis - np_) for axis in s_axes]
    x_r_axes = [np_ + nm + (axis - np_) for axis in r_axes]
    x_order = (*x_s_axes, *range(np_ + nm), *x_r_axes)
    x_packed = (math.prod(s_shape), *xv.shape[:np_], m, rows)
    s_strides = tuple(yv.strides[axis] for axis in s_axes)
    return _Shifted(
        x_order, x_packed, s_shape, s_strides, row_stride, rows, tuple(pitches), bands, columns
    )


# -- running a chunked product ------------------------------------------------------------------------


def _shifted_product(
    xv: np.ndarray,
    yv: np.ndarray,
    out: np.ndarray,
    np_: int,
    nm: int,
    shifted: _Shifted,
    epilogue: Epilogue | None,
) -> None:
    """out[P..., M..., N...] = sum over K of xv[P..., M..., K...] * yv[P..., K..., N...] by
    shifted accumulating products (`_Shifted`), then `epilogue(index)` on each finished band."""
    packed = kept_buffer("shifted x", shifted.x_packed, xv.dtype)
    np.copyto(
        packed.reshape([xv.shape[axis] for axis in shifted.x_order]), xv.transpose(shifted.x_order)
    )
    itemsize = yv.itemsize
    n_lengths = out.shape[np_ + nm :]
    pitches = shifted.pitches
    inner = 1 + sum((length - 1) * pitch for length, pitch in zip(n_lengths[1:], pitches[1:]))
    m_shape = out.shape[np_ : np_ + nm]
    m = math.prod(m_shape)
    out_shape = out.shape[:np_]

    def task(position: tuple[int, ...], start: int, stop: int) -> Callable[[], None]:
        def run() -> None:
            columns = (stop - start - 1) * pitches[0] + inner
            x_index = tuple(i if size > 1 else 0 for i, size in zip(position, xv.shape[:np_]))
            y_index = tuple(i if size > 1 else 0 for i, size in zip(position, yv.shape[:np_]))
            x_at: tuple[Any, ...] = (slice(None), *x_index)
            x_slices = packed[x_at].reshape((*shifted.s_shape, m, shifted.rows))  # [S..., M, R]
            # Y at this P index and band start (its other axes at 0), seen as [S..., R, columns]
            y_at: tuple[Any, ...] = (
                *y_index,
                *(slice(0, 1),) * (yv.ndim - np_ - len(n_lengths)),
                slice(start, stop),
            )
            corner = yv[y_at]
            windows = strided_view(
                corner,
                (*shifted.s_shape, shifted.rows, columns),
                (*shifted.s_strides, shifted.row_stride, itemsize),
                writeable=False,
            )
            scratch = kept_buffer("shifted out", (m, shifted.columns), out.dtype)
            product = scratch[:, :columns]
            matmul_sum(x_slices, windows, product, len(shifted.s_shape))
            index = (*(slice(i, i + 1) for i in position), *(slice(None),) * nm, slice(start, stop))
            target = out[index]
            np.copyto(
                target,
                strided_view(
                    scratch,
                    target.shape,
                    (
                        *(0 for _ in position),
                        *_row_major_strides(m_shape, scratch.strides[0]),
                        *(pitch * itemsize for pitch in pitches),
                    ),
                    writeable=False,
                ),
            )
            if epilogue is not None:
                epilogue(index)

        return run

    run_parts(
        [
            task(position, start, stop)
            for position in itertools.product(*(range(size) for size in out_shape))
            for start, stop in shifted.bands
        ]
    )


def _row_major_strides(shape: tuple[int, ...], last: int) -> tuple[int, ...]:
    """The byte strides of a row-major array of `shape` whose innermost axis steps `last`
    bytes (the scratch's merged M axis split back into the output's M axes)."""
    strides: list[int] = []
    step = last
    for size in reversed(shape):
        strides.insert(0, step)
        step *= size
    return tuple(strides)


def _chunked_product(
    xv: np.ndarray,
    yv: np.ndarray,
    out: np.ndarray,
    np_: int,
    nm: int,
    nk: int,
    levels: tuple[_Level, ...],
    epilogue: Epilogue | None,
) -> None:
    """out[P..., M..., N...] = sum over K of xv[P..., M..., K...] * yv[P..., K..., N...], then
    `epilogue(index)` on each finished chunk `out[index]` while it is still in cache.

    The chunks of one output part (its chunks along contracted levels, accumulated in order) are
    one task; the tasks write disjoint parts of the output and run on the call's threads
    (threads.py), each thread with its own staging buffers."""
    summed = [position for position, level in enumerate(levels) if level.out_axis is None]
    tasks: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for starts in itertools.product(*(range(0, level.length, level.step) for level in levels)):
        key = tuple(start for position, start in enumerate(starts) if position not in summed)
        tasks.setdefault(key, []).append(starts)
    per_thread: dict[int, _Buffers] = {}

    def task(chunks: list[tuple[int, ...]]) -> Callable[[], None]:
        def run() -> None:
            buffers = per_thread.get(threading.get_ident())
            if buffers is None:
                buffers = per_thread[threading.get_ident()] = _Buffers()
            _product_chunks(xv, yv, out, np_, nm, nk, levels, epilogue, chunks, buffers, summed)

        return run

    run_parts([task(chunks) for chunks in tasks.values()])


def _product_chunks(
    xv: np.ndarray,
    yv: np.ndarray,
    out: np.ndarray,
    np_: int,
    nm: int,
    nk: int,
    levels: tuple[_Level, ...],
    epilogue: Epilogue | None,
    chunks: list[tuple[int, ...]],
    buffers: _Buffers,
    summed: list[int],
) -> None:
    """The chunks (by their starts along `levels`) of one output part, in order."""
    partial: np.ndarray | None = None
    for starts in chunks:
        xs, ys = xv, yv
        index = [slice(None)] * out.ndim
        for level, start in zip(levels, starts):
            stop = min(start + level.step, level.length)
            xs = _take(xs, level.x_axis, start, stop)
            ys = _take(ys, level.y_axis, start, stop)
            if level.out_axis is not None:
                index[level.out_axis] = slice(start, stop)
        target = out[tuple(index)] if index else out  # (a 0-dim array indexed by () is a copy)
        x_mat = buffers.merged("x", xs, np_, nm)
        y_mat = buffers.merged("y", ys, np_, nk)
        # Output chunks are views: only P and outer free axes are chunked, so this never copies.
        out_mat = np.reshape(target, _merged_shape(target.shape, np_, nm), copy=False)
        if all(starts[position] == 0 for position in summed):
            matmul(x_mat, y_mat, out_mat)
        else:  # a later chunk of a contracted axis: accumulate
            if partial is None or partial.shape != out_mat.shape:
                partial = np.empty(out_mat.shape, out.dtype)
            matmul(x_mat, y_mat, partial)
            np.add(out_mat, partial, out=out_mat)
        if epilogue is not None and all(
            starts[position] + levels[position].step >= levels[position].length
            for position in summed
        ):
            epilogue(tuple(index))


def _chunk_levels(
    xv: np.ndarray,
    yv: np.ndarray,
    np_: int,
    nm: int,
    nk: int,
    x_copy: int,
    y_copy: int,
    out_bytes: int,
    tuning: ContractionTuning,
) -> list[_Level]:
    """Nested chunks so that each chunk copies at most about `copy_chunk_bytes` of operand (im2col)
    and, when an epilogue follows, writes at most about `output_chunk_bytes` of output. Chunked, in
    order: the batch-like (P) axes, outermost first; then the free axes of the copied operand (Y's
    when nothing is copied) in output order, an inner one only once the outer ones are down to
    single indices (so output chunks stay views), keeping at least `min_chunk_columns` output
    columns; then, for copies only, the contracted axes (chunks accumulate). The chunks of an
    output axis are of one size, an even number of them (so they may be under
    `min_chunk_columns`: 768 columns are two chunks of 384)."""
    copy = x_copy + y_copy
    if copy <= tuning.copy_chunk_bytes and out_bytes <= tuning.output_chunk_bytes:
        return []
    big_is_x = copy > 0 and x_copy >= y_copy
    big = xv if big_is_x else yv
    big_axis = 0 if big_is_x else 1
    free: list[tuple[int | None, int | None, int | None]]
    if big_is_x:
        free = [(np_ + j, None, np_ + j) for j in range(nm)]
    else:
        free = [(None, np_ + nk + j, np_ + nm + j) for j in range(yv.ndim - np_ - nk)]
    contracted: list[tuple[int | None, int | None, int | None]] = [
        (np_ + nm + j, np_ + j, None) for j in range(nk)
    ]
    levels: list[_Level] = []

    def over() -> bool:
        return copy > tuning.copy_chunk_bytes or out_bytes > tuning.output_chunk_bytes

    def split(roles: tuple[int | None, int | None, int | None], length: int, minimum: int) -> int:
        nonlocal copy, out_bytes
        shares_copy = roles[big_axis] is not None and big.shape[roles[big_axis]] == length  # type: ignore[index]  # the big operand has this axis
        step = length
        if shares_copy and copy > tuning.copy_chunk_bytes:
            step = min(step, int(tuning.copy_chunk_bytes * length // copy))
        if roles[2] is not None and out_bytes > tuning.output_chunk_bytes:
            step = min(step, int(tuning.output_chunk_bytes * length // out_bytes))
        step = min(length, max(1, step, minimum))
        if step < length and roles[2] is not None:
            # Chunks of one size, an even number of them: each is a task of the call's threads
            # (768 columns in steps of 512 were tasks of 512 and 256 columns: at two threads the
            # caller's took twice the worker's).
            count = -(-length // step)
            step = -(-length // (count + count % 2))
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
        inner = math.prod(big.shape[r[big_axis]] for r in free[position + 1 :])  # type: ignore[index]  # the big operand has this axis
        length = big.shape[roles[big_axis]]  # type: ignore[index]  # the big operand has this axis
        if length > 1 and split(roles, length, -(-tuning.min_chunk_columns // max(inner, 1))) > 1:
            break
    for roles in sorted(contracted, key=lambda r: -abs(big.strides[r[big_axis]])):  # type: ignore[index]  # the big operand has this axis
        if copy <= tuning.copy_chunk_bytes:
            break
        length = big.shape[roles[big_axis]]  # type: ignore[index]  # the big operand has this axis
        if length > 1:
            split(roles, length, 1)
    return levels


def _merged_shape(shape: tuple[int, ...], np_: int, first: int) -> tuple[int, ...]:
    """[P..., G1..., G2...] -> [P..., prod(G1), prod(G2)] where G1 has `first` axes."""
    return (*shape[:np_], math.prod(shape[np_ : np_ + first]), math.prod(shape[np_ + first :]))


def _merged_in_place(view: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """The view reshaped to `shape` without a copy, or None where that takes one."""
    try:
        return np.reshape(view, shape, copy=False)
    except ValueError:
        return None


def _take(x: np.ndarray, axis: int | None, start: int, stop: int) -> np.ndarray:
    if axis is None or x.shape[axis] == 1:  # an axis the view lacks, or broadcast: every chunk
        return x
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


class _Buffers:
    """One reusable staging buffer per operand for the chunk copies (kept by the thread for its
    later products, up to kept_buffers.KEPT_BYTES each); an operand the chunking does not slice is
    merged (copied) once."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def merged(self, key: str, view: np.ndarray, np_: int, first: int) -> np.ndarray:
        last = self._last.get(key)
        if last is not None and last[0] is view:
            return last[1]
        shape = _merged_shape(view.shape, np_, first)
        try:
            matrix = np.reshape(view, shape, copy=False)
        except ValueError:
            staging = kept_buffer(key, view.shape, view.dtype)
            np.copyto(staging, view)
            matrix = staging.reshape(shape)
        self._last[key] = (view, matrix)
        return matrix
