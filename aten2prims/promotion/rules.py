"""torch's type promotion and broadcasting rules as pure functions over metas (no node emission).

An *operand* is what an elementwise op receives: a tensor `Value` (n-dim or 0-dim), a runtime
scalar `Value` (ScalarMeta: it promotes exactly like a Python scalar of its kind), a Python
bool/int/float/complex, or None (ignored). The rules follow torch 2.13's
`torch/_prims_common.elementwise_dtypes` and `reduction_dtypes`, checked against eager torch in tests/test_promotion.py.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Final

from ..errors import DTypeError, ShapeError
from ..ir.dtypes import Category, DType
from ..ir.symbolic import is_literal_one, is_size, is_symbolic, number_kind, same_size
from ..ir.values import ScalarMeta, Value, is_tensor

Shape = tuple[int, ...]


class PromotionKind(enum.Enum):
    """How an elementwise op turns the promoted dtype into (computation dtype, result dtype)."""

    DEFAULT = "default"  # opmath(promoted), promoted
    NO_OPMATH = "no_opmath"  # promoted, promoted
    INT_TO_FLOAT = "int_to_float"  # bool/int promote to the default float
    ALWAYS_BOOL = "always_bool"  # opmath(promoted), bool
    COMPLEX_TO_FLOAT = "complex_to_float"  # opmath(promoted), complex -> its real counterpart
    BOOL_TO_LONG = "bool_to_long"  # bool computes and returns int64


class ReductionKind(enum.Enum):
    """How a reduction's result dtype follows from its (possibly `dtype=`-overridden) input dtype."""

    SAME = "same"
    COMPLEX_TO_FLOAT = "complex_to_float"  # var, std: complex -> its real counterpart
    KEEP_PROMOTED_TYPE = "keep_promoted_type"  # mean: the result stays in the computation dtype
    ALWAYS_BOOL = "always_bool"  # any, all


DEFAULT_FLOAT: Final = DType.float32
"""torch.get_default_dtype(); graphs are lowered with torch's default."""


# -- the dtype lattice ------------------------------------------------------------------------------


class _Complex32:
    """torch.complex32: a point of the lattice that no aten2prims tensor can have."""

    short = "c32"

    def __repr__(self) -> str:
        return "complex32"


COMPLEX32: Final = _Complex32()
Promoted = DType | _Complex32

# bool < {u8, i8} < i16 < i32 < i64 < {f16, bf16} < f32 < f64 < c32 < c64 < c128; the two
# unordered pairs share a rank and meet one rank up.
_LEVELS: tuple[tuple[Promoted, ...], ...] = (
    (DType.bool,),
    (DType.uint8, DType.int8),
    (DType.int16,),
    (DType.int32,),
    (DType.int64,),
    (DType.float16, DType.bfloat16),
    (DType.float32,),
    (DType.float64,),
    (COMPLEX32,),
    (DType.complex64,),
    (DType.complex128,),
)
_RANK: dict[Promoted, int] = {d: rank for rank, level in enumerate(_LEVELS) for d in level}
_COMPLEX_COUNTERPART: dict[DType, Promoted] = {
    DType.float16: COMPLEX32,
    DType.bfloat16: DType.complex64,
    DType.float32: DType.complex64,
    DType.float64: DType.complex128,
    DType.complex64: DType.complex64,
    DType.complex128: DType.complex128,
}
# The dtype a category gets when only Python scalars reached it.
_CATEGORY_DEFAULT: dict[Category, DType] = {
    Category.INTEGER: DType.int64,
    Category.FLOATING: DEFAULT_FLOAT,
    Category.COMPLEX: DEFAULT_FLOAT.to_complex,
}
_CATEGORY_OF_PYTHON_TYPE = {
    bool: Category.BOOL,
    int: Category.INTEGER,
    float: Category.FLOATING,
    complex: Category.COMPLEX,
}


def _higher(a: Promoted | None, b: Promoted) -> Promoted:
    """The lowest lattice point at least as high as both (torch's get_higher_dtype)."""
    if a is None or a is b:
        return b
    rank_a, rank_b = _RANK[a], _RANK[b]
    if rank_a == rank_b:
        return _LEVELS[rank_a + 1][0]
    return a if rank_a > rank_b else b


# -- operands -------------------------------------------------------------------------------------


def _scalar_kind(x: Any) -> type | None:
    """The Python type a scalar operand promotes as (None for tensors)."""
    if type(x) in _CATEGORY_OF_PYTHON_TYPE:
        return type(x)
    if is_symbolic(x):
        return number_kind(x)
    if type(x) is Value and type(x.meta) is ScalarMeta:
        return x.meta.kind
    return None


