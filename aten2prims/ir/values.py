"""What flows along a graph's edges and sits in its operands.

- `TensorMeta`: the static type of a tensor value: shape, dtype and torch's layout (strides and
  storage offset, in elements; contiguous unless given).
- `ScalarMeta`: the static type of a scalar value computed at run time (`aten._local_scalar_dense`,
  `prims.item`, `aten.sym_size.int`, …): Python's bool, int, float or complex.
- `UndefinedMeta`: the type of an undefined tensor — the None a backward op returns for a result
  its `output_mask` does not request.
- `Value`: an SSA value, defined once by a graph input or a node result.
- Literal operands: Python scalars (kept distinct from 0-dim tensors: promotion depends on it),
  strings, `DType`, `Layout`, `MemoryFormat`, `Device`, `None`, and tuples of these or of values.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from typing import Any, TypeAlias

import attrs

from .dtypes import DType
from .layout import contiguous_strides
from .symbolic import SymBool, SymExpr, SymFloat

# Sizes are ints, or symbolic expressions (`aten2prims.ir.symbolic`) in graphs with dynamic shapes.
Shape: TypeAlias = tuple[int, ...]


def as_shape(sizes: Iterable[int]) -> Shape:
    return tuple(sizes)


def _size_key(size: Any) -> Any:
    """What TensorMeta equality compares: a symbolic size by structure (`==` on two expressions
    builds a condition)."""
    return size.terms if type(size) is SymExpr else size


def _shape_key(shape: Shape) -> tuple:
    for size in shape:
        if type(size) is SymExpr:
            return tuple(_size_key(size) for size in shape)
    return shape  # sizes that are all ints are their own key (metas are hashed often)


@attrs.frozen(slots=True)
class TensorMeta:
    """Shape, dtype and layout of a tensor value. A size is a non-negative int or a `SymExpr`.
    `strides` and `storage_offset` are torch's (in elements): where each element sits in the
    storage the tensor views; they default to a fresh contiguous tensor's."""

    shape: Shape = attrs.field(converter=as_shape, eq=_shape_key)
    dtype: DType
    strides: Shape = attrs.field(converter=as_shape, eq=_shape_key)
    storage_offset: int = attrs.field(default=0, eq=_size_key)

    @strides.default
    def _contiguous(self) -> Shape:
        return contiguous_strides(self.shape)

    @shape.validator
    def _check_shape(self, _attribute: attrs.Attribute, shape: Shape) -> None:
        for size in shape:
            if type(size) is not int or size < 0:
                if type(size) is SymExpr:
                    continue
                raise ValueError(f"tensor sizes must be non-negative ints or symbolic, got {shape}")

    @strides.validator
    def _check_strides(self, _attribute: attrs.Attribute, strides: Shape) -> None:
        if len(strides) != len(self.shape) or any(type(s) is int and s < 0 for s in strides):
            raise ValueError(
                f"a tensor of shape {list(self.shape)} needs {len(self.shape)} non-negative "
                f"strides, got {list(strides)}"
            )

    @storage_offset.validator
    def _check_offset(self, _attribute: attrs.Attribute, offset: int) -> None:
        if type(offset) is int and offset < 0:
            raise ValueError(f"a storage offset must be non-negative, got {offset}")

    @property
    def is_contiguous_layout(self) -> bool:
        """Exactly a fresh contiguous tensor's strides and offset (what the text form omits)."""
        return _size_key(self.storage_offset) == 0 and _shape_key(self.strides) == _shape_key(
            contiguous_strides(self.shape)
        )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        text = f"{self.dtype.short}[{', '.join(map(str, self.shape))}]"
        if _shape_key(self.strides) != _shape_key(contiguous_strides(self.shape)):
            text += "{" + ", ".join(map(str, self.strides)) + "}"
        if type(self.storage_offset) is SymExpr:
            text += f"+({self.storage_offset})"
        elif self.storage_offset != 0:
            text += f"+{self.storage_offset}"
        return text


SCALAR_KINDS: dict[str, type] = {"bool": bool, "int": int, "float": float, "complex": complex}


