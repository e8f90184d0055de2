"""`execute(graph, inputs)`: run a prims graph on NumPy.

Inputs are validated up front (names, shapes, dtypes); the plan is built once per graph and per
set of overridden stored inputs, and cached; each intermediate is released after its last use;
view prims stay zero-copy; caller arrays are never written; results are fresh, writable arrays.

A dynamic graph is specialized per binding of its symbols (cached, the least recently used
dropped beyond 64, and found again by the input shapes alone); a graph with data-dependent sizes runs in segments, each cut and each
specialization cached, so a call repeating the sizes and the data-dependent sizes of an earlier
one plans nothing. Nested graphs (the branches and bodies of control flow) run under the
calling `execute`'s memory budget and thread count.
"""

from __future__ import annotations

import contextvars
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..errors import DTypeError, ExecutionError, ShapeError
from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput, InputKind
from ..ir.symbolic import bare_symbol, evaluate, free_symbols
from ..ir.values import ScalarMeta, TensorMeta, Value
from ..limits import nbytes, over_budget
from ..passes.bind import bind_symbols, first_unbound, specialize, split_before
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from .control_flow import install_runner
from .plan import Plan, build_plan
from .steps import Step, describe_failure, resolve
from .threads import Parted, ReducedParted, default_threads, running_with


@attrs.define(slots=True)
class _Planned:
    """A graph's plans, by the names of the stored inputs the caller overrides."""

    fingerprint: tuple[int, ...]
    # The graph's lowering when it held aten nodes, else None: the graph itself is the key of a
    # weak dictionary and must not be held by its value.
    lowered: Graph | None
    stored: frozenset[str]  # names of the inputs with stored data
    by_name: dict[str, GraphInput]
    user_inputs: tuple[GraphInput, ...]
    required: tuple[str, ...]  # names of the inputs without stored data, in order
    plans: dict[frozenset[str], Plan] = attrs.Factory(dict)
    # Bytes of every input at its meta's size: checked before a plan is built (planning folds
    # constants computed from stored inputs, which may be broadcast views).
    input_bytes: int = 0
    # Per plan: input_bytes plus the most bytes its steps' fresh results hold at once.
    peaks: dict[frozenset[str], int] = attrs.Factory(dict)
    # A dynamic graph's static specializations, by the values of its backed symbols, the least
    # recently used first (dropped beyond _MAX_SPECIALIZATIONS).
    specialized: dict[tuple[int, ...], Graph] = attrs.Factory(dict)
    # The same with their own records and binding keys, by the inputs' shapes (and int inputs)
    # that bound them, ranges and checks passed: a repeated size finds its plans without
    # binding anything.
    by_shapes: dict[tuple[Any, ...], tuple[Graph, _Planned, tuple[int, ...]]] = attrs.Factory(dict)
    # A graph with data-dependent sizes: where it is cut, and its rest per binding.
    segments: _Segments | None = None


@attrs.define(slots=True)
class _Segments:
    """A graph with data-dependent sizes cut before the first node that uses one (`index`):
    `prefix` runs as a static graph (None when that node is the first), the node's symbols are
    bound from the data, and `rest` runs specialized to them (`bound`: per binding, the least
    recently used dropped first). `index` is the node count when no node uses the symbols but
    a scalar the graph computes is one (bound once the whole graph has run, for its range and
    checks). `index` None: no size uses the symbols and none is computed, `rest` is the graph
    without them."""

    index: int | None
    prefix: Graph | None
    rest: Graph
    bound: dict[tuple[tuple[str, int], ...], Graph] = attrs.Factory(dict)


@attrs.define(slots=True)
class _Statistics:
    plans_built: int = 0


@attrs.define(slots=True)
class _Seeds:
    """The seeds a seeded call hands to the graphs it runs apart from its own plan (the nested
    graphs of its control-flow steps, the segments of a data-dependent graph): the children of
    its `SeedSequence`, one per run, in the order the runs happen. So the whole call is
    reproducible from its seed, every run draws a stream of its own (each iteration of a map
    body, each branch taken), and none repeats the call's own stream (a child's spawn key
    differs from its parent's)."""

    seed: int | np.random.SeedSequence
    sequence: np.random.SeedSequence | None = None  # made at the first child

    def child(self) -> np.random.SeedSequence:
        if self.sequence is None:
            seed = self.seed
            self.sequence = (
                seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
            )
        (child,) = self.sequence.spawn(1)
        return child


