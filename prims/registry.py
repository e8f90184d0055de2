"""The registry of prims: one definition per prim = schema + meta rule + NumPy kernel (DESIGN §4).

Calling conventions (checked at registration):
- `meta(*bound)` and `kernel(*bound)` take every schema argument in schema order, with the
  parameter names of the schema. For `meta`, tensor operands are `Value`s (symbolic tensors) or
  Python numbers; for `kernel`, NumPy arrays or Python numbers. Scalar values produced at run time
  arrive as Python scalars.
- `meta` returns a `TensorMeta`/`ScalarMeta`, or a tuple of them for multi-result prims, and
  raises `ShapeError`/`DTypeError` for what torch's meta rejects.
- `kernel` returns arrays of exactly the meta's dtype and shape (0-dim results may be NumPy
  scalars; the executor wraps them), never writes into its operands, and may return views of
  them only when the prim is registered with `view=True`.
- Random prims (`random=True`) get the executor's `numpy.random.Generator` as keyword `rng`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

from aten2prims.schema.parser import Schema, parse_schema

MetaRule = Callable[..., Any]
Kernel = Callable[..., Any]


@attrs.frozen(slots=True)
class PrimDef:
    name: str
    schema: Schema
    meta: MetaRule | None
    kernel: Kernel | None
    doc: str = ""
    extension: bool = False
    view: bool = False
    random: bool = False
    # Why a prim of torch's has no implementation here (docs/prims.md lists these).
    omitted_reason: str | None = None
    # Indices of the Tensor-typed schema arguments: a node's positional operands.
    operand_indices: tuple[int, ...] = attrs.field(init=False)
    attribute_names: tuple[str, ...] = attrs.field(init=False)

    @operand_indices.default
    def _operand_indices(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.schema.arguments) if a.type.is_tensor_like)

    @attribute_names.default
    def _attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.schema.arguments if not a.type.is_tensor_like)

    # (name, index) of every attribute argument: how a node's kwargs come from bound arguments.
    attribute_positions: tuple[tuple[str, int], ...] = attrs.field(init=False)

    @attribute_positions.default
    def _attribute_positions(self) -> tuple[tuple[str, int], ...]:
        return tuple(
            (a.name, i) for i, a in enumerate(self.schema.arguments) if not a.type.is_tensor_like
        )

    @property
    def qualified_name(self) -> str:
        return f"prims.{self.name}"

    @property
    def implemented(self) -> bool:
        return self.kernel is not None and self.meta is not None

    @property
    def result_count(self) -> int:
        return len(self.schema.returns)


PRIMS: dict[str, PrimDef] = {}


def register(
    schema: str,
    *,
    meta: MetaRule | None,
    kernel: Kernel | None,
    doc: str = "",
    extension: bool = False,
    view: bool = False,
    random: bool = False,
    omitted_reason: str | None = None,
) -> PrimDef:
    """Register one prim. Duplicate names and functions whose parameters do not match the
    schema's argument names are rejected."""
    parsed = parse_schema(schema)
    name = parsed.name
    if name in PRIMS:
        raise ValueError(f"prims.{name} is registered twice")
    expected = list(parsed.argument_names)
    for role, function in (("meta", meta), ("kernel", kernel)):
        if function is None:
            continue
        parameters = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if parameters != expected:
            raise TypeError(
                f"prims.{name}: {role} parameters {parameters} do not match the schema's {expected}"
            )
    definition = PrimDef(
        name,
        parsed,
        meta,
        kernel,
        doc=doc,
        extension=extension,
        view=view,
        random=random,
        omitted_reason=omitted_reason,
    )
    PRIMS[name] = definition
    return definition


def omit(schema: str, reason: str) -> PrimDef:
    """Record a torch prim that has no meaning in a functional CPU graph."""
    return register(schema, meta=None, kernel=None, omitted_reason=reason)


def lookup(op: str) -> PrimDef:
    """'prims.add' or 'add' -> its definition."""
    name = op.removeprefix("prims.")
    try:
        return PRIMS[name]
    except KeyError:
        raise KeyError(f"unknown prim {op!r}") from None
