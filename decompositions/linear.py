"""Family N: matrix products and convolutions (forward and backward), col2im.

Every contraction here is `einsum(spec, a, b)`: both operands broadcast to one joint shape
(`broadcast_in_dim`, zero-copy views), one `mul`, one `sum` over the contracted labels. Nothing
else is needed: the executor's contraction fusion (aten2prims/executor/contraction_fusion.py)
runs that pattern as BLAS matrix products without materializing the joint product.
float16/bfloat16 operands are converted to float32 first and the result rounded once, as torch's
CPU kernels accumulate.

A convolution contracts a zero-copy window view of its (padded) input,
`as_strided(padded, [N, G, C/G, *out, *kernel])`, with the weight split by groups. A transposed
convolution is computed by stride phases (`_PhaseDim`): each output phase is an ordinary
correlation of the input with the kernel taps that land on it, all phases in one contraction
whose result is interleaved and cropped, so no product touches an inserted zero. The backward
pass is made of the same pieces: grad_input is the transposed convolution of grad_output (and
vice versa for a transposed forward); grad_weight contracts the input's windows with
grad_output over batch and positions; grad_bias sums grad_output.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import same_size, settled, sym_max, sym_min
from aten2prims.ir.values import Value
from aten2prims.promotion import convert, opmath_dtype

from .common import (
    convert_requested,
    full,
    per_spatial_dim,
    requested,
    row_major_strides,
    row_major_window,
    row_major_window_scatter,
)
from .registry import register

# -- einsum over prims -----------------------------------------------------------------------


def einsum(spec: str, a: Value, b: Value) -> Value:
    """`spec` like "mk,kn->mn" (one letter per dim, no repeats within an operand): the sum over
    the letters missing after '->' of the product of a and b, as broadcast_in_dim + mul + sum.
    a and b must share a dtype; the product and sum are computed in it."""
    inputs, out = spec.split("->")
    a_labels, b_labels = inputs.split(",")
    if len(a_labels) != a.ndim or len(b_labels) != b.ndim:
        raise ShapeError(f"einsum {spec!r}: operands of rank {a.ndim} and {b.ndim}")
    sizes: dict[str, int] = {}
    for labels, shape in ((a_labels, a.shape), (b_labels, b.shape)):
        for label, size in zip(labels, shape):
            if sizes.setdefault(label, size) != size:
                raise ShapeError(
                    f"einsum {spec!r}: label {label!r} has sizes {sizes[label]} and {size}"
                )
    joint = _merge_orders(out, a_labels, b_labels)
    if joint is None:  # the operands' orders conflict with the output's: transpose them (views)
        a, a_labels = _transposed(a, a_labels, out)
        joint = _merge_orders(out, a_labels, b_labels)
        if joint is None:
            b, b_labels = _transposed(b, b_labels, _merge_orders(out, a_labels) or "")
            joint = _merge_orders(out, a_labels, b_labels)
    assert joint is not None
    joint_shape = [sizes[label] for label in joint]
    product = prims.mul(
        _to_joint(a, a_labels, joint, joint_shape), _to_joint(b, b_labels, joint, joint_shape)
    )
    reduced = [position for position, label in enumerate(joint) if label not in out]
    return prims.sum(product, reduced) if reduced else product


def _to_joint(x: Value, labels: str, joint: str, shape: list[int]) -> Value:
    if labels == joint:
        return x
    return prims.broadcast_in_dim(x, shape, [joint.index(label) for label in labels])


def _transposed(x: Value, labels: str, order: str) -> tuple[Value, str]:
    """x with its dims in the order its labels appear in `order` (labels not in it keep their
    relative order, last)."""
    rank = {label: position for position, label in enumerate(order)}
    new = "".join(
        sorted(labels, key=lambda label: (rank.get(label, len(order)), labels.index(label)))
    )
    if new == labels:
        return x, labels
    return prims.transpose(x, [labels.index(label) for label in new]), new


def _merge_orders(*sequences: str) -> str | None:
    """An order of every label consistent with the order within each sequence, placing the
    first sequence's labels as early as possible; None if the orders conflict."""
    labels = list(dict.fromkeys("".join(sequences)))
    before: dict[str, set[str]] = {label: set() for label in labels}
    for sequence in sequences:
        for earlier, later in itertools.pairwise(sequence):
            before[later].add(earlier)
    placed: list[str] = []
    while len(placed) < len(labels):
        ready = [label for label in labels if label not in placed and before[label] <= set(placed)]
        if not ready:
            return None
        # The first sequence's labels first, in its order; then the others' in order of appearance.
        ready.sort(key=lambda label: (label not in sequences[0], labels.index(label)))
        placed.append(ready[0])
    return "".join(placed)


