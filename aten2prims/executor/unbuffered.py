"""Broadcasts NumPy reads in place: elementwise steps whose broadcast operand (a norm's per-row
statistic, a per-channel scale, a weight along the last dim) is repeated along runs of at least
`MIN_RUN` contiguous result elements run with NumPy's ufunc buffer shorter than two such runs.

A ufunc whose operands cannot be iterated as one flat loop (a broadcast one among them) goes
through NumPy's buffered iterator. With its default buffer of 8192 elements, NumPy copies an
operand broadcast along the innermost dims into the buffer, several runs at a time, to call its
inner loop on longer stretches; with a buffer shorter than two runs it calls the inner loop once
per run, the broadcast operand read in place at stride 0 (NumPy 2.4 buffered from a buffer of
about two runs on). For add, subtract, multiply, divide and the comparisons that loop is as
fast as the contiguous one (SIMD with one operand held in a register): measured at one thread
over 1 MiB of float32, a (R, 768) array minus its (R, 1) statistic 52.6 us buffered, 28.9 us in
place; times a (768,) row 45.5 / 30.3 us; batch norm's (8, 64, 3136) times a (1, 64, 1) scale
336 / 143 us. Below runs of 512 elements the per-run calls cost more than the copy (a softmax's
rows of 197: 48 / 59 us). NumPy's loops for maximum, minimum, fmax or arctan2 with a stride-0
operand are scalar code, slower than buffering (float32 maximum 48 / 105 us): they keep NumPy's
default (`direct_kernels.IN_PLACE_BROADCASTS` names the ufuncs that gain, and
`IN_PLACE_BROADCAST_DTYPES` the operand dtypes: with 1- and 2-byte ones NumPy's copy is cheap
and its stride-0 loops no faster).

Each element is computed by the same ufunc from the same operand elements, whichever loop NumPy
picks (IEEE add, subtract, multiply and divide are correctly rounded, comparisons exact): the
results are bit for bit those of the buffered call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..ir.values import TensorMeta
from .direct_kernels import IN_PLACE_BROADCAST_DTYPES, IN_PLACE_BROADCASTS
from .steps import SlotRef, Step
from .threads import Parted

# The shortest run of contiguous result elements along which a broadcast operand is repeated
# that is read in place (shorter ones gain from NumPy's copy into its buffer; see above).
MIN_RUN = 512
# NumPy's default buffer (elements): runs of half of it or more are never buffered.
DEFAULT_BUFFER = 8192
# The smallest result worth setting the buffer size for (setting and restoring it costs about
# 4 us; a result of 512 KiB gains 15 us or more).
MIN_BYTES = 1 << 19


class Unbuffered:
    """A ufunc called with NumPy's ufunc buffer of `size` elements (a broadcast operand then
    read in place; see the module doc), the caller's buffer size restored afterwards."""

    __slots__ = ("kernel", "size")

    def __init__(self, kernel: Callable[..., Any], size: int) -> None:
        self.kernel = kernel
        self.size = size

    @property
    def __name__(self) -> str:  # named in plan_profile's reports as the ufunc itself
        return str(getattr(self.kernel, "__name__", type(self.kernel).__name__))

    def __call__(self, *operands: Any, **keywords: Any) -> Any:
        with ufunc_buffer(self.size):
            return self.kernel(*operands, **keywords)


@contextmanager
def ufunc_buffer(size: int) -> Iterator[None]:
    """NumPy's ufunc buffer of `size` elements on this thread within the block (the
    caller's restored after it)."""
    previous = np.setbufsize(size)
    try:
        yield
    finally:
        np.setbufsize(previous)


def broadcast_run(result: Sequence[int], operands: Sequence[Sequence[int]]) -> int | None:
    """The number of contiguous result elements over which NumPy iterates the operands (of these
    shapes, aligned to the result's last dims) without a break, when an operand is broadcast;
    else None (one flat loop). That run is the result's trailing dims over each of which every
    operand is either whole throughout or of size 1 throughout."""
    ndim = len(result)
    padded = [(1,) * (ndim - len(shape)) + tuple(shape) for shape in operands]
    whole: list[bool | None] = [None] * len(padded)  # per operand, over the run so far
    start = ndim
    for dim in range(ndim - 1, -1, -1):
        if result[dim] == 1:
            start = dim
            continue
        kinds = [shape[dim] == result[dim] for shape in padded]
        if any(known is not None and known != kind for known, kind in zip(whole, kinds)):
            return math.prod(result[start:])
        whole = list(kinds)
        start = dim
    return None


def buffer_size(run: int) -> int:
    """NumPy's ufunc buffer (elements) that reads operands broadcast along runs of `run`
    elements in place: the run itself, rounded down to a multiple of 16 (NumPy 1.26 takes no
    other size)."""
    return max(16, run - run % 16)


def unbuffer_broadcasts(steps: Sequence[Step], meta_of: dict[int, Any]) -> None:
    """Give the elementwise steps whose broadcast operands NumPy reads faster in place (see the
    module doc) an `Unbuffered` kernel (inside its parts, when it runs in parts)."""
    actual = {slot: meta.shape for slot, meta in meta_of.items() if type(meta) is TensorMeta}
    for step in steps:
        if step.relaxed_shape is not None and len(step.out_slots) == 1:
            actual[step.out_slots[0]] = step.relaxed_shape
    for step in steps:
        if not step.elementwise or len(step.out_slots) != 1:
            continue
        if not in_place_broadcasts(step, meta_of):
            continue
        parted = step.kernel if isinstance(step.kernel, Parted) else None
        kernel = parted.kernel if parted is not None else step.kernel
        meta = meta_of.get(step.out_slots[0])
        if type(meta) is not TensorMeta or meta.numel * meta.dtype.itemsize < MIN_BYTES:
            continue
        shapes = [actual.get(int(a), ()) for a in step.arguments if type(a) is SlotRef]
        run = broadcast_run(meta.shape, shapes)
        if run is None or not MIN_RUN <= run < DEFAULT_BUFFER // 2:
            continue
        unbuffered = Unbuffered(kernel, buffer_size(run))
        if parted is not None:
            parted.kernel = unbuffered
        else:
            step.kernel = unbuffered


def in_place_broadcasts(step: Step, meta_of: dict[int, Any]) -> bool:
    """Whether NumPy reads a broadcast operand of this step's kernel in place as fast as a
    contiguous one: a ufunc of `direct_kernels.IN_PLACE_BROADCASTS` whose tensor operands all
    have a dtype of `IN_PLACE_BROADCAST_DTYPES`."""
    kernel = step.kernel.kernel if isinstance(step.kernel, Parted) else step.kernel
    try:
        if kernel not in IN_PLACE_BROADCASTS:
            return False
    except TypeError:  # an unhashable kernel is none of them
        return False
    for argument in step.arguments:
        if type(argument) is SlotRef:
            meta = meta_of.get(int(argument))
            if type(meta) is not TensorMeta or meta.dtype not in IN_PLACE_BROADCAST_DTYPES:
                return False
    return True
