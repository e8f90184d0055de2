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
_KEPT = threading.local()


def kept_buffer(key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of `shape` and `dtype` in this thread's buffer
    `key`, 64-byte aligned."""
    # key -> (buffer, offset of its first aligned byte): reading its address (ctypes) took
    # half of this function's time, and the contraction engine and chains call it 1000 times a
    # call of EfficientNet-B0.
    kept: dict[str, tuple[np.ndarray, int]] | None = getattr(_KEPT, "buffers", None)
    if kept is None:
        kept = _KEPT.buffers = {}
    size = math.prod(shape) * dtype.itemsize
    found = kept.get(key)
    if found is None or found[0].nbytes < size + _ALIGNMENT:
        buffer = np.empty(size + _ALIGNMENT, np.uint8)
        found = buffer, -buffer.ctypes.data % _ALIGNMENT
        if size <= KEPT_BYTES:
            kept[key] = found
    buffer, start = found
    return buffer[start : start + size].view(dtype).reshape(shape)
