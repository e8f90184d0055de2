"""Strided views of an array's memory, made in a fifth of `np.lib.stride_tricks.as_strided`'s
time.

The depthwise products, shifted and stacked copies and paddings make a few such views per chunk,
hundreds per call, most of them inside a region's parts (threads.py). `as_strided` is Python
(an interface dictionary and a helper object: about 5 us), and Python time in a part holds the
GIL that the call's other threads wait for to return from their NumPy calls: measured, 5 us of
Python added to each of EfficientNet-B0's 800 scratch-buffer requests cost 3 ms a call at one
thread and 16 ms at two. ndarray's constructor over the base's buffer makes the same view in
about 1 us. A base that is not one C-contiguous buffer (or is read-only where the view is to be
written), or a view the constructor refuses (one reaching past the base's last byte: it checks
what `as_strided` does not), goes through `as_strided` as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def strided_view(
    base: np.ndarray,
    shape: Sequence[int],
    strides: Sequence[int],
    *,
    writeable: bool = False,
) -> np.ndarray:
    """`np.lib.stride_tricks.as_strided(base, shape, strides, writeable=writeable)`: the
    elements at base's first byte plus each index's dot product with `strides` (bytes)."""
    flags = base.flags
    if flags.c_contiguous and (flags.writeable or not writeable):
        try:
            view = np.ndarray(shape, base.dtype, base, 0, strides)
        except (TypeError, ValueError):  # reaches past the base, or strides it refuses
            pass
        else:
            if not writeable:
                view.flags.writeable = False
            return view
    return np.lib.stride_tricks.as_strided(base, shape, strides, writeable=writeable)