# -- matrix products -------------------------------------------------------------------------


def _check_matrix(op: str, name: str, x: Value, rank: int) -> None:
    if x.ndim != rank:
        raise ShapeError(f"{op}: {name} must be a {rank}-D tensor, got shape {list(x.shape)}")


def _same_dtype(op: str, **tensors: Value) -> DType:
    dtypes = {name: t.dtype for name, t in tensors.items()}
    first = next(iter(dtypes.values()))
    if any(d is not first for d in dtypes.values()):
        listing = ", ".join(f"{name} {d.short}" for name, d in dtypes.items())
        raise DTypeError(f"{op}: expected operands of one dtype, got {listing}")
    return first


def _matmul(op: str, spec: str, a: Value, b: Value, contracted: tuple[int, int]) -> Value:
    """einsum in the computation dtype (float32 for float16/bfloat16), before rounding back."""
    if a.shape[contracted[0]] != b.shape[contracted[1]]:
        raise ShapeError(f"{op}: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied")
    compute = opmath_dtype(_same_dtype(op, self=a, mat2=b))
    return einsum(spec, convert(a, compute), convert(b, compute))


@register("aten.mm.default")
def mm(self: Value, mat2: Value) -> Value:
    _check_matrix("aten.mm", "self", self, 2)
    _check_matrix("aten.mm", "mat2", mat2, 2)
    return convert(_matmul("aten.mm", "mk,kn->mn", self, mat2, (1, 0)), self.dtype)


@register("aten.bmm.default")
def bmm(self: Value, mat2: Value) -> Value:
    _check_matrix("aten.bmm", "self", self, 3)
    _check_matrix("aten.bmm", "mat2", mat2, 3)
    if self.shape[0] != mat2.shape[0]:
        raise ShapeError(f"aten.bmm: batch sizes differ: {list(self.shape)} and {list(mat2.shape)}")
    return convert(_matmul("aten.bmm", "bmk,bkn->bmn", self, mat2, (2, 1)), self.dtype)


def _is_zero(x: Any) -> bool:
    return x == 0


@register("aten.addmm.default")
def addmm(self: Value, mat1: Value, mat2: Value, beta: Any, alpha: Any) -> Value:
    """beta·self + alpha·(mat1 @ mat2), computed in float32 for float16/bfloat16 and rounded once.
    As BLAS does, beta = 0 ignores self (its NaN and inf do not propagate) and alpha = 0 ignores
    the product. Integer tensors truncate beta and alpha to integers, as torch does."""
    op = "aten.addmm"
    _check_matrix(op, "mat1", mat1, 2)
    _check_matrix(op, "mat2", mat2, 2)
    dtype = _same_dtype(op, self=self, mat2=mat2, mat1=mat1)
    if dtype.is_integral:
        beta, alpha = _truncated(op, "beta", beta), _truncated(op, "alpha", alpha)
    compute = opmath_dtype(dtype)
    shape = (mat1.shape[0], mat2.shape[1])
    if self.ndim > 2 or any(s not in (1, t) for s, t in zip(reversed(self.shape), reversed(shape))):
        raise ShapeError(
            f"{op}: self of shape {list(self.shape)} does not broadcast to {list(shape)}"
        )
    product = _matmul(op, "mk,kn->mn", mat1, mat2, (1, 0))
    if _is_zero(alpha) and not dtype.is_low_precision:
        # BLAS (torch's float32/float64/complex path) skips the product when alpha is 0, so inf
        # or NaN in the matrices does not reach the result; the float16/bfloat16 kernels multiply.
        product = full(shape, 0, compute)
    elif alpha != 1:
        product = prims.mul(product, convert(alpha, compute))
    if _is_zero(beta):
        return convert(product, dtype)
    bias = convert(self, compute)
    if beta != 1:
        bias = prims.mul(bias, convert(beta, compute))
    if bias.ndim != 2 or bias.shape != shape:  # ranks first: a size may be symbolic
        bias = prims.broadcast_in_dim(bias, list(shape), _trailing_dims(bias.ndim, 2))
    return convert(prims.add(product, bias), dtype)


