"""Graph passes (aten2prims/passes/: canonicalization, CSE, DCE; aten2prims/executor/folding.py):
each canonicalization rule fires where it should and keeps results bit-identical, CSE, DCE and
constant folding keep results, and the verifier accepts the graph after every pass. Results are
compared with `run_reference` (every node by its own prim kernel, nothing planned), bit for bit
and dtype and shape exact."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aten2prims
import prims
from aten2prims.executor.folding import fold_constants
from aten2prims.executor.reference import run_reference
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph, InputKind
from aten2prims.ir.values import CPU, TensorMeta, Value
from aten2prims.passes import (
    canonicalize,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    optimize,
)
from aten2prims.passes.canonicalize import (
    RULES,
    broadcast_chain,
    constant_where_branch,
    convert_chain,
    identity_broadcast,
    identity_convert,
    identity_transpose,
    identity_view,
    lossless,
    reshape_round_trip,
    rows_not_all_negative_infinity,
    transpose_chain,
)
from aten2prims.passes.verify import verify
from prims.builder import Builder

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


# -- helpers ----------------------------------------------------------------------------------------


def build(inputs: dict[str, tuple[tuple[int, ...], DType]], body: Callable[..., Any]) -> Graph:
    with Builder("g") as builder:
        values = {
            name: builder.add_input(name, TensorMeta(shape, dtype))
            for name, (shape, dtype) in inputs.items()
        }
        outputs = body(**values)
        return builder.finish(list(outputs) if isinstance(outputs, tuple) else [outputs])


def special_values(dtype: DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random values with the dtype's edge cases mixed in (extremes, zeros of both signs,
    infinities, NaN)."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape)) if shape else 1
    numpy_dtype = dtype.numpy
    if dtype.is_bool:
        return (rng.random(shape) < 0.5).astype(np.bool_)
    if dtype.is_integral:
        info = np.iinfo(numpy_dtype)
        pool = np.array(
            [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 100, info.min + 1, info.max - 1],
            dtype=np.int64,
        )
        values = rng.integers(info.min, info.max, count, dtype=np.int64, endpoint=True)
    else:
        real = (
            np.float32 if dtype in (DType.float16, DType.bfloat16, DType.complex64) else np.float64
        )
        finfo = np.finfo(real) if dtype not in (DType.float16, DType.bfloat16) else None
        big = float(finfo.max) if finfo is not None else 6e4
        pool = np.array(
            [
                0.0,
                -0.0,
                np.inf,
                -np.inf,
                np.nan,
                1.5,
                -2.5,
                300.7,
                -1e10,
                1e-30,
                big,
                -big,
                65504.0,
                3e38,
            ]
        )
        values = rng.standard_normal(count) * 1000
    values[: min(len(pool), count)] = pool[: min(len(pool), count)]
    with np.errstate(all="ignore"):
        if dtype.is_complex:
            values = values + 1j * np.roll(values, 3)
        return np.asarray(values).astype(numpy_dtype).reshape(shape)


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    return {
        gi.name: special_values(gi.value.dtype, gi.value.shape, seed + i)
        for i, gi in enumerate(graph.inputs)
        if gi.data is None
    }


def assert_bit_identical(ours: list[Any], expected: list[Any]) -> None:
    assert len(ours) == len(expected)
    for a, b in zip(ours, expected):
        assert type(a) is type(b)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes() or _same_up_to_nan_payload(a, b), (a, b)
        else:
            assert a == b or (a != a and b != b)


def _same_up_to_nan_payload(a: np.ndarray, b: np.ndarray) -> bool:
    """Bytes equal except where both hold NaN (NumPy does not promise NaN payloads)."""
    if a.dtype.kind not in "fcV":
        return False
    a_nan, b_nan = (
        np.isnan(a.astype(np.complex128) if a.dtype.kind == "c" else a.astype(np.float64)),
        np.isnan(b.astype(np.complex128) if b.dtype.kind == "c" else b.astype(np.float64)),
    )
    if not np.array_equal(a_nan, b_nan):
        return False
    keep = ~a_nan
    return a[keep].tobytes() == b[keep].tobytes()


def rewritten_by(rule: Callable[..., Any], graph: Graph) -> Graph:
    """The graph canonicalized by `rule` alone, checked to differ and to verify."""
    rewritten = canonicalize(graph, [rule])
    assert rewritten is not graph, f"{rule.__name__} did not fire"
    verify(rewritten)
    return rewritten


def check_rule(rule: Callable[..., Any], graph: Graph, seeds: int = 3) -> Graph:
    rewritten = rewritten_by(rule, graph)
    for seed in range(seeds):
        inputs = random_inputs(graph, seed)
        assert_bit_identical(run_reference(rewritten, inputs), run_reference(graph, inputs))
    return rewritten


def ops(graph: Graph) -> list[str]:
    return [node.op.removeprefix("prims.") for node in graph.nodes]


# -- each rule ----------------------------------------------------------------------------------------


def test_identity_convert() -> None:
    graph = build(
        {"x": ((3, 4), DType.float32)},
        lambda x: prims.exp(prims.convert_element_type(x, DType.float32)),
    )
    rewritten = check_rule(identity_convert, graph)
    assert ops(rewritten) == ["exp"]


DTYPES = list(DType)
CHAINS = [
    (a, b, c) for a, b, c in itertools.product(DTYPES, repeat=3) if a is not b and lossless(a, b)
]


def test_lossless_table_is_conservative() -> None:
    # Narrowing, sign changes and float -> integer are never lossless; widening floats are.
    assert not lossless(DType.float32, DType.float16)
    assert not lossless(DType.float16, DType.bfloat16) and not lossless(
        DType.bfloat16, DType.float16
    )
    assert not lossless(DType.int8, DType.uint8) and not lossless(DType.uint8, DType.int8)
    assert not lossless(DType.int32, DType.float32) and lossless(DType.int32, DType.float64)
    assert not lossless(DType.float32, DType.int64) and not lossless(DType.int64, DType.bool)
    assert lossless(DType.float16, DType.float32) and lossless(DType.bool, DType.bfloat16)
    assert not lossless(DType.complex64, DType.float64)


def test_convert_chains_every_dtype_triple() -> None:
    """convert(convert(x, b), c) -> convert(x, c) for every dtype triple the rule accepts, on
    edge values (NaN, infinities, signed zeros, extremes): bit-identical (NaN payloads aside)."""
    assert len(CHAINS) > 150
    fired = 0
    for a, b, c in CHAINS:
        graph = build(
            {"x": ((24,), a)},
            lambda x: prims.convert_element_type(prims.convert_element_type(x, b), c),
        )
        rewritten = canonicalize(graph, [convert_chain, identity_convert])
        assert rewritten is not graph
        verify(rewritten)
        live = eliminate_dead_code(rewritten)
        assert len(live.nodes) == (0 if c is a else 1), (a, b, c)
        inputs = {"x": special_values(a, (24,))}
        assert_bit_identical(run_reference(live, inputs), run_reference(graph, inputs))
        fired += 1
    assert fired == len(CHAINS)


def test_lossy_chains_are_kept() -> None:
    graph = build(
        {"x": ((4,), DType.float32)},
        lambda x: prims.convert_element_type(
            prims.convert_element_type(x, DType.float16), DType.float32
        ),
    )
    assert canonicalize(graph) is graph


def test_identity_broadcast() -> None:
    graph = build(
        {"x": ((3, 4), DType.float32)},
        lambda x: prims.neg(prims.broadcast_in_dim(x, [3, 4], [0, 1])),
    )
    assert ops(check_rule(identity_broadcast, graph)) == ["neg"]


def test_broadcast_chain() -> None:
    def body(x: Value) -> Value:
        return prims.neg(
            prims.broadcast_in_dim(prims.broadcast_in_dim(x, [1, 4], [1]), [2, 3, 4], [1, 2])
        )

    rewritten = check_rule(broadcast_chain, build({"x": ((4,), DType.int32)}, body))
    node = eliminate_dead_code(rewritten).nodes[0]
    assert node.op == "prims.broadcast_in_dim" and list(node.kwargs["broadcast_dimensions"]) == [2]


def test_identity_transpose() -> None:
    graph = build({"x": ((3, 4), DType.float64)}, lambda x: prims.neg(prims.transpose(x, [0, 1])))
    assert ops(check_rule(identity_transpose, graph)) == ["neg"]


def test_transpose_chain() -> None:
    def body(x: Value) -> Value:
        return prims.neg(prims.transpose(prims.transpose(x, [1, 2, 0]), [2, 0, 1]))

    rewritten = canonicalize(build({"x": ((2, 3, 4), DType.float32)}, body))
    assert ops(eliminate_dead_code(rewritten)) == ["neg"]  # the composition is the identity
    check_rule(
        transpose_chain,
        build(
            {"x": ((2, 3, 4), DType.float32)},
            lambda x: prims.neg(prims.transpose(prims.transpose(x, [1, 2, 0]), [1, 0, 2])),
        ),
    )


def test_identity_view() -> None:
    def body(x: Value) -> Value:
        return prims.neg(prims.collapse_view(prims.squeeze(x, []), 1, 1))

    rewritten = canonicalize(build({"x": ((2, 3, 4), DType.float32)}, body), [identity_view])
    assert ops(rewritten) == ["neg"]
    check_rule(
        identity_view,
        build({"x": ((2, 3), DType.bool)}, lambda x: prims.bitwise_not(prims.squeeze(x, []))),
    )


def test_reshape_round_trip() -> None:
    def body(x: Value) -> Value:
        return prims.neg(prims.split_dim(prims.collapse_view(x, 0, 1), 0, 2))

    rewritten = check_rule(reshape_round_trip, build({"x": ((2, 3, 4), DType.float32)}, body))
    assert ops(eliminate_dead_code(rewritten)) == ["neg"]


def test_constant_where_branch() -> None:
    """The safe softmax's where(all -inf, full_like(s, 0), s): the zero a number operand (the
    executor's bit product then selects); fills a dtype does not hold exactly stay tensors."""

    def body(x: Value, p: Value) -> tuple[Value, ...]:
        zeros = prims.full_like(x, 0, dtype=DType.float32, device=CPU, requires_grad=False)
        twos = prims.full([3, 4], 2.5, dtype=DType.float32, device=CPU, requires_grad=False)
        tiny = prims.full([3, 4], 0.1, dtype=DType.float32, device=CPU, requires_grad=False)
        negative_zero = prims.full(
            [3, 4], -0.0, dtype=DType.float32, device=CPU, requires_grad=False
        )
        return (
            prims.where(p, zeros, x),
            prims.where(p, x, twos),
            prims.where(p, tiny, x),  # 0.1 is not a float32
            prims.where(p, negative_zero, x),
            prims.where(p, zeros, twos),  # one branch stays a tensor
        )

    graph = build({"x": ((3, 4), DType.float32), "p": ((3, 4), DType.bool)}, body)
    rewritten = check_rule(constant_where_branch, graph)
    wheres = [node for node in rewritten.nodes if node.op == "prims.where"]
    numbers = [[a for a in node.args[1:] if type(a) is not Value] for node in wheres]
    assert numbers == [[0], [2.5], [], [-0.0], [0]]
    assert ops(eliminate_dead_code(rewritten)).count("full") == 2  # 0.1's and the kept 2.5


