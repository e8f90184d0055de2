"""Conventions every frontend keeps, so that a graph read from a `.pt2` file and the same graph
imported from torch.fx come out identical: value-name rules, the user's source location taken
from a stack trace, which ops are accepted, and the final verification."""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import LoadError, VerificationError
from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput
from ..ir.layout import is_contiguous
from ..ir.symbolic import (
    Symbol,
    SymExpr,
    SymFloat,
    free_symbols,
    linear_unknown,
    same_size,
    solve_linear,
)
from ..ir.values import Meta, ScalarMeta, TensorMeta, Value
from ..passes.verify import verify
from ..schema.registry import SCALAR_TARGETS, aten_schema, scalar_operator

# What the text form can print and parse back after `%`.
_VALUE_NAME = re.compile(r"[A-Za-z0-9_]+")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")  # compiled with the module, not in a first load
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
# torch's own frames (nn.Module.forward of library layers, functional wrappers) are not where
# the user wrote the op; the innermost frame outside the torch package is.
_TORCH_FRAME = re.compile(r"(^|[/\\])torch[/\\]")

SYMBOLIC = "this symbolic construct is not supported (docs/frontends.md lists those that are)"


def example_hint(size: Any, hint: Any, hints: dict[str, int]) -> None:
    """Record the example value of the symbol an input size is made of, from the size's example
    (`hint`): the size itself for a bare symbol, solved for a derived dim a·s + b."""
    name = linear_unknown(size, {})
    if name is not None and type(hint) is int:
        value = solve_linear(size, name, hint, {})
        if value is not None:
            hints.setdefault(name, value)


def graph_symbols(
    inputs: list[GraphInput],
    metas: Iterable[Any],
    ranges: Mapping[str, tuple[int | float, int | float]],
    hints: Mapping[str, int],
    sources: Mapping[str, str] | None = None,
) -> dict[str, Symbol]:
    """The symbol table of an imported graph: every symbol of the exporter's range constraints
    and of the sizes (`metas`), by name. A symbol some input's size is exactly, or is a·s + b of
    (a derived dim, `2 * Dim("h")`), is backed (bound from that input's shape) and takes its
    example from `hints` (see `example_hint`). ValueError for a symbol that
    no input binds and the constraints do not declare, or an example outside its range.
    `sources` names the scalar value an unbacked symbol is (`u0` of `x.item()`); a symbol that
    is exactly an int user input is backed, bound from that input's value (its source)."""
    used: set[str] = set()
    bare: set[str] = set()
    for meta in metas:
        for size in getattr(meta, "shape", ()):
            used |= free_symbols(size)
    for graph_input in inputs:
        for size in getattr(graph_input.value.meta, "shape", ()):
            # a bare symbol, or a·s + b of one (a derived dim): bound from that size
            if (name := linear_unknown(size, {})) is not None:
                bare.add(name)
    # A symbol an int user input is (marked dynamic) is bound from that input's value.
    scalar_inputs = {
        graph_input.name for graph_input in inputs if type(graph_input.value.meta) is ScalarMeta
    }
    from_scalars = {name for name, value in (sources or {}).items() if value in scalar_inputs}
    bare |= from_scalars
    stray = sorted(used - bare - ranges.keys())
    if stray:
        raise ValueError(
            f"symbol(s) {', '.join(stray)} appear in sizes, but no input's size binds them "
            "and range_constraints does not declare them"
        )
    symbols: dict[str, Symbol] = {}
    for name in sorted(used | ranges.keys()):
        lower, upper = ranges.get(name, (0, math.inf))
        example = hints.get(name) if name in bare else None
        if example is not None and not lower <= example <= upper:
            raise ValueError(f"symbol {name}: example {example} outside [{lower}, {upper}]")
        backed = name in bare
        source = None if backed and name not in from_scalars else (sources or {}).get(name)
        symbols[name] = Symbol(name, lower, upper, example, backed, source)
    return symbols


def recorded_meta(
    shape: tuple[int, ...], dtype: DType, strides: tuple[int, ...], storage_offset: int
) -> TensorMeta:
    """The meta of a tensor as torch recorded it. Strides that are contiguous on every dim of
    length > 1 become exactly contiguous (torch writes arbitrary strides on dims of length 1,
    which address nothing), so a contiguous tensor's meta is the plain `TensorMeta(shape,
    dtype)` it always was."""
    if any(type(x) is SymExpr for x in (*shape, *strides)):
        # Symbolic sizes: only the structurally contiguous layout is taken for contiguous (a
        # decision on a size cannot be taken while reading).
        contiguous = TensorMeta(shape, dtype, storage_offset=storage_offset)
        if all(same_size(a, b) for a, b in zip(contiguous.strides, strides)):
            return contiguous
    elif is_contiguous(shape, strides):
        return TensorMeta(shape, dtype, storage_offset=storage_offset)
    return TensorMeta(shape, dtype, strides, storage_offset)


def input_meta(meta: Meta) -> Meta:
    """A graph input's meta: its recorded strides at storage offset 0. The graph holds (and is
    given) an input's elements only, so the input is its own storage; torch itself records a
    parameter that views a larger tensor at that tensor's offset when exporting, and at 0 once
    the program is reloaded."""
    if type(meta) is TensorMeta and meta.storage_offset:
        return TensorMeta(meta.shape, meta.dtype, meta.strides)
    return meta