_PLANNED: weakref.WeakKeyDictionary[Graph, _Planned] = weakref.WeakKeyDictionary()
# Input-shape keys a dynamic graph remembers (beyond them, each call binds its symbols anew).
_MAX_SHAPE_KEYS = 4096
# Specializations a dynamic graph keeps planned: each holds its plans and their arenas, so a
# server seeing ever new sizes would grow without bound; the least recently used are dropped.
_MAX_SPECIALIZATIONS = 64
# Bindings of data-dependent symbols a segment keeps specialized and planned (data-dependent
# sizes vary with the data: the least recently used ones are dropped, with their plans).
_MAX_DATA_DEPENDENT_BINDINGS = 64
# Guards _PLANNED and every _Planned.plans: threads executing one graph share its plans, and a
# plan is built once. Running a plan needs no lock (each call has its own slot list).
_PLANS_LOCK = threading.RLock()
_STATISTICS = _Statistics()
# The memory budget, thread count, `check` and seeds (None: unseeded) of the `execute` call
# running a plan on this thread (or task): the nested graphs its control-flow steps run take the
# same options and the next child seed.
_CALLER: contextvars.ContextVar[tuple[int | None, int | None, bool, _Seeds | None]] = (
    contextvars.ContextVar("aten2prims_caller", default=(None, None, False, None))
)


def plans_built() -> int:
    """How many plans this process has built (a call repeating the sizes, and the
    data-dependent sizes, of an earlier call of the same graph builds none)."""
    return _STATISTICS.plans_built


def fingerprint(graph: Graph) -> tuple[int, ...]:
    """Changes when the graph's node list, inputs, stored data or outputs are replaced."""
    return (
        id(graph.nodes),
        len(graph.nodes),
        *map(id, graph.nodes),
        len(graph.inputs),
        *(id(graph_input.data) for graph_input in graph.inputs),
        len(graph.outputs),
        *(id(graph_output.value) for graph_output in graph.outputs),
    )


def _planned(graph: Graph) -> tuple[_Planned, Graph]:
    """The graph's plans and the prims graph they run (the graph or its lowering)."""
    with _PLANS_LOCK:
        return _planned_locked(graph)


def _planned_locked(graph: Graph) -> tuple[_Planned, Graph]:
    print_ = fingerprint(graph)
    planned = _PLANNED.get(graph)
    if planned is None or planned.fingerprint != print_:
        lowered = None
        if any(node.namespace not in ("prims", HIGHER_ORDER) for node in graph.nodes):
            # Lazy: the lowering and its decomposition rules load only for graphs holding aten ops.
            from ..passes.lower import lower

            lowered = lower(graph)
        inputs = (lowered or graph).inputs
        planned = _Planned(
            print_,
            lowered,
            frozenset(gi.name for gi in inputs if gi.data is not None),
            {gi.name: gi for gi in inputs},
            tuple(gi for gi in inputs if gi.kind is InputKind.USER_INPUT),
            tuple(gi.name for gi in inputs if gi.data is None),
            input_bytes=0
            if (lowered or graph).symbols
            else sum(nbytes(gi.value.meta) for gi in inputs),
        )
        _PLANNED[graph] = planned
    return planned, planned.lowered or graph


def plan_for(graph: Graph, overridden: frozenset[str] = frozenset()) -> Plan:
    """The cached plan of a graph for callers overriding the stored data of the inputs named in
    `overridden` (rebuilt if the graph's nodes, inputs or outputs changed)."""
    planned, prims_graph = _planned(graph)
    with _PLANS_LOCK:
        return _plan_locked(planned, prims_graph, overridden)


def _plan_locked(planned: _Planned, prims_graph: Graph, overridden: frozenset[str]) -> Plan:
    plan = planned.plans.get(overridden)
    if plan is None:
        plan = planned.plans[overridden] = build_plan(prims_graph, overridden)
        _STATISTICS.plans_built += 1
    return plan