def test_copies_are_kept() -> None:
    """clone and reshape copies give the executor a row-major layout: never removed."""
    graph = build(
        {"x": ((3, 4), DType.float32)},
        lambda x: prims.neg(prims.clone(prims.transpose(x, [1, 0]), memory_format=None)),
    )
    assert canonicalize(graph) is graph


def test_rows_not_all_negative_infinity() -> None:
    """The safe softmax's check for rows of -inf alone, any(logical_not(eq(x, -inf))), is the
    row maximum the softmax already took compared with -inf: bit for bit the same rows, NaN rows,
    rows of -inf and -inf mixed with numbers included; without that maximum in the graph, or for
    another bound, the rule does not fire."""

    def body(x: Value) -> tuple[Value, ...]:
        peak = prims.amax(x, [1])
        masked = prims.eq(prims.eq(x, -math.inf), False)
        return prims.sub(x, prims.broadcast_in_dim(peak, [6, 5], [0])), prims.amax(masked, [1])

    graph = build({"x": ((6, 5), DType.float32)}, body)
    rewritten = check_rule(rows_not_all_negative_infinity, graph)
    live = eliminate_dead_code(rewritten)
    assert ops(live).count("amax") == 1 and "eq" not in ops(live) and "ne" in ops(live)
    inf, nan = math.inf, math.nan
    x = np.array(
        [
            [-inf] * 5,
            [-inf, -inf, 1.0, -inf, -inf],
            [nan, -inf, -inf, -inf, -inf],
            [nan] * 5,
            [inf, -inf, 0.0, -0.0, 2.0],
            [1.0, 2.0, 3.0, 4.0, 5.0],
        ],
        np.float32,
    )
    expected = run_reference(graph, {"x": x})
    assert expected[1].tolist() == [False, True, True, True, True, True]
    assert_bit_identical(run_reference(live, {"x": x}), expected)

    def without_the_maximum(x: Value) -> Value:
        return prims.amax(prims.eq(prims.eq(x, -math.inf), False), [1])

    def another_bound(x: Value) -> tuple[Value, ...]:
        return prims.amax(x, [1]), prims.amax(prims.eq(prims.eq(x, math.inf), False), [1])

    for other in (without_the_maximum, another_bound):
        graph = build({"x": ((6, 5), DType.float32)}, other)
        assert canonicalize(graph, [rows_not_all_negative_infinity]) is graph