def is_value_name(name: object) -> bool:
    return type(name) is str and _VALUE_NAME.fullmatch(name) is not None


def undefined_name(index: int) -> str:
    """The name of a graph's `index`-th undefined result (in node order): torch names a None
    result nothing, so both frontends make up the same name."""
    return f"undefined_{index}"


def graph_name(stem: str) -> str:
    """A file stem made into an identifier the text form accepts ('my-model.v2' -> 'my_model_v2')."""
    name = _NOT_IDENTIFIER.sub("_", stem)
    if not name:
        return "graph"
    return f"_{name}" if name[0].isdigit() else name


def user_source(stack_trace: str | None) -> str | None:
    """'model.py:12 in forward' for the innermost frame of the user's code in a torch.export
    stack trace (frames are listed outermost first); the innermost frame when every frame is
    torch's; None when there is no trace. Frames of generated code (`<eval_with_key>.7 from
    .../proxy_tensor.py:1738 in wrapped`: every node of a joint forward-backward program) name
    no file anyone wrote, and are left out."""
    if not stack_trace:
        return None
    frames = [f for f in _FRAME.finditer(stack_trace) if not f["file"].startswith("<")]
    if not frames:
        return None
    user_frames = [f for f in frames if _TORCH_FRAME.search(f["file"]) is None]
    frame = (user_frames or frames)[-1]
    file = posixpath.basename(frame["file"].replace("\\", "/"))
    return f"{file}:{frame['line']} in {frame['function']}"


def check_known_aten_ops(uses: Iterable[tuple[str, str]], *, entry: str | None = None) -> None:
    """Refuse, in one error naming each of them, the aten overloads aten2prims has no schema for
    among `uses` ((op, where it is used) pairs): a graph may hold several, and the user wants
    the whole list at once (torch.export's `run_decompositions` keeps every op its table has no
    decomposition for, Core ATen or not)."""
    unknown: dict[str, list[str]] = {}
    for op, where in uses:
        if op.startswith("aten.") and op.count(".") == 2 and aten_schema(op) is None:
            unknown.setdefault(op, []).append(where)
    if unknown:
        listing = "; ".join(
            f"{op} ({len(places)} node{'s' if len(places) > 1 else ''}, first {places[0]})"
            for op, places in unknown.items()
        )
        raise LoadError(
            f"{len(unknown)} op(s) outside the Core ATen overloads aten2prims knows: {listing}",
            entry=entry,
        )


# One part of an op name `namespace.name.overload` (what torch.library accepts, and what the
# text form prints and parses back).
_OP_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_custom_op(op: str) -> bool:
    """Whether `op` ('mylib.fused_gelu.default') is an op of a user's namespace: three identifier
    parts, the namespace neither `aten` nor `prims`. Such nodes are read with the metas the
    program declares; lowering them takes a user rule (`default_rules().with_rule(...)`)."""
    parts = op.split(".")
    return (
        len(parts) == 3
        and all(_OP_PART.fullmatch(part) for part in parts)
        and parts[0] not in ("aten", "prims")
    )


def check_known_aten_op(op: str, where: str, *, entry: str | None = None) -> None:
    """Refuse ops aten2prims cannot read: aten overloads it has no schema for, prims, and names
    that are not `namespace.name.overload`; ops of a user's namespace are accepted."""
    if is_custom_op(op):
        return
    if not op.startswith("aten."):
        raise LoadError(
            f"{where}: {op} is neither an aten op nor an op of a user's namespace "
            "(namespace.name.overload); only Core ATen graphs, with custom ops, are supported",
            entry=entry,
        )
    if aten_schema(op) is None:
        raise LoadError(
            f"{where}: unknown op {op} (not a Core ATen overload aten2prims knows)", entry=entry
        )


def verified(graph: Graph, *, entry: str | None = None) -> Graph:
    """The graph, after the IR verifier accepted it (nodes of a user's namespace have no schema to
    check; their operands and results are checked like any node's); a graph it rejects is
    malformed input."""
    try:
        verify(graph, allow_custom_ops=True)
    except VerificationError as error:
        raise LoadError(f"the imported graph is malformed: {error}", entry=entry) from error
    return graph


def scalar_op(
    target: str, operands: tuple[Any, ...], where: str, *, entry: str | None = None
) -> str:
    """The aten overload a scalar target (`_operator.mul`, `torch.sym_float`, `math.trunc`, as
    torch.export.save names them) reads as, by its operands' kinds: a float scalar or number
    makes it a float overload (`aten.mul.int_float`). A tensor operand counts as an int (the
    verifier then names it); a target torch has no overload for is refused."""
    kinds = tuple(_operand_kind(operand) for operand in operands)
    op = scalar_operator(target, kinds) if target in SCALAR_TARGETS else None
    if op is None:
        described = ", ".join(
            "Tensor" if type(x) is Value and type(x.meta) is not ScalarMeta else kind.__name__
            for x, kind in zip(operands, kinds)
        )
        raise LoadError(f"{where}: {target} on ({described}); {SYMBOLIC}", entry=entry)
    return op


def _operand_kind(operand: Any) -> type:
    if type(operand) is Value and type(operand.meta) is ScalarMeta:
        return float if operand.meta.kind is float else int
    return float if type(operand) is float or type(operand) is SymFloat else int
