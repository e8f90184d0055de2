"""A lowered graph handed back to torch: `to_fx(graph)` builds a `torch.fx.GraphModule` whose nodes
call `torch.ops.prims.<name>` (and `torch.ops.aten2prims.<name>` for our four extension prims), so
a prims graph can run in torch, be inspected with fx tools, or be compiled further.

- Every graph input without stored data becomes a placeholder, in graph order (user inputs first
  come as they are listed; a parameter or buffer without data is a placeholder too).
- Parameters and buffers with data become buffers of the module, constants with data become
  constant attributes; both are read with `get_attr`.
- A prims node holds its tensor operands positionally and its attributes by name in schema order
  (docs/ir.md); both are bound by name to torch's schema, positionally up to its keyword-only
  arguments, by keyword after.
- The module returns the user outputs, in order, as a tuple.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from prims.registry import lookup

from ..errors import Error
from ..frontends.torch_interop import to_torch, to_torch_operand, torch_dtype
from ..ir.graph import Graph, InputKind, Node
from ..ir.layout import is_non_overlapping
from ..ir.symbolic import (
    ROUNDINGS,
    ShapeEnv,
    SymBool,
    SymExpr,
    SymFloat,
    free_symbols,
    shape_env,
    symbol,
)
from ..ir.values import ScalarMeta, TensorMeta, Value
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from . import extension_ops


class ToFxError(Error):
    """The graph cannot be expressed with torch's prims."""


def _identifier(name: str, taken: set[str]) -> str:
    """A Python identifier for an fx node or module attribute, unique among `taken`."""
    base = re.sub(r"\W", "_", name) or "v"
    if base[0].isdigit():
        base = "v" + base
    candidate, suffix = base, 1
    while candidate in taken:
        candidate, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(candidate)
    return candidate


def torch_op(node: Node) -> Any:
    """The torch OpOverload that runs a prims node."""
    import torch

    if node.namespace != "prims":
        raise ToFxError(
            f"node %{node.results[0].name if node.results else '?'} is {node.op}, not a prim: "
            "lower the graph first (aten2prims.lower)"
        )
    definition = lookup(node.op)
    if definition is None:
        raise ToFxError(f"{node.op} is not a prim of our opset")
    if not definition.implemented:
        raise ToFxError(f"{node.op} is omitted from our opset: {definition.omitted_reason}")
    if definition.extension:
        extension_ops.register()
        return getattr(getattr(torch.ops, extension_ops.NAMESPACE), definition.name).default
    return getattr(torch.ops.prims, definition.name).default


def bound_arguments(node: Node) -> dict[str, Any]:
    """The node's operands by schema argument name, in schema order."""
    definition = lookup(node.op)
    if definition is None:
        raise ToFxError(f"{node.op} is not a prim of our opset")
    named: dict[str, Any] = {}
    positional = iter(node.args)
    for index, argument in enumerate(definition.schema.arguments):
        if index in definition.operand_indices:
            named[argument.name] = next(positional)
        elif argument.name in node.kwargs:
            named[argument.name] = node.kwargs[argument.name]
    return named


def _contiguous(fx_graph: Any, value: Any) -> Any:
    import torch

    return fx_graph.call_function(
        torch.ops.prims.clone.default, (value,), {"memory_format": torch.contiguous_format}
    )


def _laid_out_window(
    fx_graph: Any, meta: TensorMeta, args: list[Any], convert: Callable[[Any], Any]
) -> list[Any]:
    """as_strided(_scatter) arguments whose operand holds its elements where `meta` says,
    in a fresh storage (so the window's storage offset counts from the operand's). An
    overlapping layout (a stride-0 broadcast) cannot be written into: its contiguous copy
    stands in, which reads the same positions only when the window stays inside one copy.
    `convert` turns symbolic sizes into the fx values computing them."""
    import torch

    if is_non_overlapping(meta.shape, meta.strides):
        operand = fx_graph.call_function(
            torch.ops.prims.copy_strided.default, (args[0], list(convert(tuple(meta.strides))))
        )
    else:
        operand = _contiguous(fx_graph, args[0])
    base, offset = convert(meta.storage_offset), args[-1]
    if type(base) is int and type(offset) is int:
        offset -= base
    elif not (type(base) is int and base == 0):  # sizes computed at run time
        offset = fx_graph.call_function(operator.sub, (offset, base))
    return [operand, *args[1:-1], offset]