def test_every_rule_is_tested() -> None:
    tested = {
        "identity_convert",
        "convert_chain",
        "identity_broadcast",
        "broadcast_chain",
        "identity_transpose",
        "transpose_chain",
        "identity_view",
        "reshape_round_trip",
        "constant_where_branch",
        "rows_not_all_negative_infinity",
    }
    assert {rule.__name__ for rule in RULES} == tested


# -- CSE, DCE ------------------------------------------------------------------------------------------


def test_cse_merges_repeats_and_keeps_results() -> None:
    def body(x: Value, w: Value) -> tuple[Value, ...]:
        a = prims.mul(prims.transpose(w, [1, 0]), 2.0)
        b = prims.mul(prims.transpose(w, [1, 0]), 2.0)
        c = prims.mul(prims.transpose(w, [1, 0]), 2)  # an int literal: a node of its own
        return prims.add(x, a), prims.sub(x, b), c

    graph = build({"x": ((4, 3), DType.float32), "w": ((3, 4), DType.float32)}, body)
    merged = eliminate_common_subexpressions(graph)
    verify(merged)
    assert (
        len(merged.nodes) == len(graph.nodes) - 3
    )  # two of three transposes, one of two muls by 2.0
    assert ops(merged).count("mul") == 2  # 2.0 and 2 are different literals
    inputs = random_inputs(graph)
    assert_bit_identical(run_reference(merged, inputs), run_reference(graph, inputs))


