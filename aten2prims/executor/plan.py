"""Execution plans: a prims graph compiled once into a flat list of steps (`steps.py`).

Planning, in order:
1. the graph passes (`aten2prims.passes.optimize`: canonicalization, CSE, DCE) on a copy;
2. constant folding (`folding.py`): nodes computed from stored parameters, buffers and constants
   alone are run once, at plan time (a plan is therefore specific to the set of data-carrying
   inputs the caller overrides); then a product's constant per-channel multiplier (an eval
   batch norm's scale) is folded into its constant weight (`scaled_weights.py`);
3. fusion (`fusion.py`): groups of nodes run as one kernel call, found by the rules of
   `FUSION_RULES` in order (contractions, `contraction_fusion.py` on the engine of
   `contraction.py` or as sums of products, `multiply_accumulate.py`; gathers along independent
   axes, `gather.py`; constant padding, `filled_scatter.py`; clamps, `select.py`);
4. specialization (`specialize.py`): a kernel chosen for the node's static types where the
   generic one would re-derive at every call what the plan already knows; attention chains
   (`attention.py`: a batched product, the row-wise steps of its result, a second batched
   product) as one step run block by block; broadcasts read only by elementwise steps left to
   NumPy's broadcasting;
5. fewer passes (`fewer_passes.py`): a product with a reciprocal made one division (SiLU);
   then elementwise chains (`chains.py`): runs of elementwise steps each reading the one before it,
   run as one step block by block, the intermediates in a cache-sized scratch block;
6. the last use of every slot, so intermediates are released as soon as possible; then an
   elementwise step that only transforms a contraction's result (a clamp, a ReLU) joins the
   contraction's epilogue (`contraction_fusion.absorb_elementwise_steps`);
7. buffer reuse (`inplace.py`): elementwise results written into operands that die there;
8. parts (`threads.py`): large elementwise steps and reductions split into parts that a call's
   threads share; a ufunc step whose broadcast operand repeats along long runs of its result
   runs with NumPy's ufunc buffer shorter than two runs, so NumPy reads it in place
   (`unbuffered.py`); a ufunc step reading a permuted view into a row-major buffer iterates in
   the view's memory order (`operand_order.py`);
9. static memory planning (`arena.py`): every other result whose kernel takes `out=` written
   into a buffer of an arena kept between calls, buffers shared by results of disjoint lifetimes;
10. segments (`segments.py`): runs of steps computing their results row by row, each run one
   step whose row parts the threads share (the arena planned again, keeping a run's buffers
   alive through the whole run);
11. code generation (`codegen.py`): the steps as one straight-line Python function.

`reference.py` runs a graph node by node with none of this: the oracle the tests compare with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

import prims as prims_package  # noqa: F401 - registers every prim
from prims.registry import lookup

from ..errors import ExecutionError
from ..ir.building import collector_paused
from ..ir.graph import Graph, GraphInput, GraphOutput, Node
from ..ir.values import Value
from .arena import ArenaPool, plan_arena
from .attention import fuse_attention
from .chains import fuse_chains
from .codegen import compile_steps
from .contraction_fusion import ContractionFusion, absorb_elementwise_steps
from .control_flow import KERNELS as CONTROL_FLOW_KERNELS
from .fewer_passes import fold_reciprocals
from .filled_scatter import filled_scatter_rule
from .folding import fold_constants
from .fusion import FusedGroup, FusionRule, find_groups
from .gather import orthogonal_gather_rule
from .inplace import reuse_dying_operands
from .operand_order import iterate_in_operand_order
from .padded_products import fuse_zero_paddings
from .row_sums import row_sums
from .scaled_weights import fold_output_scales
from .segments import Segment, checked_steps, find_segments, segmented
from .select import bound_select_rule
from .sibling_products import merge_sibling_products
from .specialize import relax_broadcasts, specialized
from .steps import Slots, Step
from .threads import split_steps
from .unbuffered import unbuffer_broadcasts

# Attention chains (a batched product, row-wise steps, a second batched product) run as one
# blocked step (attention.py); tests switch it off to compare with the unfused steps.
FUSE_ATTENTION = True
# A zero padding read only by a depthwise product's windows is read from its source by the
# product (padded_products.py); tests switch it off to compare with the padded array's steps.
FUSE_PADDINGS = True
# A product with a reciprocal runs as one division (fewer_passes.py: not the reference's bits,
# at least as accurate); tests switch it off to compare the other stages with the reference.
FOLD_RECIPROCALS = True
# A ufunc step reading a permuted view iterates in the view's memory order (operand_order.py:
# the same bits); tests switch it off to compare.
ITERATE_IN_OPERAND_ORDER = True
# Products of one activation by different stored weights run as one product against the
# concatenated weights (sibling_products.py); tests and benchmarks switch it off to compare.
MERGE_SIBLING_PRODUCTS = True
# A product's constant per-channel multiplier (an eval batch norm's scale) is folded into its
# constant weight (scaled_weights.py: not the reference's bits); tests switch it off to compare.
FOLD_SCALES = True

# The fusion rules, in the order they are tried at each node (the first group found wins).
FUSION_RULES: Sequence[FusionRule] = (
    ContractionFusion(),
    orthogonal_gather_rule,
    filled_scatter_rule,
    bound_select_rule,
)


@attrs.define(slots=True)
class Plan:
    # The inputs and outputs of the graph the steps run (optimized and folded: its inputs include
    # the folded constants). The plan keeps no Graph object: plans are cached per graph, weakly.
    inputs: tuple[GraphInput, ...]
    outputs: tuple[GraphOutput, ...]
    slot_of: dict[Value, int]
    input_slots: dict[str, int]
    steps: list[Step]
    output_slots: tuple[int, ...]
    # Per output: whether it is an input's slot (given or stored data: returned as a copy).
    output_is_input: tuple[bool, ...]
    slot_count: int
    # Slot values every run starts from: folded constants and stored input data (not
    # overridden); None elsewhere.
    initial_values: list[Any]
    # The straight-line function running the steps (codegen.py); run(values, rng, arena).
    run: Callable[..., None]
    # The arena the steps write their results into (arena.py), one per concurrent call.
    arenas: ArenaPool
    random: bool = False
    # Bytes the plan keeps alive for its folded constants (not views of stored data).
    resident_bytes: int = 0
    # ids of the stored arrays (input data and folded constants) the plan starts from, and of
    # the arrays whose memory they view.
    stored_ids: frozenset[int] = frozenset()
    # Per output: it is a reshape or transpose (steps of "review" results) of a new array that
    # a step made for it alone (`_owned_outputs`), so a view that it is is handed over as it is.
    output_owned: tuple[bool, ...] = ()
    # The steps `execute(check=True)` runs one by one: `steps`, a segment's product made in its
    # parts' row ranges as the segment makes it (segments.checked_steps), so both agree.
    checked: list[Step] = attrs.Factory(list)


def node_step(node: Node, slots: Slots) -> Step:
    """A step that runs one prim node's kernel (specialized where specialize.py knows how), or a
    control-flow node's (its nested graphs run by the executor)."""
    if node.op in CONTROL_FLOW_KERNELS:
        return Step(
            (node,),
            CONTROL_FLOW_KERNELS[node.op],
            slots.arguments(node.args),
            tuple(slots.assign(result) for result in node.results),
            tuple(r.meta for r in node.results),
            result_kind="fresh",
        )
    if node.namespace != "prims":
        raise ExecutionError(f"{node.op} is not a prim; lower the graph before executing it")
    definition = lookup(node.op)
    if definition is None or definition.kernel is None:
        reason = definition.omitted_reason if definition is not None else "unknown prim"
        raise ExecutionError(f"{node.op} cannot be executed: {reason}")
    out_metas = tuple(r.meta for r in node.results)
    special = None if definition.random else specialized(node)
    result_kind = "view" if definition.view else "fresh"
    elementwise = False
    out_operands: tuple[int, ...] = ()
    takes_out = definition.out and not definition.random
    if special is not None:
        kernel, operands = special.kernel, special.operands
        result_kind, elementwise = special.result.value, special.elementwise
        takes_out, out_operands = special.takes_out, special.out_operands
    else:
        kernel = row_sums(node) or definition.kernel_for(node.args)
        operands = definition.bind(node.args, node.kwargs)
    arguments = slots.arguments(operands)
    out_slots = tuple(slots.assign(result) for result in node.results)
    return Step(
        (node,),
        kernel,
        arguments,
        out_slots,
        out_metas,
        random=definition.random,
        result_kind=result_kind,
        elementwise=elementwise,
        takes_out=takes_out,
        out_operands=out_operands,
    )