def execute(
    graph: Graph,
    inputs: Mapping[str, Any] | Sequence[Any] = (),
    *,
    seed: int | np.random.SeedSequence | None = None,
    check: bool = False,
    return_all_outputs: bool = False,
    max_memory: int | None = None,
    threads: int | None = None,
) -> list[np.ndarray]:
    """Run `graph` and return its user outputs (`OutputKind.is_user`: user outputs and a loss;
    all outputs with `return_all_outputs=True`) as NumPy arrays (Python scalars for scalar
    outputs).

    `inputs` maps input names to arrays, or lists the user inputs in order. Parameters, buffers
    and constants that carry data need not be given (a given one overrides the stored data).
    `seed` (an int or a `numpy.random.SeedSequence`) makes random prims reproducible, those of
    nested graphs included: each nested run takes the next child of the seed's sequence, so a
    map body draws anew at each iteration. `check=True` verifies every result's shape and dtype
    against its node's meta (debug mode). A graph that still holds aten nodes is lowered first.
    A graph whose inputs and live intermediates could exceed `max_memory` bytes (default: the
    machine's memory, `limits.default_memory_budget`) raises MemoryBudgetError before anything
    is allocated (plans fold constants, so the check precedes planning). `threads` (default:
    `threads.default_threads()`, the machine's cores or ATEN2PRIMS_NUM_THREADS) is how many
    threads run the parts of large steps (BLAS runs on one thread inside each); results are bit
    for bit the same for every thread count.
    """
    planned, prims_graph = _planned(graph)
    if prims_graph.symbols:
        prims_graph, planned = _specialized(planned, prims_graph, inputs)
        if prims_graph.symbols:
            return _run_data_dependent(
                prims_graph, inputs, seed, check, return_all_outputs, max_memory, threads
            )
    return _run(planned, prims_graph, inputs, seed, check, return_all_outputs, max_memory, threads)


def _run(
    planned: _Planned,
    prims_graph: Graph,
    inputs: Mapping[str, Any] | Sequence[Any],
    seed: int | np.random.SeedSequence | None,
    check: bool,
    return_all_outputs: bool,
    max_memory: int | None,
    threads: int | None,
) -> list[Any]:
    """`execute` of a static prims graph with its record."""
    over_budget(f"the inputs of graph {prims_graph.name}", planned.input_bytes, max_memory)
    given = _bind_inputs(prims_graph, planned, inputs)
    overridden = (
        frozenset(name for name, _ in given if name in planned.stored)
        if planned.stored
        else frozenset()
    )
    plan = _checked_plan(planned, prims_graph, overridden, max_memory)
    values = plan.initial_values.copy()
    for name, array in given:
        values[plan.input_slots[name]] = array
    rng = np.random.default_rng(seed) if plan.random else None
    count = default_threads() if threads is None else threads
    arena = plan.arenas.take()
    caller = _CALLER.set((max_memory, count, check, None if seed is None else _Seeds(seed)))
    try:
        # torch returns IEEE results (inf, nan, wrapped integers) silently; so do the kernels.
        with np.errstate(all="ignore"), running_with(count):
            if check:
                for step in plan.checked:
                    _run_step(step, values, rng)
            else:
                try:
                    plan.run(values, rng, arena)
                except ExecutionError:
                    raise
                except Exception as error:  # a kernel failed: name the node and where it came from
                    index = plan.run.failed_step(error.__traceback__)  # type: ignore[attr-defined]  # set by codegen
                    if index is None or index < 0:
                        raise
                    raise ExecutionError(describe_failure(plan.steps[index], error)) from error
    finally:
        _CALLER.reset(caller)
        plan.arenas.give(arena)
    results: list[Any] = []
    # Kernels may hand an input back unchanged (a contiguous clone): inputs, and the arrays
    # they view, are never results.
    inputs_by_id = {
        id(a) for _, array in given for a in (array, getattr(array, "base", None)) if a is not None
    }
    inputs_by_id |= plan.stored_ids
    for graph_output, slot, is_input, owned in zip(
        plan.outputs, plan.output_slots, plan.output_is_input, plan.output_owned
    ):
        if not return_all_outputs and not graph_output.kind.is_user:
            continue
        value = values[slot]
        base = getattr(value, "base", None)
        result = _fresh(
            value,
            is_input
            or id(value) in inputs_by_id
            or (base is not None and id(base) in inputs_by_id),
            owned,
        )
        if any(result is earlier for earlier in results if isinstance(earlier, np.ndarray)):
            result = result.copy()  # the same value returned twice: two independent arrays
        results.append(result)
    return results


