"""Higher-order ops: torch's control flow that `torch.export` keeps (`torch.ops.higher_order.*`),
whose operands include graphs (the branches or bodies).

In the IR such a node is `higher_order.<name>` with nested `Graph` operands (docs/ir.md,
"Nested graphs"). Each op's definition says which operand positions hold graphs and checks a
node's operands and results against its graphs' signatures (`check`); the verifier asks it.
Nothing here runs anything: the executor has the kernels.

Spec: torch's `_higher_order_ops/cond.py` (the operands `(pred, true_fn, false_fn, operands)`,
both branches taking the operands and returning results of the same metas) and `map.py`
(`map_impl(body, xs, extra)`: the body called on the i-th slice along dim 0 of every mapped
operand, plus the extra operands whole; its results stacked along a new dim 0) and
`while_loop.py` (`while_loop(cond_fn, body_fn, carried, extra)`: while the condition graph holds
on the carried and extra operands, the body maps them to new carried values of the same metas)
and `scan.py` (`scan(combine_fn, init, xs, additional_inputs)`: the combine graph maps the
carries, the i-th slices along dim 0 of `xs` and the extra operands to the next carries and
the i-th outputs; the results are the last carries and the outputs stacked along a new dim 0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..ir.dtypes import DType
from ..ir.graph import Graph, Node
from ..ir.symbolic import SymBool
from ..ir.values import ScalarMeta, TensorMeta, Value

NAMESPACE = "higher_order"
_ANY_DTYPE = DType.float32  # sizes are compared as one-dim metas of one dtype


@attrs.frozen(slots=True)
class HigherOrderOp:
    """A higher-order op: its name (`higher_order.cond`), how many positional operands it takes,
    which of them are graphs, a check of a node against its graphs' signatures (None when
    the node is well-formed, else what is wrong), and which graphs return a predicate alone
    (torch calls them for a bool, not for a tuple of results)."""

    name: str
    arity: int
    graph_positions: tuple[int, ...]
    check: Callable[[Node], str | None]
    predicate_positions: tuple[int, ...] = ()

    def subgraphs(self, node: Node) -> tuple[Graph, ...]:
        return tuple(node.args[i] for i in self.graph_positions)


def _plain(meta: Any) -> Any:
    """What signatures compare: a tensor's shape and dtype (a value's layout is not part of its
    type here), a scalar's kind."""
    return TensorMeta(meta.shape, meta.dtype) if type(meta) is TensorMeta else meta


def _signature(graph: Graph) -> tuple[list[Any], list[Any]]:
    return (
        [_plain(i.value.meta) for i in graph.inputs],
        [_plain(o.value.meta) for o in graph.outputs],
    )


def _metas(operands: Any) -> list[Any]:
    return [_plain(v.meta) if type(v) is Value else v for v in operands]


def _results(node: Node) -> list[Any]:
    return [_plain(r.meta) for r in node.results]


def _show(metas: list[Any]) -> str:
    return "(" + ", ".join(map(str, metas)) + ")"


def _check_cond(node: Node) -> str | None:
    pred, true_graph, false_graph, operands = node.args
    if type(pred) is Value:
        meta = pred.meta
        if not _is_predicate(meta):
            return (
                f"the predicate %{pred.name} is {meta}, expected a bool or a one-element b8 tensor"
            )
    elif type(pred) is not bool and type(pred) is not SymBool:  # a condition on sizes
        return f"the predicate {pred!r} is not a bool"
    if type(operands) is not tuple or not all(type(v) is Value for v in operands):
        return "the operands (argument 3) must be a list of values"
    results = _results(node)
    for which, graph in (("true", true_graph), ("false", false_graph)):
        takes, returns = _signature(graph)
        if takes != _metas(operands):
            return (
                f"the {which} branch {graph.name} takes {_show(takes)}, but the operands are "
                f"{_show(_metas(operands))}"
            )
        if returns != results:
            return (
                f"the {which} branch {graph.name} returns {_show(returns)}, but the node's "
                f"results are {_show(results)}"
            )
    return None


def _not_tensor_lists(*named: tuple[str, Any]) -> str | None:
    """The complaint about the first of the (what, operands) that is not a tuple of tensors."""
    for what, operands in named:
        if type(operands) is not tuple or not all(
            type(v) is Value and v.is_tensor for v in operands
        ):
            return f"the {what} must be a list of tensors"
    return None


def _leading_slices(xs: tuple[Value, ...], what: str) -> list[TensorMeta] | str:
    """The metas of one slice along the first dimension of each of `xs` (the operands a map or a
    scan walks together), or the complaint when they do not share that dimension."""
    if not xs:
        return f"there must be at least one {what} operand"
    length = xs[0].shape[0] if xs[0].ndim else None
    if length is None or any(not x.ndim or not _same_size(x.shape[0], length) for x in xs):
        return f"the {what} operands must share their first dimension, got {_show(_metas(xs))}"
    return [TensorMeta(x.shape[1:], x.dtype) for x in xs]