def build_plan(graph: Graph, overridden: frozenset[str] = frozenset()) -> Plan:
    """The plan of a prims graph for callers overriding the stored data of the inputs named in
    `overridden` (every other input with data is read from the graph)."""
    with collector_paused():
        return _build_plan(graph, overridden)


def _build_plan(graph: Graph, overridden: frozenset[str]) -> Plan:
    # Lazy: the passes package also holds the lowering, which loads every decomposition rule.
    from ..passes import optimize

    optimized = optimize(graph)
    folded, constants = fold_constants(optimized, overridden)
    resident_bytes = constants.resident_bytes
    if FOLD_SCALES:
        folded, grown = fold_output_scales(folded, overridden)
        resident_bytes += grown
    slots = Slots()
    input_slots = {
        graph_input.name: slots.assign(graph_input.value) for graph_input in folded.inputs
    }
    steps = _steps(folded, slots, find_groups(folded, FUSION_RULES, overridden))
    output_slots = tuple(slots[o.value] for o in folded.outputs)
    meta_of = {slot: value.meta for value, slot in slots.slot_of.items()}
    if FUSE_ATTENTION:
        steps = fuse_attention(steps, meta_of, output_slots)
    stored = {  # the data a plan may copy from (not overridden by callers)
        input_slots[graph_input.name]: graph_input.data
        for graph_input in folded.inputs
        if graph_input.data is not None and graph_input.name not in overridden
    }
    merged_bytes = 0
    if MERGE_SIBLING_PRODUCTS:
        steps, merged_bytes = merge_sibling_products(steps, stored)
    relax_broadcasts(steps, output_slots, meta_of)
    if FOLD_RECIPROCALS:
        steps = fold_reciprocals(steps, output_slots, meta_of)
    steps = fuse_chains(steps, output_slots, meta_of)
    _assign_last_uses(steps, output_slots)
    steps = absorb_elementwise_steps(steps, output_slots)
    if FUSE_PADDINGS:  # with its absorbed epilogue; the padding's source now dies later
        steps = fuse_zero_paddings(steps, output_slots)
        _assign_last_uses(steps, output_slots)
    reuse_dying_operands(steps, output_slots, meta_of, set(input_slots.values()))
    split_steps(steps, meta_of)
    unbuffer_broadcasts(steps, meta_of)
    if ITERATE_IN_OPERAND_ORDER:
        iterate_in_operand_order(steps, meta_of)
    layout = plan_arena(steps, output_slots, meta_of, set(input_slots.values()))
    segments = find_segments(steps, meta_of)
    if segments:  # their buffers live through their whole runs
        spans = [(segment.first, segment.last) for segment in segments]
        layout = plan_arena(steps, output_slots, meta_of, set(input_slots.values()), spans)
    run_steps = segmented(steps, segments)
    origin = _origins(steps, segments)
    initial: list[Any] = [None] * len(slots.slot_of)
    for graph_input in folded.inputs:
        if graph_input.data is not None and graph_input.name not in overridden:
            initial[input_slots[graph_input.name]] = graph_input.data
    return Plan(
        tuple(folded.inputs),
        tuple(folded.outputs),
        slots.slot_of,
        input_slots,
        steps,
        output_slots,
        tuple(slot in set(input_slots.values()) for slot in output_slots),
        len(slots.slot_of),
        initial,
        compile_steps(run_steps, origin),
        ArenaPool(layout),
        random=any(step.random for step in steps),
        resident_bytes=resident_bytes + merged_bytes,
        stored_ids=frozenset(
            id(array)
            for value in initial
            if value is not None
            for array in (value, getattr(value, "base", None))
            if array is not None
        ),
        checked=checked_steps(steps, segments),
        output_owned=_owned_outputs(steps, output_slots),
    )