def _specialized(
    planned: _Planned, graph: Graph, inputs: Mapping[str, Any] | Sequence[Any]
) -> tuple[Graph, _Planned]:
    """The static graph of a dynamic one for the sizes of these inputs (symbols bound from their
    shapes, ranges and run-time checks checked) and its record, cached per binding of the
    backed symbols and, for the fast path of a repeated call, per the input shapes that gave
    it: a repeated size costs a tuple of shapes and one lookup."""
    if isinstance(inputs, Mapping):
        seen: tuple[Any, ...] = tuple((name, _size_key(x)) for name, x in inputs.items())
    else:
        seen = tuple(map(_size_key, inputs))
    found = planned.by_shapes.get(seen)
    if found is not None:
        static, record, key = found
        with _PLANS_LOCK:
            if planned.specialized.get(key) is static:  # not dropped by another thread meanwhile
                del planned.specialized[key]  # put back as the most recent
                planned.specialized[key] = static
                return static, record
    if isinstance(inputs, Mapping):
        pairs = [(name, array) for name, array in inputs.items() if name in planned.by_name]
    else:
        pairs = [(gi.name, array) for gi, array in zip(planned.user_inputs, inputs)]
    shapes = {name: getattr(array, "shape", None) for name, array in pairs}
    # int inputs that are symbols (marked dynamic when exported) bind them by their value
    scalars = {name: array for name, array in pairs if type(array) is int}
    binding = bind_symbols(graph, {n: s for n, s in shapes.items() if s is not None}, scalars)
    key = tuple(binding[name] for name in sorted(binding))
    with _PLANS_LOCK:
        if key in planned.specialized:
            static = planned.specialized.pop(key)  # put back as the most recent
        else:
            static = specialize(graph, binding)
        planned.specialized[key] = static
        if len(planned.specialized) > _MAX_SPECIALIZATIONS:
            _drop_least_recent(planned)
        record = _planned_locked(static)[0]
        if len(planned.by_shapes) < _MAX_SHAPE_KEYS:
            planned.by_shapes[seen] = static, record, key
    return static, record


def _drop_least_recent(planned: _Planned) -> None:
    """Forget a dynamic graph's least recently used specialization, with the input shapes that
    found it (its plans and arenas go with the last reference)."""
    key = next(iter(planned.specialized))
    dropped = planned.specialized.pop(key)
    stale = [seen for seen, found in planned.by_shapes.items() if found[0] is dropped]
    for seen in stale:
        del planned.by_shapes[seen]


def _size_key(x: Any) -> Any:
    """What of an input decides a binding: an array's shape, an int's value (an int input may
    be a symbol); nothing of another scalar."""
    kind = type(x)
    if kind is np.ndarray:
        return x.shape
    return x if kind is int else getattr(x, "shape", None)


