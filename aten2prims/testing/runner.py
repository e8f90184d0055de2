"""Running one aten call both ways and classifying the result.

torch side: `torch.ops.aten.<op>` on the call's arguments. Our side: a one-node aten graph whose
inputs are the call's tensors and whose result metas are torch's outputs → `lower` → every node
must be a prim → `execute(check=True)` (which also checks every node's meta against what the
executor produced) → compare each output with torch's under the tolerance rule.
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..errors import (
    Error,
    ExecutionError,
    ResultDTypeError,
    ResultShapeError,
    UnsupportedOpError,
)
from ..executor import execute
from ..frontends.common import recorded_meta
from ..frontends.torch_interop import to_numpy
from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput, GraphOutput, Node
from ..ir.values import UNDEFINED, Device, Layout, MemoryFormat, ScalarMeta, Value
from ..passes.lower import lower
from .compare import ZERO_SIGN_UNDEFINED, Comparison, compare
from .record import AtenCall, clone_arguments
from .statistics import STATISTICAL_CHECKS


class Status(enum.Enum):
    PASS = "pass"
    WRONG_VALUE = "wrong value"
    WRONG_DTYPE = "wrong dtype"
    WRONG_SHAPE = "wrong shape"
    NOT_LOWERED = "not fully lowered"
    LOWERING_ERROR = "lowering error"
    EXECUTION_ERROR = "execution error"
    META_MISMATCH = "meta mismatch"
    TORCH_UNSUPPORTED = "unsupported by torch"
    UNREPRESENTABLE = "unrepresentable"  # e.g. a dtype outside the 12 we model

    @property
    def counts_as_run(self) -> bool:
        return self not in (Status.TORCH_UNSUPPORTED, Status.UNREPRESENTABLE)


@attrs.frozen
class Outcome:
    call: AtenCall
    status: Status
    message: str = ""
    extension_prims: frozenset[str] = frozenset()
    lowered: Graph | None = attrs.field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS


class Unrepresentable(Exception):
    """The call holds something our IR does not model (a dtype, a generator, …)."""


# Outputs whose values torch leaves undefined: only dtype and shape are compared.
UNDEFINED_VALUES = frozenset(
    {"aten.empty.memory_format", "aten.empty_strided.default", "aten.empty_permuted.default"}
)


def torch_outputs(call: AtenCall) -> list[Any]:
    """torch's results of the call, flattened (tensors and Python scalars)."""
    import torch

    packet = getattr(torch.ops.aten, call.op.split(".")[1])
    func = getattr(packet, call.op.split(".")[2])
    result = func(*clone_arguments(call.args), **clone_arguments(call.kwargs))
    return list(result) if isinstance(result, list | tuple) else [result]


