"""The graph verifier: `verify(graph)` raises VerificationError naming the first problem.

Checked, for every graph:
- names: every value name unique; every value defined exactly once (SSA);
- use before definition: operands and outputs refer to values defined earlier in the graph;
- metas: every value has a TensorMeta, ScalarMeta or UndefinedMeta;
- undefined tensors (the None of a masked backward result) only as results where an aten
  schema returns a Tensor, read only by arguments whose schema accepts None, never a graph
  output and never a prim's operand or result;
- operands: only values, literals and tuples of those;
- known ops: `prims.*` must be registered prims, `aten.*` must have a known schema (unknown
  namespaces are rejected unless `allow_unknown_ops=True`, or `allow_custom_ops=True`, which
  accepts nodes of other namespaces — a user's custom ops — but still checks aten and prims
  nodes);
- arity and attribute types against the op's schema (missing, unknown, surplus arguments;
  an int where a dtype belongs, …); prims nodes hold exactly their tensor operands positionally
  and their attributes by name;
- meta consistency: a prim node's result metas equal what its meta rule computes; an aten
  node has as many results as its schema returns (lists count per element) of the right kinds.
"""

from __future__ import annotations

from typing import Any

from prims.registry import PrimDef, lookup

from ..errors import DTypeError, SchemaError, ShapeError, VerificationError
from ..ir.graph import Graph, Node
from ..ir.symbolic import ShapeEnv, free_symbols, shape_env
from ..ir.values import LITERAL_TYPES, ScalarMeta, TensorMeta, UndefinedMeta, Value, iter_values
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from ..schema.higher_order import higher_order_op
from ..schema.parser import Schema, check_argument
from ..schema.registry import aten_schema


def verify(
    graph: Graph, *, allow_unknown_ops: bool = False, allow_custom_ops: bool = False
) -> None:
    _check_symbols(graph)
    _check_sources(graph)
    if not graph.symbols:
        _verify(graph, allow_unknown_ops, allow_custom_ops)
        return
    # Meta rules decide on symbolic sizes: from the ranges, else from the graph's own run-time
    # checks and the example values, adding no check of their own.
    with shape_env(ShapeEnv(dict(graph.symbols), list(graph.checks), recording=False)):
        _verify(graph, allow_unknown_ops, allow_custom_ops)


def _check_sources(graph: Graph) -> None:
    """The value each symbol is declared read from (`from %v`) is one the graph defines (a
    nested graph's symbols are the enclosing graph's, read from its values: not checked)."""
    defined = {value.name for value in graph.values()}
    for name, declared in graph.symbols.items():
        if declared.value is not None and declared.value not in defined:
            raise VerificationError(
                f"symbol {name}: declared read from %{declared.value}, which graph "
                f"{graph.name} does not define"
            )


def _check_symbols(graph: Graph) -> None:
    """Every symbol a size, an operand or a check uses is declared; examples lie in range."""
    for name, declared in graph.symbols.items():
        if declared.name != name:
            raise VerificationError(f"symbol {name}: declared under the name {declared.name}")
        example = declared.example
        if example is not None and not declared.lower <= example <= declared.upper:
            raise VerificationError(
                f"symbol {name}: example {example} outside its range "
                f"[{declared.lower}, {declared.upper}]"
            )

    def check(thing: Any, where: str) -> None:
        unknown = free_symbols(thing) - graph.symbols.keys()
        if unknown:
            raise VerificationError(
                f"{where}: uses undeclared symbol(s) {', '.join(sorted(unknown))}"
            )

    for position, condition in enumerate(graph.checks):
        check(condition, f"check {position} ({condition})")
    for graph_input in graph.inputs:
        meta = graph_input.value.meta
        check(getattr(meta, "shape", ()), f"input %{graph_input.name}")
    for index, node in enumerate(graph.nodes):
        where = f"node {index} ({node.op})"
        check((*node.args, *node.kwargs.values()), where)
        for result in node.results:
            check(getattr(result.meta, "shape", ()), where)


