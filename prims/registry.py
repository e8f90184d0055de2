"""The registry of prims: one definition per prim = schema + meta rule + NumPy kernel, and the
properties passes and the executor read from it (view, random, reshape, …).

Calling conventions (checked at registration):
- `meta(*bound)` and `kernel(*bound)` take every schema argument in schema order, with the
  parameter names of the schema (`bound = definition.bind(node.args, node.kwargs)` for a node). For `meta`, tensor operands are `Value`s (symbolic tensors) or
  Python numbers; for `kernel`, NumPy arrays or Python numbers. Scalar values produced at run time
  arrive as Python scalars.
- `meta` returns a `TensorMeta`/`ScalarMeta`, or a tuple of them for multi-result prims, and
  raises `ShapeError`/`DTypeError` for what torch's meta rejects.
- `kernel` returns arrays of exactly the meta's dtype and shape (0-dim results may be NumPy
  scalars; the executor wraps them), never writes into its operands, and may return views of
  them only when the prim is registered with `view=True`.
- Random prims (`random=True`) get the executor's `numpy.random.Generator` as keyword `rng`.

Every property of a prim is a field of its `PrimDef`, set where the prim is registered; code
elsewhere reads `definition.<property>` (found with `lookup(node.op)`) and keeps no lists of names.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from aten2prims.errors import SchemaError
from aten2prims.ir.values import is_tensor
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
    # The result may share memory with an operand (the kernel may return a view of it).
    view: bool = False
    # The kernel draws from the executor's random generator: never folded, merged or reordered.
    random: bool = False
    # The result is the operand's elements in row-major order, in another shape (a copy or a view).
    reshape: bool = False
    # A view whose result holds its operand's elements whole (none reinterpreted, none dropped):
    # reading the result reads the operand, element for element.
    element_view: bool = False
    # The result depends on the metas of the tensor operands only, never on their values.
    meta_only_operands: bool = False
    # The kernel also takes `out=`: a C-contiguous array of the result's shape and dtype that
    # shares memory with no operand; it writes the result there and returns it (the executor's
    # arena, aten2prims/executor/arena.py).
    out: bool = False
    # The kernel is kernel(inp, dims, output_dtype), reducing inp over dims; each element of
    # the result reads only its own position along the kept dims.
    reduces: bool = False
    # The kernel reads its tensor operands' layouts (strides, storage offset) from their metas:
    # it takes them as keyword `layouts` (see `kernel_for`).
    reads_layout: bool = False
    # Why a prim of torch's has no implementation here (docs/prims.md lists these).
    omitted_reason: str | None = None
    # For a prim whose result size depends on its operands' values (nonzero's count): a function
    # of the operand arrays giving those size attributes by name. The executor binds a
    # data-dependent symbol with it when the operands are known.
    sizes_from_data: Callable[..., dict[str, int]] | None = None
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

    # 'prims.<name>', the op of this prim's nodes (an attribute: every emitted node reads it).
    qualified_name: str = attrs.field(init=False)

    @qualified_name.default
    def _qualified_name(self) -> str:
        return f"prims.{self.name}"

    @property
    def implemented(self) -> bool:
        return self.kernel is not None and self.meta is not None

    def kernel_for(self, operands: Sequence[Any]) -> Kernel:
        """The kernel to run on a node's positional operands (Values): the kernel itself, or,
        for a prim that reads layouts, the kernel given each tensor operand's (strides, storage
        offset) as `layouts`."""
        assert self.kernel is not None, f"{self.qualified_name} has no kernel"
        if not self.reads_layout:
            return self.kernel
        layouts = tuple(
            (operand.meta.strides, operand.storage_offset)
            for operand in operands
            if is_tensor(operand)
        )
        return functools.partial(self.kernel, layouts=layouts)

    def binding_problem(self, operands: Sequence[Any], attributes: Mapping[str, Any]) -> str | None:
        """Why a node's operands and attributes do not fit this prim's schema, or None."""
        if len(operands) != len(self.operand_indices):
            return f"takes {len(self.operand_indices)} tensor operand(s), got {len(operands)}"
        if tuple(attributes) != self.attribute_names:
            return f"attributes must be {list(self.attribute_names)}, got {list(attributes)}"
        return None

    def bind(self, operands: Sequence[Any], attributes: Mapping[str, Any]) -> list[Any]:
        """The arguments of `meta` and `kernel`, in schema order, from a node's positional tensor
        operands and its attributes by name (both as a node holds them)."""
        problem = self.binding_problem(operands, attributes)
        if problem is not None:
            raise SchemaError(f"{self.qualified_name}: {problem}")
        bound: list[Any] = [None] * len(self.schema.arguments)
        for index, operand in zip(self.operand_indices, operands):
            bound[index] = operand
        for name, index in self.attribute_positions:
            bound[index] = attributes[name]
        return bound


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
    reshape: bool = False,
    element_view: bool = False,
    meta_only_operands: bool = False,
    out: bool = False,
    reduces: bool = False,
    reads_layout: bool = False,
    omitted_reason: str | None = None,
    sizes_from_data: Callable[..., dict[str, int]] | None = None,
) -> PrimDef:
    """Register one prim. Duplicate names and functions whose parameters do not match the
    schema's argument names are rejected, and so are properties that contradict each other."""
    parsed = parse_schema(schema)
    name = parsed.name
    if name in PRIMS:
        raise ValueError(f"prims.{name} is registered twice")
    if element_view and not view:
        raise ValueError(f"prims.{name}: an element view must be registered as a view")
    if reshape and view and not element_view:
        raise ValueError(f"prims.{name}: a reshaping view reads its operand element for element")
    if out and (kernel is None or "out" not in inspect.signature(kernel).parameters):
        raise ValueError(f"prims.{name}: a kernel taking out= must have an `out` parameter")
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
        reshape=reshape,
        element_view=element_view,
        meta_only_operands=meta_only_operands,
        out=out,
        reduces=reduces,
        reads_layout=reads_layout,
        omitted_reason=omitted_reason,
        sizes_from_data=sizes_from_data,
    )
    PRIMS[name] = definition
    return definition


def omit(schema: str, reason: str) -> PrimDef:
    """Record a torch prim that has no meaning in a functional CPU graph."""
    return register(schema, meta=None, kernel=None, omitted_reason=reason)


def lookup(op: str) -> PrimDef | None:
    """The definition of the prim a node's op names ('prims.add'), or None when the op is no
    registered prim (an aten op, an unknown name)."""
    if not op.startswith("prims."):
        return None
    return PRIMS.get(op[len("prims.") :])