@attrs.frozen(slots=True)
class ScalarMeta:
    """The type of a scalar value: one of Python's bool, int, float, complex."""

    kind: type = attrs.field()

    @kind.validator
    def _check_kind(self, _attribute: attrs.Attribute, kind: type) -> None:
        if kind not in (bool, int, float, complex):
            raise ValueError(f"scalar kind must be bool, int, float or complex, got {kind!r}")

    def __str__(self) -> str:
        return self.kind.__name__


@attrs.frozen(slots=True)
class UndefinedMeta:
    """The type of an undefined tensor: the None torch returns for a result nobody asked for
    (a backward op's `output_mask` entry False). It carries no shape and no dtype; only an
    argument that accepts None may read it."""

    def __str__(self) -> str:
        return "undefined"


UNDEFINED = UndefinedMeta()

Meta: TypeAlias = TensorMeta | ScalarMeta | UndefinedMeta


@attrs.define(eq=False, slots=True, repr=False)
class Value:
    """An SSA value. Identity matters (operands refer to the defining object); the name is for
    printing and must be unique in its graph."""

    name: str
    meta: Meta

    @property
    def is_tensor(self) -> bool:
        return type(self.meta) is TensorMeta

    @property
    def is_undefined(self) -> bool:
        return type(self.meta) is UndefinedMeta

    @property
    def shape(self) -> Shape:
        return self.meta.shape  # type: ignore[union-attr]  # tensor values only

    @property
    def dtype(self) -> DType:
        return self.meta.dtype  # type: ignore[union-attr]  # tensor values only

    @property
    def ndim(self) -> int:
        return len(self.meta.shape)  # type: ignore[union-attr]  # tensor values only

    @property
    def strides(self) -> Shape:
        return self.meta.strides  # type: ignore[union-attr]  # tensor values only

    @property
    def storage_offset(self) -> int:
        return self.meta.storage_offset  # type: ignore[union-attr]  # tensor values only

    @property
    def numel(self) -> int:
        return math.prod(self.meta.shape)  # type: ignore[union-attr]  # tensor values only

    def __repr__(self) -> str:
        return f"%{self.name}: {self.meta}"


class Layout(enum.Enum):
    strided = "strided"
    sparse_coo = "sparse_coo"
    sparse_csr = "sparse_csr"


class MemoryFormat(enum.Enum):
    contiguous_format = "contiguous_format"
    preserve_format = "preserve_format"
    channels_last = "channels_last"
    channels_last_3d = "channels_last_3d"


@attrs.frozen(slots=True)
class Device:
    """A device name such as 'cpu'. Only the CPU is executed; the name is kept for fidelity."""

    name: str

    def __str__(self) -> str:
        return self.name


CPU = Device("cpu")

Literal: TypeAlias = (
    bool | int | float | complex | str | DType | Layout | MemoryFormat | Device | None
)
# An operand: a value, a literal, or a (possibly nested) tuple of those.
Operand: TypeAlias = Any

LITERAL_TYPES: tuple[type, ...] = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    DType,
    Layout,
    MemoryFormat,
    Device,
    SymExpr,  # a symbolic size
    SymBool,  # a condition on symbolic sizes
    SymFloat,  # a float expression over symbolic sizes
)


def is_tensor(x: Any) -> bool:
    """`x` is a symbolic tensor (not a number, not a scalar value)."""
    return type(x) is Value and type(x.meta) is TensorMeta


def iter_values(operand: Operand):
    """Yield every Value inside an operand (tuples are searched recursively)."""
    if type(operand) is Value:
        yield operand
    elif type(operand) is tuple:
        for item in operand:
            kind = type(item)  # no generator per int of a shape: this runs for every node read
            if kind is Value:
                yield item
            elif kind is tuple:
                yield from iter_values(item)


def map_values(operand: Operand, fn) -> Operand:
    """The operand with every Value v replaced by fn(v)."""
    if type(operand) is Value:
        return fn(operand)
    if type(operand) is tuple:
        return tuple(map_values(item, fn) for item in operand)
    return operand


def literal_equal(a: Any, b: Any) -> bool:
    """Equality of literals that tells 1 from 1.0 from True and treats nan as equal to nan."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(literal_equal(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (a != a and b != b)
    if type(a) is complex:
        return literal_equal(a.real, b.real) and literal_equal(a.imag, b.imag)
    if type(a) is SymFloat:  # structurally (floats are never compared as values)
        return a.same(b)
    return a == b