def _emit(
    fx_graph: Any,
    node: Node,
    target: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    convert: Callable[[Any], Any],
) -> Any:
    """The fx call computing `node`. The prims whose torch kernels read strides get operands
    laid out as their metas declare, and those torch refuses or computes otherwise are emitted
    as equivalents (ADAPTERS)."""
    import torch

    name = node.op.removeprefix("prims.")
    if name == "collapse_view":
        # torch refuses a collapse its strides cannot view; ours copies then (docs/prims.md).
        return fx_graph.call_function(torch.ops.prims.collapse.default, tuple(args), kwargs)
    if name == "scalar_tensor":
        # torch's prim cannot run without a dtype and a device; ours takes the dtype its meta
        # gives a Python scalar (docs/prims.md).
        kwargs = {
            **kwargs,
            "dtype": torch_dtype(node.results[0].dtype),
            "device": kwargs.get("device") or torch.device("cpu"),
        }
    if name == "reshape" and not args[1]:
        # torch's meta crashes on shape [] (reduce over no sizes); a one-element tensor reshaped
        # to [1], then squeezed, is the 0-dim tensor ours makes.
        flat = fx_graph.call_function(target, (args[0], [1]), {})
        return fx_graph.call_function(torch.ops.prims.squeeze.default, (flat, [0]), {})
    if name in REDUCTIONS:
        return _emit_reduction(fx_graph, node, target, args, kwargs)
    if name in ("as_strided", "as_strided_scatter"):
        # Both address storage through the operand's layout: the operand is given exactly the
        # layout its meta declares (a graph's input may come with any), in fresh storage.
        args = _laid_out_window(fx_graph, node.args[0].meta, args, convert)
    if name == "copy_strided" and not is_non_overlapping(node.args[0].shape, args[1]):
        # torch cannot copy into a layout whose elements share a position (a stride 0): the
        # values in a fresh contiguous tensor (an as_strided reading it re-lays it out anyway)
        return _contiguous(fx_graph, args[0])
    if name == "view_of_dtype":
        # torch refuses a non-contiguous last dim; ours copies
        args = [_contiguous(fx_graph, args[0]), *args[1:]]
    if name == "as_strided" and not args[1]:
        # torch's meta crashes on size [] as on reshape's shape []: a one-element window, squeezed.
        window = fx_graph.call_function(target, (args[0], [1], [1], *args[3:]), kwargs)
        return fx_graph.call_function(torch.ops.prims.squeeze.default, (window, [0]), {})
    return fx_graph.call_function(target, tuple(args), kwargs)


REDUCTIONS = ("sum", "prod", "amax", "amin", "xor_sum")


def _emit_reduction(
    fx_graph: Any, node: Node, target: Any, args: list[Any], kwargs: dict[str, Any]
) -> Any:
    import torch

    operand, dims = args[0], args[1]
    output_dtype = kwargs.pop("output_dtype", None)
    if output_dtype is not None:
        # torch's eager prims crash on output_dtype; ours converts first, then reduces.
        operand = fx_graph.call_function(
            torch.ops.prims.convert_element_type.default, (operand, output_dtype)
        )
    rank = node.args[0].ndim
    if dims is None:
        # torch's meta crashes on dims=None; ours reduces every dim.
        dims = list(range(rank))
    if not dims:
        # torch's eager kernels reduce everything for dims=[]; ours reduces nothing.
        return fx_graph.call_function(torch.ops.prims.clone.default, (operand,), {})
    if node.op == "prims.xor_sum":
        # torch has no eager xor_sum (inductor only): fold bitwise_xor along each dim.
        result = operand
        for dim in sorted(dims, reverse=True):
            pieces = fx_graph.call_function(torch.unbind, (result, dim))
            length = node.args[0].shape[dim]
            if length == 0:
                raise ToFxError(f"prims.xor_sum of node %{node.results[0].name}: empty dim")
            acc = fx_graph.call_function(operator.getitem, (pieces, 0))
            for index in range(1, length):
                item = fx_graph.call_function(operator.getitem, (pieces, index))
                acc = fx_graph.call_function(torch.ops.prims.bitwise_xor.default, (acc, item))
            result = acc
        return result
    result = fx_graph.call_function(target, (operand, list(dims)), kwargs)
    declared = node.results[0].dtype
    if declared.is_integral:
        # torch's eager integer sum/prod return int64 (its meta keeps the dtype, as ours does);
        # int64 arithmetic then a cast wraps exactly as reducing in the narrow dtype.
        result = fx_graph.call_function(
            torch.ops.prims.convert_element_type.default, (result, torch_dtype(declared))
        )
    return result