def test_cse_tells_literals_apart() -> None:
    def body(x: Value) -> tuple[Value, ...]:
        return (
            prims.mul(x, 0.0),
            prims.mul(x, -0.0),
            prims.add(x, float("nan")),
            prims.add(x, float("nan")),
        )

    merged = eliminate_common_subexpressions(build({"x": ((3,), DType.float32)}, body))
    assert ops(merged) == ["mul", "mul", "add"]


def test_cse_never_merges_random_draws() -> None:
    def body(x: Value) -> tuple[Value, ...]:
        draw = dict(mean=0.0, std=1.0, dtype=DType.float32, device=CPU, requires_grad=False)
        return prims.add(x, prims.normal([3], **draw)), prims.add(x, prims.normal([3], **draw))

    graph = build({"x": ((3,), DType.float32)}, body)
    assert eliminate_common_subexpressions(graph) is graph
    first, second = aten2prims.execute(graph, {"x": np.zeros(3, np.float32)}, seed=0)
    assert not np.array_equal(first, second)


def test_dce_drops_unused_nodes() -> None:
    def body(x: Value) -> Value:
        prims.exp(x)  # unused
        return prims.neg(x)

    graph = build({"x": ((3,), DType.float32)}, body)
    pruned = eliminate_dead_code(graph)
    verify(pruned)
    assert ops(pruned) == ["neg"]


# -- on real graphs: the bundled examples ----------------------------------------------------------------


@pytest.fixture(scope="module", params=["mlp", "cnn", "transformer"])
def example(request: pytest.FixtureRequest) -> tuple[Graph, dict[str, np.ndarray]]:
    lowered = aten2prims.lower(aten2prims.load(EXAMPLES / f"{request.param}.pt2"))
    with np.load(EXAMPLES / f"{request.param}.inputs.npz") as archive:
        inputs = {name: archive[name] for name in archive.files}
    return lowered, inputs


def test_each_pass_verifies_and_keeps_results_on_examples(
    example: tuple[Graph, dict[str, np.ndarray]],
) -> None:
    graph, inputs = example
    expected = run_reference(graph, inputs)
    current = graph
    for graph_pass in (canonicalize, eliminate_common_subexpressions, eliminate_dead_code):
        current = graph_pass(current)
        verify(current)
        assert_bit_identical(run_reference(current, inputs), expected)
    assert len(optimize(graph).nodes) <= len(graph.nodes)