def _check_operand(x: Any) -> None:
    if not is_tensor(x) and _scalar_kind(x) is None:
        raise DTypeError(
            f"type promotion: operand {x!r} is not a tensor value, a scalar value or a Python bool/int/float/complex"
        )


def _describe(operands: Sequence[Any]) -> str:
    parts = []
    for x in operands:
        if is_tensor(x):
            parts.append(str(x.meta))
        elif type(x) is Value and isinstance(x.meta, ScalarMeta):
            parts.append(f"runtime {x.meta.kind.__name__}")
        else:
            parts.append(repr(x))
    return "(" + ", ".join(parts) + ")"


def promoted_dtype(*operands: Any) -> Promoted:
    """torch's promoted dtype of the operands, which may be COMPLEX32 (see `result_type`)."""
    present = [x for x in operands if x is not None]
    for x in present:
        _check_operand(x)
    category = Category.BOOL
    for x in present:
        kind = _scalar_kind(x)
        category = max(
            category, x.dtype.category if kind is None else _CATEGORY_OF_PYTHON_TYPE[kind]
        )
    if category is Category.BOOL:
        return DType.bool

    # Inside the category, tensors with dims outrank 0-dim tensors, which outrank Python scalars.
    # In the complex category float tensors count as their complex counterparts.
    dim_tensors: Promoted | None = None
    zero_dim_tensors: Promoted | None = None
    for x in present:
        if not is_tensor(x):
            continue
        dtype: Promoted = x.dtype
        if category is Category.COMPLEX:
            if x.dtype.category < Category.FLOATING:
                continue
            dtype = _COMPLEX_COUNTERPART[x.dtype]
        elif x.dtype.category is not category:
            continue
        if x.ndim == 0:
            zero_dim_tensors = _higher(zero_dim_tensors, dtype)
        else:
            dim_tensors = _higher(dim_tensors, dtype)
    if dim_tensors is not None:
        return dim_tensors
    if zero_dim_tensors is not None:
        return zero_dim_tensors
    return _CATEGORY_DEFAULT[category]


def complex32_error(operands: Sequence[Any]) -> DTypeError:
    return DTypeError(
        f"type promotion of {_describe(operands)} gives complex32, which aten2prims does not support "
        "(NumPy has no complex32); convert the float16 operand to float32 or complex64 first"
    )


def result_type(*operands: Any) -> DType:
    """torch.result_type over any number of operands.

    Raises DTypeError where torch's answer would be complex32 (e.g. an f16 tensor and 1j)."""
    promoted = promoted_dtype(*operands)
    if promoted is COMPLEX32:
        raise complex32_error(operands)
    return promoted  # type: ignore[return-value]  # not COMPLEX32 (raised above)


def opmath_dtype(dtype: DType) -> DType:
    """The dtype torch computes in: float16 and bfloat16 compute in float32."""
    return DType.float32 if dtype.is_low_precision else dtype


def _computation(promoted: Promoted) -> DType:
    return DType.complex64 if promoted is COMPLEX32 else opmath_dtype(promoted)  # type: ignore[arg-type]  # a DType here


def elementwise_dtypes(*operands: Any, kind: PromotionKind) -> tuple[DType, DType]:
    """(computation dtype, result dtype) of an elementwise op over its promoting operands, as
    torch's `elementwise_dtypes`.

    complex32 is reachable only through a float16 tensor meeting a complex operand; it raises
    DTypeError except where torch computes in complex64 and returns a real or bool result
    (COMPLEX_TO_FLOAT, ALWAYS_BOOL), which needs no complex32 tensor."""
    promoted = promoted_dtype(*operands)
    if kind is PromotionKind.ALWAYS_BOOL:
        return _computation(promoted), DType.bool
    if kind is PromotionKind.COMPLEX_TO_FLOAT:
        real = DType.float16 if promoted is COMPLEX32 else promoted.real  # type: ignore[union-attr]  # a DType here
        return _computation(promoted), real
    if promoted is COMPLEX32:
        raise complex32_error(operands)
    assert isinstance(promoted, DType)
    if kind is PromotionKind.DEFAULT:
        return opmath_dtype(promoted), promoted
    if kind is PromotionKind.NO_OPMATH:
        return promoted, promoted
    if kind is PromotionKind.INT_TO_FLOAT:
        result = DEFAULT_FLOAT if promoted.is_integral else promoted
        return opmath_dtype(result), result
    if kind is PromotionKind.BOOL_TO_LONG:
        if promoted is DType.bool:
            return DType.int64, DType.int64
        return opmath_dtype(promoted), promoted
    raise ValueError(f"unknown promotion kind {kind!r}")


