"""The executor's contract (aten2prims/executor/): caller arrays and stored data are never
written (buffer reuse included), outputs are fresh and writable, intermediates are released
after their last use, a plan is specific to the stored inputs the caller overrides, check=True
catches a wrong meta, seeds make random prims reproducible, and every plan-time shortcut
(direct elementwise kernels, specialized views and windows, relaxed broadcasts, orthogonal
gathers, buffer reuse) gives what the prims' own kernels give, node by node (`run_reference`)."""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prims_testing import bits_equal

import aten2prims
import prims
from aten2prims.executor import execute, filled_scatter, plan_for
from aten2prims.executor.chains import ChainKernel
from aten2prims.executor.codegen import compile_steps
from aten2prims.executor.direct_kernels import DIRECT_KERNELS, direct_kernel
from aten2prims.executor.filled_scatter import FilledScatter
from aten2prims.executor.gather import OrthogonalGather
from aten2prims.executor.reference import run_reference
from aten2prims.executor.select import Clamp, ZeroSelect
from aten2prims.executor.specialize import basic_index
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph, GraphOutput, InputKind, Node
from aten2prims.ir.values import CPU, TensorMeta, Value
from prims.builder import Builder
from prims.common import number_as
from prims.elementwise import ELEMENTWISE
from prims.registry import PRIMS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def build(inputs: dict[str, Any], body: Callable[..., Any]) -> Graph:
    """Inputs: name -> (shape, dtype) for user inputs, or an array for a stored parameter."""
    with Builder("g") as builder:
        values = {}
        for name, spec in inputs.items():
            if isinstance(spec, np.ndarray):
                meta = TensorMeta(spec.shape, DType.from_numpy(spec.dtype))
                values[name] = builder.add_input(name, meta, InputKind.PARAMETER, name, spec)
            else:
                values[name] = builder.add_input(name, TensorMeta(*spec))
        outputs = body(**values)
        return builder.finish(list(outputs) if isinstance(outputs, tuple) else [outputs])


def assert_same(ours: list[Any], expected: list[Any], *, contraction: bool = False) -> None:
    """Equal dtype, shape and values; with `contraction`, values as close as BLAS's summation
    order allows (a fused matrix product against the node-by-node mul and sum)."""
    assert len(ours) == len(expected)
    for a, b in zip(ours, expected):
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        if contraction:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(a, b)


def example(name: str) -> tuple[Graph, dict[str, np.ndarray]]:
    graph = aten2prims.lower(aten2prims.load(EXAMPLES / f"{name}.pt2"))
    with np.load(EXAMPLES / f"{name}.inputs.npz") as archive:
        return graph, {n: archive[n] for n in archive.files}


def mlp_like(hidden: int = 64) -> Graph:
    """x @ w.T + b, relu, then a sigmoid chain and a scale: elementwise chains whose
    intermediates die (buffer reuse), a folded transpose and a bias broadcast."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((hidden, 32)).astype(np.float32)
    b = rng.standard_normal(hidden).astype(np.float32)

    def body(x: Value, w: Value, b: Value) -> tuple[Value, ...]:
        joint = [16, 32, hidden]
        product = prims.mul(
            prims.broadcast_in_dim(x, joint, [0, 1]),
            prims.broadcast_in_dim(prims.transpose(w, [1, 0]), joint, [1, 2]),
        )
        hidden_ = prims.add(prims.sum(product, [1]), prims.broadcast_in_dim(b, [16, hidden], [1]))
        relu = prims.maximum(hidden_, 0.0)
        sigmoid = prims.reciprocal(prims.add(prims.exp(prims.neg(relu)), 1.0))
        return prims.mul(prims.mul(sigmoid, relu), 0.5), prims.transpose(relu, [1, 0])

    return build({"x": ((16, 32), DType.float32), "w": w, "b": b}, body)


# -- caller arrays, stored data, outputs ----------------------------------------------------------------


def test_caller_arrays_and_stored_data_are_never_written() -> None:
    graph = mlp_like()
    plan = plan_for(graph)
    assert any(step.out_argument is not None for step in plan.steps), "no buffer is reused"
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    given = x.copy()
    stored = {gi.name: gi.data.copy() for gi in graph.inputs if gi.data is not None}
    for _ in range(2):
        outputs = aten2prims.execute(graph, {"x": x})
        assert np.array_equal(x, given)
        for gi in graph.inputs:
            if gi.data is not None:
                assert np.array_equal(gi.data, stored[gi.name]) and gi.data.flags.writeable
        assert_same(outputs, run_reference(graph, {"x": x}), contraction=True)
    # Overriding a parameter: the override is not written either.
    w = np.ones((64, 32), np.float32)
    aten2prims.execute(graph, {"x": x, "w": w})
    assert np.array_equal(w, np.ones((64, 32), np.float32))


def test_buffer_reuse_never_takes_inputs_views_or_live_values() -> None:
    def body(x: Value) -> tuple[Value, ...]:
        e = prims.exp(x)  # fresh
        t = prims.transpose(e, [1, 0])  # a view of e, read after the add below
        a = prims.add(e, 1.0)  # e dies here only if t is dead too: it is not
        b = prims.neg(
            prims.broadcast_in_dim(prims.sum(x, [1]), [4, 4], [0])
        )  # a broadcast: never written
        return a, prims.mul(t, 2.0), b, prims.add(x, 1.0)

    graph = build({"x": ((4, 4), DType.float64)}, body)
    plan = plan_for(graph)
    add = next(
        s
        for s in plan.steps
        if s.node.op == "prims.add" and s.node.args[1] == 1.0 and s.node.args[0].name != "x"
    )
    assert add.out_argument is None
    x = np.arange(16, dtype=np.float64).reshape(4, 4)
    assert_same(aten2prims.execute(graph, {"x": x}), run_reference(graph, {"x": x}))
    assert np.array_equal(x, np.arange(16, dtype=np.float64).reshape(4, 4))


def _independent(outputs: list[Any], others: list[np.ndarray]) -> bool:
    arrays = [o for o in outputs if isinstance(o, np.ndarray)]
    for i, a in enumerate(arrays):
        # A view is the caller's own only as a view of a new array owning its memory (an
        # output that reshapes a result made for it alone, Plan.output_owned).
        if not a.flags.writeable or (a.base is not None and not a.base.flags.owndata):
            return False
        if any(np.shares_memory(a, b) for b in arrays[i + 1 :] + others):
            return False
    return True


def test_outputs_are_fresh_and_writable() -> None:
    """Inputs, views of inputs, stored data, folded constants and values returned twice all
    come back as arrays of the caller's own."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)

    def body(x: Value, w: Value) -> tuple[Value, ...]:
        folded = prims.neg(prims.transpose(w, [1, 0]))
        same = prims.clone(x, memory_format=None)  # a contiguous clone: the executor reuses x
        return x, prims.transpose(x, [1, 0]), w, folded, same, same, prims.reshape(x, [3, 2])

    graph = build({"x": ((2, 3), DType.float32), "w": w}, body)
    x = np.ones((2, 3), np.float32)
    outputs = aten2prims.execute(graph, {"x": x})
    assert _independent(outputs, [x, w, *(gi.data for gi in graph.inputs if gi.data is not None)])
    for output in outputs:
        output[...] = 7  # writable, and touches nothing else
    assert np.array_equal(x, np.ones((2, 3))) and np.array_equal(w, np.arange(6).reshape(2, 3))
    assert_same(aten2prims.execute(graph, {"x": x}), run_reference(graph, {"x": x}))