def _truncated(op: str, name: str, value: Any) -> int:
    if type(value) is complex:
        raise DTypeError(f"{op}: {name} = {value!r} cannot scale an integer tensor")
    return int(value)


def _trailing_dims(rank: int, target_rank: int) -> list[int]:
    return list(range(target_rank - rank, target_rank))


# -- convolution pieces ------------------------------------------------------------------------

_SPATIAL = "pqr"  # output positions
_KERNEL = "ijk"  # kernel offsets
_PHASE = "xyz"  # output phases of a transposed convolution (positions modulo the stride)


def _embed(x: Value, sizes: Sequence[int], offsets: Sequence[int], steps: Sequence[int]) -> Value:
    """A [N, C, *sizes] tensor of zeros holding x[n, c, i...] at offsets + i·steps along each
    spatial dim; elements of x that land outside are dropped (negative padding crops)."""
    batch, channels, *spatial = x.shape
    first: list[Any] = []  # ints, or expressions of symbolic sizes
    last: list[Any] = []
    for size, offset, step, target in zip(spatial, offsets, steps, sizes):
        # Sizes may be symbolic: sym_min/sym_max keep a bound the ranges do not settle exact
        # (a min/max expression) instead of deciding it at the example sizes.
        first.append(sym_min(size, sym_max(0, -(offset // step))))
        last.append(sym_max(0, sym_min(size, -((offset - target) // step))))
    lengths: list[Any] = [sym_max(0, b - a) for a, b in zip(first, last)]
    shape = [batch, channels, *sizes]
    # A batch that may be 0 (data-dependent) takes the general path, right at 0 too.
    if any(settled(n == 0) for n in lengths) or settled(math.prod(shape) == 0):
        return full(shape, 0, x.dtype)
    if not all(same_size(a, 0) for a in first) or not all(map(same_size, lengths, spatial)):
        strides = row_major_strides(x.shape)
        start = sum(a * s for a, s in zip(first, strides[2:]))
        x = row_major_window(x, [batch, channels, *lengths], list(strides), start)
    offsets = [offset + a * step for offset, a, step in zip(offsets, first, steps)]
    if (
        all(map(same_size, x.shape[2:], sizes))
        and all(step == 1 for step in steps)
        and all(same_size(offset, 0) for offset in offsets)
    ):
        return x
    strides = row_major_strides(shape)
    window = [strides[0], strides[1], *(step * s for step, s in zip(steps, strides[2:]))]
    start = sum(offset * s for offset, s in zip(offsets, strides[2:]))
    return row_major_window_scatter(full(shape, 0, x.dtype), x, list(x.shape), window, start)


def _windows(
    padded: Value,
    groups: int,
    positions: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> Value:
    """The sliding windows of a padded [N, C, *P] input as one zero-copy view
    [N, groups, C/groups, *positions, *kernel]."""
    batch, channels, *_ = padded.shape
    strides = row_major_strides(padded.shape)
    per_group = channels // groups
    size = [batch, groups, per_group, *positions, *kernel]
    window = [
        strides[0],
        per_group * strides[1],
        strides[1],
        *(s * step for s, step in zip(strides[2:], stride)),
        *(s * d for s, d in zip(strides[2:], dilation)),
    ]
    if settled(math.prod(size) == 0):
        window = list(row_major_strides(size))
    return row_major_window(padded, size, window, 0)


def _labels(rank: int) -> tuple[str, str]:
    return _SPATIAL[:rank], _KERNEL[:rank]


def _correlate(
    x: Value,
    w: Value,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Value:
    """aten's (non-transposed) convolution without bias: x [N, C_in, *S], w [C_out, C_in/groups,
    *K], both in the computation dtype."""
    kernel = w.shape[2:]
    padded = _embed(
        x, [s + 2 * p for s, p in zip(x.shape[2:], padding)], padding, [1] * len(kernel)
    )
    positions = _positions("aten.convolution", padded.shape[2:], kernel, stride, dilation)
    windows = _windows(padded, groups, positions, kernel, stride, dilation)
    o, k = _labels(len(kernel))
    y = einsum(f"ngc{o}{k},goc{k}->ngo{o}", windows, prims.split_dim(w, 0, groups))
    return prims.collapse_view(y, 1, 2)


@attrs.frozen
class _PhaseDim:
    """One spatial dim of a transposed convolution split into stride phases.

    Without padding, the transposed convolution's output position t = s·m + r (phase r) collects
    x[i]·w[k] for i·s + k·d = t, i.e. i = m - floor(k·d/s) and r = k·d mod s: every phase is an
    ordinary correlation of x over positions m, each tap reading x at its own offset, and no
    product touches an inserted zero. All phases share one window of `taps` positions (spaced
    `spacing` apart: d/s when s divides d, else 1) over x, and the weight holds each tap at its
    (window position, phase): the kernel spread out by d/spacing, cut into [taps, s] and
    reversed along the window. Positions m run over [first, first + count), enough for the
    cropped output [padding, padding + size) to start `crop` into the phases' interleaving.
    """

    stride: int
    taps: int
    spacing: int
    weight_step: int
    first: int
    count: int
    crop: int
    size: int

    @staticmethod
    def of(
        length: int, kernel: int, stride: int, padding: int, dilation: int, output_padding: int
    ) -> _PhaseDim:
        size = (length - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
        spacing = dilation // stride if dilation % stride == 0 else 1
        first = padding // stride
        count = -(-(padding + size) // stride) - first
        return _PhaseDim(
            stride,
            (kernel - 1) * dilation // (stride * spacing) + 1,
            spacing,
            dilation // spacing,
            first,
            count,
            padding - first * stride,
            size,
        )

    @property
    def reach(self) -> int:
        """How far before position m the window starts, in x's positions."""
        return (self.taps - 1) * self.spacing


def _correlate_transposed(
    x: Value,
    w: Value,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    output_padding: Sequence[int],
    groups: int,
) -> Value:
    """aten's transposed convolution without bias: x [N, C_in, *S], w [C_in, C_out/groups, *K],
    computed phase by phase (_PhaseDim): one contraction of x's windows with the weight
    rearranged per phase, whose result [N, C_out, m1, r1, m2, r2, ...] is the interleaving of
    the phases, cropped by the padding."""
    dims = [
        _PhaseDim.of(n, k, s, p, d, extra)
        for n, k, s, p, d, extra in zip(
            x.shape[2:], w.shape[2:], stride, padding, dilation, output_padding
        )
    ]
    if any(dim.size <= 0 for dim in dims):
        sizes = [dim.size for dim in dims]
        raise ShapeError(
            f"aten.convolution: the transposed convolution's output size {sizes} is not positive"
        )
    rank = len(dims)
    # The weight as [C_in, C_out/groups, taps1, s1, taps2, s2, ...], reversed along the taps.
    spread = _embed(
        w, [dim.taps * dim.stride for dim in dims], [0] * rank, [dim.weight_step for dim in dims]
    )
    for i, dim in enumerate(dims):
        spread = prims.split_dim(spread, 2 + 2 * i, dim.taps)
    reversed_taps = [2 + 2 * i for i, dim in enumerate(dims) if dim.taps > 1]
    phased = prims.rev(spread, reversed_taps) if reversed_taps else spread
    padded = _embed(
        x,
        [dim.count + dim.reach for dim in dims],
        [dim.reach - dim.first for dim in dims],
        [1] * rank,
    )
    windows = _windows(
        padded,
        groups,
        [dim.count for dim in dims],
        [dim.taps for dim in dims],
        [1] * rank,
        [dim.spacing for dim in dims],
    )
    o, k = _labels(rank)
    r = _PHASE[:rank]
    interleaved = "".join(a + b for a, b in zip(o, r))
    y = einsum(
        f"ngc{o}{k},gco{''.join(a + b for a, b in zip(k, r))}->ngo{interleaved}",
        windows,
        prims.split_dim(phased, 0, groups),
    )
    y = prims.collapse_view(y, 1, 2)
    for i in range(rank):
        y = prims.collapse_view(y, 2 + i, 3 + i)
    shape = [*y.shape[:2], *(dim.size for dim in dims)]
    if all(map(same_size, y.shape, shape)):
        return y
    strides = row_major_strides(y.shape)
    start = sum(dim.crop * s for dim, s in zip(dims, strides[2:]))
    return row_major_window(y, shape, list(strides), start)


def _weight_grad(
    x: Value,
    grad: Value,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Value:
    """d(correlate(x, w))/dw contracted with `grad` [N, C_out, *O]: the windows of padded x over
    grad's positions times grad, summed over batch and positions -> [C_out, C_in/groups, *K]."""
    padded = _embed(
        x, [s + 2 * p for s, p in zip(x.shape[2:], padding)], padding, [1] * len(kernel)
    )
    windows = _windows(padded, groups, grad.shape[2:], kernel, stride, dilation)
    o, k = _labels(len(kernel))
    y = einsum(f"ngc{o}{k},ngo{o}->goc{k}", windows, prims.split_dim(grad, 1, groups))
    return prims.collapse_view(y, 0, 1)


def _positions(
    op: str,
    padded: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> list[int]:
    positions = [
        (p - d * (k - 1) - 1) // s + 1 for p, k, s, d in zip(padded, kernel, stride, dilation)
    ]
    if any(p - d * (k - 1) - 1 < 0 for p, k, d in zip(padded, kernel, dilation)):
        raise ShapeError(
            f"{op}: the (padded) input of spatial size {list(padded)} is smaller than the dilated kernel "
            f"{[d * (k - 1) + 1 for k, d in zip(kernel, dilation)]}"
        )
    return positions


def _conv_params(
    op: str,
    input: Value,
    weight: Value,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> tuple[list[int], list[int], list[int], list[int]]:
    rank = weight.ndim - 2
    if rank < 1 or input.ndim != weight.ndim:
        raise ShapeError(
            f"{op}: expected input [N, C, *spatial] and weight of the same rank >= 3, got {list(input.shape)} "
            f"and {list(weight.shape)}"
        )
    stride = per_spatial_dim(op, "stride", stride, rank)
    padding = per_spatial_dim(op, "padding", padding, rank)
    dilation = per_spatial_dim(op, "dilation", dilation, rank)
    output_padding = (
        per_spatial_dim(op, "output_padding", output_padding, rank) if transposed else [0] * rank
    )
    if any(s <= 0 for s in stride) or any(d <= 0 for d in dilation) or any(p < 0 for p in padding):
        raise ShapeError(f"{op}: stride and dilation must be positive and padding non-negative")
    if groups <= 0:
        raise ShapeError(f"{op}: groups must be positive, got {groups}")
    in_channels = weight.shape[0] if transposed else weight.shape[1] * groups
    if input.shape[1] != in_channels or (weight.shape[0] % groups) != 0:
        raise ShapeError(
            f"{op}: input of shape {list(input.shape)} does not match weight {list(weight.shape)} "
            f"with groups={groups}{' (transposed)' if transposed else ''}"
        )
    return stride, padding, dilation, output_padding


@register("aten.convolution.default")
def convolution(
    input: Value,
    weight: Value,
    bias: Value | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Value:
    op = "aten.convolution"
    dtype = _same_dtype(
        op, input=input, weight=weight, **({"bias": bias} if bias is not None else {})
    )
    stride, padding, dilation, output_padding = _conv_params(
        op, input, weight, stride, padding, dilation, transposed, output_padding, groups
    )
    compute = opmath_dtype(dtype)
    x, w = convert(input, compute), convert(weight, compute)
    if transposed:
        y = _correlate_transposed(x, w, stride, padding, dilation, output_padding, groups)
    else:
        y = _correlate(x, w, stride, padding, dilation, groups)
    if bias is not None:
        if bias.shape != (y.shape[1],):
            raise ShapeError(f"{op}: bias of shape {list(bias.shape)}, expected [{y.shape[1]}]")
        y = prims.add(y, prims.broadcast_in_dim(convert(bias, compute), list(y.shape), [1]))
    return convert(y, dtype)


@register("aten.convolution_backward.default")
def convolution_backward(
    grad_output: Value,
    input: Value,
    weight: Value,
    bias_sizes: Sequence[int] | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    output_mask: Sequence[bool],
) -> tuple[Value | None, Value | None, Value | None]:
    """(grad_input, grad_weight, grad_bias), each only where `output_mask` asks for it and None
    (undefined) elsewhere, as torch returns them."""
    op = "aten.convolution_backward"
    dtype = _same_dtype(op, grad_output=grad_output, input=input, weight=weight)
    stride, padding, dilation, output_padding = _conv_params(
        op, input, weight, stride, padding, dilation, transposed, output_padding, groups
    )
    want_input, want_weight, want_bias = requested(op, output_mask)
    compute = opmath_dtype(dtype)
    grad, x, w = convert(grad_output, compute), convert(input, compute), convert(weight, compute)
    kernel = weight.shape[2:]
    grad_input = grad_weight = grad_bias = None
    if transposed:
        if want_input:
            grad_input = _correlate(grad, w, stride, padding, dilation, groups)
            if not all(map(same_size, grad_input.shape, x.shape)):
                # An output_padding of a stride or more adds output rows no input row reaches:
                # the windows over them fall past the input's end.
                grad_input = row_major_window(
                    grad_input, list(x.shape), list(row_major_strides(grad_input.shape)), 0
                )
        if want_weight:
            grad_weight = _weight_grad(grad, x, kernel, stride, padding, dilation, groups)
    else:
        if want_input:
            # The rows of input the forward windows never reached come back as output_padding.
            reach = [d * (k - 1) for d, k in zip(dilation, kernel)]
            covered = [
                (o - 1) * s - 2 * p + r + 1
                for o, s, p, r in zip(grad.shape[2:], stride, padding, reach)
            ]
            leftover = [s - c for s, c in zip(input.shape[2:], covered)]
            grad_input = _correlate_transposed(grad, w, stride, padding, dilation, leftover, groups)
        if want_weight:
            grad_weight = _weight_grad(x, grad, kernel, stride, padding, dilation, groups)
    if want_bias:
        grad_bias = prims.sum(grad, [d for d in range(grad.ndim) if d != 1])
    return (
        convert_requested(grad_input, dtype),
        convert_requested(grad_weight, dtype),
        convert_requested(grad_bias, dtype),
    )


# -- col2im ----------------------------------------------------------------------------------------


@register("aten.col2im.default")
def col2im(
    self: Value,
    output_size: Sequence[int],
    kernel_size: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    stride: Sequence[int],
) -> Value:
    """The adjoint of im2col: column (c, k1, k2) of each block adds its L1×L2 values into the
    padded image at the window of kernel offset (k1, k2); the sum runs over kernel offsets in
    row-major order, in self's dtype, as torch's kernel accumulates; the padding is cropped."""
    op = "aten.col2im"
    if self.ndim not in (2, 3):
        raise ShapeError(f"{op}: expected a 2-D or 3-D input, got shape {list(self.shape)}")
    cols = self if self.ndim == 3 else prims.broadcast_in_dim(self, [1, *self.shape], [1, 2])
    batch, rows, length = cols.shape
    kernel = list(kernel_size)
    blocks = [
        (o + 2 * p - d * (k - 1) - 1) // s + 1
        for o, p, d, k, s in zip(output_size, padding, dilation, kernel, stride)
    ]
    if (
        math.prod(kernel) == 0
        or rows % math.prod(kernel) != 0
        or math.prod(blocks) != length
        or min(blocks) <= 0
    ):
        raise ShapeError(
            f"{op}: input of shape {list(self.shape)} does not hold {kernel} blocks at {blocks} positions "
            f"of an output of size {list(output_size)}"
        )
    channels = rows // math.prod(kernel)
    padded = [o + 2 * p for o, p in zip(output_size, padding)]
    shape = [batch, channels, *padded]
    image = full(shape, 0, cols.dtype)
    image_strides = row_major_strides(shape)
    window = [image_strides[0], image_strides[1], padded[1] * stride[0], stride[1]]
    col_strides = [rows * length, math.prod(kernel) * length, blocks[1], 1]
    size = [batch, channels, *blocks]
    if math.prod(size) > 0:
        for k1 in range(kernel[0]):
            for k2 in range(kernel[1]):
                start = k1 * dilation[0] * padded[1] + k2 * dilation[1]
                column = row_major_window(cols, size, col_strides, (k1 * kernel[1] + k2) * length)
                total = prims.add(row_major_window(image, size, window, start), column)
                image = row_major_window_scatter(image, total, size, window, start)
    if any(padding):
        image = row_major_window(
            image,
            [batch, channels, *output_size],
            image_strides,
            padding[0] * padded[1] + padding[1],
        )
    if self.ndim == 2:
        image = prims.squeeze(image, [0])
    return image


# -- _trilinear (nn.Bilinear; not Core ATen: torch.export keeps it) ----------------------------------


@register("aten._trilinear.default")
def _trilinear(
    i1: Value,
    i2: Value,
    i3: Value,
    expand1: Sequence[int],
    expand2: Sequence[int],
    expand3: Sequence[int],
    sumdim: Sequence[int],
    unroll_dim: int = 1,
) -> Value:
    """Σ over `sumdim` of i1·i2·i3, each operand seen with size-1 dims inserted at its `expand`
    positions (all then of one rank), the summed dims dropped. As torch's kernel: first i1·i2
    summed over the dims i3 lacks, then that times i3 summed over the rest — two contractions,
    in float32 for float16/bfloat16 and rounded once."""
    op = "aten._trilinear"
    dtype = _same_dtype(op, i1=i1, i2=i2, i3=i3)
    rank = i1.ndim + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    if rank > len(letters):
        raise ShapeError(f"{op}: {rank} dims are more than supported ({len(letters)})")
    expanded = [set(e) for e in (expand1, expand2, expand3)]
    summed = set(sumdim)
    for operand, dims, name in zip((i1, i2, i3), expanded, ("i1", "i2", "i3")):
        if operand.ndim + len(dims) != rank or any(not 0 <= d < rank for d in dims):
            raise ShapeError(
                f"{op}: {name} of shape {list(operand.shape)} with expand dims {sorted(dims)} "
                f"is not of rank {rank}"
            )
    labels = ["".join(letters[d] for d in range(rank) if d not in dims) for dims in expanded]
    compute = opmath_dtype(dtype)
    a, b, c = (convert(x, compute) for x in (i1, i2, i3))
    # i1·i2, summing the dims only they have that are summed; then with i3.
    pair = "".join(
        letters[d]
        for d in range(rank)
        if (letters[d] in labels[0] or letters[d] in labels[1])
        and not (d in summed and d in expanded[2])
    )
    product = einsum(f"{labels[0]},{labels[1]}->{pair}", a, b)
    out = "".join(letters[d] for d in range(rank) if d not in summed)
    result = einsum(f"{pair},{labels[2]}->{out}", product, c)
    return convert(result, dtype)


@register("aten.conv_tbc.default")
def conv_tbc(self: Value, weight: Value, bias: Value, pad: int = 0) -> Value:
    """Not Core ATen (F.conv_tbc): a 1-d convolution of a [time, batch, in] input with a
    [kernel, in, out] weight, padded by `pad` in time: the input as [batch, in, time] and the
    weight as [out, in, kernel] through `convolution`, the result back to [time, batch, out]."""
    op = "aten.conv_tbc"
    _check_matrix(op, "self", self, 3)
    _check_matrix(op, "weight", weight, 3)
    _check_matrix(op, "bias", bias, 1)
    if weight.shape[1] != self.shape[2] or bias.shape[0] != weight.shape[2]:
        raise ShapeError(
            f"{op}: input {list(self.shape)}, weight {list(weight.shape)} and bias "
            f"{list(bias.shape)} do not fit [time, batch, in], [kernel, in, out], [out]"
        )
    output = convolution(
        prims.transpose(self, [1, 2, 0]),
        prims.transpose(weight, [2, 1, 0]),
        bias,
        [1],
        [pad],
        [1],
        False,
        [0],
        1,
    )
    return prims.transpose(output, [2, 0, 1])
