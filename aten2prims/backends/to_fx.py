"""A lowered graph handed back to torch: `to_fx(graph)` builds a `torch.fx.GraphModule` whose nodes
call `torch.ops.prims.<name>` (and `torch.ops.aten2prims.<name>` for our extension prims), so
a prims graph can run in torch, be inspected with fx tools, or be compiled further.

- Every graph input without stored data becomes a placeholder, in graph order (user inputs first
  come as they are listed; a parameter or buffer without data is a placeholder too).
- Parameters and buffers with data become buffers of the module, constants with data become
  constant attributes; both are read with `get_attr`.
- A prims node holds its tensor operands positionally and its attributes by name in schema order
  (docs/ir.md); both are bound by name to torch's schema, positionally up to its keyword-only
  arguments, by keyword after.
- The module returns the user outputs, in order, as a tuple.
- Symbols are fx values: input dimensions (`aten.sym_size.int`), int inputs, scalars a node
  computes, or result dimensions the data decide (a prim's `sizes_from_data` argument left out
  of its call); run-time checks and symbols' ranges are `aten._assert_scalar`s, each
  emitted once its symbols are available.
- Control flow becomes torch's higher-order op, each nested graph a GraphModule submodule
  (docs/pipeline.md, section 4).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..errors import Error
from ..frontends.torch_interop import to_torch, to_torch_operand, torch_dtype
from ..ir.graph import Graph, InputKind, Node
from ..ir.layout import is_non_overlapping
from ..ir.symbolic import (
    INF,
    ROUNDINGS,
    ShapeEnv,
    Symbol,
    SymBool,
    SymExpr,
    SymFloat,
    bare_symbol,
    free_symbols,
    shape_env,
)
from ..ir.values import ScalarMeta, TensorMeta, Value
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from ..schema.higher_order import higher_order_op
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


def _name(fx_node: Any, name: str) -> None:
    """Name an fx node after our value: through the fx graph's namespace, which also holds
    the names fx gave the nodes it named itself (`ge` of a range check), so none repeats."""
    fx_node._rename(_identifier(name, set()))


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
    if name == "copy_strided" and not is_non_overlapping(
        node.args[0].shape, node.kwargs["stride"]
    ):  # the node's strides (args holds the fx values computing symbolic ones)
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
    """A dynamic graph's sizes in one fx graph: each symbol as the fx value computing it — an
    input's dimension (`aten.sym_size.int`), an int input, a scalar a node computes (`x.item()`)
    or a dimension of a node's result whose size the data decide (nonzero's count) — and
    expressions as Python operators on those (fx records them as torch does for SymInts). Each
    run-time check of the graph becomes an `aten._assert_scalar` as soon as its symbols are
    available, as does the range of each symbol (in the fx graph that computes it)."""

    def __init__(
        self,
        graph: Graph,
        fx_graph: Any,
        env: dict[Value, Any],
        scope: _Scope,
        given: dict[str, Any],
    ) -> None:
        import torch

        self.graph = graph
        self.fx_graph = fx_graph
        self.env = env
        self.scope = scope
        self.symbols: dict[str, Any] = dict(given)  # lifted from the enclosing graph
        # Symbols this fx graph computes (their checks are asserted here): from the outermost
        # graph's inputs, or from data.
        self.from_data: set[str] = set()
        self.pending = list(scope.checks)
        self.cache: dict[Any, Value] = {}
        bound: dict[str, tuple[Any, str]] = {}
        for graph_input in graph.inputs:
            for dim, size in enumerate(getattr(graph_input.value.meta, "shape", ())):
                name = bare_symbol(size)
                if name is not None and name not in self.symbols and name not in bound:
                    read = fx_graph.call_function(
                        torch.ops.aten.sym_size.int, (env[graph_input.value], dim)
                    )
                    bound[name] = (read, f"dim {dim} of input %{graph_input.name}")
            if not scope.nested and type(graph_input.value.meta) is ScalarMeta:
                for name, declared in scope.symbols.items():
                    if declared.value == graph_input.name and name not in bound:
                        # an int input marked dynamic
                        bound[name] = (env[graph_input.value], f"input %{graph_input.name}")
        for name, (read, what) in bound.items():
            if scope.nested:
                self.symbols[name] = read  # the enclosing graph asserts its range
            else:
                self.bind(name, read, what)
        self.assert_ready()

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
            found = self.symbols.get(atom[1])
            if found is None:
                raise ToFxError(self.unavailable(atom[1]))
            return found
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

    def unavailable(self, name: str) -> str:
        where = (
            f"nested graph {self.graph.name}" if self.scope.nested else f"graph {self.graph.name}"
        )
        declared = self.scope.symbols.get(name)
        if declared is not None and not declared.backed:
            source = f" (read from %{declared.value})" if declared.value else ""
            return (
                f"{where} uses the data-dependent size {name}{source} before any node of it "
                "computes it"
            )
        return (
            f"{where} uses the size {name}, which neither its inputs nor the enclosing graph give"
        )

    def bind(self, name: str, fx_value: Any, what: str) -> None:
        """Symbol `name` is `fx_value` from here on (computed here: from the outermost graph's
        inputs or from data): its range and the checks now decidable are asserted."""
        import torch

        self.symbols[name] = fx_value
        self.from_data.add(name)
        declared = self.scope.symbols.get(name)
        if declared is not None:
            kind = "symbol" if declared.backed else "data-dependent symbol"
            message = (
                f"{kind} {name} ({what}) is outside its range [{declared.lower}, {declared.upper}]"
            )
            for relation, bound in ((operator.ge, declared.lower), (operator.le, declared.upper)):
                if bound not in (INF, -INF):
                    holds = self.fx_graph.call_function(relation, (fx_value, int(bound)))
                    self.fx_graph.call_function(
                        torch.ops.aten._assert_scalar.default, (holds, message)
                    )
        self.assert_ready()

    def assert_ready(self) -> None:
        """Assert each pending check whose symbols are all available, one of them bound in this
        fx graph (the enclosing graph asserts the checks on its own symbols)."""
        import torch

        waiting = []
        for check in self.pending:
            names = free_symbols(check)
            if names <= self.symbols.keys() and (names & self.from_data or not names):
                condition = self.emit(check)
                self.fx_graph.call_function(
                    torch.ops.aten._assert_scalar.default,
                    (condition, f"graph {self.scope.root_name} was lowered assuming {check}"),
                )
            else:
                waiting.append(check)
        self.pending = waiting


@attrs.frozen
class _Scope:
    """What every graph of one conversion shares: the outermost graph's symbols and checks (a
    nested graph declares none of its own), whether the graph at hand is nested, and whether
    to apply the ADAPTERS."""

    root_name: str
    symbols: dict[str, Symbol]
    checks: tuple[SymBool, ...]
    adapt: bool
    nested: bool = False
    # Names of the outermost graph's values: a nested graph binds no symbol read from one.
    root_values: frozenset[str] = frozenset()


def to_fx(graph: Graph, *, adapt: bool = True) -> Any:
    """A `torch.fx.GraphModule` computing `graph` (prims, and control flow whose nested graphs
    hold prims) with `torch.ops.prims` and torch's higher-order ops; it takes the graph's
    placeholder inputs (see the module docstring) and returns its user outputs as a tuple.
    `adapt=False` calls every prim exactly as the node states it, without the ADAPTERS (the tests
    use it to show where torch's prims differ from ours)."""
    names = {graph_input.name for graph_input in graph.inputs}
    names |= {result.name for node in graph.nodes for result in node.results}
    scope = _Scope(
        graph.name, dict(graph.symbols), tuple(graph.checks), adapt, root_values=frozenset(names)
    )
    return _module(graph, scope)


def _module(
    graph: Graph, scope: _Scope, *, predicate: bool = False, lifted: tuple[str, ...] = ()
) -> Any:
    """The GraphModule of `graph`; with `predicate`, it returns its one output bare, as a 0-dim
    bool tensor (how torch's while_loop takes its condition's result). `lifted` names symbols
    of the enclosing graph it takes as trailing int inputs (a nested graph whose own inputs'
    dimensions do not give them)."""
    import torch
    import torch.fx

    leftovers = sorted(
        {
            node.op
            for node in graph.nodes
            if node.namespace != "prims"
            and not (node.namespace == HIGHER_ORDER and higher_order_op(node.op) is not None)
        }
    )
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

    given = {name: fx_graph.placeholder(_identifier(name, taken)) for name in lifted}
    sizes = _SymbolicSizes(graph, fx_graph, env, scope, given)

    def operand(x: Any) -> Any:
        return to_torch_operand(sizes.as_values(x), env.__getitem__)

    for node in graph.nodes:
        if node.namespace == HIGHER_ORDER:
            call = _emit_control_flow(fx_graph, root, node, scope, sizes, operand, taken)
            results = [
                fx_graph.call_function(operator.getitem, (call, index))
                for index in range(len(node.results))
            ]
        else:
            call = _emit_prim(fx_graph, node, scope, sizes, operand)
            _name(call, node.results[0].name if node.results else node.op)
            if len(node.results) == 1:
                results = [call]
            else:
                results = [
                    fx_graph.call_function(operator.getitem, (call, index))
                    for index in range(len(node.results))
                ]
        for result, item in zip(node.results, results):
            if item is not call:
                _name(item, result.name)
            env[result] = item
        for result in node.results:
            # A size the data decided (nonzero's count, a branch's result) is read off the
            # result; a symbol that is a scalar the node computed (`x.item()`) is that scalar.
            for dim, size in enumerate(getattr(result.meta, "shape", ())):
                decided = bare_symbol(size)
                if decided is not None and decided not in sizes.symbols:
                    read = fx_graph.call_function(torch.ops.aten.sym_size.int, (env[result], dim))
                    sizes.bind(decided, read, f"dim {dim} of %{result.name}, computed by {node.op}")
            for name in _symbols_read_from(result, scope, sizes):
                sizes.bind(name, env[result], f"the value of %{result.name}")
    outputs = [env[output.value] for output in graph.user_outputs]
    if predicate:
        (returned,) = graph.user_outputs
        meta = returned.value.meta
        if type(meta) is TensorMeta and meta.ndim:
            # torch's while_loop takes a 0-dim predicate; ours may be any one-element b8 tensor
            outputs[0] = fx_graph.call_function(
                torch.ops.prims.squeeze.default, (outputs[0], list(range(meta.ndim)))
            )
        fx_graph.output(outputs[0])
    else:
        fx_graph.output(tuple(outputs))
    fx_graph.lint()
    return torch.fx.GraphModule(root, fx_graph, class_name=_identifier(graph.name, set()))


def _emit_prim(
    fx_graph: Any, node: Node, scope: _Scope, sizes: _SymbolicSizes, operand: Callable[[Any], Any]
) -> Any:
    """The fx call of a prims node. A prim that computes a size from its operands' data
    (`sizes_from_data`) is called without it when no earlier node computed it: torch's op then
    decides it, as `aten2prims.nonzero` does without a count."""
    target = torch_op(node)
    named = bound_arguments(node)
    for argument, value in named.items():
        name = bare_symbol(value)
        if name is None or name in sizes.symbols:
            continue
        declared = scope.symbols.get(name)
        definition = lookup(node.op)
        if (
            declared is None
            or declared.backed
            or definition is None
            or not definition.sizes_from_data
        ):
            raise ToFxError(f"node %{node.results[0].name} ({node.op}): {sizes.unavailable(name)}")
        named[argument] = None  # torch's op computes it: read off the result (`_module`)
    missing = sorted(free_symbols(tuple(named.values())) - sizes.symbols.keys())
    if missing:
        raise ToFxError(
            f"node %{node.results[0].name} ({node.op}): {sizes.unavailable(missing[0])}"
        )
    args, kwargs = [], {}
    for argument in target._schema.arguments:
        if argument.name not in named:
            continue
        value = operand(named[argument.name])
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    if scope.adapt:
        # Layout decisions on symbolic sizes: the graph's ranges and checks, nothing added.
        with shape_env(ShapeEnv(dict(scope.symbols), list(scope.checks), recording=False)):
            call = _emit(fx_graph, node, target, args, kwargs, operand)
    else:
        call = fx_graph.call_function(target, tuple(args), kwargs)
    return call


def _symbols_read_from(result: Value, scope: _Scope, sizes: _SymbolicSizes) -> list[str]:
    """The data-dependent symbols that are the scalar `result` (`u0` of `x.item()`)."""
    if scope.nested and result.name in scope.root_values:
        return []  # the name is the enclosing graph's value's
    if type(result.meta) is not ScalarMeta:
        return []  # a tensor source (nonzero) gives its symbol as a dim, read off above
    return [
        name
        for name, declared in scope.symbols.items()
        if declared.value == result.name and not declared.backed and name not in sizes.symbols
    ]


def _emit_control_flow(
    fx_graph: Any,
    root: Any,
    node: Node,
    scope: _Scope,
    sizes: _SymbolicSizes,
    operand: Callable[[Any], Any],
    taken: set[str],
) -> Any:
    """torch's own higher-order op (`torch.ops.higher_order.<name>`), each nested graph a
    GraphModule submodule read with `get_attr` (as torch.export's graphs hold them). Symbols a
    nested graph computes with that its inputs' dimensions do not give are passed as ints after
    the last operand list, which each of the four ops hands whole to every graph, last (as
    torch.export lifts SymInts into its branches)."""
    import torch

    definition = higher_order_op(node.op)
    if definition is None:
        raise ToFxError(f"{node.op} is not a higher-order op to_fx knows")
    graphs = definition.subgraphs(node)
    needed = set().union(*(_symbols_used(g) - _symbols_of_inputs(g) for g in graphs))
    lifted = tuple(sorted(needed & sizes.symbols.keys()))
    nested = attrs.evolve(scope, nested=True)
    args = []
    for position, arg in enumerate(node.args):
        if position in definition.graph_positions:
            module = _module(
                arg,
                nested,
                predicate=position in definition.predicate_positions,
                lifted=lifted,
            )
            name = _identifier(arg.name, taken)
            root.add_module(name, module)
            args.append(fx_graph.get_attr(name))
        else:
            args.append(operand(arg))
    args[-1] = [*args[-1], *(sizes.symbols[name] for name in lifted)]
    target = getattr(torch.ops.higher_order, node.op.removeprefix(HIGHER_ORDER + "."))
    return fx_graph.call_function(target, tuple(args))


def _symbols_used(graph: Graph) -> set[str]:
    """The symbols `graph`'s nodes (and its nested graphs') compute with: in operands and in
    the sizes of what they read and produce."""
    names: set[str] = set()
    for node in graph.nodes:
        for arg in (*node.args, *node.kwargs.values()):
            if type(arg) is Graph:
                names |= _symbols_used(arg)
            else:
                names |= free_symbols(arg)
        for value in (*node.operand_values(), *node.results):
            meta = value.meta
            if type(meta) is TensorMeta:
                names |= free_symbols((meta.shape, meta.strides, meta.storage_offset))
    return names


def _symbols_of_inputs(graph: Graph) -> set[str]:
    """The symbols some input dimension of `graph` is exactly."""
    return {
        name
        for graph_input in graph.inputs
        for size in getattr(graph_input.value.meta, "shape", ())
        if (name := bare_symbol(size)) is not None
    }
