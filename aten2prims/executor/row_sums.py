"""Row sums through BLAS: a float `prims.sum` over the trailing dims of its operand (a layer
norm's mean, a softmax's denominator, a mean over an image's positions) runs as a matrix-vector
product of the operand's rows with a vector of ones (`blas.matmul`'s: MKL's gemm for large
ones when MKL is in use, OpenBLAS's otherwise).

NumPy's `np.add.reduce` along a contiguous last axis pays a per-row cost that a BLAS product
does not: over 8x196 rows of 768 float32 values it measured 0.29 ms against 0.19 ms for the
product, over 512 rows of 128 (an attention block's scores) 18 us against 5 us. A product with
ones adds the same terms (x * 1 is x, exactly; a row of -0.0 sums to +0.0 either way, as torch
and NumPy give), in BLAS's order: running partial sums instead of NumPy's pairwise tree. Its
rounding error is larger, though within float32 tolerance (rtol 1.3e-6, about 11 eps):
measured over all-positive rows (where errors add up) of 128 to 50,176 elements, at most
3.2 eps times the sum of the terms' magnitudes (NumPy's pairwise sum: 1.5). It is not bit for
bit NumPy's: a planned run and the node-by-node reference run differ in the last bits of such
sums, as they do for every fused matrix product. Rows longer than `MAX_ROW_LENGTH` keep
NumPy's sum, whose error grows only with the logarithm of the length.

BLAS's result for a row depends on how many rows one call holds (its kernels take rows in
groups and the rest another way), never on the memory's alignment: a step's rows are split into
the same calls whatever the thread count (the parts the plan decides), so the bits are the same
on 1 and N threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from prims.registry import lookup

from ..ir.graph import Node
from ..ir.values import Value
from .blas import matmul

# The longest row summed by BLAS (longer ones keep NumPy's pairwise sum): a layer norm's or an
# image's rows, well inside the lengths whose error was measured (above).
MAX_ROW_LENGTH = 8192

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class RowSums:
    """`prims.sum(inp, dims, output_dtype)` over the trailing `reduced` dims (`length` elements
    per row): `inp`'s rows times a ones vector, when they are a matrix with unit column stride
    and `inp` has the planned dtype; otherwise (a strided view given at run time) the prim's own
    kernel."""

    __slots__ = ("fallback", "length", "ones", "reduced")

    def __init__(
        self, fallback: Callable[..., Any], reduced: int, length: int, dtype: np.dtype
    ) -> None:
        self.fallback = fallback
        self.reduced = reduced
        self.length = length
        self.ones = np.ones((length, 1), dtype)

    def __call__(self, inp: Any, dims: Sequence[int] | None, output_dtype: Any) -> Any:
        kept = inp.shape[: inp.ndim - self.reduced]
        if (
            type(inp) is np.ndarray
            and inp.dtype == self.ones.dtype
            and inp.ndim > self.reduced
            and inp.size
        ):
            try:
                rows = np.reshape(inp, (-1, self.length), copy=False)
            except ValueError:  # the rows are not one strided matrix: no copy for it
                rows = None
            if rows is not None and rows.strides[1] == inp.itemsize:
                result = np.empty(kept, inp.dtype)  # an array of its own, not a view
                matmul(rows, self.ones, result.reshape(-1, 1))
                return result
        return self.fallback(inp, dims, output_dtype)


def row_sums(node: Node) -> RowSums | None:
    """The RowSums kernel of a `prims.sum` node it applies to, else None: a float32 or float64
    operand, no output dtype, the reduced dims its last ones (at least one kept dim), rows of 2 to
    MAX_ROW_LENGTH elements."""
    definition = lookup(node.op)
    if node.op != "prims.sum" or definition is None or definition.kernel is None:
        return None
    inp, dims, output_dtype = definition.bind(node.args, node.kwargs)
    if type(inp) is not Value or not inp.is_tensor or dims is None or output_dtype is not None:
        return None
    dtype = np.dtype(inp.dtype.numpy)
    shape = inp.shape
    reduced = sorted(int(d) for d in dims)
    if (
        dtype not in _FLOATS
        or not reduced
        or reduced != list(range(len(shape) - len(reduced), len(shape)))
        or len(reduced) == len(shape)
        or not all(type(n) is int for n in shape)
    ):
        return None
    length = 1
    for n in shape[len(shape) - len(reduced) :]:
        length *= n
    if not 2 <= length <= MAX_ROW_LENGTH:
        return None
    return RowSums(definition.kernel, len(reduced), length, dtype)