def _verify(graph: Graph, allow_unknown_ops: bool, allow_custom_ops: bool) -> None:
    defined: set[Value] = set()
    names: set[str] = set()

    def check_typed(value: Any, where: str) -> None:
        if type(value) is not Value:
            raise VerificationError(f"{where}: expected a Value, got {value!r}")
        if type(value.meta) not in (TensorMeta, ScalarMeta, UndefinedMeta):
            raise VerificationError(f"{where}: %{value.name} has no valid meta ({value.meta!r})")

    def define(value: Any, where: str) -> None:
        check_typed(value, where)
        if value in defined:
            raise VerificationError(f"{where}: %{value.name} is defined twice")
        if value.name in names:
            raise VerificationError(f"{where}: the name %{value.name} is used by two values")
        defined.add(value)
        names.add(value.name)

    for graph_input in graph.inputs:
        define(graph_input.value, f"input %{graph_input.name}")
        if graph_input.value.is_undefined:
            raise VerificationError(
                f"input %{graph_input.name}: an undefined tensor (None) cannot be a graph input"
            )

    for index, node in enumerate(graph.nodes):
        results = ", ".join(f"%{r.name}" if type(r) is Value else repr(r) for r in node.results)
        where = f"node {index} ({results} = {node.op})" if results else f"node {index} ({node.op})"
        for result in node.results:  # well-typed before the meta rule compares with them
            check_typed(result, where)
        for operand in (*node.args, *node.kwargs.values()):
            if type(operand) is Graph and node.namespace == HIGHER_ORDER:
                continue  # a branch or body: checked with its node below
            _check_operand(operand, defined, where)
        if node.namespace == "prims":
            definition = lookup(node.op)
            if definition is None:
                raise VerificationError(f"{where}: unknown prim")
            _check_prim_node(node, definition, where)
        elif node.namespace == "aten":
            schema = aten_schema(node.op)
            if schema is None:
                if not allow_unknown_ops:
                    raise VerificationError(f"{where}: no schema is known for this aten op")
            else:
                _check_aten_node(node, schema, where)
        elif node.namespace == HIGHER_ORDER:
            _check_higher_order_node(node, graph, where, allow_unknown_ops, allow_custom_ops)
        elif not (allow_unknown_ops or allow_custom_ops):
            raise VerificationError(f"{where}: unknown op namespace {node.namespace!r}")
        if node.namespace != "prims" and aten_schema(node.op) is None:
            _check_no_undefined_operands(node, where)
        for result in node.results:
            define(result, where)

    for position, graph_output in enumerate(graph.outputs):
        value = graph_output.value
        if type(value) is not Value or value not in defined:
            name = f"%{value.name}" if type(value) is Value else repr(value)
            raise VerificationError(f"output {position}: {name} is not defined in the graph")
        if value.is_undefined:
            raise VerificationError(
                f"output {position}: %{value.name} is an undefined tensor (None); a graph "
                "returns tensors and scalars only"
            )


def _check_higher_order_node(
    node: Node, graph: Graph, where: str, allow_unknown_ops: bool, allow_custom_ops: bool
) -> None:
    """A control-flow node: a known higher-order op, its graphs where its definition says, each
    graph well-formed (checked whole, under the enclosing graph's symbols), and its operands and
    results matching the graphs' signatures."""
    definition = higher_order_op(node.op)
    if definition is None:
        raise VerificationError(f"{where}: unknown higher-order op")
    if node.kwargs or len(node.args) != definition.arity:
        raise VerificationError(
            f"{where}: takes {definition.arity} positional operands, got {len(node.args)}"
            + (f" and named ones ({', '.join(node.kwargs)})" if node.kwargs else "")
        )
    for position, arg in enumerate(node.args):
        if (type(arg) is Graph) != (position in definition.graph_positions):
            expected = "a graph" if position in definition.graph_positions else "not a graph"
            raise VerificationError(f"{where}: operand {position} must be {expected}")
    for subgraph in definition.subgraphs(node):
        if subgraph.symbols or subgraph.checks:
            raise VerificationError(
                f"{where}: nested graph {subgraph.name} declares symbols or checks; its sizes "
                "use the enclosing graph's"
            )
        nested = subgraph.with_body(subgraph.inputs, subgraph.nodes, subgraph.outputs)
        nested.symbols, nested.checks = graph.symbols, graph.checks
        try:
            _check_symbols(nested)
            _verify(nested, allow_unknown_ops, allow_custom_ops)
        except VerificationError as error:
            raise VerificationError(f"{where}, in graph {subgraph.name}: {error}") from None
        if any(i.kind.value != "user_input" or i.data is not None for i in subgraph.inputs):
            raise VerificationError(
                f"{where}: nested graph {subgraph.name} takes only user inputs (operands)"
            )
    problem = definition.check(node)
    if problem is not None:
        raise VerificationError(f"{where}: {problem}")


