"""Strides: how torch lays a tensor's elements out in its storage, as torch's prims metas compute
it (`torch/_prims_common`). Pure arithmetic on sizes and strides, counted in elements; a tensor's
layout is part of its `TensorMeta` (values.py). On symbolic sizes, a decision the ranges do not
settle takes the example sizes' answer without a run-time check (`symbolic.lenient`): a layout is
metadata and never restricts the sizes a graph runs at. The shape environment remembers each
answer on symbolic sizes (`symbolic.remembered`): the same shapes meet the same layouts at
every op.

- `contiguous_strides(shape)`: row-major strides (a dim of length 0 counts as 1, as torch's
  `make_contiguous_strides_for`).
- `channels_last_strides(shape)`: channels-last strides of a rank-3, 4 or 5 shape.
- `is_non_overlapping_and_dense(shape, strides)`: some permutation of the dims is contiguous;
  `is_non_overlapping`: no two elements share a storage position.
- `elementwise_strides(shape, layouts)`: the strides torch gives an elementwise result.
- `preserved_strides(shape, strides)`: `empty_like(a, memory_format=preserve_format)`'s strides.
- `same_significant_strides(shape, a, b)`: a and b agree on every dim of length > 1 (strides of a
  tensor with fewer than two elements do not matter), torch's `check_significant_strides`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from .symbolic import SymExpr, remembered, same_size, settled

Strides = tuple[int, ...]


def contiguous_strides(shape: Sequence[int]) -> Strides:
    # Every tensor meta made without strides asks this: remembered per shape, by structure.
    return _contiguous_strides(
        tuple(size.terms if type(size) is SymExpr else size for size in shape)
    )


@functools.lru_cache(maxsize=65536)
def _contiguous_strides(shape_key: tuple) -> Strides:
    shape = [size if type(size) is int else SymExpr(size) for size in shape_key]
    strides: list[Any] = []
    multiplier: Any = 1  # an int, or an expression once a symbolic size is met
    for size in reversed(shape):
        strides.append(multiplier)
        # A symbolic size counts as itself: torch clamps it to 1, which differs only for an
        # empty tensor, whose strides address nothing (no decision on the size is taken here).
        multiplier = multiplier * (size if type(size) is not int or size > 1 else 1)
    return tuple(reversed(strides))


# The order of a channels-last layout's dims, innermost first, by rank.
_CHANNELS_LAST_ORDER = {3: (1, 2, 0), 4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}


def channels_last_strides(shape: Sequence[int]) -> Strides:
    """torch's `make_channels_last_strides_for` (which does not clamp zero sizes to one)."""
    order = _CHANNELS_LAST_ORDER.get(len(shape))
    if order is None:
        raise ValueError(f"channels-last strides need a rank-3, 4 or 5 shape, got {list(shape)}")
    strides = [0] * len(shape)
    multiplier = 1
    for dim in order:
        strides[dim] = multiplier
        multiplier = multiplier * shape[dim]
    return tuple(strides)


def permuted_strides(shape: Sequence[int], physical_order: Sequence[int]) -> Strides:
    """Contiguous strides of the dims taken outermost-first in `physical_order` (torch's
    `empty_permuted`)."""
    strides = [0] * len(shape)
    inner = contiguous_strides([shape[d] for d in physical_order])
    for stride, dim in zip(inner, physical_order):
        strides[dim] = stride
    return tuple(strides)


@remembered
def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """torch's `is_contiguous`: dims of length 1 are ignored; empty tensors are contiguous."""
    if _numel(shape) == 0:
        return True
    return _dense_in_order(shape, strides, reversed(range(len(shape))))


@remembered
def is_channels_last_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """torch's `is_channels_last_contiguous_2d` (rank 4) / `_3d` (rank 5)."""
    order = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}.get(len(shape))
    if order is None:
        return False
    return _dense_in_order(shape, strides, order)


@remembered
def is_non_overlapping_and_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    if _numel(shape) < 2:
        return True
    if len(shape) == 1:
        return strides[0] == 1
    by_stride = sorted(range(len(shape)), key=lambda d: (strides[d], shape[d]))
    return _dense_in_order(shape, strides, by_stride)


def _dense_in_order(shape: Sequence[int], strides: Sequence[int], dims: Iterable[int]) -> bool:
    """Whether the dims, innermost first, lay the elements out densely: each stride the product
    of the sizes before it (dims of length 1 ignored, as torch does)."""
    expected = 1
    for dim in dims:
        if shape[dim] == 1:
            continue
        if strides[dim] != expected:
            return False
        expected = expected * shape[dim]
    return True