# -- broadcasting ---------------------------------------------------------------------------------


def broadcast_shapes(*shapes: Sequence[int] | int) -> Shape:
    """The common shape of the given shapes, as torch.broadcast_shapes: aligned from the right, a
    size 1 stretches, any other mismatch raises ShapeError naming the shapes. A bare int n stands
    for the shape (n,), as in torch."""
    normalized: list[tuple[Any, ...]] = [
        (shape,) if is_size(shape) else tuple(shape)  # type: ignore[arg-type]  # a sequence here
        for shape in shapes
    ]
    for shape in normalized:
        if not all(is_size(size) for size in shape):
            raise ShapeError(f"broadcast_shapes: shape {list(shape)} must hold non-negative ints")
    rank = max((len(shape) for shape in normalized), default=0)
    result = [1] * rank
    for shape in normalized:
        offset = rank - len(shape)
        for i, size in enumerate(shape):
            current = result[offset + i]
            # A size 1 known as such first: a symbolic size meeting a literal 1 is taken as is,
            # right whatever its value (torch's size-oblivious broadcasting).
            if same_size(size, current) or is_literal_one(size):
                continue
            if is_literal_one(current):
                result[offset + i] = size
                continue
            if size == current or size == 1:
                continue
            if current != 1:
                listing = ", ".join(str(list(s)) for s in normalized)
                raise ShapeError(
                    f"shapes {listing} cannot be broadcast together: size {size} meets size {current} "
                    f"at dimension {offset + i - rank}"
                )
            result[offset + i] = size
    return tuple(result)


def broadcast_dimensions(shape: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """The `broadcast_dimensions` of `prims.broadcast_in_dim` that broadcasts `shape` to `target`
    the NumPy/torch way (right-aligned; size-1 dims stretch; leading dims are new); ShapeError
    if it cannot."""
    shape, target = tuple(shape), tuple(target)
    offset = len(target) - len(shape)
    # Equal to the target before "is it 1?": a size equal to its target whatever its value
    # (a recorded check, torch's own assertion) must not be taken as "not 1" under a check.
    if offset < 0 or not all(
        same_size(size, target[offset + i])
        or is_literal_one(size)
        or size == target[offset + i]
        or size == 1
        for i, size in enumerate(shape)
    ):
        raise ShapeError(f"shape {list(shape)} cannot be broadcast to {list(target)}")
    return tuple(range(offset, len(target)))


# -- reductions -----------------------------------------------------------------------------------


def reduction_dtypes(
    input_dtype: DType, kind: ReductionKind, dtype: DType | None = None
) -> tuple[DType, DType]:
    """(computation dtype, result dtype) of a reduction, as torch's `reduction_dtypes`: compute
    in opmath of `dtype` (if given) or of the input dtype. For KEEP_PROMOTED_TYPE (mean) torch
    returns no result dtype, meaning "stay in the computation dtype"; that is what we return."""
    computation = opmath_dtype(dtype if dtype is not None else input_dtype)
    if kind is ReductionKind.SAME:
        return computation, dtype if dtype is not None else input_dtype
    if kind is ReductionKind.COMPLEX_TO_FLOAT:
        return computation, (dtype if dtype is not None else input_dtype).real
    if kind is ReductionKind.KEEP_PROMOTED_TYPE:
        return computation, computation
    if kind is ReductionKind.ALWAYS_BOOL:
        return computation, DType.bool
    raise ValueError(f"unknown reduction kind {kind!r}")


def sum_dtype(input_dtype: DType, dtype: DType | None = None) -> DType:
    """The result dtype of sum, prod, cumsum and cumprod: `dtype` if given; else int64 for
    integer and bool inputs; else the input dtype. (Compute in `opmath_dtype` of it.)"""
    if dtype is not None:
        return dtype
    return DType.int64 if input_dtype.is_integral else input_dtype


def mean_dtypes(input_dtype: DType, dtype: DType | None = None) -> tuple[DType, DType]:
    """(computation dtype, result dtype) of mean: the sum and the division run in opmath of
    `dtype` (or the input dtype), and the result is that dtype, which must be floating or
    complex (DTypeError otherwise, as torch's "mean(): could not infer output dtype")."""
    target = dtype if dtype is not None else input_dtype
    if target.category < Category.FLOATING:
        origin = "input" if dtype is None else "dtype= argument"
        raise DTypeError(
            f"mean: the {origin} dtype {target.short} must be floating point or complex"
        )
    computation, _ = reduction_dtypes(input_dtype, ReductionKind.KEEP_PROMOTED_TYPE, target)
    return computation, target