def _check_no_undefined_operands(node: Node, where: str) -> None:
    """A node without a schema cannot say which arguments accept None: it reads no undefined
    tensor."""
    for operand in (*node.args, *node.kwargs.values()):
        for value in iter_values(operand):
            if value.is_undefined:
                raise VerificationError(
                    f"{where}: reads %{value.name}, an undefined tensor (None), but the op has no "
                    "schema saying which arguments accept None"
                )


def _check_operand(operand: Any, defined: set[Value], where: str) -> None:
    if type(operand) is Value:
        if operand not in defined:
            raise VerificationError(f"{where}: %{operand.name} is used before it is defined")
    elif type(operand) is tuple:
        for item in operand:
            _check_operand(item, defined, where)
    elif not isinstance(operand, LITERAL_TYPES):
        raise VerificationError(
            f"{where}: operand {operand!r} of type {type(operand).__name__} is not allowed"
        )


def _check_arguments(
    schema: Schema, bound: list[Any], where: str, *, run_time_scalars: bool = False
) -> None:
    for argument, value in zip(schema.arguments, bound):
        problem = check_argument(argument.type, value, run_time_scalars=run_time_scalars)
        if problem is not None:
            raise VerificationError(f"{where}: argument {argument.name!r} expects {problem}")


def _check_prim_node(node: Node, definition: PrimDef, where: str) -> None:
    problem = definition.binding_problem(node.args, node.kwargs)
    if problem is not None:
        raise VerificationError(f"{where}: {problem}")
    bound = definition.bind(node.args, node.kwargs)
    _check_arguments(definition.schema, bound, where)
    if definition.meta is None:
        raise VerificationError(
            f"{where}: this prim is not supported ({definition.omitted_reason})"
        )
    try:
        metas = definition.meta(*bound)
    except (ShapeError, DTypeError) as error:
        raise VerificationError(f"{where}: its meta rule rejects the operands: {error}") from None
    expected = metas if type(metas) is tuple else (metas,)
    actual = tuple(r.meta for r in node.results)
    if expected != actual:
        raise VerificationError(
            f"{where}: results are typed ({', '.join(map(str, actual))}) but the meta rule gives "
            f"({', '.join(map(str, expected))})"
        )


def _check_aten_node(node: Node, schema: Schema, where: str) -> None:
    try:
        bound = schema.bind(node.args, node.kwargs, op=node.op)
    except SchemaError as error:
        raise VerificationError(f"{where}: {error}") from None
    _check_arguments(schema, bound, where, run_time_scalars=True)
    returns = schema.returns
    if len(returns) == 1 and returns[0].type.is_list:
        kinds = [returns[0].type.base] * len(node.results)
    else:
        kinds = [r.type.base for r in returns]
        if len(node.results) != len(kinds):
            raise VerificationError(
                f"{where}: has {len(node.results)} result(s), its schema returns {len(kinds)}"
            )
    for result, kind in zip(node.results, kinds):
        wants_tensor = kind == "Tensor"
        # torch returns None (undefined) for a tensor nobody asked for (output_mask)
        allowed = (TensorMeta, UndefinedMeta) if wants_tensor else (ScalarMeta,)
        if type(result.meta) not in allowed:
            raise VerificationError(
                f"{where}: result %{result.name} is {result.meta}, the schema returns {kind}"
            )