def test_an_output_viewing_a_result_made_for_it_alone_is_not_copied() -> None:
    """An output that reshapes or transposes a new array no other output reaches is handed over
    as that view (upsampling's final split of its channels: a copy of the whole result saved);
    two outputs viewing one result, and views of inputs or stored data, are still copies."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)

    def body(x: Value, w: Value) -> tuple[Value, ...]:
        alone = prims.reshape(prims.transpose(prims.neg(x), [1, 0]), [6])
        shared = prims.mul(x, 2.0)
        return (
            alone,
            prims.reshape(shared, [6]),
            prims.transpose(shared, [1, 0]),
            prims.reshape(w, [6]),
            prims.reshape(x, [6]),
        )

    graph = build({"x": ((2, 3), DType.float32), "w": w}, body)
    assert plan_for(graph).output_owned == (True, False, False, False, False)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    outputs = aten2prims.execute(graph, {"x": x})
    assert outputs[0].base is not None  # the view itself, not a copy
    assert _independent(outputs, [x, w, *(gi.data for gi in graph.inputs if gi.data is not None)])
    assert_same(outputs, run_reference(graph, {"x": x}))
    again = aten2prims.execute(graph, {"x": x})
    assert not np.shares_memory(again[0], outputs[0])


# -- release after last use ---------------------------------------------------------------------------


def test_intermediates_are_released_after_their_last_use() -> None:
    """Run the compiled plan with every kernel wrapped: each result is watched by a weakref, and
    before each step every value whose last reader has run must be gone (outputs excepted) or
    be a buffer of the plan's arena, which the plan keeps between calls (arena.py)."""
    graph, inputs = example("transformer")
    plan = plan_for(graph)
    arena = plan.arenas.layout.views()
    last_read = {}
    for index, step in enumerate(plan.steps):
        for slot in step.reads():
            last_read[slot] = index
    outputs = set(plan.output_slots)
    watched: dict[int, weakref.ref] = {}
    checked = []

    values = plan.initial_values.copy()

    def watching(index: int, kernel: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            for slot, ref in watched.items():
                if slot not in outputs and last_read.get(slot, -1) < index:
                    assert values[slot] is None, f"slot {slot} outlived its last use"
                    alive = ref()  # still alive only as memory another live value shares (a view, a reused buffer)
                    assert (
                        alive is None
                        or any(alive is buffer for buffer in arena)
                        or any(
                            isinstance(v, np.ndarray) and np.shares_memory(v, alive)
                            for v in (*values, *args)
                        )
                    ), f"slot {slot}'s array outlived every value sharing it"
            checked.append(index)
            result = kernel(*args, **kwargs)
            for slot, item in zip(
                plan.steps[index].out_slots,
                result if len(plan.steps[index].out_slots) > 1 else (result,),
            ):
                if isinstance(item, np.ndarray) and last_read.get(slot, -1) >= 0:
                    watched[slot] = weakref.ref(item)
            return result

        return call

    original = [step.kernel for step in plan.steps]
    for index, step in enumerate(plan.steps):
        step.kernel = watching(index, step.kernel)
    run = compile_steps(plan.steps)
    try:
        for name, array in inputs.items():
            values[plan.input_slots[name]] = array
        with np.errstate(all="ignore"):
            run(values, None, arena)
    finally:
        for step, kernel in zip(plan.steps, original):
            step.kernel = kernel
    assert len(checked) == len(plan.steps)
    # Every slot is freed right after its last read, outputs kept.
    for index, step in enumerate(plan.steps):
        for slot in step.free_after:
            assert slot not in outputs and last_read.get(slot, index) == index


def test_large_chain_peak_memory() -> None:
    """A chain of elementwise steps on a 4 MiB array: the intermediates die as they go and
    reuse each other's buffers, so the peak stays near input + output."""
    import tracemalloc

    def body(x: Value) -> Value:
        y = x
        for _ in range(8):
            y = prims.mul(prims.exp(prims.neg(y)), 0.5)
        return y

    graph = build({"x": ((1024, 1024), DType.float32)}, body)
    x = np.zeros((1024, 1024), np.float32)
    aten2prims.execute(graph, {"x": x})
    tracemalloc.start()
    try:
        aten2prims.execute(graph, {"x": x})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * x.nbytes, peak


# -- plans per override set -------------------------------------------------------------------------------


def test_overriding_a_parameter_invalidates_folding() -> None:
    graph = mlp_like()
    x = np.random.default_rng(2).standard_normal((16, 32)).astype(np.float32)
    default = plan_for(graph)
    assert any(gi.kind is InputKind.CONSTANT and gi not in graph.inputs for gi in default.inputs)
    before = aten2prims.execute(graph, {"x": x})
    w = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    overridden = aten2prims.execute(graph, {"x": x, "w": w})
    np.testing.assert_allclose(
        overridden[0], run_reference(graph, {"x": x, "w": w})[0], rtol=1e-5, atol=1e-6
    )
    assert not np.allclose(overridden[0], before[0])
    plan = plan_for(graph, frozenset({"w"}))
    assert plan is not default
    w_slot = plan.input_slots["w"]
    assert plan.initial_values[w_slot] is None  # the override's slot is the caller's, every call
    assert any(w_slot in step.reads() for step in plan.steps)  # nothing computed from w was folded
    assert_same(
        aten2prims.execute(graph, {"x": x}), before
    )  # the default plan is still there (same result)


def test_replacing_stored_data_rebuilds_the_plan() -> None:
    graph = mlp_like()
    x = np.ones((16, 32), np.float32)
    first = aten2prims.execute(graph, {"x": x})
    graph.input("w").data = np.zeros((64, 32), np.float32)
    second = aten2prims.execute(graph, {"x": x})
    np.testing.assert_allclose(second[0], run_reference(graph, {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(first[0], second[0])


# -- check mode, errors, random prims ---------------------------------------------------------------------


def test_check_catches_a_wrong_meta() -> None:
    graph = build({"x": ((2, 3), DType.float32)}, lambda x: prims.exp(prims.add(x, 1.0)))
    add = graph.nodes[0]
    wrong = Value(add.results[0].name, TensorMeta((2, 3), DType.float64))  # the kernel gives f32
    exp = graph.nodes[1]
    broken = Graph(
        "broken",
        graph.inputs,
        [
            Node(add.op, add.args, add.kwargs, (wrong,)),
            Node(exp.op, (wrong,), exp.kwargs, (Value("y", wrong.meta),)),
        ],
        [GraphOutput(Value("unused", wrong.meta))],
    )
    broken.outputs[0] = GraphOutput(broken.nodes[1].results[0])
    x = np.ones((2, 3), np.float32)
    with pytest.raises(aten2prims.ExecutionError, match="meta says f64"):
        aten2prims.execute(broken, {"x": x}, check=True)
    aten2prims.execute(graph, {"x": x}, check=True)  # the right metas pass (relaxed broadcasts too)
    mlp = mlp_like()
    assert any(step.relaxed_shape is None for step in plan_for(mlp).steps)
    aten2prims.execute(mlp, {"x": np.ones((16, 32), np.float32)}, check=True)


def test_kernel_failures_name_the_node() -> None:
    graph = build({"x": ((3,), DType.int64)}, lambda x: prims.neg(prims.div(x, prims.sub(x, x))))
    with pytest.raises(
        aten2prims.ExecutionError, match=r"prims\.div computing %\w+ failed: ZeroDivisionError"
    ):
        aten2prims.execute(graph, {"x": np.arange(3)})
    with pytest.raises(aten2prims.ExecutionError, match=r"prims\.div"):
        aten2prims.execute(graph, {"x": np.arange(3)}, check=True)


def test_seeds_make_random_prims_reproducible() -> None:
    def body(x: Value) -> tuple[Value, ...]:
        options = dict(dtype=DType.float32, device=CPU, requires_grad=False)
        noise = prims.normal([4, 5], mean=0.0, std=1.0, **options)
        uniform = prims.uniform(
            [4, 5], low=0.0, high=1.0, dtype=DType.float32, device=CPU, stride=[5, 1]
        )
        return (
            prims.add(x, noise),
            uniform,
            prims.add(x, prims.normal([4, 5], mean=0.0, std=1.0, **options)),
        )

    graph = build({"x": ((4, 5), DType.float32)}, body)
    x = np.zeros((4, 5), np.float32)
    first, second = (
        aten2prims.execute(graph, {"x": x}, seed=7),
        aten2prims.execute(graph, {"x": x}, seed=7),
    )
    assert_same(first, second)
    assert_same(first, run_reference(graph, {"x": x}, seed=7))
    assert not np.array_equal(first[0], first[2])  # two draws stay two draws
    assert not np.array_equal(first[0], aten2prims.execute(graph, {"x": x}, seed=8)[0])


# -- plan-time shortcuts give the kernels' results ------------------------------------------------------------

STANDARD_DTYPES = [
    DType.bool,
    DType.uint8,
    DType.int8,
    DType.int16,
    DType.int32,
    DType.int64,
    DType.float32,
    DType.float64,
    DType.complex64,
    DType.complex128,
]


def _values(dtype: DType, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.is_bool:
        return rng.random(shape) < 0.5
    if dtype.is_integral:
        info = np.iinfo(dtype.numpy)
        values = rng.integers(max(info.min, -1000), min(info.max, 1000), shape)
        values.flat[:2] = [info.max, info.min] if values.size >= 2 else values.flat[:2]
        return values.astype(dtype.numpy)
    values = rng.standard_normal(shape) * 3
    values.flat[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype.numpy)


@pytest.mark.parametrize("name", sorted(DIRECT_KERNELS))
def test_direct_kernels_are_the_kernels(name: str, kernels: str) -> None:
    """Each direct kernel, numbers converted once, bit for bit against the prim's kernel on
    every dtype it covers (arrays, 0-dim arrays, and number operands), with MKL's vector math
    and NumPy's."""
    kernel = PRIMS[name].kernel
    arity = ELEMENTWISE[name].arity
    compared = 0
    for dtype in STANDARD_DTYPES:
        function = direct_kernel(name, dtype)
        if function is None or dtype not in ELEMENTWISE[name].domain:
            continue
        arrays = [_values(dtype, (6,), seed) for seed in range(3)]
        if name == "where":
            cases = [
                (arrays[0] != arrays[0][::-1], arrays[1], arrays[2]),
                (np.asarray(True), arrays[1], 2 if not dtype.is_bool else True),
            ]
        elif arity == 1:
            cases = [(arrays[0],), (arrays[0][:1].reshape(()),)]
        else:
            number = True if dtype.is_bool else (3 if dtype.is_integral else 0.75)
            cases = [
                (arrays[0], arrays[1]),
                (arrays[0], number),
                (number, arrays[1])
                if name not in ("sub",) or not dtype.is_bool
                else (arrays[0], arrays[1]),
            ]
        for args in cases:
            with np.errstate(all="ignore"):
                try:
                    expected = kernel(*args)
                except Exception:
                    continue
                converted = [
                    number_as(a, dtype) if type(a) in (bool, int, float) else a for a in args
                ]
                if name == "reciprocal":
                    ours = np.true_divide(number_as(1, dtype), *converted)
                else:
                    ours = function(*converted)
            ours = np.asarray(ours)
            assert ours.dtype == expected.dtype and ours.shape == expected.shape, (name, dtype)
            assert ours.tobytes() == np.asarray(expected).tobytes() or np.array_equal(
                ours, expected, equal_nan=True
            ), (name, dtype, args)
            compared += 1
    assert compared >= 2


def test_as_strided_windows_as_basic_indexes() -> None:
    """Every window basic_index accepts is exactly the generic kernel's window."""
    kernel = PRIMS["as_strided"].kernel
    rng = np.random.default_rng(0)
    shape = (3, 4, 5)
    a = np.arange(60, dtype=np.int32).reshape(shape)
    accepted = 0
    for _ in range(400):
        rank = int(rng.integers(1, 4))
        size = tuple(int(n) for n in rng.integers(1, 4, rank))
        stride = tuple(int(s) for s in rng.choice([0, 1, 2, 5, 10, 20, 40], rank))
        span = sum((n - 1) * s for n, s in zip(size, stride))
        if span >= 60:
            continue
        offset = int(rng.integers(0, 60 - span))
        index = basic_index(shape, size, stride, offset)
        if index is not None:
            accepted += 1
            assert np.array_equal(a[index], kernel(a, size, stride, offset)), (size, stride, offset)
    assert accepted > 50
    # select / slice / narrow shapes the lowering emits
    for size, stride, offset in [
        ((4, 5), (5, 1), 20),
        ((3, 2, 5), (20, 5, 1), 10),
        ((1, 4, 5), (60, 5, 1), 40),
        ((3, 4), (20, 5), 2),
    ]:
        index = basic_index(shape, size, stride, offset)
        assert index is not None and np.array_equal(a[index], kernel(a, size, stride, offset))


def test_relaxed_broadcasts_and_windows_agree_with_the_kernels() -> None:
    def body(x: Value, y: Value) -> tuple[Value, ...]:
        row = prims.broadcast_in_dim(prims.amax(x, [1]), [4, 6], [0])
        column = prims.broadcast_in_dim(y, [4, 6], [1])
        window = prims.as_strided(x, [2, 6], [6, 1], 6)
        both = prims.add(
            prims.broadcast_in_dim(y, [4, 6], [1]),
            prims.broadcast_in_dim(prims.amax(x, [1]), [4, 6], [0]),
        )
        return (
            prims.sub(x, row),
            prims.mul(column, x),
            prims.where(prims.gt(x, row), column, 0.0),
            prims.neg(window),
            both,
            # a window scatter (padding): specialized into two copies when a basic index
            prims.as_strided_scatter(prims.mul(x, 2.0), prims.neg(window), [2, 6], [6, 1], 6),
            prims.as_strided_scatter(x, prims.neg(window), [2, 6], [1, 4], 1),
        )

    graph = build({"x": ((4, 6), DType.float32), "y": ((6,), DType.float32)}, body)
    plan = plan_for(graph)
    assert any(step.relaxed_shape is not None for step in plan.steps)
    inputs = {"x": _values(DType.float32, (4, 6), 1), "y": _values(DType.float32, (6,), 2)}
    expected = run_reference(graph, inputs)
    assert_same(aten2prims.execute(graph, inputs), expected)
    assert_same(aten2prims.execute(graph, inputs, check=True), expected)
    transposed = {
        "x": np.asfortranarray(inputs["x"]),
        "y": inputs["y"],
    }  # a window of a non-contiguous operand
    assert_same(aten2prims.execute(graph, transposed), expected)


def test_orthogonal_gather() -> None:
    """Nearest upsampling's gather (ramp over rows, a position table over the rest) runs as takes
    along axes, and out-of-range indices fail as the kernel's do."""

    def body(a: Value, rows: Value, table: Value) -> Value:
        return prims.gather_nd(
            a,
            (
                prims.broadcast_in_dim(rows, [3, 4, 5], [0]),
                prims.broadcast_in_dim(table, [3, 4, 5], [1, 2]),
            ),
        )

    graph = build(
        {
            "a": ((3, 10), DType.float32),
            "rows": ((3,), DType.int64),
            "table": ((4, 5), DType.int64),
        },
        body,
    )
    assert any(isinstance(step.kernel, OrthogonalGather) for step in plan_for(graph).steps)
    inputs = {
        "a": _values(DType.float32, (3, 10), 0),
        "rows": np.array([2, 0, 1]),
        "table": np.arange(20).reshape(4, 5) % 10,
    }
    assert_same(aten2prims.execute(graph, inputs), run_reference(graph, inputs))
    inputs["table"][1, 2] = 10
    with pytest.raises(
        aten2prims.ExecutionError, match="index 10 is out of bounds for dimension 1 with size 10"
    ):
        aten2prims.execute(graph, inputs)


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_examples_agree_with_the_reference(name: str) -> None:
    """The planned executor against node-by-node execution: equal, up to the fused contractions'
    BLAS summation order."""
    graph, inputs = example(name)
    ours = execute(graph, inputs, return_all_outputs=True)
    checked = execute(graph, inputs, check=True, return_all_outputs=True)
    expected = run_reference(graph, inputs)
    for a, b, c in zip(ours, checked, expected, strict=True):
        assert a.dtype == c.dtype and a.shape == c.shape
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5)


def test_codegen_is_straight_line() -> None:
    plan = plan_for(mlp_like())
    source = plan.run.source
    assert source.count("\n") >= len(plan.steps) and "for " not in source
    assert all(f"k{index}(" in source for index in range(len(plan.steps)))


def test_plans_are_cached_and_rebuilt_when_the_graph_changes() -> None:
    graph = mlp_like()
    assert plan_for(graph) is plan_for(graph)
    first = plan_for(graph)
    graph.nodes = list(graph.nodes)  # a new node list
    assert plan_for(graph) is not first


def test_plans_do_not_keep_their_graph_alive() -> None:
    """Plans are cached per graph in a weak dictionary: a graph nobody holds is collected."""
    import gc

    graph = mlp_like()
    aten2prims.execute(graph, {"x": np.ones((16, 32), np.float32)})
    ref = weakref.ref(graph)
    del graph
    gc.collect()
    assert ref() is None


def test_every_prim_literal_combination_of_dtypes_plans() -> None:
    """Direct kernels take numbers converted once, with the kernel's wrap-around for integers."""
    for dtype, number in itertools.product(
        [DType.int8, DType.uint8, DType.int32], [300, -1, 2**40]
    ):
        graph = build({"x": ((3,), dtype)}, lambda x, n=number: prims.add(x, n))
        x = np.array([1, 2, 3], dtype=dtype.numpy)
        assert_same(aten2prims.execute(graph, {"x": x}), run_reference(graph, {"x": x}))


@pytest.mark.parametrize(
    ("fill", "dtype"),
    [(0.0, DType.float32), (-0.0, DType.float32), (-math.inf, DType.float64), (7, DType.int32)],
)
def test_filled_scatter_is_the_kernels(fill: Any, dtype: DType) -> None:
    """full + as_strided_scatter (constant padding) runs as one step, bit for bit the kernels':
    a window that is a basic index, one that is not (a step of 2 rows), and an empty one. (The
    filled tensor is too large for constant folding, as a real padded image is.)"""
    for size, stride, offset in [
        ([2, 3], [300, 1], 301),
        ([2, 3], [601, 1], 1),
        ([0, 3], [300, 1], 0),
    ]:

        def body(x: Value) -> Value:
            base = prims.full([300, 300], fill, dtype=dtype, device=CPU, requires_grad=False)
            window = prims.as_strided(x, size, [3, 1], 0)
            return prims.as_strided_scatter(base, window, size, stride, offset)

        graph = build({"x": ((2, 3), dtype)}, body)
        steps = plan_for(graph).steps
        assert [type(step.kernel) for step in steps][-1] is FilledScatter
        inputs = {"x": _values(dtype, (2, 3), 1)}
        expected = run_reference(graph, inputs)
        ours = aten2prims.execute(graph, inputs)
        assert_same(ours, expected)
        assert np.array_equal(np.signbit(ours[0]), np.signbit(expected[0]))


@pytest.mark.parametrize(
    ("fill", "dtype"), [(0.0, DType.float32), (-0.0, DType.float32), (7, DType.int32)]
)
@pytest.mark.parametrize("side", [300, 30])
def test_shared_and_folded_fills_scatter_in_one_step(fill: Any, dtype: DType, side: int) -> None:
    """One full read by two scatters (equal paddings merged by CSE; side 300) or folded into a
    constant at plan time (side 30, small enough to fold): every scatter is one step making its
    own filled array, no step copies the fill, bit for bit the kernels'; and a full also read
    by another node stays whole."""

    def body(x: Value, y: Value) -> tuple[Value, ...]:
        base = prims.full([side, side], fill, dtype=dtype, device=CPU, requires_grad=False)
        return (
            prims.as_strided_scatter(base, x, [2, 3], [side, 1], side + 1),
            prims.as_strided_scatter(base, y, [2, 3], [2 * side, 1], 2),
        )

    graph = build({"x": ((2, 3), dtype), "y": ((2, 3), dtype)}, body)
    steps = plan_for(graph).steps
    assert [type(step.kernel) for step in steps] == [FilledScatter, FilledScatter]
    inputs = {"x": _values(dtype, (2, 3), 1), "y": _values(dtype, (2, 3), 2)}
    expected = run_reference(graph, inputs)
    for _ in range(2):  # the second call writes into the arena's buffers again
        bits_equal(aten2prims.execute(graph, inputs), expected)

    def also_read(x: Value) -> tuple[Value, ...]:
        base = prims.full([300, 300], fill, dtype=dtype, device=CPU, requires_grad=False)
        return prims.as_strided_scatter(base, x, [2, 3], [300, 1], 301), prims.neg(base)

    graph = build({"x": ((2, 3), dtype)}, also_read)
    assert FilledScatter not in [type(step.kernel) for step in plan_for(graph).steps]
    one = {"x": inputs["x"]}
    bits_equal(aten2prims.execute(graph, one), run_reference(graph, one))


@pytest.mark.parametrize(
    ("values", "uniform"),
    [
        (np.zeros((30, 30), np.float32), True),
        (np.full((3, 5), -0.0, np.float64), True),
        (np.full(7, np.nan, np.float32), True),
        (np.array([0.0, -0.0], np.float32), False),  # equal values, other bits
        (np.array([3, 3, 3, 2], np.int16), False),
        (np.array([True, True]), True),
        (np.array([1, 1, 1], np.float16), True),
        (np.array([0, 1], np.longdouble), False),  # 16-byte elements
        (np.zeros(2, np.longdouble), True),
        (np.ones((4, 4), np.float32)[:, ::2], True),  # not contiguous
    ],
)
def test_a_folded_base_fills_only_where_its_bits_are_one_value(
    values: np.ndarray, uniform: bool
) -> None:
    """A constant scatter base (a folded full) is a fill when every element has its first's
    bits."""
    assert filled_scatter._uniform(values) is uniform


@pytest.mark.parametrize(
    ("size", "stride", "offset", "bordered"),
    [
        # a padding box (rows 1-32, columns 1-34 of each plane): 11% of the buffer outside
        ([2, 32, 34], [1224, 36, 1], 37, True),
        ([2, 1, 32, 34], [1224, 36, 36, 1], 37, True),  # a window dim of size 1 (a new axis)
        ([2, 16, 18], [1224, 36, 1], 37, False),  # a wide border (77%): the whole is filled
        ([32, 17], [36, 2], 37, False),  # columns stepping 2: the whole buffer is filled
        ([34, 36], [36, 1], 1224, False),  # the window is the second plane whole (50% outside)
    ],
)
def test_filled_scatter_into_a_used_buffer_fills_only_a_thin_border(
    size: list[int], stride: list[int], offset: int, bordered: bool
) -> None:
    """Written into a buffer holding other values (an arena's), a padding fills only the parts
    outside its window when that is a box and they are at most BORDER_MAX_FRACTION of the
    buffer (else the whole buffer), and gives exactly the kernels' result."""
    shape = (2, 34, 36)

    def body(x: Value) -> Value:
        base = prims.full(list(shape), -0.0, dtype=DType.float32, device=CPU, requires_grad=False)
        return prims.as_strided_scatter(base, x, size, stride, offset)

    graph = build({"x": (tuple(size), DType.float32)}, body)
    (step,) = [s for s in plan_for(graph).steps if isinstance(s.kernel, FilledScatter)]
    assert (step.kernel.border is not None) == bordered
    x = _values(DType.float32, tuple(size), 1)
    (expected,) = run_reference(graph, {"x": x})
    used = np.full(shape, np.nan, np.float32)
    bits_equal([step.kernel(x, out=used)], [expected])


SELECT_DTYPES = [DType.float32, DType.float64, DType.float16, DType.bfloat16, DType.int32]


@pytest.mark.parametrize("dtype", SELECT_DTYPES)
def test_selections_without_where_are_the_kernels(dtype: DType) -> None:
    """relu's where(x < 0, 0, x), its mirror, clamps by one bound and by two, with zero bounds
    on x (which may be -0.0) and on a shifted x (never -0.0), all bit for bit the node-by-node
    kernels', on values holding ±0, ±inf and NaN; and the steps the plan chose for them: every
    bound selected against x one np.clip (`Clamp`), checking for -0.0 only where a zero bound
    meets an x that may hold one."""
    zero, low, high = (0.0, -1.5, 2.0) if dtype.is_floating else (0, -2, 3)

    def body(x: Value) -> tuple[Value, ...]:
        shifted = prims.add(x, 3.0 if dtype.is_floating else 3)
        return (
            prims.where(prims.lt(x, zero), zero, x),  # relu
            prims.where(prims.gt(x, zero), x, zero),  # the zero branch second
            prims.where(prims.lt(x, low), low, x),  # a lower bound
            prims.where(prims.lt(high, x), high, x),  # an upper bound, mirrored
            prims.where(prims.gt(prims.where(prims.lt(x, low), low, x), high), high, x),
            prims.where(  # hardswish's clamp(x + 3, 0, 6)
                prims.gt(
                    prims.where(prims.lt(shifted, zero), zero, shifted),
                    6.0 if dtype.is_floating else 6,
                ),
                6.0 if dtype.is_floating else 6,
                prims.where(prims.lt(shifted, zero), zero, shifted),
            ),
            prims.where(prims.le(x, zero), zero, x),  # -0.0 selects the bound here
        )

    graph = build({"x": ((7, 9), dtype)}, body)
    inputs = {"x": _values(dtype, (7, 9), 3)}
    bits_equal(aten2prims.execute(graph, inputs), run_reference(graph, inputs))
    kernels = [step.kernel for step in plan_for(graph).steps]
    assert any(isinstance(kernel, ZeroSelect) for kernel in kernels)
    if dtype in (DType.float32, DType.float64, DType.int32):
        # relu, the two single bounds, hardswish's and the `<=` (the two-bound selection's
        # inner selection is the single lower bound's, shared).
        clamps = [kernel for kernel in kernels if isinstance(kernel, Clamp)]
        assert len(clamps) == 5
        # The zero bounds on x itself (relu and `<=`) check for -0.0; -0.0 gives -0.0, +0.0.
        checked = [clamp.at_negative_zero for clamp in clamps if clamp.bits is not None]
        negative_zero = np.array(-0.0, dtype.numpy).view(_BIT_DTYPES[dtype])[()]
        assert checked == ([negative_zero, 0] if dtype.is_floating else [])


_BIT_DTYPES = {DType.float32: np.int32, DType.float64: np.int64, DType.int32: np.int32}


def _same_bytes(ours: list[Any], expected: list[Any]) -> None:
    """Bit for bit, NaN payloads included (a selection copies its operand's bits)."""
    for a, b in zip(ours, expected, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(np.ascontiguousarray(a).view(np.uint8), b.view(np.uint8))


def _special_floats(dtype: np.dtype, size: int, seed: int) -> np.ndarray:
    """Random values, a fifth of them -0.0, +0.0, ±inf, ±subnormals, the bounds 0 and 6 and NaNs
    of both signs with payloads (quiet and signaling): each at positions NumPy's vector loops and
    their scalar tails both reach, in every block and part."""
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(size) * 4).astype(dtype)
    bits = values.view(np.int32 if dtype == np.float32 else np.int64)
    nans = (
        [0x7FC00001, 0x7F800005, 0xFFC00002, 0xFF800003]
        if dtype == np.float32
        else [0x7FF8000000000001, 0x7FF0000000000005, 0xFFF8000000000002, 0xFFF0000000000003]
    )
    nan_values = np.array(nans, np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    specials = np.concatenate(
        [np.array([-0.0, 0.0, np.inf, -np.inf, tiny, -tiny, 0.0, 6.0], dtype), nan_values]
    )
    picks = rng.random(size) < 0.2
    values[picks] = rng.choice(specials, int(picks.sum()))
    assert bits.min() == np.iinfo(bits.dtype).min  # -0.0 is there
    return values


@pytest.mark.parametrize("dtype", [DType.float32, DType.float64])
def test_clamps_of_values_that_may_be_negative_zero_keep_the_selections_bits(
    dtype: DType,
) -> None:
    """relu, relu6 and where(x <= 0, 0, x) of x itself (perhaps -0.0, which np.clip may turn
    into +0.0) as `Clamp`s checking for -0.0: bit for bit np.where's selections (-0.0 kept by
    `<`, +0.0 for `<=`, NaN payloads kept), whole, in parts on 1 to 3 threads, and written over
    a dying operand (a chain's block: -0.0 found before it is overwritten); blocks with no -0.0
    take the plain np.clip."""

    def body(x: Value) -> tuple[Value, ...]:
        doubled = prims.mul(x, 2.0)
        low = prims.where(prims.lt(doubled, 0.0), 0.0, doubled)
        negated = prims.neg(x)  # dies in its relu, which writes over it
        return (
            prims.where(prims.lt(x, 0.0), 0.0, x),
            prims.where(prims.gt(low, 6.0), 6.0, low),  # relu6
            prims.where(prims.le(x, 0.0), 0.0, x),
            prims.where(prims.lt(negated, 0.0), 0.0, negated),
        )

    shape = (4, 512, 300)  # 2.4 / 4.9 MB: parts and chain blocks
    graph = build({"x": (shape, dtype)}, body)
    x = _special_floats(np.dtype(dtype.numpy), math.prod(shape), 7).reshape(shape)
    x[1:3] = np.abs(x[1:3])  # parts with no -0.0 (and the negation's blocks with only -0.0s)
    expected = run_reference(graph, {"x": x})
    for threads in (1, 2, 3):
        _same_bytes(aten2prims.execute(graph, {"x": x}, threads=threads), expected)
    steps = plan_for(graph).steps
    kernels = [getattr(step.kernel, "kernel", step.kernel) for step in steps]  # Parted's own
    # relu6 and the negation's relu: chains (mul, clamp; neg, clamp) whose clamp writes over
    # the block of the link before.
    chains = [k for k in kernels if isinstance(k, ChainKernel)]
    assert [[type(link.kernel) for link in k.links] for k in chains] == [[np.ufunc, Clamp]] * 2
    assert all(k._in_target is not None for k in chains)
    clamps = [k for k in kernels if isinstance(k, Clamp)] + [k.links[1].kernel for k in chains]
    assert len(clamps) == 4 and all(clamp.bits is not None for clamp in clamps)
    assert not any(isinstance(k, ZeroSelect) for k in kernels)
    # relu's kernel alone, on every length up to 70 (vector loops and tails), -0.0 and a NaN
    # anywhere, into a fresh array and over its operand.
    (relu,) = [k for k in kernels if isinstance(k, Clamp) and k.at_negative_zero != 0]
    for length in range(1, 70):
        for position in range(length):
            part = np.linspace(-2, 2, length).astype(dtype.numpy)
            part[position] = -0.0
            part[(position * 7) % length] = x.flat[int(np.flatnonzero(np.isnan(x))[0])]
            want = np.where(part < 0, np.zeros((), part.dtype), part)
            _same_bytes([relu(part)], [want])
            _same_bytes([relu(part, out=part)], [want])


@pytest.mark.parametrize("tie", [0.0, -0.0])
def test_clamps_give_the_selections_zero_whichever_zero_clip_gives(
    tie: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """np.clip(-0.0, 0.0, ...) may give either zero (here it keeps x; other builds of NumPy
    need not): with a clip giving `tie` for every zero, relu keeps -0.0 and where(x <= 0, 0, x)
    gives +0.0, as the selections do."""
    clip = np.clip

    def clip_with_tie(x: Any, low: Any, high: Any, out: Any = None) -> Any:
        # -0.0 meeting the bound +0.0 (found before out, perhaps x, is written)
        ties = (x == 0) & np.signbit(x)
        result = clip(x, low, high, out=out)
        result[ties] = tie
        return result

    monkeypatch.setattr(np, "clip", clip_with_tie)

    def body(x: Value) -> tuple[Value, ...]:
        return prims.where(prims.lt(x, 0.0), 0.0, x), prims.where(prims.le(x, 0.0), 0.0, x)

    graph = build({"x": ((5,), DType.float32)}, body)
    assert all(isinstance(step.kernel, Clamp) for step in plan_for(graph).steps)
    x = np.array([-0.0, 0.0, -1.0, 2.0, -0.0], np.float32)
    relu, at_most_zero = aten2prims.execute(graph, {"x": x})
    assert np.array_equal(relu, [0, 0, 0, 2, 0]) and np.array_equal(at_most_zero, [0, 0, 0, 2, 0])
    assert np.array_equal(np.signbit(relu), [True, False, False, False, True])
    assert not np.signbit(at_most_zero).any()


def test_a_negative_zero_bound_stays_a_selection() -> None:
    """where(x < -0.0, -0.0, x) keeps +0.0 where np.clip may give the bound, -0.0: not clamped,
    even on a shifted x (never -0.0)."""

    def body(x: Value) -> Value:
        shifted = prims.add(x, 3.0)
        return prims.where(prims.lt(shifted, -0.0), -0.0, shifted)

    graph = build({"x": ((4,), DType.float32)}, body)
    assert not any(isinstance(step.kernel, Clamp) for step in plan_for(graph).steps)
    x = np.array([-3.0, 1.0, -5.0, np.nan], np.float32)
    (result,) = aten2prims.execute(graph, {"x": x})
    assert np.array_equal(np.signbit(result), [False, False, True, np.signbit(np.float32(np.nan))])


@pytest.mark.parametrize("op", ["add", "sub"])
def test_zero_bounds_after_a_stored_shift_skip_the_check_when_it_holds_no_negative_zero_term(
    op: str,
) -> None:
    """relu6 of x · alpha + beta (a batch norm in evaluation, beta stored and broadcast per
    channel): one np.clip without looking for -0.0 when beta's term in the sum holds no -0.0 (a
    sum is -0.0 only when both terms are), looking for it otherwise, and when the caller
    overrides beta (its stored values say nothing then); bit for bit the node-by-node kernels'
    every time."""
    rng = np.random.default_rng(0)
    alpha = rng.standard_normal(3).astype(np.float32)
    shift = {"add": rng.standard_normal(3).astype(np.float32)}
    shift["sub"] = -shift["add"]

    def body(x: Value, alpha: Value, beta: Value) -> Value:
        scaled = prims.mul(x, prims.broadcast_in_dim(alpha, [2, 3, 5], [1]))
        ufunc = prims.add if op == "add" else prims.sub
        y = ufunc(scaled, prims.broadcast_in_dim(beta, [2, 3, 5], [1]))
        low = prims.where(prims.lt(y, 0.0), 0.0, y)
        return prims.where(prims.gt(low, 6.0), 6.0, low)

    x = np.zeros((2, 3, 5), np.float32)
    x[0] = -0.0
    x[1] = rng.standard_normal((3, 5)).astype(np.float32) * 8
    # A term -0.0 in the sum: +0.0 subtracted, or -0.0 added.
    negative_zero_term = np.float32(-0.0) if op == "add" else np.float32(0.0)
    for beta, clipped in [
        (shift[op], True),
        (np.array([0.5, negative_zero_term, 1.0], np.float32), False),
    ]:
        graph = build({"x": ((2, 3, 5), DType.float32), "alpha": alpha, "beta": beta}, body)
        (clamp,) = [s.kernel for s in plan_for(graph).steps if isinstance(s.kernel, Clamp)]
        assert (clamp.bits is None) == clipped, "-0.0 is looked for unless beta rules it out"
        bits_equal(aten2prims.execute(graph, {"x": x}), run_reference(graph, {"x": x}))
        overriding = {"x": x, "beta": np.array([-0.0, 0.0, 2.0], np.float32)}
        bits_equal(aten2prims.execute(graph, overriding), run_reference(graph, overriding))
        overridden = plan_for(graph, frozenset({"beta"}))
        (clamp,) = [s.kernel for s in overridden.steps if isinstance(s.kernel, Clamp)]
        assert clamp.bits is not None


def test_zero_bounds_after_a_residual_sum_with_a_shifted_value_skip_the_check() -> None:
    """relu(x · alpha + beta + r), a residual connection: the sum's first term is never -0.0
    (beta holds no -0.0), so neither is the sum, whatever r holds, and its clamp does not look
    for -0.0; relu(r + s) of two inputs does. Bit for bit the node-by-node kernels'."""
    alpha = np.array([1.0, -2.0, 0.5], np.float32)
    beta = np.array([0.25, -1.0, 3.0], np.float32)

    def body(x: Value, r: Value, s: Value, alpha: Value, beta: Value) -> tuple[Value, ...]:
        shifted = prims.add(
            prims.mul(x, prims.broadcast_in_dim(alpha, [4, 3], [1])),
            prims.broadcast_in_dim(beta, [4, 3], [1]),
        )
        residual = prims.add(r, shifted)
        plain = prims.add(r, s)
        return (
            prims.where(prims.lt(residual, 0.0), 0.0, residual),
            prims.where(prims.lt(plain, 0.0), 0.0, plain),
        )

    spec = ((4, 3), DType.float32)
    graph = build({"x": spec, "r": spec, "s": spec, "alpha": alpha, "beta": beta}, body)
    clamps = [s.kernel for s in plan_for(graph).steps if isinstance(s.kernel, Clamp)]
    assert [clamp.bits is None for clamp in clamps] == [True, False]
    values = np.array([-0.0, 0.0, -0.25, 1.0], np.float32)
    x = np.tile(values[:, None], (1, 3))
    inputs = {"x": x, "r": -x, "s": np.full((4, 3), -0.0, np.float32)}
    bits_equal(aten2prims.execute(graph, inputs), run_reference(graph, inputs))


@pytest.mark.parametrize("dtype", [DType.float32, DType.int64, DType.bool, DType.bfloat16])
def test_fills_agree_with_the_kernels(dtype: DType) -> None:
    """full and full_like with a literal value run as one converted value copied in parts."""
    value = {DType.bool: True, DType.int64: -3}.get(dtype, 0.1)

    def body(x: Value) -> tuple[Value, ...]:
        full = prims.full([256, 300], value, dtype=dtype, device=CPU, requires_grad=False)
        like = prims.full_like(x, value, dtype=dtype, device=CPU, requires_grad=False)
        return prims.eq(full, like), full, like

    graph = build({"x": ((256, 300), DType.float32)}, body)
    inputs = {"x": np.zeros((256, 300), np.float32)}
    expected = run_reference(graph, inputs)
    for threads in (1, 2):
        assert_same(aten2prims.execute(graph, inputs, threads=threads), expected)


@pytest.mark.parametrize("dtype", [DType.float32, DType.float64])
def test_erf_runs_its_direct_kernel_into_the_arena(dtype: DType, kernels: str) -> None:
    """erf (GELU's cost) calls prims.elementwise.erf_of directly (MKL's vector erf, or NumPy's
    passes and SciPy), written part by part into its dying operand or its arena buffer: bit for
    bit the node-by-node kernel's, whatever the thread count, also on a broadcast operand left
    to NumPy's broadcasting."""

    # Below one block of an elementwise chain (chains.py), which would run mul, erf and add.
    def body(x: Value, row: Value) -> tuple[Value, ...]:
        scaled = prims.mul(x, 0.7071067811865476)
        spread = prims.broadcast_in_dim(row, [100, 150], [1])
        # (The product reduced: written into an output, erf's result would be the output's array,
        # arena.py, not an arena buffer.)
        return prims.add(prims.erf(scaled), 1.0), prims.amax(prims.mul(prims.erf(spread), x), [1])

    graph = build({"x": ((100, 150), dtype), "row": ((150,), dtype)}, body)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((100, 150)) * 3).astype(dtype.numpy)
    x[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    inputs = {"x": x, "row": x[1].copy()}
    expected = run_reference(graph, inputs)
    for threads in (1, 2):
        bits_equal(aten2prims.execute(graph, inputs, threads=threads), expected)
    erf_steps = [s for s in plan_for(graph).steps if s.node.op == "prims.erf"]
    assert len(erf_steps) == 2 and all(s.takes_out for s in erf_steps)
    # The first writes into its dying operand (x's scaled copy), the second into the arena.
    assert erf_steps[0].out_argument == 0 and erf_steps[1].out_buffer is not None


def test_windows_and_scatters_of_permuted_layouts() -> None:
    """as_strided windows and scatters address the storage of their operand's layout: on a
    transposed operand (dense strides, permuted) they run as views of it transposed into storage
    order — RoPE's halves of a transposed q — bit for bit the generic kernels' (which rebuild
    the storage), also where a row-major reading of the operand would pick other elements."""

    def body(x: Value, y: Value) -> tuple[Value, ...]:
        q = prims.transpose(prims.mul(x, 2.0), [0, 2, 1, 3])  # [2, 4, 6, 8]{192, 8, 32, 1}
        first = prims.as_strided(q, [2, 4, 6, 4], [192, 8, 32, 1], 0)
        second = prims.as_strided(q, [2, 4, 6, 4], [192, 8, 32, 1], 4)
        rotated = prims.sub(prims.mul(first, 3.0), second)
        picked = prims.as_strided(q, [3, 2, 5], [32, 8, 1], 11)  # a window transposing q's dims
        t = prims.transpose(prims.add(y, 1.0), [1, 0])  # [6, 4]{1, 6}
        scattered = prims.as_strided_scatter(
            t, prims.neg(prims.as_strided(t, [2, 2], [4, 1], 0)), [2, 2], [4, 1], 0
        )
        return rotated, prims.mul(picked, 1.0), scattered

    graph = build({"x": ((2, 6, 4, 8), DType.float32), "y": ((4, 6), DType.float32)}, body)
    rng = np.random.default_rng(3)
    inputs = {
        "x": rng.standard_normal((2, 6, 4, 8)).astype(np.float32),
        "y": rng.standard_normal((4, 6)).astype(np.float32),
    }
    bits_equal(aten2prims.execute(graph, inputs), run_reference(graph, inputs))
    plan = plan_for(graph)
    windows = [s for s in plan.steps if s.node.op == "prims.as_strided"]
    # Positions 0, 1, 4 and 5 of t's storage are no basic index: that window stays generic.
    indexed = [s for s in windows if s.node.results[0].shape != (2, 2)]
    assert len(windows) == 4 and len(indexed) == 3
    assert all(getattr(s.kernel, "__name__", "") == "window" for s in indexed)


@pytest.mark.parametrize("infinities", [0, 3])
def test_selections_whose_predicate_is_false_everywhere(infinities: int) -> None:
    """GELU's where(x == inf, nan, y): a predicate true nowhere skips the masked write, one true
    somewhere writes it; bit for bit the kernel's either way, on one thread and in parts."""

    def body(x: Value) -> Value:
        return prims.where(prims.eq(x, math.inf), math.nan, prims.mul(x, 2.0))

    graph = build({"x": ((300, 700), DType.float32)}, body)
    x = np.random.default_rng(2).standard_normal((300, 700)).astype(np.float32)
    x.reshape(-1)[: 2 * infinities : 2] = np.inf
    expected = run_reference(graph, {"x": x})
    assert int(np.isnan(expected[0]).sum()) == infinities
    for threads in (1, 2):
        bits_equal(aten2prims.execute(graph, {"x": x}, threads=threads), expected)


def test_selections_write_into_their_dying_second_branch() -> None:
    """A where whose second branch dies there writes into it (no copy), bit for bit the
    kernel's, in parts too; never when the other branch views the same memory (where(p, t.T, t)
    would read elements it already overwrote)."""

    def body(x: Value) -> tuple[Value, ...]:
        y = prims.mul(x, 2.0)
        t = prims.add(x, 1.0)
        return (  # not outputs themselves (outputs are never written into operands)
            prims.neg(prims.where(prims.eq(x, math.inf), math.nan, y)),
            prims.neg(prims.where(prims.gt(x, 0.5), prims.transpose(t, [1, 0]), t)),
        )

    # Below one block of an elementwise chain (chains.py), which would run mul, where and neg.
    graph = build({"x": ((150, 150), DType.float32)}, body)
    x = np.random.default_rng(4).standard_normal((150, 150)).astype(np.float32)
    x[0, :3] = np.inf
    expected = run_reference(graph, {"x": x})
    for threads in (1, 2):
        bits_equal(aten2prims.execute(graph, {"x": x}, threads=threads), expected)
    wheres = [s for s in plan_for(graph).steps if s.node.op == "prims.where"]
    assert [s.out_argument for s in wheres] == [2, None]