def _owned_outputs(steps: list[Step], output_slots: tuple[int, ...]) -> tuple[bool, ...]:
    """Per output: whether its value is, through steps whose results are reshapes or transposes
    of their one operand ("review"), the result of one step that makes a new array (`fresh`,
    neither in the arena nor written into an operand; in a segment too, which then allocates
    it) that no other output reaches. Such an output's memory is the caller's alone: an output
    that is a view of it (upsampling's final split of its flat channels) needs no copy."""
    producer = {slot: step for step in steps for slot in step.out_slots}
    roots: list[int | None] = []
    for slot in output_slots:
        step = producer.get(slot)
        while step is not None and step.result_kind == "review" and len(step.reads()) == 1:
            slot = step.reads()[0]
            step = producer.get(slot)
        owned = (
            step is not None
            and step.result_kind == "fresh"
            and step.out_buffer is None
            and step.out_argument is None
        )
        roots.append(slot if owned else None)
    return tuple(root is not None and roots.count(root) == 1 for root in roots)


def _steps(graph: Graph, slots: Slots, groups: dict[int, FusedGroup]) -> list[Step]:
    """One step per fused group (at the group's last node) and per node outside every group."""
    claimed = {index for group in groups.values() for index in group.node_indices}
    steps: list[Step] = []
    for index, node in enumerate(graph.nodes):
        group = groups.get(index)
        if group is not None:
            steps.append(
                Step(
                    tuple(graph.nodes[i] for i in group.node_indices),
                    group.kernel,
                    slots.arguments(group.operands),
                    tuple(slots.assign(result) for result in node.results),
                    tuple(r.meta for r in node.results),
                    result_kind="fresh" if group.fresh_result else "view",
                    takes_out=group.takes_out,
                    elementwise=group.elementwise,
                    out_operands=group.out_operands,
                )
            )
        elif index not in claimed:
            steps.append(node_step(node, slots))
    return steps


def _assign_last_uses(steps: list[Step], output_slots: tuple[int, ...]) -> None:
    """Release every slot right after the step that reads it last (never graph outputs). Results
    nobody reads are released right after the step that makes them."""
    last_use: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.reads():
            last_use[slot] = index
        for slot in step.out_slots:
            last_use.setdefault(slot, index)
    keep = set(output_slots)
    frees: list[list[int]] = [[] for _ in steps]
    for slot, index in last_use.items():
        if slot not in keep:
            frees[index].append(slot)
    for step, free in zip(steps, frees):
        step.free_after = tuple(sorted(free))


def _origins(steps: list[Step], segments: list[Segment]) -> list[int]:
    """Per step of `segmented(steps, segments)`: the number of the step it stands for in
    `steps` (a segment's: its first member's)."""
    starts = {segment.first: segment for segment in segments}
    result: list[int] = []
    index = 0
    while index < len(steps):
        result.append(index)
        segment = starts.get(index)
        index = segment.last + 1 if segment is not None else index + 1
    return result