def _check_map(node: Node) -> str | None:
    body, xs, extra = node.args
    wrong = _not_tensor_lists(
        ("mapped operands (argument 1)", xs), ("extra operands (argument 2)", extra)
    )
    if wrong is not None:
        return wrong
    slices = _leading_slices(xs, "mapped")
    if type(slices) is str:
        return slices
    length = xs[0].shape[0]
    takes, returns = _signature(body)
    if takes != [*slices, *_metas(extra)]:
        return (
            f"the body {body.name} takes {_show(takes)}, but the slices and extra operands are "
            f"{_show([*slices, *_metas(extra)])}"
        )
    if not all(type(meta) is TensorMeta for meta in returns):
        return f"the body {body.name} returns {_show(returns)}; a map stacks tensors only"
    stacked = [TensorMeta((length, *meta.shape), meta.dtype) for meta in returns]
    results = _results(node)
    if results != stacked:
        return (
            f"the body {body.name} returns {_show(returns)}, so the node's results are "
            f"{_show(stacked)}, not {_show(results)}"
        )
    return None


def _is_predicate(meta: Any) -> bool:
    """A bool scalar, or a one-element b8 tensor."""
    if type(meta) is ScalarMeta:
        return meta.kind is bool
    return type(meta) is TensorMeta and meta.numel == 1 and meta.dtype.is_bool


def _check_while_loop(node: Node) -> str | None:
    cond_graph, body, carried, extra = node.args
    wrong = _not_tensor_lists(("carried operands", carried), ("extra operands", extra))
    if wrong is not None:
        return wrong
    operands = [*_metas(carried), *_metas(extra)]
    takes, returns = _signature(cond_graph)
    if takes != operands:
        return (
            f"the condition {cond_graph.name} takes {_show(takes)}, but the carried and extra "
            f"operands are {_show(operands)}"
        )
    if len(returns) != 1 or not _is_predicate(returns[0]):
        return (
            f"the condition {cond_graph.name} returns {_show(returns)}, expected one bool or "
            "one-element b8 tensor"
        )
    takes, returns = _signature(body)
    if takes != operands:
        return (
            f"the body {body.name} takes {_show(takes)}, but the carried and extra operands are "
            f"{_show(operands)}"
        )
    if returns != _metas(carried):
        return (
            f"the body {body.name} returns {_show(returns)}, but the carried operands are "
            f"{_show(_metas(carried))}"
        )
    results = _results(node)
    if results != _metas(carried):
        return f"the results are {_show(results)}, but the carried operands are {_show(_metas(carried))}"
    return None


def _check_scan(node: Node) -> str | None:
    combine, init, xs, extra = node.args
    wrong = _not_tensor_lists(
        ("initial operands", init), ("scanned operands", xs), ("extra operands", extra)
    )
    if wrong is not None:
        return wrong
    slices = _leading_slices(xs, "scanned")
    if type(slices) is str:
        return slices
    length = xs[0].shape[0]
    operands = [*_metas(init), *slices, *_metas(extra)]
    takes, returns = _signature(combine)
    if takes != operands:
        return (
            f"the combine graph {combine.name} takes {_show(takes)}, but the carries, slices "
            f"and extra operands are {_show(operands)}"
        )
    carries, outputs = returns[: len(init)], returns[len(init) :]
    if carries != _metas(init):
        return (
            f"the combine graph {combine.name} returns the carries {_show(carries)}, but the "
            f"initial operands are {_show(_metas(init))}"
        )
    if not all(type(meta) is TensorMeta for meta in outputs):
        return f"the combine graph {combine.name} returns {_show(returns)}; a scan stacks tensors"
    expected = [*carries, *(TensorMeta((length, *m.shape), m.dtype) for m in outputs)]
    results = _results(node)
    if results != expected:
        return (
            f"the combine graph {combine.name} returns {_show(returns)}, so the node's results "
            f"are {_show(expected)}, not {_show(results)}"
        )
    return None


def _same_size(a: Any, b: Any) -> bool:
    return TensorMeta((a,), _ANY_DTYPE) == TensorMeta((b,), _ANY_DTYPE)


HIGHER_ORDER_OPS: dict[str, HigherOrderOp] = {
    op.name: op
    for op in (
        HigherOrderOp("higher_order.cond", 4, (1, 2), _check_cond),
        HigherOrderOp("higher_order.map_impl", 3, (0,), _check_map),
        HigherOrderOp("higher_order.while_loop", 4, (0, 1), _check_while_loop, (0,)),
        HigherOrderOp("higher_order.scan", 4, (0,), _check_scan),
    )
}


def higher_order_op(name: str) -> HigherOrderOp | None:
    """The definition of a higher-order op (`higher_order.cond`), or None."""
    return HIGHER_ORDER_OPS.get(name)
