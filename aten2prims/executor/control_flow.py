"""Kernels of the higher-order ops (`higher_order.cond`, ...): control flow whose branches or
bodies are nested prims graphs, each run by the executor itself (its plans cached per nested
graph, as for any graph), under the memory budget, thread count and `check` of the call running
the control-flow step, and, when that call is seeded, with a seed of their own each run (the next
child of the call's seed, in the order the runs happen).

The executor's `execute` lives in `run.py`, which depends on the planner that uses these kernels;
`run.py` installs it here when it is imported (`install_runner`), so this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from ..errors import ExecutionError
from ..ir.graph import Graph


@attrs.define(slots=True)
class _Runner:
    """`execute(graph, user_inputs) -> outputs` with the running call's `max_memory`, `threads`,
    `check` and next child seed (set by `install_runner`)."""

    execute: Callable[[Graph, list[Any]], list[Any]] | None = None


_runner = _Runner()


def install_runner(execute: Callable[[Graph, list[Any]], list[Any]]) -> None:
    """Make the kernels run nested graphs with the executor's `execute` (which passes them the
    running call's options)."""
    _runner.execute = execute


def _run(graph: Graph, operands: tuple[Any, ...]) -> Any:
    results = _runner_outputs(graph, operands)
    return results[0] if len(results) == 1 else tuple(results)


def cond(pred: Any, true_graph: Graph, false_graph: Graph, operands: tuple[Any, ...]) -> Any:
    """`torch.cond`: the true branch's results when the predicate holds, else the false one's."""
    return _run(true_graph if bool(np.asarray(pred)) else false_graph, operands)


def map_impl(body: Graph, xs: tuple[Any, ...], extra: tuple[Any, ...]) -> Any:
    """`torch.ops.higher_order.map_impl`: the body on each slice along dim 0 of the mapped
    operands (with the extra operands whole), its results stacked along a new dim 0."""
    length = xs[0].shape[0]
    if any(x.shape[0] != length for x in xs):
        raise ExecutionError(
            f"map over {body.name}: the mapped operands' first dims differ "
            f"({', '.join(str(x.shape[0]) for x in xs)})"
        )
    if length == 0:
        # The verifier has checked that the body returns tensors (the results are stacked).
        empty = [np.empty((0, *o.value.shape), o.value.dtype.numpy) for o in body.outputs]
        return empty[0] if len(empty) == 1 else tuple(empty)
    steps = []
    for index in range(length):
        produced = _runner_outputs(body, (*(x[index] for x in xs), *extra))
        steps.append(produced)
    stacked = [np.stack(parts) for parts in zip(*steps)]
    return stacked[0] if len(stacked) == 1 else tuple(stacked)


def while_loop(
    cond_graph: Graph, body: Graph, carried: tuple[Any, ...], extra: tuple[Any, ...]
) -> Any:
    """`torch.ops.higher_order.while_loop`: the body applied to the carried values while the
    condition graph holds on them (with the extra operands whole); the last carried values."""
    state = tuple(np.array(value, copy=True) for value in carried)  # never the operands' memory
    while bool(np.asarray(_runner_outputs(cond_graph, (*state, *extra))[0])):
        state = tuple(_runner_outputs(body, (*state, *extra)))
    return state[0] if len(state) == 1 else state


def scan(combine: Graph, init: tuple[Any, ...], xs: tuple[Any, ...], extra: tuple[Any, ...]) -> Any:
    """`torch.ops.higher_order.scan`: the combine graph on the carries, the i-th slices along
    dim 0 of the scanned operands and the extra operands, for each i in order; the last carries,
    then the per-step outputs stacked along a new dim 0."""
    length = xs[0].shape[0]
    if any(x.shape[0] != length for x in xs):
        raise ExecutionError(
            f"scan over {combine.name}: the scanned operands' first dims differ "
            f"({', '.join(str(x.shape[0]) for x in xs)})"
        )
    carries = tuple(np.array(value, copy=True) for value in init)  # never the operands' memory
    steps = []
    for index in range(length):
        produced = _runner_outputs(combine, (*carries, *(x[index] for x in xs), *extra))
        carries = tuple(produced[: len(init)])
        steps.append(produced[len(init) :])
    # The verifier has checked that the per-step outputs are tensors (they are stacked).
    outputs = combine.outputs[len(init) :]
    stacked = (
        [np.stack(parts) for parts in zip(*steps)]
        if length
        else [np.empty((0, *o.value.shape), o.value.dtype.numpy) for o in outputs]
    )
    results = (*carries, *stacked)
    return results[0] if len(results) == 1 else results


def _runner_outputs(graph: Graph, operands: tuple[Any, ...]) -> list[Any]:
    if _runner.execute is None:
        raise ExecutionError("the executor is not installed: import aten2prims.executor")
    return _runner.execute(graph, list(operands))


# The kernel of each higher-order op (the definitions are in aten2prims.schema.higher_order).
KERNELS: dict[str, Callable[..., Any]] = {
    "higher_order.cond": cond,
    "higher_order.map_impl": map_impl,
    "higher_order.while_loop": while_loop,
    "higher_order.scan": scan,
}
