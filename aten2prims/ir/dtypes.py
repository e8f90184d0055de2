"""The twelve torch dtypes aten2prims models, their NumPy and torch.export counterparts, and the
category predicates type promotion is built on.

complex32 (torch.chalf) has no NumPy counterpart and is out of scope; promotion that would reach
it raises a DTypeError naming the op (see docs/ir.md).
"""

from __future__ import annotations

import builtins
import enum
import sys
from typing import Any

import numpy as np


class Category(enum.IntEnum):
    """Promotion categories, ordered: bool < integer < floating < complex."""

    BOOL = 0
    INTEGER = 1
    FLOATING = 2
    COMPLEX = 3


class DType(enum.Enum):
    """A torch dtype. The value is (short name, torch name, NumPy dtype, torch.export ScalarType).

    bfloat16's NumPy dtype comes from ml_dtypes, imported the first time it is asked for: from
    ml_dtypes 0.7 on, importing it takes about half a second, which every process would
    otherwise pay, bfloat16 or not."""

    bool = ("b8", "bool", np.dtype(np.bool_), 12)
    uint8 = ("u8", "uint8", np.dtype(np.uint8), 1)
    int8 = ("i8", "int8", np.dtype(np.int8), 2)
    int16 = ("i16", "int16", np.dtype(np.int16), 3)
    int32 = ("i32", "int32", np.dtype(np.int32), 4)
    int64 = ("i64", "int64", np.dtype(np.int64), 5)
    float16 = ("f16", "float16", np.dtype(np.float16), 6)
    bfloat16 = ("bf16", "bfloat16", None, 13)  # NumPy's dtype: `_late_numpy`
    float32 = ("f32", "float32", np.dtype(np.float32), 7)
    float64 = ("f64", "float64", np.dtype(np.float64), 8)
    complex64 = ("c64", "complex64", np.dtype(np.complex64), 10)
    complex128 = ("c128", "complex128", np.dtype(np.complex128), 11)

    def __init__(self, short: str, torch_name: str, numpy: np.dtype | None, pt2_code: int) -> None:
        self.short = short
        self.torch_name = torch_name
        self._numpy = numpy  # None for bfloat16 until its first use
        self.pt2_code = pt2_code

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype (bfloat16's from ml_dtypes, imported at this first use)."""
        found = self._numpy
        if found is None:
            found = self._numpy = _late_numpy()
        return found

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    def __str__(self) -> str:
        return self.short

    # -- categories -------------------------------------------------------------------------
    @property
    def category(self) -> Category:
        # Set below, once the table exists (a dict lookup would hash the enum).
        category: Category = self._category  # type: ignore[attr-defined]
        return category

    @property
    def is_bool(self) -> builtins.bool:
        return self is DType.bool

    @property
    def is_integer(self) -> builtins.bool:
        """Integral, bool excluded (torch's is_integer_dtype)."""
        return self.category is Category.INTEGER

    @property
    def is_integral(self) -> builtins.bool:
        """Integral, bool included."""
        return self.category <= Category.INTEGER

    @property
    def is_floating(self) -> builtins.bool:
        return self.category is Category.FLOATING

    @property
    def is_complex(self) -> builtins.bool:
        return self.category is Category.COMPLEX

    @property
    def is_low_precision(self) -> builtins.bool:
        """float16 and bfloat16: computed in float32 (opmath)."""
        return self in (DType.float16, DType.bfloat16)

    @property
    def is_signed(self) -> builtins.bool:
        return self not in (DType.bool, DType.uint8)

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def python_type(self) -> type:
        """The Python scalar type of this dtype's category (bool, int, float, complex)."""
        return _PYTHON_TYPE[self.category]

    # -- counterparts -------------------------------------------------------------------------
    @property
    def real(self) -> DType:
        """complex64 -> float32, complex128 -> float64; other dtypes are their own."""
        return _REAL.get(self, self)

    @property
    def to_complex(self) -> DType:
        """The complex counterpart of a floating dtype (float32 -> complex64)."""
        try:
            return _COMPLEX[self]
        except KeyError:
            raise ValueError(f"{self.short} has no complex counterpart in aten2prims") from None

    # -- lookups -------------------------------------------------------------------------
    @classmethod
    def from_short(cls, short: str) -> DType:
        try:
            return _BY_SHORT[short]
        except KeyError:
            raise ValueError(f"unknown dtype {short!r}; known: {' '.join(_BY_SHORT)}") from None

    @classmethod
    def from_numpy(cls, dtype: Any) -> DType:
        try:
            numpy = np.dtype(dtype)
        except TypeError:
            # NumPy knows the name "bfloat16" only once ml_dtypes is loaded; ours does anyway.
            found = DType.bfloat16 if isinstance(dtype, str) and dtype == "bfloat16" else None
        else:
            found = _BY_NUMPY.get(numpy) or (DType.bfloat16 if is_bfloat16(numpy) else None)
        if found is None:
            raise ValueError(f"NumPy dtype {dtype!r} has no torch counterpart in aten2prims")
        return found

    @classmethod
    def from_pt2(cls, code: int) -> DType:
        try:
            return _BY_PT2[code]
        except KeyError:
            raise ValueError(f"torch.export ScalarType {code} is not supported") from None

    @classmethod
    def from_torch_name(cls, name: str) -> DType:
        """'float32' or 'torch.float32' -> DType.float32 (also torch's aliases 'float', 'long', …)."""
        name = name.removeprefix("torch.")
        try:
            return _BY_TORCH_NAME[name]
        except KeyError:
            raise ValueError(f"torch dtype {name!r} is not supported") from None

    @classmethod
    def from_python_type(cls, kind: type) -> DType:
        """The dtype torch gives a Python scalar of this type: bool, int64, float32, complex64."""
        return _DEFAULT_FOR_PYTHON_TYPE[kind]


_CATEGORY = {
    DType.bool: Category.BOOL,
    DType.uint8: Category.INTEGER,
    DType.int8: Category.INTEGER,
    DType.int16: Category.INTEGER,
    DType.int32: Category.INTEGER,
    DType.int64: Category.INTEGER,
    DType.float16: Category.FLOATING,
    DType.bfloat16: Category.FLOATING,
    DType.float32: Category.FLOATING,
    DType.float64: Category.FLOATING,
    DType.complex64: Category.COMPLEX,
    DType.complex128: Category.COMPLEX,
}
for _dtype, _category in _CATEGORY.items():
    _dtype._category = _category  # type: ignore[attr-defined]  # a cached enum attribute
_PYTHON_TYPE = {
    Category.BOOL: bool,
    Category.INTEGER: int,
    Category.FLOATING: float,
    Category.COMPLEX: complex,
}
_REAL = {DType.complex64: DType.float32, DType.complex128: DType.float64}
_COMPLEX = {
    DType.bfloat16: DType.complex64,
    DType.float32: DType.complex64,
    DType.float64: DType.complex128,
    DType.complex64: DType.complex64,
    DType.complex128: DType.complex128,
}
_BY_SHORT = {d.short: d for d in DType}
_BY_NUMPY = {d._numpy: d for d in DType if d._numpy is not None}  # bfloat16: from_numpy
_BY_PT2 = {d.pt2_code: d for d in DType}
_BY_TORCH_NAME = {d.torch_name: d for d in DType} | {
    "float": DType.float32,
    "double": DType.float64,
    "half": DType.float16,
    "long": DType.int64,
    "int": DType.int32,
    "short": DType.int16,
    "cfloat": DType.complex64,
    "cdouble": DType.complex128,
}
_DEFAULT_FOR_PYTHON_TYPE = {
    bool: DType.bool,
    int: DType.int64,
    float: DType.float32,
    complex: DType.complex64,
}


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype is bfloat16, without importing ml_dtypes to ask: a dtype of it
    exists only once ml_dtypes is loaded."""
    return "ml_dtypes" in sys.modules and dtype == DType.bfloat16.numpy


def _late_numpy() -> np.dtype:
    """bfloat16's NumPy dtype (ml_dtypes imported here, on first use)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


# Short aliases, as printed: `from aten2prims.ir.dtypes import f32`.
b8 = DType.bool
u8 = DType.uint8
i8 = DType.int8
i16 = DType.int16
i32 = DType.int32
i64 = DType.int64
f16 = DType.float16
bf16 = DType.bfloat16
f32 = DType.float32
f64 = DType.float64
c64 = DType.complex64
c128 = DType.complex128

ALL_DTYPES: tuple[DType, ...] = tuple(DType)
