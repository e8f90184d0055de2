"""`lower(graph)`: expand every aten node into prims by its decomposition rule.

The input graph is never modified: lowering builds a new graph. Each aten node's rule runs in a
builder whose provenance names that node, so every prim it emits records the aten op and result
name it came from (and the user's source location). The rule's results must have exactly the
node's declared metas — a rule producing another dtype or shape is a bug, reported by op and node;
a result laid out otherwise than declared (torch's kernels and torch's prims metas legitimately
disagree, e.g. on a channels-last convolution) is copied into the declared layout.
A size the graph declares as a fresh data-dependent (unbacked) symbol of the node being lowered
(torch's size of a slice at `.item()` bounds) is identified with the rule's expression of it,
when that expression reads only sizes known by then: the symbol is replaced by the expression in
every later meta, operand and check (so the executor computes it from the values it reads), and
the symbol's declared range becomes a run-time check of the expression unless the ranges settle
it.
The last value a rule makes for a result takes that result's name, so the lowered graph reads
like the original one. An undefined result (the None of a backward op's masked result) is one
the rule returns None for, and is not computed; its readers get None.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeAlias

import attrs

import prims
from decompositions import RULES, active_registry
from decompositions.registry import lowering_node
from prims.builder import Builder

from ..errors import (
    Error,
    LoweringError,
    ResultDTypeError,
    ResultShapeError,
    ShapeError,
    UnsupportedOpError,
)
from ..ir.building import collector_paused
from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput, GraphOutput, Node, Provenance
from ..ir.layout import required_length, same_significant_strides
from ..ir.symbolic import (
    INF,
    ShapeEnv,
    Symbol,
    SymExpr,
    assume,
    bare_symbol,
    compare,
    current_env,
    format_expr,
    free_symbols,
    is_literal_one,
    number_kind,
    same_size,
    settled,
    shape_env,
    substitute,
    symbol,
)
from ..ir.values import CPU, ScalarMeta, TensorMeta, UndefinedMeta, Value, map_values
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from .bind import specialize
from .dce import eliminate_dead_code

# Which aten nodes to leave as they are: overload names ("aten.mm.default"), shell-style
# patterns ("aten.convolution.*"), or a predicate on the node.
Keep: TypeAlias = Iterable[str] | Callable[[Node], bool] | None


def keep_predicate(keep: Keep) -> Callable[[Node], bool]:
    """`keep` as a predicate on nodes (a string is one name or pattern)."""
    if keep is None:
        return lambda node: False
    if callable(keep):
        return keep
    names = [keep] if isinstance(keep, str) else list(keep)
    exact = frozenset(name for name in names if not any(c in name for c in "*?["))
    patterns = [name for name in names if name not in exact]
    return lambda node: (
        node.op in exact or any(fnmatch.fnmatchcase(node.op, pattern) for pattern in patterns)
    )


def lower(
    graph: Graph,
    *,
    strict: bool = True,
    keep: Keep = None,
    registry: Any = None,
    dce: bool = True,
) -> Graph:
    """A new graph in which every aten node is replaced by the prims its rule emits.

    `keep` leaves the chosen aten nodes intact (partial lowering, for a backend that runs them
    natively); `registry` is the rule table (default: every rule of `decompositions`).
    `strict=True` raises UnsupportedOpError naming every op that is neither kept nor has a rule
    (all of them, with counts) before doing anything; `strict=False` leaves such nodes in place.
    `dce` removes nodes whose results nobody uses (e.g. the unused statistics of a
    normalization)."""
    registry = RULES if registry is None else registry
    with collector_paused():
        return _lower(graph, strict=strict, kept=keep_predicate(keep), registry=registry, dce=dce)


def _lower(
    graph: Graph, *, strict: bool, kept: Callable[[Node], bool], registry: Any, dce: bool
) -> Graph:
    missing = Counter(
        node.op
        for node in _all_nodes(graph)
        if node.namespace not in ("prims", HIGHER_ORDER)
        and node.op not in registry
        and not kept(node)
    )
    if missing and strict:
        raise UnsupportedOpError(missing)

    builder = Builder(graph.name, reserved_names=(value.name for value in graph.values()))
    mapping: dict[Value, Any] = {}
    for graph_input in graph.inputs:
        value = Value(graph_input.name, graph_input.value.meta)
        builder.inputs.append(
            GraphInput(value, graph_input.kind, graph_input.target, graph_input.data)
        )
        mapping[graph_input.value] = value

    def remap(operand: Any) -> Any:
        return map_values(operand, mapping.__getitem__)

    # Size decisions the symbols' ranges do not settle become run-time checks of the result.
    env = ShapeEnv(dict(graph.symbols), list(graph.checks))
    # Scalars that are data-dependent symbols (`x.item()` is u0): later rules see the symbol,
    # and the lowered graph names the prims value the executor binds it from.
    sources = {s.value: s.name for s in graph.symbols.values() if s.value is not None}
    lowered_sources: dict[str, str] = {}
    for graph_input in graph.inputs:  # an int user input marked dynamic is its symbol
        name = sources.get(graph_input.name)
        if name is not None:
            lowered_sources[name] = graph_input.name
            mapping[graph_input.value] = symbol(name)
    # Fresh unbacked symbols identified with a rule's expression: substituted from then on.
    fresh = _fresh_symbols(graph)
    bound: dict[str, int | SymExpr] = {}

    def under_bound(operand: Any) -> Any:
        return _under(operand, bound)

    with builder, active_registry(registry), shape_env(env):
        for index, node in enumerate(graph.nodes):
            args = tuple(under_bound(remap(a)) for a in node.args)
            kwargs = {name: under_bound(remap(a)) for name, a in node.kwargs.items()}
            rule = registry.get(node.op) if node.namespace != "prims" else None
            if node.namespace == HIGHER_ORDER:
                # Control flow stays a node; each of its graphs is lowered to prims in turn.
                args = tuple(
                    _lower_nested(_graph_under(a, bound), env, strict, kept, registry)
                    if type(a) is Graph
                    else a
                    for a in args
                )
                _copy_node(node, args, kwargs, builder, mapping, bound)
            elif rule is None or kept(node):
                _copy_node(node, args, kwargs, builder, mapping, bound)
            else:
                mine = {name for name, first in fresh.items() if first == index}
                later = {name for name, first in fresh.items() if first > index}
                _expand(node, rule, args, kwargs, builder, mapping, _Fresh(mine, later, bound))
            for result in node.results:
                name = sources.get(result.name)
                new = mapping.get(result)
                if (
                    name is not None
                    and name not in bound
                    and type(new) is Value
                    and type(new.meta) is ScalarMeta
                ):
                    lowered_sources[name] = new.name
                    mapping[result] = symbol(name)
        outputs = [GraphOutput(_output_value(o, mapping), o.kind, o.target) for o in graph.outputs]

    lowered = builder.finish(outputs, name=graph.name)
    # A data-dependent symbol no scalar is is read from the node computing it from data
    # (nonzero's count): declared its source, which the passes keep (dce.py) however its results
    # are read.
    computed = _computed_from_data(lowered.nodes, graph.symbols)
    lowered.symbols = {
        name: attrs.evolve(declared, value=lowered_sources.get(name, computed.get(name)))
        for name, declared in graph.symbols.items()
        if name not in bound
    }
    lowered.checks = _checks_under(env.checks, bound, graph.name)
    return eliminate_dead_code(lowered) if dce else lowered


def _computed_from_data(nodes: list[Node], symbols: dict[str, Symbol]) -> dict[str, str]:
    """The unbacked symbols a node computes from its operands' data, each by the result of the
    first node computing it: a prim that says it does (`PrimDef.sizes_from_data`: nonzero's
    count, an attribute that is the bare symbol), or a node left unlowered whose result has the
    symbol as a size (torch's op decides that size, as `aten.nonzero` kept does)."""
    found: dict[str, str] = {}
    for node in nodes:
        definition = prims.lookup(node.op) if node.namespace == "prims" else None
        if definition is not None:
            if definition.sizes_from_data is None:
                continue
            computed = [bare_symbol(attribute) for attribute in node.kwargs.values()]
        else:
            computed = [
                bare_symbol(size)
                for result in node.results
                for size in getattr(result.meta, "shape", ())
            ]
        for name in computed:
            if name is not None and name in symbols and not symbols[name].backed:
                found.setdefault(name, node.results[0].name)
    return found


def _fresh_symbols(graph: Graph) -> dict[str, int]:
    """Each unbacked symbol that no input's meta mentions, with the index of the first node whose
    results' metas do: the node torch made it for (a slice's size at data-dependent bounds)."""
    unbacked = {name for name, declared in graph.symbols.items() if not declared.backed}
    seen = free_symbols(tuple(_meta_sizes(i.value.meta) for i in graph.inputs)) & unbacked
    first: dict[str, int] = {}
    for index, node in enumerate(graph.nodes):
        for result in node.results:
            for name in free_symbols(_meta_sizes(result.meta)) & unbacked - seen:
                first[name] = index
                seen.add(name)
    return first


def _meta_sizes(meta: Any) -> tuple:
    if type(meta) is not TensorMeta:
        return ()
    return (meta.shape, meta.strides, meta.storage_offset)


@attrs.define(slots=True)
class _Fresh:
    """The fresh unbacked symbols of the node being lowered (`mine`), those of later nodes
    (`later`: not known yet), and every symbol identified so far with a rule's expression
    (`bound`, shared by the whole lowering)."""

    mine: set[str]
    later: set[str]
    bound: dict[str, int | SymExpr]

    def identify(self, node: Node, declared: Any, new: Any) -> None:
        """Bind each of the node's fresh symbols that `declared` holds as a size or its offset
        to what the rule computed there, when that reads only sizes known by then."""
        if not self.mine or type(declared) is not TensorMeta:
            return
        if type(new) is not Value or type(new.meta) is not TensorMeta:
            return
        made = new.meta
        if len(made.shape) != len(declared.shape):
            return  # a rank mismatch: _check_result names it
        for want, got in zip(declared.shape, made.shape):
            self._identify_size(node, want, got)
        # An offset is comparable only in the same layout (else the lowering copies the value
        # into the declared one, whose offset is not the rule's); strides of dims of size 1 say
        # nothing.
        declared = _meta_under(declared, self.bound)
        if all(
            same_size(want, got) or is_literal_one(size)
            for want, got, size in zip(declared.strides, made.strides, made.shape)
        ):
            self._identify_size(node, declared.storage_offset, made.storage_offset)

    def _identify_size(self, node: Node, want: Any, got: Any) -> None:
        name = bare_symbol(want)
        if name is None or name not in self.mine or name in self.bound:
            return
        got = _under(got, self.bound)
        if not same_size(want, got) and not free_symbols(got) & (self.mine | self.later):
            self._bind(node, name, got)

    def _bind(self, node: Node, name: str, value: int | SymExpr) -> None:
        declared = current_env().symbols[name]
        what = (
            f"{_where(node)}: the graph declares the size {name} in "
            f"[{declared.lower}, {declared.upper}], which the rule computes as {format_expr(value)}"
        )
        # The declared range still holds: a run-time check unless the ranges settle it.
        if declared.lower != -INF:
            assume(compare(">=", value, int(declared.lower)), what)
        if declared.upper != INF:
            assume(compare("<=", value, int(declared.upper)), what)
        self.bound[name] = value


def _under(operand: Any, bound: dict[str, int | SymExpr]) -> Any:
    """The operand with every bound symbol replaced by its expression."""
    if not bound or not free_symbols(operand) & bound.keys():
        return operand
    return substitute(operand, lambda name: bound[name] if name in bound else symbol(name))


def _meta_under(meta: Any, bound: dict[str, int | SymExpr]) -> Any:
    if type(meta) is not TensorMeta or not free_symbols(_meta_sizes(meta)) & bound.keys():
        return meta
    return TensorMeta(
        _under(meta.shape, bound),
        meta.dtype,
        _under(meta.strides, bound),
        _under(meta.storage_offset, bound),
    )


def _graph_under(subgraph: Graph, bound: dict[str, int | SymExpr]) -> Graph:
    """A nested graph whose sizes use bound symbols, with their expressions instead."""
    return specialize(subgraph, bound) if bound else subgraph


def _checks_under(checks: list, bound: dict[str, int | SymExpr], name: str) -> list:
    """The run-time checks with bound symbols replaced (one settled true is dropped)."""
    kept: list = []
    for check in checks:
        value = _under(check, bound)
        if value is False:
            raise ShapeError(
                f"graph {name}: the check {check} fails for every size once "
                f"{', '.join(f'{n} = {format_expr(v)}' for n, v in bound.items())}"
            )
        if value is not True and value not in kept:
            kept.append(value)
    return kept


def _all_nodes(graph: Graph) -> Iterator[Node]:
    """The graph's nodes and those of its nested graphs, at any depth."""
    for node in graph.nodes:
        yield node
        for subgraph in node.subgraphs():
            yield from _all_nodes(subgraph)


def _lower_nested(
    subgraph: Graph, env: ShapeEnv, strict: bool, kept: Callable[[Node], bool], registry: Any
) -> Graph:
    """A nested graph (a branch, a loop body) lowered under the enclosing graph's symbols; the
    size decisions it takes become checks of the enclosing graph."""
    scoped = subgraph.with_body(subgraph.inputs, subgraph.nodes, subgraph.outputs)
    scoped.symbols, scoped.checks = dict(env.symbols), list(env.checks)
    lowered = _lower(scoped, strict=strict, kept=kept, registry=registry, dce=True)
    for check in lowered.checks:
        if check not in env.checks:
            env.checks.append(check)
    lowered.symbols, lowered.checks = {}, []
    return lowered


def _copy_node(
    node: Node,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    builder: Builder,
    mapping: dict,
    bound: dict[str, int | SymExpr],
) -> None:
    results = tuple(Value(r.name, _meta_under(r.meta, bound)) for r in node.results)
    builder.append(Node(node.op, args, kwargs, results, node.provenance))
    mapping.update(zip(node.results, results))


def _expand(
    node: Node,
    rule: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    builder: Builder,
    mapping: dict,
    fresh: _Fresh,
) -> None:
    first = node.results[0].name if node.results else None
    if node.provenance.origin_op is None:
        builder.provenance = Provenance(node.op, first, node.provenance.source)
    else:  # already a lowered node's provenance: keep pointing at the user's aten node
        builder.provenance = node.provenance
    start = len(builder.nodes)
    try:
        with lowering_node(node):
            produced = rule(*args, **kwargs)
    except UnsupportedOpError:
        raise
    except Error as error:
        raise _with_context(error, node) from error
    except Exception as error:  # a rule's own bug: say where it happened
        raise LoweringError(
            f"{_where(node)}: the rule failed: {type(error).__name__}: {error}"
        ) from error
    results = _as_results(node, produced)
    declared = []
    for old, new in zip(node.results, results):
        fresh.identify(node, old.meta, new)
        declared.append(Value(old.name, _meta_under(old.meta, fresh.bound)))
        _check_result(node, declared[-1], new)
    try:
        results = tuple(_laid_out(old, new) for old, new in zip(declared, results))
    except Error as error:
        raise _with_context(error, node) from error
    created = {value for new_node in builder.nodes[start:] for value in new_node.results}
    for old, new in zip(node.results, results):
        if new is None:
            mapping[old] = None  # undefined: whoever reads it reads None
            continue
        if type(new) is Value and new in created:
            # The aten result's name is reserved in the builder, so it is free for this value.
            new.name = old.name
            created.discard(new)
        mapping[old] = new


def _as_results(node: Node, produced: Any) -> tuple[Any, ...]:
    if type(produced) is list:
        produced = tuple(produced)
    if type(produced) is not tuple:
        produced = (produced,)
    if len(produced) != len(node.results):
        raise LoweringError(
            f"{_where(node)}: the rule returned {len(produced)} value(s), the node has {len(node.results)}"
        )
    return produced


def _check_result(node: Node, old: Value, new: Any) -> None:
    expected = old.meta
    if (type(expected) is UndefinedMeta) != (new is None):
        made = "leaves it undefined (None)" if new is None else f"computes {new!r}"
        raise LoweringError(
            f"{_where(node)}: the graph declares %{old.name} as {expected}, but the rule {made}"
        )
    if new is None:
        return
    if type(expected) is TensorMeta:
        if type(new) is not Value or type(new.meta) is not TensorMeta:
            raise LoweringError(
                f"{_where(node)}: the rule returned {new!r} for tensor result %{old.name}"
            )
        if new.meta.dtype is not expected.dtype:
            raise ResultDTypeError(
                f"{_where(node)}: the rule produced {new.meta} for %{old.name}, the graph says {expected}"
            )
        if new.meta.shape != expected.shape:
            raise ResultShapeError(
                f"{_where(node)}: the rule produced {new.meta} for %{old.name}, the graph says {expected}"
            )
        return
    assert type(expected) is ScalarMeta
    kind = (
        new.meta.kind if type(new) is Value and type(new.meta) is ScalarMeta else number_kind(new)
    )
    if kind is not expected.kind:
        raise ResultDTypeError(
            f"{_where(node)}: the rule produced a {kind.__name__} for %{old.name}, the graph says {expected}"
        )


def _laid_out(old: Value, new: Any) -> Any:
    """`new` with the layout the graph declares for `old`. A rule computes a value's layout as
    torch's prims metas do, which can differ from the layout torch's own kernel gave the aten
    node (a convolution computed as products and sums is contiguous where torch's kernel keeps
    channels-last). The declared layout wins, so that every op reading a layout (as_strided,
    sym_stride, …) sees torch's: a differing value is copied into it (`copy_strided`; a view
    with a storage offset becomes a window into a buffer holding it at that offset)."""
    expected = old.meta
    if type(expected) is not TensorMeta or type(new) is not Value:
        return new
    if new.meta == TensorMeta(new.shape, new.dtype, expected.strides, expected.storage_offset):
        return new  # the same layout, compared by structure (no decision on symbolic sizes)
    # Empty when a dim is, asked per dim, which the ranges settle where the product of the
    # sizes (an expanded polynomial) would not; a data-dependent size that may be 0 gets the
    # copy, which is right at every size (strides of an empty tensor address nothing).
    if any(settled(n == 0) for n in expected.shape) or (
        same_significant_strides(expected.shape, expected.strides, new.strides)
        and expected.storage_offset == new.storage_offset
    ):
        return new
    if expected.storage_offset == 0:
        return prims.copy_strided(new, stride=list(expected.strides))
    length = required_length(expected.shape, expected.strides, expected.storage_offset)
    buffer = prims.as_strided_scatter(
        prims.full([length], 0, dtype=new.dtype, device=CPU, requires_grad=False),
        new,
        list(expected.shape),
        list(expected.strides),
        expected.storage_offset,
    )
    return prims.as_strided(
        buffer, list(expected.shape), list(expected.strides), expected.storage_offset
    )


# The widest dtype of each Python scalar kind: a folded scalar output round-trips exactly.
_SCALAR_DTYPES = {
    bool: DType.bool,
    int: DType.int64,
    float: DType.float64,
    complex: DType.complex128,
}


def _output_value(graph_output: GraphOutput, mapping: dict) -> Value:
    value = mapping[graph_output.value]
    if type(graph_output.value.meta) is ScalarMeta and number_kind(value) in _SCALAR_DTYPES:
        # A scalar output folded to a constant (sym_size of a static shape) or to a symbolic
        # size: outputs must be values, so it becomes one again.
        dtype = _SCALAR_DTYPES[number_kind(value)]
        return prims.item(prims.scalar_tensor(value, dtype=dtype))
    if type(value) is not Value:
        raise LoweringError(
            f"output %{graph_output.value.name} folded to the constant {value!r}; outputs must be values"
        )
    return value


def _where(node: Node) -> str:
    names = ", ".join(f"%{r.name}" for r in node.results) or "(no results)"
    source = f" at {node.provenance.source}" if node.provenance.source else ""
    return f"lowering {node.op} -> {names}{source}"


def _with_context(error: Error, node: Node) -> Error:
    message = f"{_where(node)}: {error}"
    try:
        return type(error)(message)
    except TypeError:
        return LoweringError(message)