# The prims `_emit` rewrites, and why (docs/pipeline.md repeats this table).
ADAPTERS: dict[str, str] = {
    "collapse_view": "emitted as prims.collapse: torch refuses a collapse its strides cannot view, ours copies",
    "as_strided": "operand copied into the layout its meta declares (copy_strided; a graph input may come with any) and the storage offset taken relative to the operand's; size [] emitted as a one-element window and a squeeze (torch's meta crashes on an empty size)",
    "as_strided_scatter": "as as_strided",
    "copy_strided": "to an overlapping layout (a stride 0, which the lowering uses to lay a result out as torch's expand did) emitted as a contiguous clone: torch cannot copy into it",
    "view_of_dtype": "operand made contiguous first: torch refuses a non-contiguous last dim, ours copies",
    "scalar_tensor": "dtype and device always passed (torch's prim cannot run without them)",
    "reshape": "to shape [] emitted as a reshape to [1] and a squeeze (torch's meta crashes on an empty shape)",
    "sum, prod, amax, amin": "output_dtype becomes a convert_element_type before (torch's eager prims crash on it); dims=None becomes every dim (torch's meta crashes); dims=[] becomes a clone (torch's eager kernels reduce everything); integer results are cast back to the declared dtype (torch's eager kernels return int64)",
    "xor_sum": "a fold of prims.bitwise_xor over torch.unbind (torch has no eager xor_sum)",
}


class _SymbolicSizes:
    """A dynamic graph's sizes in the fx graph: each symbol as `aten.sym_size.int` of the input
    whose dimension it is, expressions as Python operators on those (fx records them as torch
    does for SymInts), the graph's run-time checks as `aten._assert_scalar`."""

    def __init__(self, graph: Graph, fx_graph: Any, env: dict[Value, Any]) -> None:
        import torch

        self.graph = graph
        self.fx_graph = fx_graph
        self.env = env
        self.symbols: dict[str, Any] = {}
        for graph_input in graph.inputs:
            for dim, size in enumerate(getattr(graph_input.value.meta, "shape", ())):
                names = free_symbols(size)
                if len(names) == 1 and type(size) is SymExpr:
                    (name,) = names
                    if name not in self.symbols and size.same(symbol(name)):
                        self.symbols[name] = fx_graph.call_function(
                            torch.ops.aten.sym_size.int, (env[graph_input.value], dim)
                        )
        self.cache: dict[Any, Value] = {}

    def as_values(self, x: Any) -> Any:
        """x with each symbolic size replaced by a Value standing for its fx node."""
        if type(x) is tuple:
            return tuple(self.as_values(item) for item in x)
        if type(x) not in (SymExpr, SymBool, SymFloat):
            return x
        key = (type(x), x.key() if isinstance(x, SymBool) else getattr(x, "terms", None) or x.node)
        value = self.cache.get(key)
        if value is None:
            kind = float if type(x) is SymFloat else int
            value = self.cache[key] = Value(f"size_{len(self.cache)}", ScalarMeta(kind))
            self.env[value] = self.emit(x)
        return value

    def emit(self, x: Any) -> Any:
        call = self.fx_graph.call_function
        if type(x) is SymBool:
            relation = {"==": operator.eq, "!=": operator.ne, "<=": operator.le}[x.relation]
            return call(relation, (self.emit(x.poly), 0))
        if type(x) is SymFloat:
            return self.emit_float(x.node)
        if type(x) is not SymExpr:
            return int(x)
        total: Any = None
        for monomial, coefficient in x.terms:
            term: Any = coefficient if not monomial else None
            for atom in monomial:
                factor = self.atom(atom)
                term = factor if term is None else call(operator.mul, (term, factor))
            if monomial and coefficient != 1:
                term = call(operator.mul, (term, coefficient))
            total = term if total is None else call(operator.add, (total, term))
        return total

    def atom(self, atom: Any) -> Any:
        import torch

        if atom[0] == "sym":
            return self.symbols[atom[1]]
        if atom[0] in ROUNDINGS:  # an int-valued function of a float expression
            roundings = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc}
            rounding = roundings.get(atom[0], round)
            return self.fx_graph.call_function(rounding, (self.emit_float(atom[1][0]),))
        a, b = (self.emit(SymExpr(arg) if type(arg) is tuple else arg) for arg in atom[1])
        function = {
            "floordiv": operator.floordiv,
            "mod": operator.mod,
            "min": torch.sym_min,
            "max": torch.sym_max,
        }[atom[0]]
        return self.fx_graph.call_function(function, (a, b))

    def emit_float(self, node: tuple) -> Any:
        """The fx values computing a float expression, operation by operation (Python's float
        arithmetic on torch's SymInts and SymFloats)."""
        import torch

        call = self.fx_graph.call_function
        kind = node[0]
        if kind == "c":
            return float.fromhex(node[1])
        if kind == "float":
            return call(torch.sym_float, (self.emit(SymExpr(node[1])),))
        if kind == "idiv":
            a, b = (self.emit(SymExpr(raw) if type(raw) is tuple else raw) for raw in node[1:])
            return call(operator.truediv, (a, b))
        if kind == "neg":
            return call(operator.neg, (self.emit_float(node[1]),))
        function = {
            "add": operator.add,
            "sub": operator.sub,
            "mul": operator.mul,
            "div": operator.truediv,
            "pow": operator.pow,
            "min": torch.sym_min,
            "max": torch.sym_max,
        }[kind]
        return call(function, (self.emit_float(node[1]), self.emit_float(node[2])))

    def assert_checks(self) -> None:
        import torch

        for check in self.graph.checks:
            condition = self.emit(check)
            self.fx_graph.call_function(
                torch.ops.aten._assert_scalar.default,
                (condition, f"graph {self.graph.name} was lowered assuming {check}"),
            )