def build_graph(call: AtenCall, outputs: list[Any]) -> tuple[Graph, dict[str, Any]]:
    """A one-node graph of the call and its input arrays. A None among torch's `outputs` (a
    backward op's result its output_mask does not request) is an undefined result of the node,
    not an output of the graph."""
    inputs: list[GraphInput] = []
    arrays: dict[str, Any] = {}

    def operand(value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            name = f"a{len(inputs)}"
            meta = _meta_of(value)  # with its layout: samples may be transposed, sliced, ...
            inputs.append(GraphInput(Value(name, meta)))
            arrays[name] = to_numpy(value)
            return inputs[-1].value
        if isinstance(value, list | tuple):
            return tuple(operand(v) for v in value)
        if isinstance(value, torch.dtype):
            return _dtype(value)
        if isinstance(value, torch.device):
            return Device(str(value))
        if isinstance(value, torch.layout):
            return Layout[str(value).removeprefix("torch.")]
        if isinstance(value, torch.memory_format):
            return MemoryFormat[str(value).removeprefix("torch.")]
        if value is None or isinstance(value, bool | int | float | complex | str):
            return value
        raise Unrepresentable(f"argument {value!r} of type {type(value).__name__}")

    args = tuple(operand(a) for a in call.args)
    kwargs = {name: operand(v) for name, v in call.kwargs.items()}
    results = tuple(Value(f"out{i}", _meta_of(output)) for i, output in enumerate(outputs))
    name = re.sub(r"\W", "_", call.op.removeprefix("aten."))
    defined = [GraphOutput(r) for r in results if not r.is_undefined]
    graph = Graph(name, inputs, [Node(call.op, args, kwargs, results)], defined)
    return graph, arrays


def _dtype(torch_dtype: Any) -> DType:
    try:
        return DType.from_torch_name(str(torch_dtype))
    except ValueError:
        raise Unrepresentable(f"dtype {torch_dtype}") from None


def _meta_of(output: Any) -> Any:
    import torch

    if isinstance(output, torch.Tensor):
        # torch's layout too: the lowering lays every result out as torch's kernel did
        return recorded_meta(
            tuple(output.shape),
            _dtype(output.dtype),
            tuple(output.stride()),
            int(output.storage_offset()),  # concrete: samples are real tensors
        )
    if isinstance(output, bool | int | float | complex):
        return ScalarMeta(type(output))
    if output is None:
        return UNDEFINED
    raise Unrepresentable(f"result {output!r}")


def _expected(outputs: list[Any]) -> list[Any]:
    """torch's outputs as the graph of `build_graph` returns them: undefined (None) ones left out."""
    import torch

    return [to_numpy(o) if isinstance(o, torch.Tensor) else o for o in outputs if o is not None]


# Overloads whose every result element is a sum of products of input elements (scaled by
# numbers): their rounding error grows with the sum of the terms' magnitudes, not with the
# result's, so the tolerance rule is told that magnitude (`sum_of_magnitudes`).
SUMS_OF_PRODUCTS = frozenset(
    {
        "aten.mm.default",
        "aten.bmm.default",
        "aten.addmm.default",
        "aten.convolution.default",
        "aten.convolution_backward.default",
        "aten.sum.dim_IntList",
        "aten.mean.dim",
    }
)


@contextlib.contextmanager
def float64_promotions() -> Iterator[None]:
    """torch's default dtype set to float64 for the while: an integer or bool operand that an
    op promotes to a floating result (irfft or sigmoid of an int32 tensor, int / int) is then
    promoted to float64 (complex128), as a widened floating operand is. Under the float32
    default such a "float64 reference" would be torch's float32 result itself."""
    # why: only the reference computations need torch, and only when they run
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def float64_reference(call: AtenCall, *, magnitudes: bool = False) -> list[Any] | None:
    """torch's results with every floating/complex input tensor widened to float64/complex128
    and integer operands promoted to them (`float64_promotions`), narrowed back to the original
    result dtypes' width only in comparison (None when the op cannot run that way). With
    `magnitudes`, each input is replaced by its absolute value: for a sum of products
    (SUMS_OF_PRODUCTS) that gives each element's sum of |terms|."""
    import torch

    def widen(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.dtype.is_complex:
                value = value.to(torch.complex128)
                return value.abs().to(torch.complex128) if magnitudes else value
            if value.dtype.is_floating_point:
                return value.to(torch.float64).abs() if magnitudes else value.to(torch.float64)
            return value
        if isinstance(value, list | tuple):
            return type(value)(widen(v) for v in value)
        return value

    try:
        wide = AtenCall(call.op, widen(call.args), {k: widen(v) for k, v in call.kwargs.items()})
        with float64_promotions():
            return _expected(torch_outputs(wide))
    except Exception:
        return None


def run_call(call: AtenCall, *, registry: Any = None, seed: int = 0) -> Outcome:
    """Run the call through torch and through lower → execute, and classify."""
    try:
        outputs = torch_outputs(call)
    except Exception as error:
        return Outcome(call, Status.TORCH_UNSUPPORTED, f"{type(error).__name__}: {error}")
    try:
        graph, arrays = build_graph(call, outputs)
    except Unrepresentable as error:
        return Outcome(call, Status.UNREPRESENTABLE, str(error))
    try:
        lowered = lower(graph, registry=registry)
    except UnsupportedOpError as error:
        return Outcome(call, Status.NOT_LOWERED, str(error))
    except ResultDTypeError as error:
        return Outcome(call, Status.WRONG_DTYPE, str(error))
    except ResultShapeError as error:
        return Outcome(call, Status.WRONG_SHAPE, str(error))
    except Error as error:
        return Outcome(call, Status.LOWERING_ERROR, f"{type(error).__name__}: {error}")
    leftovers = sorted({node.op for node in lowered.nodes if node.namespace != "prims"})
    if leftovers:
        return Outcome(
            call, Status.NOT_LOWERED, f"left in the graph: {', '.join(leftovers)}", lowered=lowered
        )
    extensions = frozenset(
        node.op
        for node in lowered.nodes
        if (definition := lookup(node.op)) is not None and definition.extension
    )
    try:
        ours = execute(lowered, arrays, check=True, seed=seed)
    except ExecutionError as error:
        status = Status.META_MISMATCH if "[check=True]" in str(error) else Status.EXECUTION_ERROR
        return Outcome(call, status, str(error), extensions, lowered)
    except Error as error:
        return Outcome(
            call, Status.EXECUTION_ERROR, f"{type(error).__name__}: {error}", extensions, lowered
        )
    for verdict in judge_outputs(call, ours, _expected(outputs)):
        if not verdict:
            status = {"dtype": Status.WRONG_DTYPE, "shape": Status.WRONG_SHAPE}.get(
                verdict.reason, Status.WRONG_VALUE
            )
            return Outcome(call, status, verdict.message, extensions, lowered)
    return Outcome(call, Status.PASS, "", extensions, lowered)


def judge_outputs(
    call: AtenCall,
    ours: list[Any],
    expected: list[Any],
    positions: Sequence[int] | None = None,
) -> list[Comparison]:
    """Our outputs of the call against torch's: by the op's statistical check (random and
    unstable-order ops), by dtype and shape alone (ops whose values torch leaves undefined), or
    by the tolerance rule. `positions[i]` is where `expected[i]` stands among torch's defined
    (not None) outputs of the call, when they are not all judged (default: all, in order)."""
    statistical = STATISTICAL_CHECKS.get(call.op)
    if statistical is not None:
        return [statistical(call, ours, expected)]
    if call.op in UNDEFINED_VALUES:
        return [
            _compare_layout(o, e, f"output {i}") for i, (o, e) in enumerate(zip(ours, expected))
        ]
    return compare_outputs(call, ours, expected, positions)


def compare_outputs(
    call: AtenCall,
    ours: list[Any],
    expected: list[Any],
    positions: Sequence[int] | None = None,
) -> list[Comparison]:
    """Each output under the tolerance rule; one that fails against torch alone is judged again
    against the float64 reference (computed only then; `positions` as for `judge_outputs`)."""
    reference: list[Any] | None = None
    magnitudes: list[Any] = []
    verdicts = []
    where = range(len(expected)) if positions is None else positions
    for index, (our, their, at) in enumerate(zip(ours, expected, where)):
        signed_zeros = call.op not in ZERO_SIGN_UNDEFINED
        verdict = compare(our, their, signed_zeros=signed_zeros, what=f"output {index}")
        if not verdict and verdict.reason == "value":
            if reference is None:
                reference = float64_reference(call) or []
                if call.op in SUMS_OF_PRODUCTS:
                    magnitudes = float64_reference(call, magnitudes=True) or []
            if at < len(reference):
                verdict = compare(
                    our,
                    their,
                    reference=reference[at],
                    sum_of_magnitudes=magnitudes[at] if at < len(magnitudes) else None,
                    signed_zeros=signed_zeros,
                    what=f"output {index}",
                )
        verdicts.append(verdict)
    return verdicts


def _compare_layout(ours: Any, theirs: Any, what: str) -> Comparison:
    if not isinstance(ours, np.ndarray) or ours.dtype != theirs.dtype:
        return Comparison(
            False,
            "dtype",
            f"{what}: dtype {getattr(ours, 'dtype', type(ours))} vs torch's {theirs.dtype}",
        )
    if ours.shape != theirs.shape:
        return Comparison(
            False, "shape", f"{what}: shape {list(ours.shape)} vs torch's {list(theirs.shape)}"
        )
    return Comparison(True, "", f"{what}: values undefined; dtype and shape equal")
