"""A dense stride-1 convolution with a 2-d kernel read from its unpadded input: shifted
products over copies of the input stacked along the contraction.

The matrix engine's shifted products (`contraction._Shifted`) read a convolution's padded input
at each of the kernel's k_h·k_w offsets: k_h·k_w accumulating products of C_in rows each, over
output rows widened to the padded width (their padding columns computed into a scratch buffer,
then dropped while it is copied into the output), after a step that made the padded input.
Where that padding is read by the product alone (`padded_products.py`), each task (an image, or
a band of its output rows) instead copies the unpadded images once per kernel column, each copy
shifted by its column's offset and laid out as the output's rows (`out_columns` wide, no
padding columns), with zeros where the kernel column reads the padding:

    copies[j, c, r, x] = padded[c, first_row + r, first_column + x + j·d_w]

so the kernel row i's window is the copies from row i·d_h on, for every kernel column and input
channel at once: one matrix [k_w·C_in, rows·out_columns]. The k_h products (each of k_w·C_in
rows: a larger contraction, nearer gemm's full speed) accumulate straight into the output rows
(gemm's beta = 1), and the epilogue runs on them while they are in cache. Neither the padded
input nor the widened scratch is made. One thread, NumPy's OpenBLAS on an AMD EPYC,
convolutions with their bias against the padding step and the shifted products: 1.08-1.15x
faster (docs/executor.md, "Dense convolutions reading their unpadded input").

The products sum each output element over its kernel rows in order, each a gemm over the kernel
columns and channels, where the shifted products summed the k_h·k_w offsets in order: the same
terms, another rounding order. The tasks are those of the shifted products (`bands`), fixed when
the plan is made, so every thread count gives the same bits.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from .blas import matmul_sum
from .contraction import ContractionRecipe, Epilogue, spread_epilogue
from .kept_buffers import kept_buffer
from .multiply_accumulate import ZeroPadded, positions_inside
from .strided import strided_view
from .threads import run_parts


@attrs.frozen
class StackedCopies:
    """How a recipe's windows operand, a window of a zero-padded input, is read from the
    unpadded input (see the module doc): X (the weights) packed per call as [k_h, P..., M,
    (k_w, C_in)] by `x_order`; each P index's images start at image `first_image` plus the P
    steps (`image_steps`, in images) of the unpadded input seen as (images, rows, columns), its
    channels `channel_step` images apart; the copies start at padded row `first_row` and column
    `first_column` (the source's row and column: minus `top`, `left`)."""

    x_order: tuple[int, ...]
    x_packed: tuple[int, ...]
    image_steps: tuple[int, ...]
    first_image: int
    channel_step: int
    channels: int
    kernel: tuple[int, int]  # k_h, k_w
    dilation: tuple[int, int]  # d_h, d_w, in padded rows and columns
    first_row: int
    first_column: int
    source_shape: tuple[int, int]
    top: int
    left: int
    out_columns: int
    bands: tuple[tuple[int, int], ...]  # output rows of each task (the shifted products')

    def run(
        self,
        recipe: ContractionRecipe,
        source: np.ndarray,
        weights: np.ndarray,
        out: np.ndarray,
        epilogue: Epilogue | None,
    ) -> None:
        """Into `out` (C-contiguous, of the output's shape): the recipe's contraction of the
        windows of the zero-padded `source` (the unpadded input, C-contiguous) and `weights`
        (the other operand, in its operand shape); then the epilogue on each task's rows."""
        xv = recipe.arranged(weights, recipe.x_is_a).reshape(recipe.x_view)
        packed = kept_buffer("stacked x", self.x_packed, xv.dtype)
        np.copyto(
            packed.reshape([xv.shape[axis] for axis in self.x_order]), xv.transpose(self.x_order)
        )
        inner = epilogue
        if inner is not None and recipe.present_axes is not None:
            inner = spread_epilogue(inner, recipe.present_axes, out.ndim)
        product = out.reshape(recipe.product_shape)
        np_ = recipe.batch_axes
        p_shape = product.shape[:np_]
        x_p_shape = xv.shape[:np_]
        rows, columns = self.source_shape
        images = source.reshape(-1, rows, columns)
        (kernel_rows, kernel_columns), row_step = self.kernel, self.dilation[0]
        widest = max(stop - start for start, stop in self.bands)
        copy_rows = widest + (kernel_rows - 1) * row_step
        m = product.shape[np_]
        itemsize = out.itemsize

        def task(position: tuple[int, ...], start: int, stop: int) -> Callable[[], None]:
            def run() -> None:
                first = self.first_image + sum(i * s for i, s in zip(position, self.image_steps))
                channels = images[
                    first : first + self.channels * self.channel_step : self.channel_step
                ]
                copies = kept_buffer(
                    "stacked copies",
                    (kernel_columns, self.channels, copy_rows, self.out_columns),
                    out.dtype,
                )
                needed = stop - start + (kernel_rows - 1) * row_step
                self._copy(channels, copies, start, needed)
                band = (stop - start) * self.out_columns
                windows = strided_view(
                    copies,
                    (kernel_rows, kernel_columns * self.channels, band),
                    (row_step * self.out_columns * itemsize, copies.strides[1], itemsize),
                    writeable=False,
                )
                x_index = tuple(i if size > 1 else 0 for i, size in zip(position, x_p_shape))
                x_at: tuple[Any, ...] = (slice(None), *x_index)
                x_slices = packed[x_at]  # [k_h, M, (k_w, C_in)]
                out_at: tuple[Any, ...] = (*position, slice(None), slice(start, stop))
                target = product[out_at]
                matmul_sum(x_slices, windows, np.reshape(target, (m, band), copy=False), 1)
                if inner is not None:
                    inner(
                        (
                            *(slice(i, i + 1) for i in position),
                            slice(None),
                            slice(start, stop),
                            slice(None),
                        )
                    )

            return run

        run_parts(
            [
                task(position, start, stop)
                for position in itertools.product(*(range(size) for size in p_shape))
                for start, stop in self.bands
            ]
        )

    def _copy(self, channels: np.ndarray, copies: np.ndarray, start: int, needed: int) -> None:
        """copies[j, :, r, x] = the padded images' element (first_row + start + r,
        first_column + x + j·d_w) for r < `needed`: the unpadded channels' element, or zero
        where it lies in the padding."""
        rows, columns = self.source_shape
        # Copy row r reads source row `row + r`; the rows inside the source: [low, high).
        row = self.first_row + start - self.top
        low, high = positions_inside(row, 1, needed, rows)
        if low:
            copies[:, :, :low] = 0
        if high < needed:
            copies[:, :, high:needed] = 0
        if low == high:
            return
        for j in range(self.kernel[1]):
            # Copy j's column x reads source column `shift + x`; the columns inside: [left, right).
            shift = self.first_column + j * self.dilation[1] - self.left
            left, right = positions_inside(shift, 1, self.out_columns, columns)
            laid = copies[j, :, low:high]
            if left:
                laid[:, :, :left] = 0
            if right < self.out_columns:
                laid[:, :, right:] = 0
            if left < right:
                laid[:, :, left:right] = channels[
                    :, row + low : row + high, shift + left : shift + right
                ]


def plan_stacked_copies(
    recipe: ContractionRecipe,
    a: np.ndarray,
    b: np.ndarray,
    windows_is_a: bool,
    padded: ZeroPadded,
) -> StackedCopies | None:
    """The stacked copies that compute `recipe` (planned for a and b, one of them the windows
    of the zero-padded input `padded` describes) from the unpadded input, or None where the
    recipe is not shifted products of a 2-d kernel's windows over its padded images, one output
    channel axis and the output rows its own."""
    # Where the shifted products would not run (too few columns per product: small images),
    # neither do these: the matrix engine's im2col copy makes the whole batch's columns one
    # product (512 channels on 7x7 at batch 4: 9.7 ms against 11.8 ms in copies per image).
    shifted = recipe.shifted
    if (
        shifted is None
        or recipe.a_summed
        or recipe.b_summed
        or recipe.reorder is not None
        or recipe.broadcast_shape is not None
        or recipe.scale != 1
        or not recipe.epilogue_per_chunk
        or recipe.x_is_a == windows_is_a
        or recipe.rows_axes != 1
        or recipe.contracted_axes != 3
    ):
        return None
    y = recipe.arranged(a if windows_is_a else b, windows_is_a)
    try:
        yv = np.reshape(y, recipe.y_view, copy=False)
    except ValueError:
        return None
    np_ = recipe.batch_axes
    if yv.ndim != np_ + 5:
        return None  # [P..., C_in, k_h, k_w, rows, columns]
    itemsize = yv.itemsize
    padded_rows, padded_columns = padded.shape
    image = padded_rows * padded_columns * itemsize
    channel_stride, kh_stride, kw_stride, row_stride, column_stride = yv.strides[np_:]
    channels, kernel_rows, kernel_columns, _, out_columns = yv.shape[np_:]  # [.., rows, columns]
    if (
        yv.dtype not in (np.float32, np.float64)
        or row_stride != padded_columns * itemsize
        or column_stride != itemsize
        or channel_stride % image
        or channel_stride <= 0
        or kh_stride % (padded_columns * itemsize)
        or kw_stride % itemsize
        or kh_stride <= 0
        or kw_stride <= 0
        or kernel_columns < 2
    ):
        return None
    image_steps = []
    for size, stride in zip(yv.shape[:np_], yv.strides[:np_]):
        if size > 1 and stride % image:
            return None
        image_steps.append(stride // image if size > 1 else 0)
    first_image, within = divmod(padded.origin, padded_rows * padded_columns)
    first_row, first_column = divmod(within, padded_columns)
    xv_ndim = len(recipe.x_view)  # [P..., M, C_in, k_h, k_w]
    if xv_ndim != np_ + 4:
        return None
    m = recipe.x_view[np_]
    bands = shifted.bands
    x_order = (np_ + 2, *range(np_), np_, np_ + 3, np_ + 1)
    x_packed = (kernel_rows, *recipe.x_view[:np_], m, kernel_columns * channels)
    return StackedCopies(
        x_order,
        x_packed,
        tuple(image_steps),
        first_image,
        channel_stride // image,
        channels,
        (kernel_rows, kernel_columns),
        (kh_stride // (padded_columns * itemsize), kw_stride // itemsize),
        first_row,
        first_column,
        padded.source_shape,
        padded.top,
        padded.left,
        out_columns,
        bands,
    )


__all__ = ["StackedCopies", "plan_stacked_copies"]