def to_fx(graph: Graph, *, adapt: bool = True) -> Any:
    """A `torch.fx.GraphModule` computing `graph` (prims only) with `torch.ops.prims`; it takes the
    graph's placeholder inputs (see the module docstring) and returns its user outputs as a tuple.
    `adapt=False` calls every prim exactly as the node states it, without the ADAPTERS (the tests
    use it to show where torch's prims differ from ours)."""
    import torch
    import torch.fx

    unbacked = sorted(name for name, s in graph.symbols.items() if not s.backed)
    if unbacked:
        raise ToFxError(
            f"graph {graph.name} has data-dependent sizes ({', '.join(unbacked)}); to_fx takes "
            "graphs whose symbols the inputs' shapes bind"
        )
    control_flow = sorted({node.op for node in graph.nodes if node.namespace == HIGHER_ORDER})
    if control_flow:
        raise ToFxError(
            f"graph {graph.name} holds control flow ({', '.join(control_flow)}), which to_fx does "
            "not map back to torch's higher-order ops yet; execute it with aten2prims.execute"
        )
    leftovers = sorted({node.op for node in graph.nodes if node.namespace != "prims"})
    if leftovers:
        raise ToFxError(
            f"graph {graph.name} still holds non-prims ops ({', '.join(leftovers)}): lower it first"
        )
    root = torch.nn.Module()
    fx_graph = torch.fx.Graph()
    taken: set[str] = set()
    env: dict[Value, Any] = {}
    for graph_input in graph.inputs:
        name = _identifier(graph_input.name, taken)
        if graph_input.data is None:
            env[graph_input.value] = fx_graph.placeholder(name)
            continue
        tensor = to_torch(np.asarray(graph_input.data))
        if graph_input.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            root.register_buffer(name, tensor)
        else:
            setattr(root, name, tensor)
        env[graph_input.value] = fx_graph.get_attr(name)

    sizes = _SymbolicSizes(graph, fx_graph, env)

    def operand(x: Any) -> Any:
        return to_torch_operand(sizes.as_values(x), env.__getitem__)

    sizes.assert_checks()

    for node in graph.nodes:
        target = torch_op(node)
        named = bound_arguments(node)
        args, kwargs = [], {}
        for argument in target._schema.arguments:
            if argument.name not in named:
                continue
            value = operand(named[argument.name])
            if argument.kwarg_only:
                kwargs[argument.name] = value
            else:
                args.append(value)
        if adapt:
            # Layout decisions on symbolic sizes: the graph's ranges and checks, nothing added.
            with shape_env(ShapeEnv(dict(graph.symbols), list(graph.checks), recording=False)):
                call = _emit(fx_graph, node, target, args, kwargs, operand)
        else:
            call = fx_graph.call_function(target, tuple(args), kwargs)
        call.name = _identifier(node.results[0].name if node.results else node.op, taken)
        if len(node.results) == 1:
            env[node.results[0]] = call
        else:
            for index, result in enumerate(node.results):
                item = fx_graph.call_function(operator.getitem, (call, index))
                item.name = _identifier(result.name, taken)
                env[result] = item
    fx_graph.output(tuple(env[output.value] for output in graph.user_outputs))
    fx_graph.lint()
    return torch.fx.GraphModule(root, fx_graph, class_name=_identifier(graph.name, set()))