def _run_data_dependent(
    graph: Graph,
    inputs: Mapping[str, Any] | Sequence[Any],
    seed: int | np.random.SeedSequence | None,
    check: bool,
    return_all_outputs: bool,
    max_memory: int | None,
    threads: int | None,
) -> list[Any]:
    """Run a graph whose sizes still hold data-dependent (unbacked) symbols in segments: the
    nodes before the first one that uses such a symbol run as a static graph; that node's prim
    computes the symbol from its operands' data (`PrimDef.sizes_from_data`: nonzero's count),
    checked against the symbol's range; the rest, specialized to the value, runs on (a symbol
    read from a scalar is bound from it, also when no node uses it: its range and checks are
    checked). The cuts and the specializations are cached (`_Segments`), so their plans are
    too."""
    if isinstance(inputs, Mapping):
        feed = dict(inputs)
    else:
        feed = {gi.name: array for gi, array in zip(graph.user_inputs, inputs)}
    # Each segment draws from a child seed of its own: restarting one generator per segment
    # would repeat the same stream in each.
    seeds = None if seed is None else _Seeds(seed)
    while graph.symbols:
        segments = _segments(graph)
        if segments.index is None:  # only checks still name these symbols
            graph = segments.rest
            break
        if segments.prefix is not None:
            produced = execute(
                segments.prefix,
                feed,
                seed=None if seeds is None else seeds.child(),
                check=check,
                max_memory=max_memory,
                threads=threads,
            )
            feed.update((o.value.name, a) for o, a in zip(segments.prefix.outputs, produced))
        graph = segments.rest
        # Symbols that are scalars the prefix computed (`x.item()`), then sizes a prim computes
        # from its operands' data (nonzero's count).
        binding = {
            name: int(feed[declared.value])
            for name, declared in graph.symbols.items()
            if declared.value is not None and declared.value in feed
        }
        if binding:
            for name, value in binding.items():
                _check_data_dependent(
                    graph, name, value, f"the value of %{graph.symbols[name].value}"
                )
            graph = _bound_rest(segments, binding)
            continue
        if not graph.nodes:
            raise ShapeError(
                f"graph {graph.name}: symbol(s) {', '.join(sorted(graph.symbols))} are read "
                "from no scalar the graph computes"
            )
        node = graph.nodes[0]  # the rest starts with the node using the symbol
        definition = lookup(node.op)
        if definition is None or definition.sizes_from_data is None:
            raise ShapeError(
                f"graph {graph.name}: {node.op} (node {segments.index}) uses the data-dependent "
                f"size(s) {', '.join(sorted(free_symbols(node.kwargs) & graph.symbols.keys()) or graph.symbols)}"
                ", which no earlier node determines"
            )
        stored = {gi.name: gi.data for gi in graph.inputs if gi.data is not None}
        operands = [
            feed[v.name] if v.name in feed else stored[v.name]
            for v in node.args
            if type(v) is Value
        ]
        for name, value in definition.sizes_from_data(*operands).items():
            symbol_name = bare_symbol(node.kwargs.get(name))
            if symbol_name is None or symbol_name not in graph.symbols:
                continue
            what = f"the {name} of {node.op} computing %{node.results[0].name}"
            _check_data_dependent(graph, symbol_name, value, what)
            binding[symbol_name] = value
        if not binding:
            raise ShapeError(
                f"graph {graph.name}: {node.op} (node {segments.index}) binds no symbol"
            )
        graph = _bound_rest(segments, binding)
    return execute(
        graph,
        feed,
        seed=None if seeds is None else seeds.child(),
        check=check,
        return_all_outputs=return_all_outputs,
        max_memory=max_memory,
        threads=threads,
    )


def _segments(graph: Graph) -> _Segments:
    """The graph cut before its first node using a data-dependent size (cached with its
    record)."""
    planned, _ = _planned(graph)
    with _PLANS_LOCK:
        if planned.segments is not None:
            return planned.segments
        index = first_unbound(graph)
        computed = {r.name for node in graph.nodes for r in node.results}
        if index is None and any(s.value in computed for s in graph.symbols.values()):
            # No node uses these symbols, but a scalar the graph computes is one (`k =
            # n.item()` under `torch._check(k <= 5)` alone): its range and checks are checked
            # once the graph has run, as torch's program asserts them.
            index = len(graph.nodes)
        if index is None:
            rest = graph.with_body(list(graph.inputs), list(graph.nodes), list(graph.outputs))
            rest.checks = [c for c in graph.checks if not free_symbols(c) & graph.symbols.keys()]
            rest.symbols = {}
            planned.segments = _Segments(None, None, rest)
        else:
            prefix, rest = split_before(graph, index)
            planned.segments = _Segments(index, prefix if prefix.nodes else None, rest)
        return planned.segments


def _bound_rest(segments: _Segments, binding: dict[str, int]) -> Graph:
    """The rest of a cut graph specialized to the data-dependent sizes bound (checked)."""
    key = tuple(sorted(binding.items()))
    with _PLANS_LOCK:
        bound = segments.bound.pop(key, None)  # put back as the most recent
        if bound is None:
            bound = specialize(segments.rest, binding)
        segments.bound[key] = bound
        if len(segments.bound) > _MAX_DATA_DEPENDENT_BINDINGS:
            del segments.bound[next(iter(segments.bound))]
    return bound


