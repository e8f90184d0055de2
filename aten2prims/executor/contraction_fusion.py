"""The contraction fusion: `sum(mul(A, B), dims)` whose product is used by nothing else runs as
one call of the contraction engine (`contraction.py`: BLAS-backed matrix products), so the joint
product is never materialized.

The pattern is the one every contraction lowers to, whoever wrote the graph:

    A = broadcast_in_dim(a, joint, dims_a)      # optional, fused when only the mul reads it
    B = broadcast_in_dim(b, joint, dims_b)      # optional, likewise
    P = mul(A, B)                               # read only by the sum
    S = sum(P, reduced)                         # the anchor

Every joint dimension becomes a label of the engine; an operand's dims carry the joint dims they
are broadcast to (size-1 dims index nothing).

An epilogue may follow the sum in the same group: reshapes of the result and in-place add/mul
with a same-shape or 0-dim tensor or a number (a bias, a scale). It runs on each finished output
chunk while that is in cache, and the group returns one array of its own, never a view.

Not fused (the nodes run as they are): float16/bfloat16 products (prims.mul rounds each product
to the narrow type, which BLAS cannot reproduce; decompositions convert to float32 first), sums
with an `output_dtype` other than the product's, sums that reduce nothing, and products with
number or 0-dim operands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from prims import vector_math
from prims.common import number_as
from prims.registry import lookup

from ..ir.dtypes import DType
from ..ir.values import Value
from .contraction import (
    DEFAULT_TUNING,
    ContractionRecipe,
    ContractionTuning,
    Epilogue,
    batch_labels,
    plan_contraction,
)
from .direct_kernels import makes_short_calls
from .fusion import FusedGroup, FusionContext
from .multiply_accumulate import MultiplyAccumulateRecipe, ZeroPadded, plan_multiply_accumulate
from .steps import SlotRef, Step
from .threads import elementwise_in_parts, sharing

if TYPE_CHECKING:  # stacked_copies.py runs the products: it imports this module's neighbours
    from .stacked_copies import StackedCopies

# Reshapes (prims registered with `reshape=True`: the contiguous result of the contraction in
# another shape, row-major order kept), and elementwise prims applied in place on it, may follow
# the sum in the fused group (an epilogue: a convolution's or a linear layer's bias, addmm's
# alpha). The group then ends at the last of them (its step runs there) and its kernel returns
# one fresh array, never a view.
_IN_PLACE: dict[str, np.ufunc] = {"prims.add": np.add, "prims.mul": np.multiply}


def _is_reshape(op: str) -> bool:
    definition = lookup(op)
    return definition is not None and definition.reshape


# A product whose result's rows are its matrix rows (a linear layer's, not a convolution's
# images) joins a segment (segments.py: its rows in up to 4 parts) only with at least this many
# rows: each part's product is a shorter one, and OpenBLAS's products lose speed below a few
# hundred rows (256x1024 @ 1024x4096: whole 11.3 ms, in 4 parts of 64 rows 16.3, 2 of 128
# 13.6, in 4 parts of 1024 columns 11.2; one thread).
ROW_SPLIT_MIN_ROWS = 1024


@attrs.frozen
class _OperandSpec:
    """A mul operand as the kernel receives it: the array is reshaped to `shape` (its size-1
    dims dropped), whose dims carry `labels` (joint dims)."""

    shape: tuple[int, ...]
    labels: tuple[int, ...]


# Stands for the contraction's result among an absorbed step's arguments (`_Epilogue.arguments`).
RESULT = object()


@attrs.frozen
class _Epilogue:
    """One step after the sum: a reshape to `shape` (`ufunc` and `function` None),
    `ufunc(result, other)` in place, `other` being the kernel's extra operand number `operand`
    or the number `number`, or an absorbed elementwise step (`absorb_elementwise_steps`):
    `function(*arguments, out=result)`, RESULT in `arguments` standing for the result."""

    shape: tuple[int, ...]
    ufunc: np.ufunc | None = None
    operand: int | None = None
    number: Any = None
    function: Callable[..., Any] | None = None
    arguments: tuple[Any, ...] = ()


@attrs.frozen
class ContractionKernel:
    """The fused kernel of one broadcast/mul/sum group and its epilogue: the engine's contraction
    of the mul's operands into a fresh array of the group's result shape, then the epilogue in
    place."""

    operands: tuple[_OperandSpec, _OperandSpec]
    out_labels: tuple[int, ...]
    sizes: tuple[int, ...]
    epilogue: tuple[_Epilogue, ...] = ()
    tuning: ContractionTuning = DEFAULT_TUNING
    # The calls planned so far, by operand layout (strides, dtype): filled by the calls themselves.
    _calls: dict[tuple[Any, ...], PlannedCall] = attrs.field(factory=dict, eq=False, repr=False)

    def __call__(
        self, a: np.ndarray, b: np.ndarray, *others: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        return self.planned_call(a, b)(a, b, others, out)

    def planned_call(self, a: np.ndarray, b: np.ndarray) -> PlannedCall:
        """The call planned for operands of a's and b's layout (planned now if new)."""
        key = (a.strides, b.strides, a.dtype)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = PlannedCall(self, a, b)
        return call

    def recipes(self) -> list[ContractionRecipe | MultiplyAccumulateRecipe]:
        """The recipes planned by the calls so far (one per operand layout)."""
        return [call.recipe for call in self._calls.values()]

    def row_operands(self, count: int) -> tuple[bool, ...] | None:
        """Per operand of a call with `count` operands (a, b, then the epilogue's): whether
        the result's rows (its dim 0) are computed from its same rows (the epilogue's operands
        and one of a and b: a convolution's images, a linear layer's rows) or it is read whole
        (the weight); None when the result's rows are not computed so. `for_rows` then gives
        the kernel of a slice of the rows (segments.py)."""
        which = self._row_operand()
        if which is None:
            return None
        return (which == 0, which == 1) + (True,) * (count - 2)

    def _row_operand(self) -> int | None:
        if not self.out_labels:
            return None
        label = self.out_labels[0]
        rows = self.sizes[label]
        if any(step.shape[:1] != (rows,) for step in self.epilogue):
            return None
        carriers = [i for i, spec in enumerate(self.operands) if label in spec.labels]
        if len(carriers) != 1 or self.operands[carriers[0]].labels[0] != label:
            return None
        a, b = self.operands
        if rows < ROW_SPLIT_MIN_ROWS and label not in batch_labels(
            self.out_labels, a.labels, b.labels, self.sizes, self.tuning
        ):
            return None  # too few matrix rows to share (a convolution's images are a batch)
        return carriers[0]

    def for_rows(self, count: int) -> ContractionKernel:
        """This kernel for `count` rows (`row_operands` is not None): run in a segment's
        part, it makes its product whole, in no parts of its own (the segment's parts are the
        threads' share)."""
        which = self._row_operand()
        assert which is not None  # the caller checked
        label = self.out_labels[0]
        sizes = list(self.sizes)
        sizes[label] = count
        operands = list(self.operands)
        operands[which] = attrs.evolve(operands[which], shape=(count, *operands[which].shape[1:]))
        return ContractionKernel(
            (operands[0], operands[1]),
            self.out_labels,
            tuple(sizes),
            tuple(attrs.evolve(step, shape=(count, *step.shape[1:])) for step in self.epilogue),
            attrs.evolve(self.tuning, max_parts=1, shifted_min_tasks=1),
        )


def matrix_product(rows: int, contracted: int, columns: int, add: bool) -> ContractionKernel:
    """The kernel of a [rows, contracted] @ [contracted, columns] product, with `add`, plus a
    third operand of the result's shape (a broadcast bias) added in place."""
    epilogue = (_Epilogue((rows, columns), ufunc=np.add, operand=0),) if add else ()
    return ContractionKernel(
        (_OperandSpec((rows, contracted), (0, 1)), _OperandSpec((contracted, columns), (1, 2))),
        (0, 2),
        (rows, contracted, columns),
        epilogue,
    )


class PlannedCall:
    """A ContractionKernel call on operands of one layout: the recipe run into a fresh result
    (a sum of elementwise products where `multiply_accumulate.py` takes the contraction, else
    the matrix engine's), then the epilogue: on each output chunk when the recipe is chunked,
    on each part of a product made in parts (in the part's own task), else once on the whole
    result."""

    __slots__ = (
        "a_shape",
        "absorbed",
        "b_shape",
        "deferred_from",
        "out_shape",
        "recipe",
        "result_shape",
        "steps",
    )

    def __init__(self, kernel: ContractionKernel, a: np.ndarray, b: np.ndarray) -> None:
        (sa, sb) = kernel.operands
        self.a_shape = sa.shape
        self.b_shape = sb.shape
        self.out_shape = tuple(kernel.sizes[label] for label in kernel.out_labels)
        self.result_shape = kernel.epilogue[-1].shape if kernel.epilogue else self.out_shape
        dtype = DType.from_numpy(a.dtype)
        # (kernel, extra operand index or None, the number (of the result's dtype) when it is
        # None) for a ufunc with an operand; (function, None, its arguments) for an absorbed
        # step (`absorbed` says which).
        steps: list[tuple[Callable[..., Any], int | None, Any]] = []
        absorbed: list[bool] = []
        for step in kernel.epilogue:
            if step.function is not None:
                steps.append((step.function, None, step.arguments))
                absorbed.append(True)
            elif step.ufunc is not None:
                number = number_as(step.number, dtype) if step.operand is None else None
                steps.append((step.ufunc, step.operand, number))
                absorbed.append(False)
        self.steps = tuple(steps)
        self.absorbed = tuple(absorbed)
        # From the first absorbed step making many short NumPy calls (GELU's erf chain) on,
        # the epilogue runs on the whole result after the product when one thread runs the
        # call (its own step's speed), and on each chunk in long calls when threads share it.
        self.deferred_from = next(
            (
                number
                for number, ((kernel, _, _), absorbed_step) in enumerate(zip(steps, absorbed))
                if absorbed_step and makes_short_calls(kernel)
            ),
            None,
        )
        products = plan_multiply_accumulate(
            a.reshape(sa.shape),
            sa.labels,
            b.reshape(sb.shape),
            sb.labels,
            kernel.out_labels,
            kernel.sizes,
        )
        self.recipe: ContractionRecipe | MultiplyAccumulateRecipe = (
            products
            if products is not None
            else plan_contraction(
                a.reshape(sa.shape),
                sa.labels,
                b.reshape(sb.shape),
                sb.labels,
                kernel.out_labels,
                kernel.sizes,
                with_epilogue=bool(self.steps),
                tuning=kernel.tuning,
            )
        )

    def __call__(
        self,
        a: np.ndarray,
        b: np.ndarray,
        others: tuple[np.ndarray, ...],
        result: np.ndarray | None = None,
    ) -> np.ndarray:
        if result is None:
            result = np.empty(self.result_shape, a.dtype)
        # The epilogue runs on the contraction's own shape: reshapes keep row-major order, so
        # each in-place operand is reshaped (a view, for broadcast biases too) to that shape.
        out = result.reshape(self.out_shape)
        a = a.reshape(self.a_shape)
        b = b.reshape(self.b_shape)
        if isinstance(self.recipe, MultiplyAccumulateRecipe):
            epilogue, rest = self._chunk_epilogue(out, others) if self.steps else (None, None)
            self.recipe.run_into(a, b, out, epilogue)
            if rest is not None:
                rest(())
            return result
        if self.steps and (self.recipe.levels or self.recipe.part_indices is not None):
            # on each chunk, or each part of a product made in parts, as it is finished
            epilogue, rest = self._chunk_epilogue(out, others)
            self.recipe.run(a, b, out, epilogue)
            if rest is not None:
                rest(())
            return result
        self.recipe.run(a, b, out)
        epilogue, rest = self._chunk_epilogue(out, others)
        epilogue(())  # in parts: the call's threads share them
        if rest is not None:
            rest(())
        return result

    def run_zero_padded(
        self,
        source: np.ndarray,
        padded: ZeroPadded,
        other: np.ndarray,
        others: tuple[np.ndarray, ...],
        result: np.ndarray | None = None,
    ) -> np.ndarray:
        """The call with its full operand the window of a zero-padded `source` that the recipe
        reads from `source` itself (`MultiplyAccumulateRecipe.reads_zero_padded`)."""
        recipe = self.recipe
        assert isinstance(recipe, MultiplyAccumulateRecipe)
        return self._from_source(
            source.dtype,
            other,
            recipe.full_is_a,
            others,
            result,
            lambda other, out, epilogue: recipe.run_zero_padded(
                source, padded, other, out, epilogue
            ),
        )

    def run_stacked(
        self,
        stacked: StackedCopies,
        source: np.ndarray,
        other: np.ndarray,
        windows_is_a: bool,
        others: tuple[np.ndarray, ...],
        result: np.ndarray | None = None,
    ) -> np.ndarray:
        """The call with its windows operand (a if `windows_is_a`, else b) those of a
        zero-padded `source`, read from `source` itself by stacked copies (stacked_copies.py)."""
        recipe = self.recipe
        assert isinstance(recipe, ContractionRecipe)
        return self._from_source(
            source.dtype,
            other,
            windows_is_a,
            others,
            result,
            lambda other, out, epilogue: stacked.run(recipe, source, other, out, epilogue),
        )

    def _from_source(
        self,
        dtype: np.dtype[Any],
        other: np.ndarray,
        other_is_b: bool,
        others: tuple[np.ndarray, ...],
        result: np.ndarray | None,
        run: Callable[[np.ndarray, np.ndarray, Epilogue | None], None],
    ) -> np.ndarray:
        """A call whose windows operand is read from its padding's source by `run(other, out,
        epilogue)`: the result (new unless given), the other operand in its operand shape, and
        the epilogue run on the chunks `run` finishes."""
        if result is None:
            result = np.empty(self.result_shape, dtype)
        out = result.reshape(self.out_shape)
        other = other.reshape(self.b_shape if other_is_b else self.a_shape)
        epilogue, rest = self._chunk_epilogue(out, others) if self.steps else (None, None)
        run(other, out, epilogue)
        if rest is not None:
            rest(())
        return result

    def _chunk_epilogue(
        self, out: np.ndarray, others: tuple[np.ndarray, ...]
    ) -> tuple[Callable[[tuple[slice, ...]], None], Callable[[tuple[slice, ...]], None] | None]:
        """The epilogue of `out`: `epilogue(index)` runs the steps on out[index] in place,
        `epilogue(())` on the whole of it, each step in parts; and the rest of the steps (None
        when there is none), to run on the whole result after the product (`deferred_from`:
        at one thread)."""
        steps: list[tuple[Callable[..., Any], Any, bool]] = []
        for (kernel, operand, extra), absorbed in zip(self.steps, self.absorbed):
            if absorbed:
                steps.append((kernel, extra, True))
                continue
            other = extra if operand is None else others[operand]
            if other.ndim:
                other = other.reshape(self.out_shape)
            steps.append((kernel, other, False))
        shared = sharing()  # asked here, on the calling thread: in a part it is False
        cut = len(steps) if shared or self.deferred_from is None else self.deferred_from

        def running(
            steps: list[tuple[Callable[..., Any], Any, bool]],
        ) -> Callable[[tuple[slice, ...]], None]:
            # No errstate here: a call runs under execute's errstate(all="ignore"), which the
            # workers running its parts take over (threads.py); entering one per chunk cost
            # 1.5 us of Python, holding the GIL the call's other threads wait for.
            def epilogue(index: tuple[slice, ...]) -> None:
                part = out[index] if index else out
                for kernel, other, absorbed in steps:
                    if absorbed:
                        operands = [part if a is RESULT else a for a in other]
                    else:
                        operands = [part, other[index] if index and other.ndim else other]
                    if not index:  # the whole output at once: in parts the threads share
                        elementwise_in_parts(kernel, *operands, out=part)
                    elif shared and makes_short_calls(kernel):
                        with vector_math.long_calls():  # fewer GIL hand-offs between threads
                            kernel(*operands, out=part)
                    else:
                        kernel(*operands, out=part)

            return epilogue

        return running(steps[:cut]), (running(steps[cut:]) if cut < len(steps) else None)


def _operand_spec(source: Value, joint: tuple[int, ...], dims: Sequence[int]) -> _OperandSpec:
    """`source` seen in the joint shape, its dim i at joint dim dims[i]; size-1 dims index nothing."""
    kept = [(size, joint_dim) for size, joint_dim in zip(source.shape, dims) if size != 1]
    return _OperandSpec(tuple(size for size, _ in kept), tuple(joint_dim for _, joint_dim in kept))


@attrs.frozen
class ContractionFusion:
    """The fusion rule: the broadcast/mul/sum group anchored at a `prims.sum` node, with its
    epilogue, as one ContractionKernel with this tuning of the engine."""

    tuning: ContractionTuning = DEFAULT_TUNING

    def __call__(self, context: FusionContext, index: int) -> FusedGroup | None:
        if context.node(index).op != "prims.sum":
            return None
        return _group(context, index, _chain_after(context, index), self.tuning)


def _group(
    context: FusionContext, sum_index: int, chain: list[int], tuning: ContractionTuning
) -> FusedGroup | None:
    """The broadcast/mul/sum group anchored at node `sum_index`, with the epilogue `chain`."""
    node = context.node(sum_index)
    if len(node.args) != 1:
        return None
    found = context.defining_node(node.args[0])
    if found is None or found[1].op != "prims.mul":
        return None
    mul_index, mul = found
    product = mul.results[0]
    joint = product.shape
    if product.dtype.is_low_precision or node.kwargs.get("output_dtype") not in (
        None,
        product.dtype,
    ):
        return None
    dims = node.kwargs.get("dims")
    reduced = set(range(len(joint))) if dims is None else {d for d in dims if d < len(joint)}
    if not reduced:
        return None
    members = {mul_index, sum_index}
    if not context.internal(mul_index, members):
        return None
    sources: list[Value] = []
    specs: list[_OperandSpec] = []
    for operand in mul.args:
        if type(operand) is not Value or not operand.is_tensor or operand.ndim != len(joint):
            return None
        source, spec = operand, _operand_spec(operand, joint, range(len(joint)))
        producer = context.defining_node(operand)
        if producer is not None and producer[1].op == "prims.broadcast_in_dim":
            broadcast_index, broadcast = producer
            inner = broadcast.args[0]
            if type(inner) is Value and context.internal(
                broadcast_index, members | {broadcast_index}
            ):
                members.add(broadcast_index)
                source = inner
                spec = _operand_spec(inner, joint, broadcast.kwargs["broadcast_dimensions"])
        sources.append(source)
        specs.append(spec)
    out_labels = tuple(d for d in range(len(joint)) if d not in reduced)
    epilogue: list[_Epilogue] = []
    previous = node.results[0]
    for position in chain:
        step = context.node(position)
        shape = step.results[0].shape
        if _is_reshape(step.op):
            epilogue.append(_Epilogue(shape))
        else:
            other = next(a for a in step.args if a is not previous)
            if type(other) is Value:
                epilogue.append(_Epilogue(shape, _IN_PLACE[step.op], operand=len(sources) - 2))
                sources.append(other)
            else:
                epilogue.append(_Epilogue(shape, _IN_PLACE[step.op], number=other))
        previous = step.results[0]
    members.update(chain)
    kernel = ContractionKernel(
        (specs[0], specs[1]), out_labels, tuple(joint), tuple(epilogue), tuning
    )
    return FusedGroup(
        tuple(sorted(members)), tuple(sources), kernel, fresh_result=True, takes_out=True
    )


def _next_in_chain(context: FusionContext, index: int) -> int | None:
    """The epilogue node after node `index`: the only reader of its result, when that reader is a
    reshape of it, or an add/mul of it with a number or a same-shape (or 0-dim) tensor that can
    run in place."""
    result = context.node(index).results[0]
    readers = context.users.get(result, [])
    if result in context.outputs or len(readers) != 1 or readers[0] in context.claimed:
        return None
    reader = context.node(readers[0])
    if _is_reshape(reader.op):
        return readers[0]
    if reader.op not in _IN_PLACE or result.dtype.is_complex or result.dtype.is_low_precision:
        return None  # complex add/mul have their own semantics (prims/elementwise.py)
    others = [a for a in reader.args if a is not result]
    if len(reader.args) != 2 or len(others) != 1 or reader.results[0].shape != result.shape:
        return None
    other = others[0]
    if type(other) is Value:
        if (
            not other.is_tensor
            or other.dtype is not result.dtype
            or other.shape not in (result.shape, ())
        ):
            return None
    elif type(other) not in (bool, int, float):
        return None
    return readers[0]


def _chain_after(context: FusionContext, sum_index: int) -> list[int]:
    chain: list[int] = []
    current = _next_in_chain(context, sum_index)
    while current is not None:
        chain.append(current)
        current = _next_in_chain(context, current)
    return chain


# -- elementwise steps absorbed into the epilogue -------------------------------------------------


def absorb_elementwise_steps(steps: list[Step], output_slots: Sequence[int]) -> list[Step]:
    """The steps with each elementwise step that only transforms a contraction's result (a
    ReLU6's clamp or a ReLU after a convolution or a linear layer) run as the last step of the
    contraction's epilogue: on each output chunk or part, in place while it is in cache, and in
    the same parallel region, instead of as one more pass over memory and one more region.

    A step is absorbed when it is elementwise and takes `out=`, reads the contraction's result
    once (which dies there and is no graph output) and otherwise only numbers (or 0-dim
    arrays), may write its result over that operand (a ufunc, or `Step.out_operands`), and its
    result has the contraction result's shape and dtype. Each element is computed by the same kernel from the
    same operand element, so results are the unfused steps' bits. Needs the slots' last uses
    (`Step.free_after`). A kernel making many short NumPy calls (`makes_short_calls`: GELU's
    chain with its float32 erf) is absorbed too; the call decides where it runs
    (`PlannedCall.deferred_from`: on the whole result at one thread, on each chunk in long
    calls when threads share the chunks)."""
    outputs = set(output_slots)
    result: list[Step] = []
    for step in steps:
        previous = result[-1] if result else None
        if previous is not None and _absorbs(previous, step, outputs):
            result[-1] = _absorbed(previous, step)
        else:
            result.append(step)
    return result


def _absorbs(step: Step, following: Step, outputs: set[int]) -> bool:
    kernel = step.kernel
    if type(kernel) is not ContractionKernel or len(step.out_slots) != 1:
        return False
    slot = step.out_slots[0]
    if (
        not following.elementwise
        or not following.takes_out
        or following.random
        or following.relaxed_shape is not None
        or len(following.out_slots) != 1
        or following.reads() != [slot]
        or slot not in following.free_after
        or slot in outputs
    ):
        return False
    position = next(i for i, a in enumerate(following.arguments) if type(a) is SlotRef)
    function = following.kernel
    in_place = isinstance(function, np.ufunc) and function.nout == 1
    if not in_place and position not in following.out_operands:
        return False
    if any(i != position and not _is_scalar(a) for i, a in enumerate(following.arguments)):
        return False
    mine, theirs = step.out_metas[0], following.out_metas[0]
    return bool(
        getattr(mine, "shape", None) == getattr(theirs, "shape", None)
        and getattr(mine, "dtype", None) == getattr(theirs, "dtype", None)
    )


def _is_scalar(argument: Any) -> bool:
    """A number, or a 0-dim array (a clamp's bound): the same for every part of the result."""
    if isinstance(argument, np.ndarray):
        return argument.ndim == 0
    return isinstance(argument, bool | int | float | complex | np.generic)


def _absorbed(step: Step, following: Step) -> Step:
    kernel = step.kernel
    assert isinstance(kernel, ContractionKernel)  # _absorbs checked
    arguments = tuple(RESULT if type(a) is SlotRef else a for a in following.arguments)
    shape = tuple(following.out_metas[0].shape)
    fused = ContractionKernel(
        kernel.operands,
        kernel.out_labels,
        kernel.sizes,
        (*kernel.epilogue, _Epilogue(shape, function=following.kernel, arguments=arguments)),
        kernel.tuning,
    )
    dead = step.out_slots[0]
    return attrs.evolve(
        step,
        nodes=step.nodes + following.nodes,
        kernel=fused,
        out_slots=following.out_slots,
        out_metas=following.out_metas,
        free_after=tuple(sorted({*step.free_after, *following.free_after} - {dead})),
    )