@remembered
def is_non_overlapping(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """No two elements share a storage position (gaps allowed): taken by increasing stride,
    each dim's stride steps past everything the smaller ones span."""
    if _numel(shape) < 2:
        return True
    span = 0
    for stride, size in sorted((s, n) for s, n in zip(strides, shape) if n > 1):
        if stride <= span:
            return False
        span = span + (size - 1) * stride
    return True


def _numel(shape: Sequence[int]) -> int:
    numel = 1
    for size in shape:
        numel = numel * size
    return numel


def _suggested_strides(shape: Sequence[int], strides: Sequence[int]) -> Strides:
    """Strides of `empty_like` for a tensor that is not dense: channels-last when the strides
    look like it (c10's `is_channels_last_strides_2d/3d`), otherwise contiguous."""
    order = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}.get(len(shape))
    if order is None or strides[1] == 0:
        return contiguous_strides(shape)
    smallest = 0
    for dim in order:
        if shape[dim] == 0 or strides[dim] < smallest:
            return contiguous_strides(shape)
        if dim == 0 and smallest == strides[1]:
            return contiguous_strides(shape)
        smallest = strides[dim]
        if shape[dim] > 1:
            smallest = smallest * shape[dim]
    return channels_last_strides(shape)


@remembered
def preserved_strides(shape: Sequence[int], strides: Sequence[int]) -> Strides:
    """`empty_like(a, memory_format=preserve_format)`: a's strides when a is non-overlapping and
    dense, otherwise contiguous or channels-last as a's strides suggest."""
    if is_non_overlapping_and_dense(shape, strides):
        return tuple(strides)
    return _suggested_strides(shape, strides)


def _physical_order(shape: Sequence[int], layouts: Sequence[Sequence[int]]) -> list[int]:
    """torch's `compute_elementwise_output_logical_to_physical_perm` for operands of `shape`
    with the given strides (0-dim operands already left out)."""
    ndim = len(shape)
    if ndim == 0 or not layouts:
        return []
    if ndim == 1:
        return [0]
    # Strides structurally a contiguous tensor's are contiguous whatever the sizes: no decision
    # on a symbolic size is needed for them (the common case, and a costly one to decide).
    row_major = contiguous_strides(shape)
    contiguous = all(
        all(map(same_size, strides, row_major)) or is_contiguous(shape, strides)
        for strides in layouts
    )
    channels_last = all(is_channels_last_contiguous(shape, s) for s in layouts)
    if contiguous and not channels_last:
        return list(range(ndim))
    if channels_last and not contiguous:
        return [0, *range(2, ndim), 1]

    def at_least(a: int, b: int) -> bool:
        return b == 0 or (a != 0 and (a >= b or a % b == 0))

    def should_swap(a: int, b: int) -> int:
        for strides in layouts:
            stride_a, stride_b = strides[a], strides[b]
            if stride_a == 0 or stride_b == 0:
                continue
            if stride_a == stride_b:
                if at_least(shape[b], shape[a]):
                    continue
                return 1
            if at_least(stride_b, stride_a):
                return -1
            if at_least(stride_a, stride_b):
                return 1
        return 0

    perm = list(reversed(range(ndim)))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in reversed(range(i)):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return list(reversed(perm))


@remembered
def elementwise_strides(shape: Sequence[int], layouts: Sequence[Sequence[int]]) -> Strides:
    """The strides of an elementwise prim's result (torch's `_prim_elementwise_meta`: the
    operands' common dim order, made contiguous); `layouts` are the strides of the operands of
    `shape` (0-dim operands left out)."""
    if not layouts:
        return contiguous_strides(shape)
    order = _physical_order(shape, layouts)
    if order == list(range(len(shape))):  # the common case: no permutation to lay out
        return contiguous_strides(shape)
    return permuted_strides(shape, order)


@remembered
def single_operand_strides(shape: Sequence[int], strides: Sequence[int]) -> Strides:
    """torch's `compute_elementwise_output_strides` of one tensor: its strides when dense, else
    `empty_like`'s."""
    if len(shape) == 0:
        return ()
    if len(shape) == 1:
        return (1,)
    return preserved_strides(shape, strides)


@remembered
def same_significant_strides(shape: Sequence[int], a: Sequence[int], b: Sequence[int]) -> bool:
    if _numel(shape) < 2:
        return True
    return all(size == 1 or x == y for size, x, y in zip(shape, a, b))


def required_length(shape: Sequence[int], strides: Sequence[int], storage_offset: int) -> int:
    """One past the last storage element a tensor of this layout reads (0 when it is empty)."""
    if settled(_numel(shape) == 0):  # undecided (a data-dependent size): the non-empty bound
        return 0
    end = storage_offset + 1
    for size, stride in zip(shape, strides):
        end = end + (size - 1) * stride
    return end
