"""Contractions with few reduced positions and no labels of one operand's own (a depthwise
convolution: `sum over (kh, kw) of window[n, c, h, w, kh, kw] * weight[c, kh, kw]`), computed as
a sum of elementwise products over the whole output, one per reduced position:

    out = A[r_0] * B[r_0] + A[r_1] * B[r_1] + ...      (r: the reduced labels' positions)

where A[r] is the full operand at reduced position r (for a convolution, the input shifted by
one kernel offset: a strided view, never copied) and B[r] the other operand there, broadcast.
The matrix engine (`contraction.py`) would run such a contraction as matrix-vector products on
an im2col copy (one column per output channel: BLAS at its slowest); here each product is one
NumPy multiply and one add over long contiguous runs.

Runs are made long by merging the two innermost output dims when the full operand steps the
outer one by a whole number `m` of inner steps, `m` at least the inner length (an image row and
its padding): the output is then computed along the flat run of `(rows - 1) * m + columns`
positions, the padding positions in between computed and dropped (a convolution's window
reads the padded image, which holds them). The output is made in chunks of the leading dims
that keep the accumulator in cache; an epilogue (a bias) runs on each finished chunk.

Summation order differs from a matrix product's (each output element is a plain sum over the
reduced positions in row-major order), within the rounding of any order; a sum of -0.0
products is +0.0, as from the zero-initialized accumulators of BLAS and torch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

# At most this many reduced positions (a 9x9 kernel); more products run on the matrix engine.
MAX_POSITIONS = 81
# The full operand's smallest step along a kept label, in elements, at most this (a
# convolution's stride): longer steps make the products' runs scattered, where the matrix
# engine reads the operand in order.
MAX_INNER_STEP = 4
# A merge of the two innermost output dims may compute at most this factor more positions.
MAX_MERGE_WASTE = 1.5
# The accumulator of one chunk holds about this many bytes (measured on 56x56 and 112x112 images
# with 3x3 and 7x7 kernels: 4-18 channels a chunk ran up to 3x faster than whole tensors).
CHUNK_BYTES = 256 << 10

Epilogue = Callable[[tuple[slice, ...]], None]


@attrs.frozen
class MultiplyAccumulateRecipe:
    """How operands of one layout are contracted: both seen in the order
    (outer kept dims..., chunked dim, reduced dims..., run) through strided views made from
    the full operand's and the other's strides (bytes), then summed product by product."""

    full_is_a: bool
    # Per operand (full, other): strides in bytes in the order above (views start at the
    # arrays' first element).
    full_strides: tuple[int, ...]
    other_strides: tuple[int, ...]
    view_shape: tuple[int, ...]  # outer..., chunked, reduced..., run (other: run may be 1)
    other_run: int  # the other operand's run length: 1 (broadcast) or the run's
    outer_shape: tuple[int, ...]
    chunked: int  # length of the chunked dim
    chunk: int
    reduced_shape: tuple[int, ...]
    run: int
    # The output as (outer..., chunked, rows, columns) (rows 1 without a merge) and how the run
    # maps onto it: row r, column c at run position r * row_step + c.
    out_view: tuple[int, ...]
    row_step: int
    # Per output dim: the position among the outer dims and the chunked one (last) of its label,
    # or None (taken whole).
    out_roles: tuple[int | None, ...]

    def run_into(
        self, a: np.ndarray, b: np.ndarray, out: np.ndarray, epilogue: Epilogue | None = None
    ) -> None:
        full, other = (a, b) if self.full_is_a else (b, a)
        itemsize = out.itemsize
        full_view = np.lib.stride_tricks.as_strided(
            full, self.view_shape, self.full_strides, writeable=False
        )
        other_shape = self.view_shape[:-1] + (self.other_run,)
        other_view = np.lib.stride_tricks.as_strided(
            other, other_shape, self.other_strides, writeable=False
        )
        outer_count = len(self.outer_shape)
        reduced_count = len(self.reduced_shape)
        # Reduced dims first, so each product indexes its position with one tuple of ints.
        order = (
            *range(outer_count + 1, outer_count + 1 + reduced_count),
            *range(outer_count + 1),
            outer_count + 1 + reduced_count,
        )
        full_view = full_view.transpose(order)
        other_view = other_view.transpose(order)
        positions = list(itertools.product(*map(range, self.reduced_shape)))
        every_position = (slice(None),) * reduced_count
        shaped = out.reshape(self.out_view)
        rows, columns = self.out_view[-2:]
        accumulator = np.empty((self.chunk, self.run), out.dtype)
        zero = out.dtype.type(0)
        product = np.empty_like(accumulator)
        for outer in itertools.product(*map(range, self.outer_shape)):
            for start in range(0, self.chunked, self.chunk):
                stop = min(start + self.chunk, self.chunked)
                index: tuple[Any, ...] = (*outer, slice(start, stop))
                total = accumulator[: stop - start]
                scratch = product[: stop - start]
                full_block = full_view[every_position + index]
                other_block = other_view[every_position + index]
                for number, position in enumerate(positions):
                    x = full_block[position]
                    y = other_block[position]
                    if number == 0:
                        np.multiply(x, y, out=total)
                    else:
                        np.multiply(x, y, out=scratch)
                        np.add(total, scratch, out=total)
                laid = np.lib.stride_tricks.as_strided(
                    total,
                    (stop - start, rows, columns),
                    (self.run * itemsize, self.row_step * itemsize, itemsize),
                    writeable=False,
                )
                # + 0.0 as the copy: a sum whose every product is -0.0 is +0.0, as from a
                # zero-initialized accumulator (BLAS's, torch's); nothing else changes.
                np.add(laid, zero, out=shaped[index])
                if epilogue is not None:
                    epilogue(self._out_index(outer, start, stop))

    def _out_index(self, outer: tuple[int, ...], start: int, stop: int) -> tuple[slice, ...]:
        """The part of the output (in its own shape) a chunk covers."""
        index: list[slice] = []
        for role in self.out_roles:
            if role is None:
                index.append(slice(None))
            elif role == len(self.outer_shape):
                index.append(slice(start, stop))
            else:
                index.append(slice(outer[role], outer[role] + 1))
        return tuple(index)


def plan_multiply_accumulate(
    a: np.ndarray,
    a_labels: Sequence[int],
    b: np.ndarray,
    b_labels: Sequence[int],
    out_labels: Sequence[int],
    sizes: Sequence[int],
) -> MultiplyAccumulateRecipe | None:
    """The recipe for operands of a's and b's layout, or None when the contraction is not of
    this module's kind: a real float dtype, every label of one operand (the other's) also the
    full one's, at most MAX_POSITIONS reduced positions, each reduced label of size > 1 the full
    operand's, and the full operand stepping at most MAX_INNER_STEP elements along some kept
    label (its runs are then close to contiguous)."""
    if a.dtype not in (np.float32, np.float64) or b.dtype != a.dtype:
        return None
    if any(size == 0 for size in sizes):
        return None
    if set(b_labels) <= set(a_labels):
        full, full_labels, other, other_labels, full_is_a = a, a_labels, b, b_labels, True
    elif set(a_labels) <= set(b_labels):
        full, full_labels, other, other_labels, full_is_a = b, b_labels, a, a_labels, False
    else:
        return None
    kept = [label for label in out_labels if sizes[label] > 1]
    reduced = [label for label in range(len(sizes)) if label not in out_labels and sizes[label] > 1]
    if not reduced or math.prod(sizes[label] for label in reduced) > MAX_POSITIONS:
        return None
    if any(label not in full_labels for label in reduced + kept):
        return None
    itemsize = full.itemsize

    def strides_of(array: np.ndarray, labels: Sequence[int]) -> dict[int, int]:
        step = dict.fromkeys(range(len(sizes)), 0)
        for axis, label in enumerate(labels):
            if array.shape[axis] != 1:
                step[label] = array.strides[axis]
        return step

    full_step = strides_of(full, full_labels)
    other_step = strides_of(other, other_labels)
    if not kept or any(full_step[label] % itemsize for label in kept + reduced):
        return None
    inner_label = kept[-1]
    if not 0 < abs(full_step[inner_label]) <= MAX_INNER_STEP * itemsize:
        return None
    # Merge the two innermost kept labels into one run when the full operand's outer step is a
    # whole number of inner steps covering the inner length, and the other operand steps alike.
    rows, columns, row_step = 1, sizes[inner_label], 0
    leading = kept[:-1]
    if leading:
        outer_label = leading[-1]
        inner_step, outer_step = full_step[inner_label], full_step[outer_label]
        m = outer_step // inner_step if inner_step and outer_step % inner_step == 0 else 0
        length = (sizes[outer_label] - 1) * m + columns
        if (
            m >= columns
            and other_step[outer_label] == m * other_step[inner_label]
            and length <= MAX_MERGE_WASTE * sizes[outer_label] * columns
        ):
            rows, row_step = sizes[outer_label], m
            leading = leading[:-1]
    run = (rows - 1) * row_step + columns
    if not leading:
        leading_sizes: list[int] = [1]
        full_leading, other_leading = [0], [0]
    else:
        leading_sizes = [sizes[label] for label in leading]
        full_leading = [full_step[label] for label in leading]
        other_leading = [other_step[label] for label in leading]
    outer_shape = tuple(leading_sizes[:-1])
    chunked = leading_sizes[-1]
    chunk = max(1, min(chunked, CHUNK_BYTES // (run * itemsize)))
    reduced_shape = tuple(sizes[label] for label in reduced)
    other_run = run if other_step[inner_label] else 1
    # Every label the output lacks a dim for (size 1) is absent from both views; the output
    # itself is C-contiguous, so its row-major view (outer..., chunked, rows, columns) is a
    # reshape.
    return MultiplyAccumulateRecipe(
        full_is_a=full_is_a,
        full_strides=(
            *full_leading,
            *(full_step[label] for label in reduced),
            full_step[inner_label],
        ),
        other_strides=(
            *other_leading,
            *(other_step[label] for label in reduced),
            other_step[inner_label],
        ),
        view_shape=(*outer_shape, chunked, *reduced_shape, run),
        other_run=other_run,
        outer_shape=outer_shape,
        chunked=chunked,
        chunk=chunk,
        reduced_shape=reduced_shape,
        run=run,
        out_view=(*outer_shape, chunked, rows, columns),
        row_step=row_step if rows > 1 else columns,
        out_roles=tuple(leading.index(label) if label in leading else None for label in out_labels),
    )


__all__ = ["MultiplyAccumulateRecipe", "plan_multiply_accumulate"]
