"""`execute(graph, inputs)`: run a prims graph on NumPy (DESIGN §7).

Inputs are validated up front (names, shapes, dtypes); the plan is built once per graph and
cached; each intermediate is released after its last use; view prims stay zero-copy; caller
arrays are never written; results are fresh, writable arrays.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DTypeError, ExecutionError, ShapeError
from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput, InputKind
from ..ir.printer import format_provenance
from ..ir.values import ScalarMeta, TensorMeta
from .plan import Plan, Step, build_plan, fingerprint, resolve_structure

_PLANS: weakref.WeakKeyDictionary[Graph, Plan] = weakref.WeakKeyDictionary()


def plan_for(graph: Graph) -> Plan:
    """The cached plan of a graph (rebuilt if the graph's node list changed)."""
    plan = _PLANS.get(graph)
    if plan is None or plan.graph_fingerprint != fingerprint(graph):
        plan = build_plan(graph)
        _PLANS[graph] = plan
    return plan


def execute(
    graph: Graph,
    inputs: Mapping[str, Any] | Sequence[Any] = (),
    *,
    seed: int | None = None,
    check: bool = False,
    return_all_outputs: bool = False,
) -> list[np.ndarray]:
    """Run `graph` and return its user outputs (all outputs with `return_all_outputs=True`) as
    NumPy arrays (Python scalars for scalar outputs).

    `inputs` maps input names to arrays, or lists the user inputs in order. Parameters, buffers
    and constants that carry data need not be given (a given one overrides the stored data).
    `seed` makes random prims reproducible. `check=True` verifies every result's shape and dtype
    against its node's meta (debug mode). A graph that still holds aten nodes is lowered first.
    """
    if any(node.namespace != "prims" for node in graph.nodes):
        from ..passes.lower import lower

        graph = lower(graph)
    plan = plan_for(graph)
    values: list[Any] = [None] * plan.slot_count
    for graph_input, array in _bind_inputs(graph, inputs):
        values[plan.input_slots[graph_input.name]] = array
    rng = np.random.default_rng(seed)
    for step in plan.steps:
        _run_step(step, values, rng, check)
    outputs = graph.outputs if return_all_outputs else graph.user_outputs
    output_slot = {o.value: plan.slot_of[o.value] for o in graph.outputs}
    caller_arrays = [values[plan.input_slots[i.name]] for i in graph.inputs]
    results: list[Any] = []
    for graph_output in outputs:
        result = _fresh(values[output_slot[graph_output.value]], caller_arrays)
        if any(result is earlier for earlier in results if isinstance(earlier, np.ndarray)):
            result = result.copy()  # the same value returned twice: two independent arrays
        results.append(result)
    return results


def _run_step(step: Step, values: list[Any], rng: np.random.Generator, check: bool) -> None:
    args = step.template.copy()
    for position, slot in step.fetch:
        args[position] = values[slot]
    for position, structure in step.fetch_nested:
        args[position] = resolve_structure(structure, values)
    try:
        result = step.kernel(*args, rng=rng) if step.random else step.kernel(*args)
    except ExecutionError:
        raise
    except Exception as error:  # a kernel failed: name the node and where it came from
        raise ExecutionError(_describe_failure(step, error)) from error
    if len(step.out_slots) == 1:
        values[step.out_slots[0]] = _as_result(result, step.out_metas[0])
    else:
        for slot, item, meta in zip(step.out_slots, result, step.out_metas, strict=True):
            values[slot] = _as_result(item, meta)
    if check:
        for slot, meta in zip(step.out_slots, step.out_metas):
            _check_result(step, values[slot], meta)
    for slot in step.free_after:
        values[slot] = None


def _as_result(result: Any, meta: Any) -> Any:
    if type(meta) is TensorMeta and type(result) is not np.ndarray:
        return np.asarray(result)
    return result


def _describe_failure(step: Step, error: Exception) -> str:
    node = step.node
    names = ", ".join(f"%{r.name}" for r in node.results) or "(no results)"
    where = format_provenance(node.provenance).removeprefix("# ")
    fused = f" (fused with {len(step.nodes) - 1} other node(s))" if len(step.nodes) > 1 else ""
    text = f"{node.op} computing {names}{fused} failed: {type(error).__name__}: {error}"
    return f"{text} [from {where}]" if where else text


def _check_result(step: Step, result: Any, meta: Any) -> None:
    node = step.node
    if type(meta) is ScalarMeta:
        if type(result) is not meta.kind:
            raise ExecutionError(f"{node.op}: produced {type(result).__name__} {result!r}, meta says {meta}")
        return
    if not isinstance(result, np.ndarray):
        raise ExecutionError(f"{node.op}: produced {type(result).__name__}, meta says {meta}")
    if result.shape != meta.shape or result.dtype != meta.dtype.numpy:
        try:
            produced = str(TensorMeta(result.shape, DType.from_numpy(result.dtype)))
        except ValueError:
            produced = f"{result.dtype}{list(result.shape)}"
        raise ExecutionError(f"{node.op}: produced {produced}, meta says {meta} [check=True]")


def _fresh(result: Any, caller_arrays: list[Any]) -> Any:
    """Results the caller owns: views (of inputs, of each other, read-only broadcasts) are copied."""
    if not isinstance(result, np.ndarray):
        return result
    if result.base is not None or not result.flags.writeable or any(result is a for a in caller_arrays):
        return result.copy()
    return result


def _bind_inputs(graph: Graph, inputs: Mapping[str, Any] | Sequence[Any]) -> list[tuple[GraphInput, Any]]:
    by_name = {graph_input.name: graph_input for graph_input in graph.inputs}
    if isinstance(inputs, Mapping):
        unknown = [name for name in inputs if name not in by_name]
        if unknown:
            raise ShapeError(
                f"graph {graph.name} has no input(s) {', '.join(map(repr, unknown))}; "
                f"its inputs are {', '.join(repr(n) for n in by_name)}"
            )
        given = dict(inputs)
    else:
        user_inputs = graph.user_inputs
        inputs = list(inputs)
        if len(inputs) != len(user_inputs):
            raise ShapeError(f"graph {graph.name} takes {len(user_inputs)} user input(s), got {len(inputs)}")
        given = {i.name: array for i, array in zip(user_inputs, inputs)}
    bound: list[tuple[GraphInput, Any]] = []
    missing: list[str] = []
    for graph_input in graph.inputs:
        if graph_input.name in given:
            bound.append((graph_input, _validated(graph, graph_input, given[graph_input.name])))
        elif graph_input.data is not None:
            bound.append((graph_input, graph_input.data))
        else:
            missing.append(graph_input.name)
    if missing:
        raise ShapeError(f"graph {graph.name} is missing input(s): {', '.join(missing)}")
    return bound


def _validated(graph: Graph, graph_input: GraphInput, array: Any) -> Any:
    meta = graph_input.value.meta
    what = f"input %{graph_input.name} of graph {graph.name}"
    if type(meta) is ScalarMeta:
        if type(array) is not meta.kind:
            raise DTypeError(f"{what} must be a Python {meta}, got {type(array).__name__}")
        return array
    if not isinstance(array, np.ndarray):
        if isinstance(array, np.generic):
            array = np.asarray(array)
        else:
            raise DTypeError(f"{what} must be a NumPy array of {meta}, got {type(array).__name__}")
    if array.dtype != meta.dtype.numpy:
        raise DTypeError(f"{what} must have dtype {meta.dtype.short} ({meta.dtype.numpy}), got {array.dtype}")
    if array.shape != meta.shape:
        raise ShapeError(f"{what} must have shape {list(meta.shape)}, got {list(array.shape)}")
    return array


__all__ = ["execute", "plan_for", "InputKind"]