def _check_data_dependent(graph: Graph, name: str, value: int, what: str) -> None:
    declared = graph.symbols[name]
    if not declared.lower <= value <= declared.upper:
        raise ShapeError(
            f"data-dependent symbol {name} = {value} ({what}) is outside its range "
            f"[{declared.lower}, {declared.upper}]"
        )
    for check in graph.checks:
        if free_symbols(check) == {name} and not evaluate(check, {name: value}):
            raise ShapeError(
                f"graph {graph.name} was lowered assuming {check}, which fails for "
                f"{name} = {value} ({what})"
            )


def check_memory_budget(
    graph: Graph, max_memory: int | None = None, overridden: frozenset[str] = frozenset()
) -> None:
    """Raise MemoryBudgetError, before anything is allocated, when running `graph` could take
    more than `max_memory` bytes (default: `limits.default_memory_budget()`): its inputs at their
    full size, then its plan's fresh results alive at once (views cost nothing). A dynamic
    graph's sizes are known only with its inputs: `execute` checks each binding's plan."""
    planned, prims_graph = _planned(graph)
    if prims_graph.symbols:
        return
    _checked_plan(planned, prims_graph, overridden, max_memory)


def _checked_plan(
    planned: _Planned, prims_graph: Graph, overridden: frozenset[str], max_memory: int | None
) -> Plan:
    over_budget(f"the inputs of graph {prims_graph.name}", planned.input_bytes, max_memory)
    with _PLANS_LOCK:
        plan = _plan_locked(planned, prims_graph, overridden)
        peak = planned.peaks.get(overridden)
        if peak is None:
            peak = planned.peaks[overridden] = planned.input_bytes + _steps_peak(plan)
    over_budget(f"running graph {prims_graph.name}", peak, max_memory)
    return plan


def _steps_peak(plan: Plan) -> int:
    """The most bytes the plan's fresh step results outside its arena hold at once, plus its
    folded constants and its arena."""
    held: dict[int, int] = {}
    live = peak = plan.resident_bytes + plan.arenas.layout.nbytes
    for step in plan.steps:
        if step.result_kind != "view" and step.out_buffer is None:
            for slot, meta in zip(step.out_slots, step.out_metas):
                held[slot] = nbytes(meta)
                live += held[slot]
        peak = max(peak, live)
        for slot in step.free_after:
            live -= held.pop(slot, 0)
    return peak


def _run_step(step: Step, values: list[Any], rng: np.random.Generator | None) -> None:
    """One step, checked (execute(check=True)): every result against its meta. The kernel runs
    whole (not in parts) and allocates its result where the plan gives it an arena buffer
    (an `out=` of the meta's dtype would hide a kernel computing another one)."""
    args = [resolve(argument, values) for argument in step.arguments]
    keywords: dict[str, Any] = {}
    if step.random:
        keywords["rng"] = rng
    if step.out_argument is not None:
        keywords["out"] = args[step.out_argument]
    kernel = step.kernel
    if isinstance(kernel, Parted | ReducedParted):
        kernel = kernel.kernel
    try:
        result = kernel(*args, **keywords)
    except ExecutionError:
        raise
    except Exception as error:  # a kernel failed: name the node and where it came from
        raise ExecutionError(describe_failure(step, error)) from error
    if len(step.out_slots) == 1:
        values[step.out_slots[0]] = _as_result(result, step.out_metas[0])
    else:
        for slot, item, meta in zip(step.out_slots, result, step.out_metas, strict=True):
            values[slot] = _as_result(item, meta)
    for slot, meta in zip(step.out_slots, step.out_metas):
        if step.relaxed_shape is not None and type(meta) is TensorMeta:
            meta = TensorMeta(step.relaxed_shape, meta.dtype)
        _check_result(step, values[slot], meta)
    for slot in step.free_after:
        values[slot] = None


def _as_result(result: Any, meta: Any) -> Any:
    if type(meta) is TensorMeta and type(result) is not np.ndarray:
        return np.asarray(result)
    return result


