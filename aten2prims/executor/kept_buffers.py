"""Each thread's scratch buffers, kept by name between calls: staging copies, accumulators and
phase images of the contraction engine (`contraction.py`, `multiply_accumulate.py`,
`stacked_copies.py`), a convolution's padded input where its fused step makes one
(`padded_products.py`), an elementwise chain's blocks (`chains.py`) and an attention step's
block buffers (`attention.py`), so a steady-state call of a plan allocates (and page-faults)
none of them anew.

A buffer of up to KEPT_BYTES is kept by the thread that asked for it; a larger request gets a
fresh array each time. Every array handed out starts on a 64-byte boundary, the same on every
thread, so MKL takes the same code path whichever thread runs a part. A name is used by one
kernel at a time on a thread (a kernel's buffers are dead when it returns), so two kernels on
one thread share a name only if they never hold it at once.
"""

from __future__ import annotations

import math
import threading

import numpy as np

KEPT_BYTES = 16 << 20
_ALIGNMENT = 64
# The arrays remembered per buffer (a plan asks for a few shapes of each).
MAX_VIEWS = 64
_KEPT = threading.local()


class _Kept:
    """One name's buffer on a thread: its bytes, the offset of their first aligned byte, and the
    arrays already handed out over it by (shape, dtype)."""

    __slots__ = ("buffer", "start", "views")

    def __init__(self, buffer: np.ndarray) -> None:
        self.buffer = buffer
        # Reading the address (ctypes) took half of a call's time: once per buffer.
        self.start = -buffer.ctypes.data % _ALIGNMENT
        self.views: dict[tuple[tuple[int, ...], np.dtype], np.ndarray] = {}


def kept_buffer(key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of `shape` and `dtype` in this thread's buffer
    `key`, 64-byte aligned (the same array object for the same shape and dtype while the buffer
    lasts: callers slice it, never change it)."""
    # The contraction engine, chains and depthwise products call this about 800 times a call
    # of EfficientNet-B0, most of them inside a region's parts, where Python time holds the GIL
    # that the call's other threads need to return from their NumPy calls: a dictionary
    # lookup, not a slice, view and reshape.
    kept: dict[str, _Kept] | None = getattr(_KEPT, "buffers", None)
    if kept is None:
        kept = _KEPT.buffers = {}
    found = kept.get(key)
    layout = (tuple(shape), dtype)
    if found is not None:
        view = found.views.get(layout)
        if view is not None:
            return view
    size = math.prod(shape) * dtype.itemsize
    if found is None or found.buffer.nbytes < size + _ALIGNMENT:
        found = _Kept(np.empty(size + _ALIGNMENT, np.uint8))
        if size > KEPT_BYTES:  # not kept: a fresh array each time
            return found.buffer[found.start : found.start + size].view(dtype).reshape(shape)
        kept[key] = found
    view = found.buffer[found.start : found.start + size].view(dtype).reshape(shape)
    if len(found.views) >= MAX_VIEWS:  # shapes that vary from call to call (dynamic sizes)
        found.views.clear()
    found.views[layout] = view
    return view
