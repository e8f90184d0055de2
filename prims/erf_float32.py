"""erf of float32 values in a few vectorized NumPy passes instead of SciPy's per-element
double-precision routine (about 12 ns per element: GELU's whole cost). The prim's float32 erf
when MKL is not loaded; with MKL, `vector_math.py` calls MKL's vector erf instead (one pass,
within 1 ulp, 3.2x faster than these passes).

erf(x) = tanh(g(x)) where g = atanh ∘ erf is odd and smooth, so g(x) ≈ x·P(x²) with P of degree
6. P was fitted in float64 (weighted least squares iterated towards minimax, over 40,000 points of
[0, 4.3], each weighted by how much an error in g moves erf, relative to erf: 1 − tanh(g)² over
erf), with the relative error of erf below 1e-7 over the interval. Evaluated in float32 the
result is within 4 ulp of the correctly rounded erf where NumPy's float32 tanh runs its FMA
kernels (AVX2 and AVX-512, which give identical bits; 5 ulp on its pre-AVX2 baseline kernel)
(mean 0.8 ulp; `tests/test_erf_float32.py`
checks millions of values, subnormals to the tails), closer than torch's own vectorized float32
erf needs to be to pass its tolerance (float32: rtol 1.3e-6, about 11 ulp).

P was fitted on [0, 4.3]: beyond it erf(x) rounds to ±1 in float32, and so does tanh(g(x))
without any clipping: x·P(x²) evaluated in float32 is at least g(4.3) ≈ 11.6 for every float32
x ≥ 4.3 (checked over all of them: P's leading coefficient is positive and the Horner steps
only grow; NumPy's float32 tanh reaches 1 at 10), and for huge x and +inf it overflows to +inf
(x² and the products: no NaN, since no step subtracts infinities), whose tanh is 1; odd in x,
so -1 below -4.3. NaN stays NaN, ±0 keep their sign and subnormals are x·(2/√π) as erf's are.
(The clip at ±4.3 this evaluation once started with gave the same bits for every float32, also
checked over all of them, and cost 14 of erf's 108 µs per 64K-element block, the most
expensive pass after tanh: NumPy's float32 clip is not one of its SIMD loops.)

The 15 passes (x², six Horner steps of a multiply and an add, the product by x, tanh) run
block by block over cache-sized pieces: on arrays larger than a core's L2 cache every pass would
otherwise stream its operands from L3 (measured over 1.2M values: 4.8 ms whole-array, 2.6 ms in
blocks of 64K elements, against 15 ms for scipy.special.erf). On the AMD EPYC (1 MiB of L2 per
core) over 0.6M values: 0.98 ms with the clip, 0.82 ms without; blocks of 8K / 16K / 32K
elements 1.64 / 1.19 / 0.94 ms, so 64K stays.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# P's coefficients, constant term first: g(x) ≈ x·(C0 + C1·x² + … + C6·x¹²).
_COEFFICIENTS = tuple(
    np.float32(c)
    for c in (
        1.1283792740811072,
        0.10276905764968221,
        -0.00019183462728238778,
        -0.0006197816602083405,
        8.763630025390683e-05,
        -5.668322412172284e-06,
        1.4184418928554188e-07,
    )
)
# Elements per block: the block's input, its two scratch arrays and its output (256 KiB each)
# stay in a core's L2 cache across the 15 passes (64K to 128K measured fastest; 4K 2x slower).
BLOCK = 1 << 16
# Elements per block under `long_blocks`: each pass one NumPy call of 100-200 µs over 1 MiB.
# Threads sharing the parts of one erf hand the GIL to each other at the end of every call, so
# fewer, longer calls share better, while one thread is faster with L2-sized blocks.
LONG_BLOCK = 1 << 18


class _Scratch(threading.local):
    """Each thread's two scratch blocks (a call's threads may run parts of one erf at once)
    and its block length."""

    squares: np.ndarray | None = None
    polynomial: np.ndarray | None = None
    block: int = BLOCK


_SCRATCH = _Scratch()


@contextmanager
def long_blocks() -> Iterator[None]:
    """erf's passes on this thread over blocks of LONG_BLOCK elements: for a thread running
    one of several threads' parts of an erf (the same bits: each element's passes are the
    same whatever its block)."""
    scratch = _SCRATCH
    outer, scratch.block = scratch.block, LONG_BLOCK
    try:
        yield
    finally:
        scratch.block = outer


def erf_float32(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf of a float32 array (broadcast to `out`'s shape when `out` is given), written into
    `out` or a new C-contiguous array."""
    if out is None:
        out = np.empty(np.shape(a), np.float32)
    if not out.flags.c_contiguous:
        out[...] = erf_float32(np.broadcast_to(a, out.shape))
        return out
    source = np.ascontiguousarray(np.broadcast_to(a, out.shape), dtype=np.float32)
    if np.may_share_memory(source, out) and source.ctypes.data != out.ctypes.data:
        source = source.copy()  # overlapping other than element for element: blocks would clash
    flat_in, flat_out = source.reshape(-1), out.reshape(-1)
    scratch = _SCRATCH
    block = scratch.block
    if scratch.squares is None or scratch.polynomial is None or scratch.squares.size < block:
        scratch.squares = np.empty(block, np.float32)
        scratch.polynomial = np.empty(block, np.float32)
    # x² underflows for tiny x (the result is x·P(0) then) and overflows with P(x²) for huge x
    # (tanh of ±inf: ±1): expected, silently.
    with np.errstate(over="ignore", under="ignore"):
        _passes(flat_in, flat_out, scratch.squares[:block], scratch.polynomial[:block])
    return out


def _passes(
    flat_in: np.ndarray,
    flat_out: np.ndarray,
    squares_block: np.ndarray,
    polynomial_block: np.ndarray,
) -> None:
    """tanh(x·P(x²)) of `flat_in` into `flat_out` (the same length; the same memory or none of
    it), block by block (the scratch blocks' length); x is read again for the product, so the
    result is written last."""
    c0, c1, c2, c3, c4, c5, c6 = _COEFFICIENTS
    block = squares_block.size
    for start in range(0, flat_out.size, block):
        stop = min(start + block, flat_out.size)
        size = stop - start
        z = flat_in[start:stop]
        s = np.multiply(z, z, out=squares_block[:size])
        p = np.multiply(s, c6, out=polynomial_block[:size])
        for coefficient in (c5, c4, c3, c2, c1):
            np.add(p, coefficient, out=p)
            np.multiply(p, s, out=p)
        np.add(p, c0, out=p)
        result = flat_out[start:stop]
        np.multiply(p, z, out=result)
        np.tanh(result, out=result)