def _check_result(step: Step, result: Any, meta: Any) -> None:
    node = step.node
    if type(meta) is ScalarMeta:
        if type(result) is not meta.kind:
            raise ExecutionError(
                f"{node.op}: produced {type(result).__name__} {result!r}, meta says {meta}"
            )
        return
    if not isinstance(result, np.ndarray):
        raise ExecutionError(f"{node.op}: produced {type(result).__name__}, meta says {meta}")
    if result.shape != meta.shape or result.dtype != meta.dtype.numpy:
        try:
            produced = str(TensorMeta(result.shape, DType.from_numpy(result.dtype)))
        except ValueError:
            produced = f"{result.dtype}{list(result.shape)}"
        raise ExecutionError(f"{node.op}: produced {produced}, meta says {meta} [check=True]")


def _fresh(result: Any, is_input: bool, owned: bool = False) -> Any:
    """Results the caller owns: inputs (given or stored) and views (of inputs, of each other,
    read-only broadcasts, folded constants) are copied, except views of a new array made for
    this output alone (`owned`: `Plan.output_owned`)."""
    if not isinstance(result, np.ndarray):
        return result
    if is_input or (result.base is not None and not owned) or not result.flags.writeable:
        return result.copy()
    return result


def _bind_inputs(
    graph: Graph, planned: _Planned, inputs: Mapping[str, Any] | Sequence[Any]
) -> list[tuple[str, Any]]:
    """The given inputs, validated, as (name, array); every input without stored data must be
    given."""
    if isinstance(inputs, Mapping):
        by_name = planned.by_name
        unknown = [name for name in inputs if name not in by_name]
        if unknown:
            raise ShapeError(
                f"graph {graph.name} has no input(s) {', '.join(map(repr, unknown))}; "
                f"its inputs are {', '.join(repr(n) for n in by_name)}"
            )
        pairs = [(by_name[name], array) for name, array in inputs.items()]
    else:
        user_inputs = planned.user_inputs
        inputs = list(inputs)
        if len(inputs) != len(user_inputs):
            raise ShapeError(
                f"graph {graph.name} takes {len(user_inputs)} user input(s), got {len(inputs)}"
            )
        pairs = list(zip(user_inputs, inputs))
    if planned.required:
        given_names = {graph_input.name for graph_input, _ in pairs}
        missing = [name for name in planned.required if name not in given_names]
        if missing:
            raise ShapeError(f"graph {graph.name} is missing input(s): {', '.join(missing)}")
    return [
        (graph_input.name, _validated(graph, graph_input, array)) for graph_input, array in pairs
    ]


def _validated(graph: Graph, graph_input: GraphInput, array: Any) -> Any:
    meta = graph_input.value.meta
    if type(meta) is ScalarMeta:
        if type(array) is not meta.kind:
            raise DTypeError(
                f"{_what(graph, graph_input)} must be a Python {meta}, got {type(array).__name__}"
            )
        return array
    assert type(meta) is TensorMeta
    if type(array) is not np.ndarray and not isinstance(array, np.ndarray):
        if isinstance(array, np.generic):
            array = np.asarray(array)
        else:
            raise DTypeError(
                f"{_what(graph, graph_input)} must be a NumPy array of {meta}, got {type(array).__name__}"
            )
    if array.dtype != meta.dtype.numpy:
        raise DTypeError(
            f"{_what(graph, graph_input)} must have dtype {meta.dtype.short} ({meta.dtype.numpy}), got {array.dtype}"
        )
    if array.shape != meta.shape:
        raise ShapeError(
            f"{_what(graph, graph_input)} must have shape {list(meta.shape)}, got {list(array.shape)}"
        )
    return array


def _what(graph: Graph, graph_input: GraphInput) -> str:
    return f"input %{graph_input.name} of graph {graph.name}"


def _run_nested(graph: Graph, operands: list[Any]) -> list[Any]:
    """A branch or body of a control-flow step: run under the memory budget, thread count and
    `check` of the `execute` call running that step, with its next child seed when it is
    seeded (unseeded otherwise)."""
    max_memory, threads, check, seeds = _CALLER.get()
    return execute(
        graph,
        operands,
        seed=None if seeds is None else seeds.child(),
        check=check,
        max_memory=max_memory,
        threads=threads,
    )


install_runner(_run_nested)

__all__ = ["InputKind", "execute", "plan_for", "plans_built"]
