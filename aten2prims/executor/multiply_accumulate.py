"""Contractions with few reduced positions and no labels of one operand's own (a depthwise
convolution: `sum over (kh, kw) of window[n, c, h, w, kh, kw] * weight[c, kh, kw]`), computed as
a sum of elementwise products over the whole output, one per reduced position:

    out = A[r_0] * B[r_0] + A[r_1] * B[r_1] + ...      (r: the reduced labels' positions)

where A[r] is the full operand at reduced position r (for a convolution, the input shifted by
one kernel offset: a strided view) and B[r] the other operand there, broadcast. The matrix
engine (`contraction.py`) would run such a contraction as matrix-vector products on an im2col
copy of the whole input (one column per output channel: BLAS at its slowest, on a copy far
larger than any cache).

When B is constant along the run (a per-channel kernel), a chunk of channels is **gathered**:
its runs A[r] for every r are copied into one buffer (channel, r, run) of a few MiB (in L2 and
L3), in one NumPy call, and one matrix-vector product per channel (weights (1, r) times the
buffer, BLAS) sums them. That is a copy and a read per kernel position where a multiply and an
add per position (`out += A[r] * B[r]`, the fallback when B varies along the run or one
channel's buffer would be too large) make two passes that each write: 1.3-2.8x faster on
ConvNeXt's and EfficientNet's layers.

With a kernel of several reduced labels (rows and columns) over contiguous runs, the runs of
every kernel column are one shifted copy of the image (`_Copies`), and the kernel rows offsets
into it. One matrix product per channel (its kernel as a (rows, columns) matrix times its
copies, BLAS) makes every kernel row's sum over the whole copies at once, and a matrix-vector
product by ones sums those partial sums, each read from its kernel row's offset on (a skewed
view: BLAS reads it as a matrix whose lda is the partial sums' length plus the offset). A 7x7
kernel then copies 7 shifted images rather than 49 runs and reads them once: chosen where the
copies and partial sums move at most about as many elements as the runs (every 2-d kernel
but 3x3 ones on images smaller than 7x7).
With a matrix-vector product per kernel row instead (reading the copies once per row) that was
1.1-1.4x faster than the runs; the matrix product is 1.2-1.4x faster again.

Runs are made long by merging the two innermost output dims when the full operand steps the
outer one by a whole number `m` of inner steps, `m` at least the inner length (an image row and
its padding): the output is then computed along the flat run of `(rows - 1) * m + columns`
positions, the padding positions in between computed and dropped (a convolution's window
reads the padded image, which holds them). The output is made in chunks of the leading dims
that keep the accumulator in cache; an epilogue (a bias) runs on each finished chunk.

A strided full operand (a convolution of stride > 1) has no such runs: its products would
read every s-th element. With few kernel positions (3x3) and a per-channel kernel, the
windows are gathered directly, a strided copy per position into a buffer laid out as the
output's chunk, and the matrix-vector products write the output itself. Otherwise its memory
is seen as an image (rows of a whole number of bytes, elements contiguous in them) and each
chunk of it is first copied into s_h x s_w phase images (`_Phases`: phase (a, b) holds the image's rows a, a + s_h, ... and columns b, b + s_w, ...):
every kernel position then reads one phase at an offset, so the products run over long
contiguous runs again (the same merged rows, of the phase's width), as for stride 1. The copy
is one pass over the chunk's input, made while it stays in cache.

Chunks are independent (each writes its own part of the output, with the running thread's
buffers), and the call's threads share them (`run_parts`): a chunk of GATHER_BYTES is a few
NumPy calls of 100 µs and more (copy, products, copy into the output, epilogue), each releasing
the GIL for all of it. (Chunks of 1 MiB, a few calls of 5-50 µs each, had made two threads
slower than one: the threads handed the GIL to each other at nearly every call;
docs/executor.md, "Threads".)

With MKL (`prims/mkl.py`, asked at each call) a product with a per-channel kernel (every
depthwise convolution) runs instead as **batched axpys** (`_Axpy`): `y += w * x` per channel
and kernel position, x read from the operand in place (no gathered copy; a strided operand
from the part's phase images, copied first, as above), y a run of the thread's accumulator.
The output is cut, when the plan is made, into parts of about AXPY_PART_BYTES of accumulator
(ranges of channels of one outer index); a part is one MKL call for all its channels and
positions (ctypes releases the GIL for all of it), then the copy into the output and the
epilogue while the part is in L2, so the parts are shared among the call's threads. MKL skips an axpy whose weight is zero (where 0 * inf must be
NaN): a kernel holding a zero runs as the chunks above. Each channel's sum is a plain sum in
order of the kernel positions from +0.0 (so -0.0 products sum to +0.0).

A zero-padded full operand whose padding only this product reads (`padded_products.py`) is
read from its unpadded source when the product runs as shifted copies, gathered strided
windows or gathered runs over phase images (`run_zero_padded`): they are copied from the
source's images, the padding's positions set to zero (the copies without the padding columns,
so the sum is written into the output itself); the same products in the same order as over
the padded operand. Strided windows with fewer phases than kernel positions (3x3 at stride 2:
4 for 9) copy each phase once (a strided copy) and each window from its phase (a contiguous
copy from an offset). The copies and zeros are few NumPy calls per chunk (all kernel columns'
shifted copies one strided copy; the zeros one call per kernel row or column), as short calls
hand the GIL between the call's threads at every call.

Summation order differs from a matrix product's over the whole im2col copy (gathered: BLAS's
matrix-vector order over one channel's positions, fixed by the sizes; else a plain sum in
row-major order of the positions), within the rounding of any order; a sum of -0.0 products is
+0.0, as from the zero-initialized accumulators of BLAS and torch.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from prims import mkl

from .blas import matmul
from .kept_buffers import kept_buffer
from .strided import strided_view
from .threads import run_parts

# At most this many reduced positions (a 9x9 kernel); more products run on the matrix engine.
MAX_POSITIONS = 81
# The full operand's smallest step along a kept label, in elements, at most this (a
# convolution's stride): longer steps make the products' runs scattered, where the matrix
# engine reads the operand in order.
MAX_INNER_STEP = 4
# A merge of the two innermost output dims may compute at most this factor more positions (a
# small image's padding columns: a 7x7 image padded by 3 computes 85 positions for 49, in 8 ms
# at batch 4 and 768 channels, where the unmerged rows took 240 ms, one short run per batch
# index and channel).
MAX_MERGE_WASTE = 4.0
# The accumulator of one chunk holds about this many bytes (measured on 56x56 and 112x112 images
# with 3x3 and 7x7 kernels: 4-18 channels a chunk ran up to 3x faster than whole tensors); with
# phases, the chunk's phase images hold about this many.
CHUNK_BYTES = 256 << 10
# With gathered runs, the chunk's phase images hold about this many bytes: measured on
# EfficientNet-B0's 5x5 stride-2 layers (batch 4, one thread, both planned in one process,
# called alternately) against 256 KiB, 1.1-1.15x faster (fewer, longer NumPy calls), 2 MiB
# 1.05x slower than 1 MiB.
PHASE_CHUNK_BYTES = 1 << 20
# A gathered chunk's buffer (channels x positions x run; shifted copies and their partial sums)
# holds about this many bytes. Measured at batch 4 with NumPy's kernels on an AMD EPYC (1 MiB
# of L2 per core, 32 MiB of L3), one thread, against 1 MiB: 4 MiB 1.1-1.25x faster on 3x3,
# 5x5 and 7x7 layers (fewer chunks, fewer calls), 16 MiB 1.1-1.8x slower; and the longer
# calls let two threads share the chunks. (On an older Intel machine 1 MiB had been fastest,
# 256 KiB up to 1.7x and 2 MiB up to 1.5x slower.) One channel's buffer may hold up to
# GATHER_MAX_BYTES; larger ones (huge images) run as multiply-adds.
GATHER_BYTES = 4 << 20
GATHER_MAX_BYTES = 4 << 20
# A strided full operand with at most this many reduced positions gathers its windows directly
# (strided reads of the output's positions, no phase images and no padding columns): measured at
# batch 4, 3x3 stride-2 layers ran 1.1-1.25x faster so (a strided read per position against a
# phase copy plus a contiguous copy per position), 5x5 ones 1.0-1.1x slower.
WINDOW_MAX_POSITIONS = 12
# Shifted copies (`_Copies`) replace gathered runs when they move at most this factor of the
# elements: the copies plus the partial sums written and read back, against one run per
# kernel position. Measured at batch 4 (gathered runs / copies): 7x7 layers 1.07-1.40 (traffic
# 0.44-0.56), 5x5 ones 1.11-1.25 at 0.63-0.66. With chunks of 4 MiB (NumPy's kernels, AMD EPYC,
# one thread, process CPU time, both planned in one process, called in shuffled order): 5x5 on
# 7x7 images 1.2x (traffic 0.72); 3x3 layers within 5% of the runs from 7² to 112² (traffic
# 1.006-1.098). 3x3 ones take the copies all the same: only the copies read a zero padding's
# source in place of the padded operand (`run_zero_padded`), 1.2-1.7x faster than the runs.
COPIES_MAX_TRAFFIC = 1.1
# With MKL, a part of a depthwise product (`_Axpy`) accumulates about this many bytes of its
# output's runs: one batched axpy call, then the copy into the output and the epilogue while
# the part is in L2.
AXPY_PART_BYTES = 1 << 20
# Shifted copies read from a zero-padding's source (`run_zero_padded`) zero the positions the
# padding holds: a NumPy call per side and per kernel column shifted off the image, each
# running its inner loop once per row for one to three elements; or one AND of all the copies'
# bits with a mask, a pass over them. The mask pays on narrow images whose copies shift by at
# least 2 columns (kernels of 5 columns and more, or dilated ones: zeroed runs of two elements
# and more): measured at batch 4, one and two threads, both in one process, calls
# alternating, medians of 21, the whole layer masked / zeroed: 7x7 kernels on 7² images
# 0.77-0.81, on 14² 0.79-0.91, on 28² 0.94-1.00, on 56² 0.96-1.05; 5x5 on 7² 0.81-0.82, on
# 14² 0.89-0.98, on 28² 0.98-1.02; 3x3 on 7² 1.04-1.05 (runs of one element).
MASK_MAX_COLUMNS = 16
MASK_MIN_SHIFT = 2

Epilogue = Callable[[tuple[slice, ...]], None]


@attrs.frozen
class _Phases:
    """A strided full operand seen as an image per leading index: `rows` x `columns` elements,
    rows `row_bytes` apart, elements contiguous; split into `steps[0]` x `steps[1]` phase
    images of `shape` (rows, columns) each. Kernel position number k reads phase
    `taps[k][:2]` from flat offset `taps[k][2]` on (the output's row r, column c at run position
    r * shape[1] + c)."""

    rows: int
    columns: int
    row_bytes: int
    steps: tuple[int, int]
    shape: tuple[int, int]
    taps: tuple[tuple[int, int, int], ...]


@attrs.frozen
class _Copies:
    """Gathered runs of a full operand with contiguous runs and several reduced labels, as one
    copy per position of its `axis`-th reduced label (the one stepping least: a kernel's
    columns), `length` elements from that position on, its step `step` bytes: the other
    reduced labels' positions (`other_shape`, stepping `other_steps` bytes: a kernel's rows) are
    offsets into the copies, which BLAS reads as matrices (copies x run) in place."""

    axis: int
    length: int
    step: int
    other_shape: tuple[int, ...]
    other_steps: tuple[int, ...]


@attrs.frozen
class ZeroPadded:
    """A full operand that is a window of a zero-padded copy of an unpadded operand: per leading
    index an image of `shape` (rows, columns) read from an unpadded image of `source_shape`
    placed at (`top`, `left`) in it, the padding zeros. The window starts at storage element
    `origin` of the padded tensor (C-contiguous)."""

    shape: tuple[int, int]
    source_shape: tuple[int, int]
    top: int
    left: int
    origin: int


@attrs.frozen
class _Axpy:
    """A product with a per-channel kernel as one axpy per channel and kernel position
    (`y += w * x`, x the full operand's run read in place, `step` elements apart, from
    `offsets[position]` bytes after the channel's first element), with MKL: each part's axpys
    (`parts`: outer index, first and last chunked index; fixed by the plan) in one call of
    MKL's batched axpy into the thread's accumulator, laid as (channels, rows x `row_step`),
    then copied into the output (padding columns dropped) and the epilogue run on it. A
    strided operand (`phases`) is first copied, part by part, into the thread's phase images,
    which the axpys then read as contiguous runs (stride 1)."""

    step: int
    row_step: int
    run: int
    parts: tuple[tuple[tuple[int, ...], int, int], ...]
    # x's bytes from the full operand's first element (or the phase images') of each part's
    # outer index's first channel, of one channel to the next, of each kernel position from
    # its channel's first element; y's bytes of one channel's accumulator. With `from_part`,
    # x's channels count from the part's first one (each part's own phase images).
    origins: tuple[int, ...]
    channel_step: int
    offsets: np.ndarray = attrs.field(eq=False, repr=False)
    accumulator_bytes: int
    from_part: bool
    phases: _Phases | None = None
    # Per part, made at its first batched call (only with MKL: a plan made without it never
    # holds them; ConvNeXt-T's would take 25 MB): its problems' x and y offsets in bytes,
    # channel by channel, position by position, their lengths and x steps (MKL_INT).
    _tables: dict[int, tuple[np.ndarray, ...]] = attrs.field(
        factory=dict, eq=False, repr=False, init=False
    )

    def table(self, number: int) -> tuple[np.ndarray, ...]:
        """Part `number`'s (x offsets, y offsets, lengths, x steps, ones)."""
        found = self._tables.get(number)
        if found is None:
            _, start, stop = self.parts[number]
            channels = np.arange(start, stop, dtype=np.int64)[:, None]
            first = start if self.from_part else 0
            x_offsets = (
                self.origins[number] + (channels - first) * self.channel_step + self.offsets
            ).ravel()
            y_offsets = np.repeat(
                (channels[:, 0] - start) * self.accumulator_bytes, len(self.offsets)
            )
            count = len(x_offsets)
            found = (
                x_offsets,
                y_offsets,
                np.full(count, self.run, np.int32),
                np.full(count, self.step, np.int32),
                np.ones(count, np.int32),
            )
            self._tables[number] = found  # a thread making it too makes the same arrays
        return found


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
    # A strided full operand's phase images (the full view's run is then unused).
    phases: _Phases | None = None
    # The chunk's runs are gathered into a buffer and summed by matrix-vector products (the
    # other operand is constant along the run).
    gathered: bool = False
    # A strided full operand's windows gathered directly: its strides (bytes) in the order
    # (outer..., chunked, reduced..., rows, columns) (the run is then rows * columns, the
    # output's chunk itself).
    window_strides: tuple[int, ...] | None = None
    # Gathered runs as shifted copies (the weights then ordered (other positions..., 1, copied
    # positions)).
    copies: _Copies | None = None
    # With MKL: the parts of the product as batched axpys (else the chunks above run).
    axpy: _Axpy | None = None

    def run_into(
        self, a: np.ndarray, b: np.ndarray, out: np.ndarray, epilogue: Epilogue | None = None
    ) -> None:
        full, other = (a, b) if self.full_is_a else (b, a)
        outer_count = len(self.outer_shape)
        reduced_count = len(self.reduced_shape)
        other_shape = self.view_shape[:-1] + (self.other_run,)
        other_view = strided_view(other, other_shape, self.other_strides, writeable=False)
        if self.window_strides is not None:
            source = strided_view(
                full,
                (*self.view_shape[:-1], *self.out_view[-2:]),
                self.window_strides,
                writeable=False,
            )
        elif self.copies is not None:
            copies = self.copies
            source = strided_view(
                full,
                (
                    *self.view_shape[: outer_count + 1],
                    self.reduced_shape[copies.axis],
                    copies.length,
                ),
                (*self.full_strides[: outer_count + 1], copies.step, full.itemsize),
                writeable=False,
            )
        elif self.phases is None:
            source = strided_view(full, self.view_shape, self.full_strides, writeable=False)
        else:
            phases = self.phases
            source = strided_view(
                full,
                (*self.outer_shape, self.chunked, phases.rows, phases.columns),
                (*self.full_strides[: outer_count + 1], phases.row_bytes, full.itemsize),
                writeable=False,
            )
        if self.axpy is not None:
            library = mkl.library()  # asked at each call: mkl.disabled() means NumPy
            if library is not None and self._run_axpy(library, full, other_view, out, epilogue):
                return
        if self.copies is not None:
            # Every channel's weights as rows (outer..., chunked, other positions..., 1, copied
            # positions).
            moved = np.moveaxis(other_view[..., 0], outer_count + 1 + self.copies.axis, -1)
            other_view = moved[..., None, :]
        elif self.gathered:
            # Every channel's weights as a row (outer..., chunked, 1, positions), a view where
            # the layout allows.
            other_view = other_view.reshape(*self.view_shape[: outer_count + 1], 1, -1)
        else:
            # Reduced dims first, so each product indexes its position with one tuple of ints.
            order = (
                *range(outer_count + 1, outer_count + 1 + reduced_count),
                *range(outer_count + 1),
                outer_count + 1 + reduced_count,
            )
            other_view = other_view.transpose(order)
            if self.phases is None:
                source = source.transpose(order)
        shaped = out.reshape(self.out_view)

        def compute(outer: tuple[int, ...], start: int, stop: int) -> None:
            buffers = self._buffers(out.dtype)
            self._chunk(source, other_view, shaped, buffers, outer, start, stop)

        self._run_chunks(compute, epilogue)

    def _run_axpy(
        self,
        library: mkl.Mkl,
        full: np.ndarray,
        other_view: np.ndarray,
        out: np.ndarray,
        epilogue: Epilogue | None,
    ) -> bool:
        """The product as batched axpys, part by part on the call's threads (each part one
        MKL call, which releases the GIL for all of it); False (nothing done) when a weight is
        zero: MKL's axpy skips it, where 0 * inf must be NaN."""
        assert self.axpy is not None
        axpy = self.axpy
        weights = np.ascontiguousarray(other_view[..., 0]).reshape(
            *self.outer_shape, self.chunked, -1
        )
        if not weights.all():
            return False
        function = library.axpy_batch(ctypes.c_float if out.itemsize == 4 else ctypes.c_double)
        shaped = out.reshape(self.out_view)
        rows, columns = self.out_view[-2:]
        base = full.ctypes.data
        phases = axpy.phases
        if phases is not None:
            image = strided_view(
                full,
                (*self.outer_shape, self.chunked, phases.rows, phases.columns),
                (*self.full_strides[: len(self.outer_shape) + 1], phases.row_bytes, full.itemsize),
                writeable=False,
            )

        def part(number: int) -> Callable[[], None]:
            def run() -> None:
                outer, start, stop = axpy.parts[number]
                x_offsets, y_offsets, lengths, steps, ones = axpy.table(number)
                count = stop - start
                x_base = base
                if phases is not None:
                    staging = kept_buffer(
                        "phases",
                        (count * math.prod(phases.steps) * math.prod(phases.shape),),
                        out.dtype,
                    )
                    chunk: tuple[Any, ...] = (*outer, slice(start, stop))
                    self._copy_phases(phases, image[chunk], staging)
                    x_base = staging.ctypes.data
                accumulator = kept_buffer("accumulator", (count * rows * axpy.row_step,), out.dtype)
                # +0.0 to start from: a sum whose every product is -0.0 is +0.0, as from
                # BLAS's and torch's accumulators.
                accumulator.fill(0)
                x = x_offsets + x_base
                y = y_offsets + accumulator.ctypes.data
                alpha = weights[outer][start:stop]  # (count, positions), C-contiguous
                function(
                    lengths.ctypes.data,
                    alpha.ctypes.data,
                    x.ctypes.data,
                    steps.ctypes.data,
                    y.ctypes.data,
                    ones.ctypes.data,
                    len(x),
                    ones.ctypes.data,
                )
                laid = accumulator.reshape(count, rows, axpy.row_step)[:, :, :columns]
                index: tuple[Any, ...] = (*outer, slice(start, stop))
                np.copyto(shaped[index], laid)
                if epilogue is not None:
                    epilogue(self._out_index(outer, start, stop))

            return run

        run_parts([part(number) for number in range(len(axpy.parts))])
        return True

    def _buffers(self, dtype: np.dtype) -> tuple[np.ndarray, ...]:
        """The running thread's accumulator (rows x row_step per channel: the output's rows are
        then a reshape of it), then its product (multiply-adds) or gathered runs (gathered) or
        shifted copies and their partial sums (copies), then (with phases) its phase images.
        The phase images are zeroed: the positions no copy writes (past an image's edge) feed
        only dropped outputs, and zeros never make them slow (subnormal) arithmetic."""
        accumulator = kept_buffer(
            "accumulator", (self.chunk, self.out_view[-2] * self.row_step), dtype
        )
        if self.copies is not None:
            copies = self.copies
            copied = self.reduced_shape[copies.axis]
            others = math.prod(copies.other_shape)
            return (
                accumulator,
                kept_buffer("copies", (self.chunk, copied, copies.length), dtype),
                kept_buffer("partial", (self.chunk, others, copies.length), dtype),
            )
        if self.gathered:
            work_shape: tuple[int, ...] = (self.chunk, math.prod(self.reduced_shape), self.run)
        else:
            work_shape = (self.chunk, self.run)
        work = kept_buffer("gathered", work_shape, dtype)
        if self.phases is None:
            return accumulator, work
        rows, columns = self.phases.shape
        staging = kept_buffer("phases", (self.chunk, *self.phases.steps, rows, columns), dtype)
        staging.fill(0)
        return accumulator, work, staging

    def _chunk(
        self,
        source: np.ndarray,
        other_view: np.ndarray,
        shaped: np.ndarray,
        buffers: tuple[np.ndarray, ...],
        outer: tuple[int, ...],
        start: int,
        stop: int,
    ) -> None:
        """The output's chunk `outer..., start:stop`: the products summed position by position
        into the accumulator, then laid into the output."""
        count = stop - start
        index: tuple[Any, ...] = (*outer, slice(start, stop))
        rows, columns = self.out_view[-2:]
        if self.window_strides is not None:
            # source: (outer..., chunked, positions..., rows, columns)
            gathered = buffers[1][:count]
            np.copyto(gathered.reshape(count, *self.reduced_shape, rows, columns), source[index])
            # A sum of -0.0 products is +0.0 here too: BLAS's accumulators start at +0.0.
            matmul(other_view[index], gathered, shaped[index].reshape(count, 1, self.run))
            return
        accumulator = buffers[0][:count]
        total = accumulator[:, : self.run]
        if self.copies is not None:
            self._copies_sum(source[index], other_view[index], buffers, total)
        elif self.gathered:
            gathered = buffers[1][:count]
            if self.phases is None:  # source: (outer..., chunked, positions..., run)
                np.copyto(gathered.reshape(count, *self.reduced_shape, self.run), source[index])
            else:
                staging = buffers[2][:count]
                self._copy_phases(self.phases, source[index], staging)
                self._gather_taps(staging, gathered)
            matmul(other_view[index], gathered, total[:, None, :])
        else:
            every_position = (slice(None),) * len(self.reduced_shape)
            other_block = other_view[every_position + index]
            positions = list(itertools.product(*map(range, self.reduced_shape)))
            if self.phases is None:
                full_block = source[every_position + index]
                operands = [full_block[position] for position in positions]
            else:
                operands = self._phase_operands(source[index], buffers[2][:count])
            scratch = buffers[1][:count]
            for number, (x, position) in enumerate(zip(operands, positions)):
                y = other_block[position]
                if number == 0:
                    np.multiply(x, y, out=total)
                else:
                    np.multiply(x, y, out=scratch)
                    np.add(total, scratch, out=total)
        laid = accumulator.reshape(count, rows, self.row_step)[:, :, :columns]
        # + 0.0 as the copy: a sum whose every product is -0.0 is +0.0, as from a
        # zero-initialized accumulator (BLAS's, torch's); nothing else changes.
        np.add(laid, total.dtype.type(0), out=shaped[index])

    def _copies_sum(
        self,
        source: np.ndarray,
        weights: np.ndarray,
        buffers: tuple[np.ndarray, ...],
        total: np.ndarray,
    ) -> None:
        """The chunk's shifted copies (count, copied positions, length), one matrix product per
        channel (its weights as a matrix (other positions, copied positions) times its copies:
        every other position's sum over the whole copies), then per channel the sum over the
        other positions, each read from its offset on (a matrix-vector product by ones over a
        skewed view of those sums; with several other labels, one per position of the leading
        ones, added in row-major order)."""
        assert self.copies is not None
        copies = self.copies
        count = total.shape[0]
        copied = buffers[1][:count]
        np.copyto(copied, source)
        partial = buffers[2][:count]
        matmul(weights.reshape(count, partial.shape[1], copied.shape[1]), copied, partial)
        itemsize = partial.itemsize
        # Other position (o_1, ..., o_m) starts at row o of the sums plus its offset.
        skewed_strides = []
        row = partial.strides[1]
        for size, step in zip(reversed(copies.other_shape), reversed(copies.other_steps)):
            skewed_strides.append(row + step)
            row *= size
        skewed = strided_view(
            partial,
            (count, *copies.other_shape, self.run),
            (partial.strides[0], *reversed(skewed_strides), itemsize),
            writeable=False,
        )
        ones = np.ones((1, copies.other_shape[-1]), total.dtype)
        leading = itertools.product(*map(range, copies.other_shape[:-1]))
        for number, position in enumerate(leading):
            index: tuple[Any, ...] = (slice(None), *position)
            matmul(ones, skewed[index], total[:, None, :], accumulate=number > 0)

    @staticmethod
    def _copy_phases(phases: _Phases, image: np.ndarray, staging: np.ndarray) -> None:
        """The chunk's image (count, rows, columns) copied into flat phase images (count,
        steps[0], steps[1], phase rows x phase columns). The positions no copy writes (past an
        image's edge) feed only dropped outputs."""
        row_step, column_step = phases.steps
        images = staging.reshape(image.shape[0], row_step, column_step, *phases.shape)
        for phase_row in range(row_step):
            for phase_column in range(column_step):
                part = image[:, phase_row::row_step, phase_column::column_step]
                images[:, phase_row, phase_column, : part.shape[1], : part.shape[2]] = part

    def _phase_operands(self, image: np.ndarray, staging: np.ndarray) -> list[np.ndarray]:
        """The chunk's image (count, rows, columns) copied into its phase images; per kernel
        position, the run it reads from them."""
        assert self.phases is not None
        self._copy_phases(self.phases, image, staging)
        return self._tap_runs(staging)

    def _gather_taps(self, staging: np.ndarray, gathered: np.ndarray) -> None:
        """Every kernel position's run in the chunk's phase images copied into the gathered
        runs (count, positions, run). (One copy per position: a strided copy per phase of all
        its positions at once measured 1.1-1.5x slower.)"""
        for number, operand in enumerate(self._tap_runs(staging)):
            gathered[:, number] = operand

    def _tap_runs(self, staging: np.ndarray) -> list[np.ndarray]:
        """Per kernel position, the run it reads from the chunk's phase images."""
        assert self.phases is not None
        flat = staging.reshape(*staging.shape[:3], -1)
        return [
            flat[:, phase_row, phase_column, offset : offset + self.run]
            for phase_row, phase_column, offset in self.phases.taps
        ]

    def reads_zero_padded(self, padded: ZeroPadded, itemsize: int) -> bool:
        """Whether `run_zero_padded` computes this product from the unpadded operand: shifted
        copies of a 2-d kernel over merged rows of the padded images, as wide as the unpadded
        ones (so the copies' rows, without padding columns, are the output's), the gathered
        windows of a strided 2-d kernel, or gathered runs over phase images whose rows are the
        padded images' (not a dilated kernel's pairs of rows); the window at the padded
        images' start."""
        rows, columns = padded.shape
        image = rows * columns * itemsize
        row_bytes = columns * itemsize
        leading = self.full_strides[: len(self.outer_shape) + 1]
        if not (0 <= padded.origin < columns and all(s > 0 and s % image == 0 for s in leading)):
            return False  # not whole images from the first padded image's first row
        if self.window_strides is not None:
            *_, kernel_row, kernel_column, row, column = self.window_strides
            return (
                len(self.reduced_shape) == 2
                and kernel_row % row_bytes == 0
                and row % row_bytes == 0
                and 0 < kernel_column < row_bytes
                and 0 < column < row_bytes
                and kernel_row > 0
                and row > 0
            )
        if self.phases is not None:
            # Gathered runs over phase images of whole padded rows.
            return self.gathered and self.phases.row_bytes == row_bytes
        copies = self.copies
        if copies is None:
            return False
        return (
            len(copies.other_shape) == 1
            and copies.other_steps[0] % row_bytes == 0
            and 0 < copies.step < row_bytes
            and self.full_strides[-1] == itemsize
            and self.row_step == columns
            and self.out_view[-1] == padded.source_shape[1]
        )

    def run_zero_padded(
        self,
        source: np.ndarray,
        padded: ZeroPadded,
        b: np.ndarray,
        out: np.ndarray,
        epilogue: Epilogue | None = None,
    ) -> None:
        """The product of a full operand that is a window of the zero-padded `source` (C-
        contiguous, `reads_zero_padded`), read from `source` itself: each chunk's shifted copies
        are copied from the unpadded images, the positions the padding holds set to zero, and
        laid out as the output's rows (no padding columns), so the partial sums' sum is written
        into the output. The padded tensor is never made; the products and their order are those
        of `run_into` on it. Strided windows and phase images are gathered from the source
        likewise, their positions in the padding set to zero."""
        if self.window_strides is not None:
            self._windows_from_zero_padded(source, padded, b, out, epilogue)
            return
        if self.phases is not None:
            self._phases_from_zero_padded(source, padded, b, out, epilogue)
            return
        assert self.copies is not None
        copies = self.copies
        outer_count = len(self.outer_shape)
        itemsize = out.itemsize
        padded_rows, padded_columns = padded.shape
        image = padded_rows * padded_columns * itemsize
        # Each leading index's image number, from the full operand's leading strides.
        image_steps = [step // image for step in self.full_strides[: outer_count + 1]]
        source_rows, columns = padded.source_shape
        images = source.reshape(-1, source_rows * columns)
        rows = self.out_view[-2]
        kernel_rows = copies.other_shape[0]
        row_offset = copies.other_steps[0] // (padded_columns * itemsize)
        copied = self.reduced_shape[copies.axis]
        column_step = copies.step // itemsize
        origin_row, origin_column = divmod(
            padded.origin % (padded_rows * padded_columns), padded_columns
        )
        # Copy j, row R, column c holds source row R + first_row, column c + shift[j].
        first_row = origin_row - padded.top
        shifts = [origin_column + j * column_step - padded.left for j in range(copied)]
        copy_rows = rows + (kernel_rows - 1) * row_offset
        length = copy_rows * columns
        other_shape = self.view_shape[:-1] + (self.other_run,)
        other_view = strided_view(b, other_shape, self.other_strides, writeable=False)
        weights = np.moveaxis(other_view[..., 0], outer_count + 1 + copies.axis, -1)
        shaped = out.reshape(*self.out_view[:-2], rows * columns)
        ones = np.ones((1, kernel_rows), out.dtype)
        # The rows of the copies read from the source, and the positions (flat) they cover.
        low_row = max(0, -first_row)
        high_row = min(copy_rows, source_rows - first_row)
        row_start, row_stop = low_row * columns, max(high_row, low_row) * columns
        source_image = source_rows * columns
        flat = source.reshape(-1)

        def compute(outer: tuple[int, ...], start: int, stop: int) -> None:
            count = stop - start
            first = sum(i * step for i, step in zip(outer, image_steps))
            first += start * image_steps[-1]
            chunk_images = images[first : first + count * image_steps[-1] : image_steps[-1]]
            buffer = kept_buffer("copies", (self.chunk, copied, length), out.dtype)[:count]
            partial = kept_buffer("partial", (self.chunk, kernel_rows, length), out.dtype)[:count]
            # Every copy's rows read from the source in one strided copy (copy j starting
            # shifts[j] elements on), where its reads stay inside the source's memory: a
            # position whose column lies outside the image reads a neighbouring row's element,
            # set to zero below with the padding's columns. Short NumPy calls do not share
            # the GIL well between the call's threads: a few long ones make the copies.
            last = first + (count - 1) * image_steps[-1]
            lowest = first * source_image + row_start + first_row * columns + shifts[0]
            highest = last * source_image + row_stop - 1 + first_row * columns + shifts[-1]
            if row_start < row_stop and lowest >= 0 and highest < flat.size:
                if row_start and keep is None:
                    buffer[:, :, :row_start] = 0
                if row_stop < length and keep is None:
                    buffer[:, :, row_stop:] = 0
                buffer[:, :, row_start:row_stop] = strided_view(
                    flat[lowest:],
                    (count, copied, row_stop - row_start),
                    (image_steps[-1] * source_image * itemsize, column_step * itemsize, itemsize),
                    writeable=False,
                )
            else:  # at the source's first or last element: each copy read inside it
                for j, shift in enumerate(shifts):
                    target = buffer[:, j]
                    offset = first_row * columns + shift
                    low = max(row_start, -offset)
                    high = max(min(row_stop, source_rows * columns - offset), low)
                    target[:, :low] = 0
                    target[:, low:high] = chunk_images[:, low + offset : high + offset]
                    target[:, high:] = 0
            if keep is not None:  # every position the padding holds zeroed in one pass
                bits = buffer.view(keep.dtype)
                np.bitwise_and(bits, keep, out=bits)
            else:  # the columns the padding holds, copy by copy
                for j, shift in enumerate(shifts):
                    if shift:
                        laid = buffer[:, j].reshape(count, copy_rows, columns)
                        laid[:, :, _off_image(shift, columns)] = 0
            index: tuple[Any, ...] = (*outer, slice(start, stop))
            matmul(weights[index], buffer, partial)
            skewed = strided_view(
                partial,
                (count, kernel_rows, rows * columns),
                (
                    partial.strides[0],
                    partial.strides[1] + row_offset * columns * itemsize,
                    itemsize,
                ),
                writeable=False,
            )
            matmul(ones, skewed, shaped[index][:, None, :])

        keep = _kept_positions(out.dtype, copy_rows, columns, row_start, row_stop, tuple(shifts))
        self._run_chunks(compute, epilogue)

    def _phases_from_zero_padded(
        self,
        source: np.ndarray,
        padded: ZeroPadded,
        b: np.ndarray,
        out: np.ndarray,
        epilogue: Epilogue | None,
    ) -> None:
        """`run_zero_padded` of gathered runs over phase images: each chunk's phase images are
        copied from the source's images (strided slices) into the zeroed phase buffer, the
        positions in the padding left zero, so they hold what `_copy_phases` copies from the
        padded images; then the runs are gathered and summed as in `_chunk`."""
        assert self.phases is not None
        phases = self.phases
        outer_count = len(self.outer_shape)
        padded_rows, padded_columns = padded.shape
        image = padded_rows * padded_columns * out.itemsize
        image_steps = [step // image for step in self.full_strides[: outer_count + 1]]
        source_rows, source_columns = padded.source_shape
        images = source.reshape(-1, source_rows, source_columns)
        origin_row, origin_column = divmod(
            padded.origin % (padded_rows * padded_columns), padded_columns
        )
        # Phase (a, b)'s row R, column C: the phases' image row a + R s_h, column b + C s_w,
        # the source's row and column (top, left) before them; per phase the rectangle of the
        # source's positions and the slices of the source's images it reads.
        row_step, column_step = phases.steps
        reads = []
        for phase_row, phase_column in itertools.product(range(row_step), range(column_step)):
            top = origin_row - padded.top + phase_row
            left = origin_column - padded.left + phase_column
            low_row, high_row = positions_inside(
                top, row_step, -(-(phases.rows - phase_row) // row_step), source_rows
            )
            low_column, high_column = positions_inside(
                left,
                column_step,
                -(-(phases.columns - phase_column) // column_step),
                source_columns,
            )
            if low_row < high_row and low_column < high_column:
                written = (
                    phase_row,
                    phase_column,
                    slice(low_row, high_row),
                    slice(low_column, high_column),
                )
                read = (
                    slice(top + low_row * row_step, top + (high_row - 1) * row_step + 1, row_step),
                    slice(
                        left + low_column * column_step,
                        left + (high_column - 1) * column_step + 1,
                        column_step,
                    ),
                )
                reads.append((written, read))
        other_shape = self.view_shape[:-1] + (self.other_run,)
        weights = strided_view(b, other_shape, self.other_strides, writeable=False).reshape(
            *self.view_shape[: outer_count + 1], 1, -1
        )
        shaped = out.reshape(self.out_view)
        rows, columns = self.out_view[-2:]

        def compute(outer: tuple[int, ...], start: int, stop: int) -> None:
            count = stop - start
            first = sum(i * step for i, step in zip(outer, image_steps))
            first += start * image_steps[-1]
            chunk_images = images[first : first + count * image_steps[-1] : image_steps[-1]]
            accumulator, gathered, staging = (buffer[:count] for buffer in self._buffers(out.dtype))
            for written, read in reads:
                staging[(slice(None), *written)] = chunk_images[(slice(None), *read)]
            total = accumulator[:, : self.run]
            self._gather_taps(staging, gathered)
            index: tuple[Any, ...] = (*outer, slice(start, stop))
            matmul(weights[index], gathered, total[:, None, :])
            laid = accumulator.reshape(count, rows, self.row_step)[:, :, :columns]
            # + 0.0 as the copy, as in `_chunk`.
            np.add(laid, total.dtype.type(0), out=shaped[index])

        self._run_chunks(compute, epilogue)

    def _windows_from_zero_padded(
        self,
        source: np.ndarray,
        padded: ZeroPadded,
        b: np.ndarray,
        out: np.ndarray,
        epilogue: Epilogue | None,
    ) -> None:
        """`run_zero_padded` of gathered windows: per chunk and kernel position, the output
        positions whose window element lies in the source copied from it (a strided slice, or
        a flat copy from the position's phase image), the others set to zero, then the
        matrix-vector products into the output (as in `_chunk`)."""
        assert self.window_strides is not None
        outer_count = len(self.outer_shape)
        itemsize = out.itemsize
        padded_columns = padded.shape[1]
        row_bytes = padded_columns * itemsize
        image = padded.shape[0] * row_bytes
        image_steps = [step // image for step in self.window_strides[: outer_count + 1]]
        *_, kernel_row, kernel_column, row, column = self.window_strides
        steps = (row // row_bytes, column // itemsize)
        dilations = (kernel_row // row_bytes, kernel_column // itemsize)
        origin = (-padded.top, padded.origin - padded.left)
        source_rows, source_columns = padded.source_shape
        images = source.reshape(-1, source_rows, source_columns)
        rows, columns = self.out_view[-2:]
        kernel_rows, kernel_columns = self.reduced_shape
        other_shape = self.view_shape[:-1] + (self.other_run,)
        other_view = strided_view(b, other_shape, self.other_strides, writeable=False).reshape(
            *self.view_shape[: outer_count + 1], 1, -1
        )
        shaped = out.reshape(*self.out_view[:-2], rows * columns)

        # Each kernel position's window starts at (top, left) of the source; per position,
        # the output positions reading the source (a rectangle: the others read the padding),
        # and its phase: the source's rows top mod s_h, + s_h, ... and columns alike.
        taps = []
        for i, j in itertools.product(range(kernel_rows), range(kernel_columns)):
            top = origin[0] + i * dilations[0]
            left = origin[1] + j * dilations[1]
            taps.append(
                (
                    top,
                    left,
                    positions_inside(top, steps[0], rows, source_rows),
                    positions_inside(left, steps[1], columns, source_columns),
                )
            )
        used_phases = sorted({(top % steps[0], left % steps[1]) for top, left, _, _ in taps})
        # With fewer phases than positions (3x3 at stride 2: 4 for 9), each phase is copied
        # once (a strided copy, laid as the output's rows) and each position's window is a
        # contiguous copy of its phase from a flat offset: 1.3x faster than a strided copy per
        # position. Only where every window starts at or before its phase's first output
        # position (then every position it reads inside the source lies in the phase images).
        use_phases = len(used_phases) < len(taps) and all(
            top // steps[0] <= 0 and left // steps[1] <= 0 for top, left, _, _ in taps
        )
        # A phase is copied straight into the window of a position that reads it whole (at
        # shift 0, every output position inside the source); the others into a buffer.
        homes: dict[tuple[int, int], int] = {}
        for number, (top, left, row_range, column_range) in enumerate(taps):
            if (
                0 <= top < steps[0]
                and 0 <= left < steps[1]
                and row_range == (0, rows)
                and column_range == (0, columns)
            ):
                homes.setdefault((top, left), number)
        unhomed = [phase for phase in used_phases if phase not in homes]

        # The window positions reading the padding, zeroed after the copies: per kernel row
        # the output rows outside its row range, per kernel column the output columns outside
        # its column range (in every row: those outside the row range are zero anyway), each a
        # NumPy call for all the windows of that kernel row or column (short NumPy calls do
        # not share the GIL well between the call's threads).
        padding_zeros: list[tuple[Any, ...]] = []
        for i in range(kernel_rows):
            low_row, high_row = taps[i * kernel_columns][2]
            row_windows = slice(i * kernel_columns, (i + 1) * kernel_columns)
            if low_row:
                padding_zeros.append((row_windows, slice(0, low_row)))
            if high_row < rows:
                padding_zeros.append((row_windows, slice(high_row, rows)))
        for j in range(kernel_columns):
            low_column, high_column = taps[j][3]
            column_windows = slice(j, None, kernel_columns)
            if low_column:
                padding_zeros.append((column_windows, slice(None), slice(0, low_column)))
            if high_column < columns:
                padding_zeros.append((column_windows, slice(None), slice(high_column, columns)))

        def compute(outer: tuple[int, ...], start: int, stop: int) -> None:
            count = stop - start
            first = sum(i * step for i, step in zip(outer, image_steps))
            first += start * image_steps[-1]
            chunk_images = images[first : first + count * image_steps[-1] : image_steps[-1]]
            gathered = kept_buffer(
                "gathered",
                (self.chunk, kernel_rows * kernel_columns, rows * columns),
                out.dtype,
            )[:count]
            laid = gathered.reshape(count, kernel_rows * kernel_columns, rows, columns)
            if use_phases:
                # Phase (a, b)'s row r, column c: the source's (a + r s_h, b + c s_w);
                # the positions past the source's edge are left as they are (read only
                # by window positions in the padding, set to zero below).
                spare = kept_buffer(
                    "phases", (self.chunk, len(unhomed), rows * columns), out.dtype
                )[:count]
                phases = {
                    phase: gathered[:, homes[phase]]
                    if phase in homes
                    else spare[:, unhomed.index(phase)]
                    for phase in used_phases
                }
                for (a, b), phase in phases.items():
                    part = chunk_images[:, a :: steps[0], b :: steps[1]][:, :rows, :columns]
                    image = phase.reshape(count, rows, columns)
                    image[:, : part.shape[1], : part.shape[2]] = part
            for number, (top, left, row_range, column_range) in enumerate(taps):
                window = laid[:, number]
                if use_phases:
                    phase = phases[top % steps[0], left % steps[1]]
                    if homes.get((top, left)) == number:
                        continue  # the phase itself
                    # Window position (r, c) is phase position (r + top // s_h,
                    # c + left // s_w): a flat shift back by `shift` positions.
                    shift = -(top // steps[0]) * columns - left // steps[1]
                    # The first `shift` positions read before the phase's start: rows
                    # above or columns left of the source, zeroed below.
                    shift = min(shift, rows * columns)
                    gathered[:, number, shift:] = phase[:, : rows * columns - shift]
                else:
                    (low_row, high_row), (low_column, high_column) = row_range, column_range
                    if low_row >= high_row or low_column >= high_column:
                        continue  # only padding: zeroed below
                    rows_read = slice(
                        top + low_row * steps[0], top + (high_row - 1) * steps[0] + 1, steps[0]
                    )
                    columns_read = slice(
                        left + low_column * steps[1],
                        left + (high_column - 1) * steps[1] + 1,
                        steps[1],
                    )
                    window[:, low_row:high_row, low_column:high_column] = chunk_images[
                        :, rows_read, columns_read
                    ]
            for zeros in padding_zeros:
                laid[(slice(None), *zeros)] = 0
            index: tuple[Any, ...] = (*outer, slice(start, stop))
            # A sum of -0.0 products is +0.0 here too: BLAS's accumulators start at +0.0.
            matmul(other_view[index], gathered, shaped[index][:, None, :])

        self._run_chunks(compute, epilogue)

    def _run_chunks(
        self,
        compute: Callable[[tuple[int, ...], int, int], None],
        epilogue: Epilogue | None,
    ) -> None:
        """Every chunk (`compute(outer index, start, stop along the chunked dim)`, then the
        epilogue on the part of the output it wrote, while in cache), shared by the call's
        threads."""

        def task(outer: tuple[int, ...], start: int) -> Callable[[], None]:
            def run() -> None:
                stop = min(start + self.chunk, self.chunked)
                compute(outer, start, stop)
                if epilogue is not None:
                    epilogue(self._out_index(outer, start, stop))

            return run

        run_parts(
            [
                task(outer, start)
                for outer in itertools.product(*map(range, self.outer_shape))
                for start in range(0, self.chunked, self.chunk)
            ]
        )

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


@functools.lru_cache(maxsize=64)
def _kept_positions(
    dtype: np.dtype,
    copy_rows: int,
    columns: int,
    row_start: int,
    row_stop: int,
    shifts: tuple[int, ...],
) -> np.ndarray | None:
    """The shifted copies' positions that read the image, as a mask of their bits: per copy
    (one per shift, `copy_rows` x `columns` positions) all ones where the copy's row lies in
    [row_start, row_stop) of its positions and its column shifted by the copy's shift lies in
    the image, zero where the padding holds it (an AND gives those positions +0's bits and
    keeps the others' bits). None where zeroing those positions call by call costs less (wide
    images, copies shifted by at most one column, as a 3x3 kernel's: `MASK_MAX_COLUMNS`,
    `MASK_MIN_SHIFT`), or no unsigned integer has the dtype's width."""
    widest = max(abs(shift) for shift in shifts)
    if columns > MASK_MAX_COLUMNS or widest < MASK_MIN_SHIFT or dtype.itemsize not in (2, 4, 8):
        return None
    bits = np.dtype(f"u{dtype.itemsize}")
    kept = np.zeros((len(shifts), copy_rows * columns), bits)
    kept[:, row_start:row_stop] = np.iinfo(bits).max
    laid = kept.reshape(len(shifts), copy_rows, columns)
    for j, shift in enumerate(shifts):
        if shift:
            laid[j, :, _off_image(shift, columns)] = 0
    kept.flags.writeable = False
    return kept


def _off_image(shift: int, columns: int) -> slice:
    """The columns of a copy of an image's rows shifted by `shift` (nonzero) columns that lie
    off the image (the padding's: left of it for a negative shift, right for a positive one)."""
    if shift < 0:
        return slice(0, min(-shift, columns))
    return slice(max(columns - shift, 0), columns)


def positions_inside(first: int, step: int, count: int, length: int) -> tuple[int, int]:
    """The positions p in [0, count) whose index first + p * step lies in [0, length): an
    interval [low, high) of [0, count) (low == high when empty)."""
    low = min(max(0, -(first // step)) if first < 0 else 0, count)
    high = max(low, min(count, -(-(length - first) // step)))
    return low, high


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
    phases = None
    if leading and other_step[leading[-1]] == other_step[inner_label] == 0:
        phases = _phases(full_step, sizes, leading[-1], inner_label, reduced, itemsize)
    row_label = leading[-1] if leading else None
    if phases is not None:  # a strided operand: merged runs over its phase images
        rows, row_step = sizes[leading[-1]], phases.shape[1]
        leading = leading[:-1]
    elif leading:
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
    per_chunk_row = run if phases is None else math.prod(phases.steps) * math.prod(phases.shape)
    chunk = max(1, min(chunked, CHUNK_BYTES // (per_chunk_row * itemsize)))
    reduced_shape = tuple(sizes[label] for label in reduced)
    other_run = run if other_step[inner_label] else 1
    gathered_row = math.prod(reduced_shape) * run * itemsize  # one channel's gathered runs
    gathered = other_run == 1 and gathered_row <= GATHER_MAX_BYTES
    window_strides = None
    strided_phases = phases
    if gathered and phases is not None and math.prod(reduced_shape) <= WINDOW_MAX_POSITIONS:
        assert row_label is not None  # phases need output rows
        window_strides = (
            *full_leading,
            *(full_step[label] for label in reduced),
            full_step[row_label],
            full_step[inner_label],
        )
        phases, run, row_step = None, rows * columns, columns
        gathered_row = math.prod(reduced_shape) * run * itemsize
    if gathered:
        chunk = max(1, min(chunked, GATHER_BYTES // gathered_row))
        if phases is not None:
            chunk = max(1, min(chunk, PHASE_CHUNK_BYTES // (per_chunk_row * itemsize)))
    copies = None
    if gathered and phases is None and window_strides is None:
        copies = _copies(full_step, reduced, reduced_shape, inner_label, run, itemsize)
    if copies is not None:
        # A channel's copies and the partial sums of its other positions.
        chunk_row = (reduced_shape[copies.axis] + math.prod(copies.other_shape)) * copies.length
        chunk_row *= itemsize
        chunk = max(1, min(chunked, GATHER_BYTES // chunk_row))
    # Chunks of equal size (at most the budget's): the call's threads then share equal parts
    # (1152 channels in chunks of at most 896 run as 576 and 576, not 896 and 256).
    chunk = -(-chunked // -(-chunked // chunk))
    axpy = None
    # A strided operand is read through phase images: axpys reading every s-th element of
    # merged rows (s times the positions) ran 1.6x slower than the gathered windows.
    if other_run == 1 and (row_label is None or row_label in leading or other_step[row_label] == 0):
        axpy = _axpy(
            full_step,
            sizes,
            full_leading,
            leading_sizes,
            None if row_label is None or row_label in leading else row_label,
            inner_label,
            reduced,
            itemsize,
            strided_phases,
        )
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
        phases=phases,
        gathered=gathered,
        window_strides=window_strides,
        copies=copies,
        axpy=axpy,
    )


def _axpy(
    full_step: dict[int, int],
    sizes: Sequence[int],
    leading_steps: Sequence[int],
    leading_sizes: Sequence[int],
    row_label: int | None,
    column_label: int,
    reduced: Sequence[int],
    itemsize: int,
    phases: _Phases | None,
) -> _Axpy | None:
    """The batched axpys of a product whose other operand is constant along the output's
    runs: each run `row_label`'s rows merged (the full operand steps a whole number m of
    column steps per row, m at least the columns, as for the merged runs above) or one row;
    the parts split the leading dims (the last one into ranges) by AXPY_PART_BYTES of
    accumulator (and phase images). With `phases` (a strided operand) the runs are the phase
    images' merged rows, as for the chunks. None when the operand steps backwards or its rows
    cannot be merged so."""
    if phases is not None:
        assert row_label is not None  # phases need output rows
        return _phase_axpy(sizes, leading_sizes, row_label, column_label, itemsize, phases)
    column_step = full_step[column_label]
    steps = [column_step, *leading_steps, *(full_step[label] for label in reduced)]
    if column_step <= 0 or min(steps) < 0:
        return None
    columns = sizes[column_label]
    rows, row_step = 1, columns
    if row_label is not None:
        rows = sizes[row_label]
        if full_step[row_label] % column_step:
            return None
        row_step = full_step[row_label] // column_step
        length = (rows - 1) * row_step + columns
        if row_step < columns or length > MAX_MERGE_WASTE * rows * columns:
            return None
    run = (rows - 1) * row_step + columns
    offsets = np.array(
        [
            sum(i * full_step[label] for i, label in zip(position, reduced))
            for position in itertools.product(*(range(sizes[label]) for label in reduced))
        ],
        np.int64,
    )
    return _axpy_parts(
        leading_steps,
        leading_sizes,
        offsets,
        column_step // itemsize,
        rows,
        row_step,
        run,
        itemsize,
    )


def _phase_axpy(
    sizes: Sequence[int],
    leading_sizes: Sequence[int],
    row_label: int,
    column_label: int,
    itemsize: int,
    phases: _Phases,
) -> _Axpy:
    """The batched axpys over a part's phase images (count, steps..., shape...): each kernel
    position reads its phase from its offset on, the output's rows merged at the phase
    images' width."""
    image = math.prod(phases.shape)
    row_step = phases.shape[1]
    rows, columns = sizes[row_label], sizes[column_label]
    offsets = np.array(
        [
            ((row * phases.steps[1] + column) * image + offset) * itemsize
            for row, column, offset in phases.taps
        ],
        np.int64,
    )
    channel = math.prod(phases.steps) * image * itemsize
    leading_steps = [0] * (len(leading_sizes) - 1) + [channel]  # from each part's own images
    axpy = _axpy_parts(
        leading_steps,
        leading_sizes,
        offsets,
        1,
        rows,
        row_step,
        (rows - 1) * row_step + columns,
        itemsize,
        extra=channel,
    )
    return attrs.evolve(axpy, phases=phases)


def _axpy_parts(
    leading_steps: Sequence[int],
    leading_sizes: Sequence[int],
    offsets: np.ndarray,
    step: int,
    rows: int,
    row_step: int,
    run: int,
    itemsize: int,
    extra: int = 0,
) -> _Axpy:
    """The parts (ranges of the last leading dim per index of the others, about
    AXPY_PART_BYTES of accumulator plus `extra` bytes per channel), whose tables `_Axpy.table`
    makes. With `extra` (phase images) the x offsets start at each part's own first channel."""
    *outer_steps, chunk_step = leading_steps
    *outer_shape, chunked = leading_sizes
    per_part = max(1, AXPY_PART_BYTES // (rows * row_step * itemsize + extra))
    pieces = -(-chunked // per_part)
    bounds = [(i * chunked // pieces, (i + 1) * chunked // pieces) for i in range(pieces)]
    parts = []
    origins = []
    for outer in itertools.product(*map(range, outer_shape)):
        origin = sum(i * step for i, step in zip(outer, outer_steps))
        for start, stop in bounds:
            parts.append((outer, start, stop))
            origins.append(origin)
    return _Axpy(
        step,
        row_step,
        run,
        tuple(parts),
        tuple(origins),
        chunk_step,
        offsets,
        rows * row_step * itemsize,
        bool(extra),
    )


def _copies(
    full_step: dict[int, int],
    reduced: Sequence[int],
    reduced_shape: tuple[int, ...],
    inner_label: int,
    run: int,
    itemsize: int,
) -> _Copies | None:
    """Shifted copies for a full operand with contiguous runs and at least two reduced labels
    stepping forward (a 2-d or 3-d kernel): copied along the label stepping least, the others
    offsets into the copies: a 7x7 kernel copies 7 shifted images instead of 49 runs. None
    otherwise, and where they would move more than COPIES_MAX_TRAFFIC times the elements the
    runs move."""
    if len(reduced) < 2 or full_step[inner_label] != itemsize:
        return None
    if any(full_step[label] <= 0 for label in reduced):
        return None
    axis = min(range(len(reduced)), key=lambda i: full_step[reduced[i]])
    others = [i for i in range(len(reduced)) if i != axis]
    extent = sum((reduced_shape[i] - 1) * full_step[reduced[i]] for i in others) // itemsize
    other_positions = math.prod(reduced_shape[i] for i in others)
    traffic = reduced_shape[axis] * (extent + run) + 2 * other_positions * run
    if traffic > COPIES_MAX_TRAFFIC * math.prod(reduced_shape) * run:
        return None
    return _Copies(
        axis,
        extent + run,
        full_step[reduced[axis]],
        tuple(reduced_shape[i] for i in others),
        tuple(full_step[reduced[i]] for i in others),
    )


def _phases(
    full_step: dict[int, int],
    sizes: Sequence[int],
    row_label: int,
    column_label: int,
    reduced: Sequence[int],
    itemsize: int,
) -> _Phases | None:
    """The phase images of a full operand stepping more than one row or element along its
    output rows or columns (`row_label`, `column_label`), when its memory per leading index is
    an image: elements contiguous, rows a whole number of bytes apart that hold every column it
    reads, and each reduced label stepping along the rows or along the columns (a convolution's
    kernel rows and columns; at most two reduced labels). None for other layouts, and for
    operands stepping one row and one element (the merged runs read them directly)."""
    steps = [full_step[label] for label in (row_label, column_label, *reduced)]
    if len(reduced) > 2 or min(steps) <= 0:
        return None
    ordered = sorted(reduced, key=lambda label: full_step[label])
    # (labels along the columns, labels along the rows): the smaller step is the columns'.
    if len(ordered) == 2:
        splits = [(ordered[:1], ordered[1:])]
    else:
        splits = [(ordered, []), ([], ordered)]
    column_step = full_step[column_label] // itemsize
    for along_columns, along_rows in splits:
        row_bytes = math.gcd(full_step[row_label], *(full_step[label] for label in along_rows))
        if row_bytes % itemsize:
            continue
        row_step = full_step[row_label] // row_bytes
        row_unit = {label: full_step[label] // row_bytes for label in along_rows}
        column_unit = {label: full_step[label] // itemsize for label in along_columns}
        rows = 1 + (sizes[row_label] - 1) * row_step
        rows += sum((sizes[label] - 1) * unit for label, unit in row_unit.items())
        columns = 1 + (sizes[column_label] - 1) * column_step
        columns += sum((sizes[label] - 1) * unit for label, unit in column_unit.items())
        if columns * itemsize > row_bytes:
            continue  # rows overlap: not an image
        if row_step == 1 and column_step == 1:
            return None
        shape = (-(-rows // row_step), -(-columns // column_step))
        taps: list[tuple[int, int, int]] = []
        for position in itertools.product(*(range(sizes[label]) for label in reduced)):
            row = sum(i * row_unit.get(label, 0) for label, i in zip(reduced, position))
            column = sum(i * column_unit.get(label, 0) for label, i in zip(reduced, position))
            offset = (row // row_step) * shape[1] + column // column_step
            taps.append((row % row_step, column % column_step, offset))
        return _Phases(rows, columns, row_bytes, (row_step, column_step), shape, tuple(taps))
    return None


__all__ = ["MultiplyAccumulateRecipe", "ZeroPadded", "plan_multiply_accumulate"]