def test_rules_fire_on_examples(example: tuple[Graph, dict[str, np.ndarray]]) -> None:
    """Each example graph loses nodes to the rules (broadcast and view chains of the lowering)."""
    graph, inputs = example
    changed = [rule.__name__ for rule in RULES if canonicalize(graph, [rule]) is not graph]
    assert changed or graph.name == "mlp", "no rule fired"  # the MLP's lowering has nothing to tidy
    for name in changed:
        rule = next(r for r in RULES if r.__name__ == name)
        rewritten = canonicalize(graph, [rule])
        verify(rewritten)
        assert_bit_identical(run_reference(rewritten, inputs), run_reference(graph, inputs))


def test_folding_keeps_results_on_examples(
    example: tuple[Graph, dict[str, np.ndarray]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folded values are what the nodes compute (bit for bit). Stored row-major for BLAS, they
    may change the order in which an unfused NumPy sum adds (its pairwise order follows the
    layout): rounding only."""
    from aten2prims.executor import folding

    graph, inputs = example
    expected = run_reference(graph, inputs)
    folded, constants = fold_constants(optimize(graph))
    assert constants.folded_nodes > 0  # weight transposes, bias broadcasts, batch norm factors
    verify(folded)
    new_constants = [gi for gi in folded.inputs if gi not in graph.inputs]
    assert new_constants and all(
        gi.kind is InputKind.CONSTANT and not gi.data.flags.writeable for gi in new_constants
    )
    for ours, theirs in zip(run_reference(folded, inputs), expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(folding, "SMALL_BYTES", 0)  # folded views stay views
    monkeypatch.setattr(folding, "REUSED_BYTES", 0)
    assert_bit_identical(run_reference(fold_constants(optimize(graph))[0], inputs), expected)


def test_folding_skips_overridden_inputs(example: tuple[Graph, dict[str, np.ndarray]]) -> None:
    """With every stored input overridden, nothing computed from one folds."""
    graph, _ = example
    stored = {gi.value for gi in graph.inputs if gi.data is not None}
    folded, _ = fold_constants(graph, frozenset(v.name for v in stored))
    kept = set(map(id, folded.nodes))
    assert all(
        id(node) in kept for node in graph.nodes if any(v in stored for v in node.operand_values())
    )


def test_folding_leaves_big_broadcasts_and_failing_nodes() -> None:
    """A broadcast of a constant read by an unfolded node stays a (free) view; a constant node
    whose kernel fails is left to fail at run time with the executor's message."""

    def body(x: Value, w: Value, k: Value) -> tuple[Value, ...]:
        return prims.add(x, prims.broadcast_in_dim(prims.neg(w), [5, 3], [1])), prims.div(
            k, prims.sub(k, k)
        )

    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((5, 3), DType.float32))
        w = builder.add_input(
            "w",
            TensorMeta((3,), DType.float32),
            InputKind.PARAMETER,
            "w",
            np.arange(3, dtype=np.float32),
        )
        k = builder.add_input(
            "k", TensorMeta((2,), DType.int64), InputKind.BUFFER, "k", np.array([1, 2])
        )
        graph = builder.finish(list(body(x, w, k)))
    folded, _constants = fold_constants(graph)
    verify(folded)
    assert ops(folded) == [
        "broadcast_in_dim",
        "add",
        "div",
    ]  # neg and sub folded; the division by zero is not
    with pytest.raises(aten2prims.ExecutionError, match="prims.div"):
        aten2prims.execute(graph, {"x": np.zeros((5, 3), np.float32)})


@pytest.mark.parametrize(("dtype", "row_major"), [(DType.float32, False), (DType.float64, True)])
def test_folded_transposed_weights(dtype: DType, row_major: bool) -> None:
    """A small folded view is stored row-major (a copy), except a float32 transposed matrix: the
    contraction kernel multiplies by those fastest as they are (ContractionTuning.swap_rows)."""
    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((32, 64), dtype))
        data = np.arange(64 * 32, dtype=dtype.numpy).reshape(64, 32)
        w = builder.add_input("w", TensorMeta((64, 32), dtype), InputKind.PARAMETER, "w", data)
        graph = builder.finish([prims.add(prims.transpose(w, [1, 0]), x)])
    folded, constants = fold_constants(graph)
    assert constants.folded_nodes == 1
    (constant,) = [gi for gi in folded.inputs if gi.kind is InputKind.CONSTANT]
    assert constant.data.flags.c_contiguous is row_major
    np.testing.assert_array_equal(constant.data, data.T)
