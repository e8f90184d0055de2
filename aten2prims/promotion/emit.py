"""Emitting promotion and broadcasting as prims nodes, inside a `prims.Builder` (i.e. inside a
decomposition rule). Each helper emits a node only where something changes: a convert only
where a dtype does, a broadcast_in_dim only where a shape does.

The pipeline of one elementwise call (`elementwise`) is: dtypes from the promoting operands →
convert each promoting operand to the computation dtype → broadcast every tensor to the common
shape → the prim → convert the result to the result dtype. Converting *before* broadcasting
(rather than broadcasting first) runs the convert on the smaller, un-broadcast tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import prims

from ..errors import DTypeError
from ..ir.dtypes import DType
from ..ir.symbolic import is_symbolic, same_size
from ..ir.values import ScalarMeta, Value, is_tensor
from .rules import (
    COMPLEX32,
    PromotionKind,
    broadcast_dimensions,
    broadcast_shapes,
    complex32_error,
    elementwise_dtypes,
    promoted_dtype,
)

_NUMBER_TYPES = (bool, int, float, complex)


def _is_runtime_scalar(x: Any) -> bool:
    return type(x) is Value and type(x.meta) is ScalarMeta


def convert_number(x: bool | int | float | complex, dtype: DType) -> bool | int | float | complex:
    """A Python number as the Python type of `dtype`'s category (2 → 2.0 for a float dtype,
    True → 1 for an integer dtype). The value is not rounded to `dtype`: the prim's kernel does
    that, as torch's do. Complex to real is refused, as torch's casts of Python numbers refuse it."""
    target = dtype.python_type
    if type(x) is target:
        return x
    if is_symbolic(x) and target is not bool:
        # A symbolic size stays symbolic: bound to an int, it is the same number to a prim.
        return x
    if type(x) is complex and target is not complex:
        raise DTypeError(f"cannot convert the Python complex {x!r} to {dtype.short}")
    try:
        return target(x)
    except (OverflowError, ValueError) as error:
        raise DTypeError(
            f"cannot convert the Python {type(x).__name__} {x!r} to {dtype.short}: {error}"
        ) from None


def convert(x: Any, dtype: DType) -> Any:
    """`x` as `dtype`: a tensor through `prims.convert_element_type` (none if the dtype is
    already right); a runtime scalar as a 0-dim tensor through `prims.scalar_tensor`; a Python
    number as the Python type of the dtype's category (see `convert_number`)."""
    if is_tensor(x):
        return x if x.dtype is dtype else prims.convert_element_type(x, dtype)
    if type(x) in _NUMBER_TYPES or is_symbolic(x):
        return convert_number(x, dtype)
    if _is_runtime_scalar(x):
        return prims.scalar_tensor(x, dtype=dtype)
    raise DTypeError(
        f"convert to {dtype.short}: expected a tensor, a scalar value or a Python number, got {x!r}"
    )


def broadcast_to(x: Value, shape: Sequence[int]) -> Value:
    """`x` broadcast to `shape` the NumPy/torch way (right-aligned; size-1 dims stretch; leading
    dims are new) as one `prims.broadcast_in_dim`; `x` itself if its shape is already `shape`."""
    if not is_tensor(x):
        raise DTypeError(f"broadcast_to: expected a tensor value, got {x!r}")
    shape = tuple(shape)
    if x.ndim == len(shape) and all(map(same_size, x.shape, shape)):
        return x
    return prims.broadcast_in_dim(x, list(shape), list(broadcast_dimensions(x.shape, shape)))


def broadcast(*operands: Any) -> tuple[Any, ...]:
    """Every tensor operand broadcast to the operands' common shape; other operands unchanged."""
    shape = broadcast_shapes(*(x.shape for x in operands if is_tensor(x)))
    return tuple(broadcast_to(x, shape) if is_tensor(x) else x for x in operands)


def promote(
    *operands: Any,
    kind: PromotionKind = PromotionKind.DEFAULT,
    promoting: Sequence[int] | None = None,
) -> tuple[tuple[Any, ...], DType, DType]:
    """(operands converted and broadcast, computation dtype, result dtype), for rules that run
    more than one prim between promotion and the result's conversion.

    Only the `promoting` operands (indices; default all) decide the dtypes and are converted to
    the computation dtype: tensors by convert_element_type, runtime scalars into 0-dim tensors,
    Python numbers into the computation dtype's Python kind (they stay literal operands). Every
    tensor operand, promoting or not (e.g. `where`'s condition), is then broadcast to the common
    shape, 0-dim tensors included. None operands pass through.

    ALWAYS_BOOL computes in the promoted dtype itself, not in its opmath dtype as torch's
    `elementwise_dtypes` says: eager torch's comparison kernels cast to the promoted dtype
    (`f16 tensor == 0.1` is True for an element equal to f16(0.1)); comparing in float16 is exact.
    """
    indices = _promoting_indices(len(operands), promoting)
    chosen = [operands[i] for i in indices]
    computation, result = elementwise_dtypes(*chosen, kind=kind)
    if kind is PromotionKind.ALWAYS_BOOL:
        promoted = promoted_dtype(*chosen)
        if promoted is COMPLEX32:
            raise complex32_error(chosen)
        computation = promoted  # type: ignore[assignment]  # not COMPLEX32 (raised above)
    # Check the shapes before emitting anything, so an error leaves no stray node behind.
    shape = broadcast_shapes(*(x.shape for x in operands if is_tensor(x)))
    converted = list(operands)
    for i in indices:
        if operands[i] is not None:
            converted[i] = convert(operands[i], computation)
    return (
        tuple(broadcast_to(x, shape) if is_tensor(x) else x for x in converted),
        computation,
        result,
    )


def elementwise(
    prim: Callable[..., Value],
    *operands: Any,
    kind: PromotionKind = PromotionKind.DEFAULT,
    promoting: Sequence[int] | None = None,
) -> Value:
    """One elementwise prim call with torch's promotion and broadcasting made explicit:
    `elementwise(prims.add, x, 2.5)`. See `promote` for the operands; the prim's result is
    converted to the result dtype if it differs."""
    converted, _, result_dtype = promote(*operands, kind=kind, promoting=promoting)
    if not any(is_tensor(x) for x in converted):
        raise DTypeError(f"{_prim_name(prim)}: needs at least one tensor operand, got {operands!r}")
    return convert(prim(*converted), result_dtype)


def _promoting_indices(count: int, promoting: Sequence[int] | None) -> tuple[int, ...]:
    if promoting is None:
        return tuple(range(count))
    indices = []
    for index in promoting:
        if type(index) is not int or not -count <= index < count:
            raise ValueError(f"promoting index {index!r} is out of range for {count} operand(s)")
        indices.append(index % count)
    return tuple(sorted(set(indices)))


def _prim_name(prim: Callable[..., Any]) -> str:
    return f"prims.{getattr(prim, '__name__', prim)}"


__all__ = ["broadcast", "broadcast_to", "convert", "convert_number", "elementwise", "promote"]
