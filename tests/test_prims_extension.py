"""The extension prims of prims/indexing.py (gather_nd, scatter_nd, sort, nonzero) and
prims/complex_parts.py (complex): kernel semantics against torch 2.13, bounds errors, meta rules — and, through whole aten graphs, that an
out-of-range index makes execution raise without reading or writing out of bounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from prims_testing import (
    DTYPES,
    assert_bitwise,
    kernel_call,
    ours_meta,
    random_array,
    rng_for,
    run_prim,
)

from aten2prims.errors import DTypeError, ExecutionError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy, to_torch
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta
from aten2prims.passes.lower import lower
from aten2prims.testing.compare import compare
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph, torch_outputs
from prims.registry import PRIMS, lookup

EXTENSIONS = ("gather_nd", "scatter_nd", "sort", "nonzero", "complex")
ORDERED = tuple(d for d in DTYPES if not d.is_complex)
i64 = DType.int64
f32 = DType.float32


def _index(values: list | np.ndarray, dtype: type = np.int64) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def test_extension_prims_are_marked_and_documented() -> None:
    for name in EXTENSIONS:
        assert PRIMS[name].extension and PRIMS[name].implemented and PRIMS[name].doc


# -- complex ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [DType.float32, DType.float64], ids=str)
def test_complex_matches_torch_complex_bit_for_bit(dtype: DType) -> None:
    """Every pair of special parts (an infinite part leaves the other one as it is) and random
    transposed parts; a 0-dim part joins any shape."""
    parts = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], dtype=dtype.numpy)
    real, imag = (np.ascontiguousarray(a) for a in np.meshgrid(parts, parts))
    rng = rng_for("complex", dtype)
    cases = [
        (real, imag),
        (random_array((4, 3), dtype, rng).T, random_array((4, 3), dtype, rng).T),
        (random_array((2, 5), dtype, rng), np.asarray(-0.0, dtype=dtype.numpy)),
    ]
    for first, second in cases:
        (ours,) = run_prim("complex", first, second)
        theirs = torch.complex(to_torch(first), to_torch(second))
        assert_bitwise(ours, to_numpy(theirs))


def test_complex_meta_gives_the_complex_dtype_and_refuses_what_torch_refuses() -> None:
    f64 = DType.float64
    assert ours_meta("complex", TensorMeta((2, 3), f64), TensorMeta((2, 3), f64)) == TensorMeta(
        (2, 3), DType.complex128
    )
    assert ours_meta("complex", TensorMeta((2, 3), f32), TensorMeta((), f32)).dtype is (
        DType.complex64
    )
    with pytest.raises(DTypeError, match="complex32"):
        ours_meta("complex", TensorMeta((2,), DType.float16), TensorMeta((2,), DType.float16))
    for dtype in (DType.bfloat16, DType.int64, DType.complex64):
        with pytest.raises(DTypeError, match="not supported|expected"):
            ours_meta("complex", TensorMeta((2,), dtype), TensorMeta((2,), dtype))
    with pytest.raises(DTypeError, match="different dtypes"):
        ours_meta("complex", TensorMeta((2,), f32), TensorMeta((2,), DType.float64))
    with pytest.raises(ShapeError, match="different shapes"):
        ours_meta("complex", TensorMeta((2,), f32), TensorMeta((3,), f32))


# -- gather_nd --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_nd_matches_torch_advanced_indexing(dtype: DType) -> None:
    rng = rng_for("gather_nd", dtype)
    a = random_array((4, 5, 3), dtype, rng)
    indices = [rng.integers(0, n, (2, 6)) for n in a.shape]
    indices[1] = indices[1].astype(np.int32)
    (ours,) = run_prim("gather_nd", a, indices)
    theirs = to_numpy(to_torch(a)[tuple(torch.from_numpy(i).long() for i in indices)])
    assert_bitwise(ours, theirs)


def test_gather_nd_reads_broadcast_indices() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows = np.broadcast_to(_index([[2], [0]]), (2, 4))
    columns = np.broadcast_to(_index([3, 2, 1, 0]), (2, 4))
    (ours,) = run_prim("gather_nd", a, [rows, columns])
    assert_bitwise(ours, a[::-2, ::-1])


@pytest.mark.parametrize("bad", [-1, 5, 100])
def test_gather_nd_rejects_out_of_range_indices(bad: int) -> None:
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    with pytest.raises(
        ExecutionError, match=rf"index {bad} is out of bounds for dimension 1 with size 5"
    ):
        run_prim("gather_nd", a, [_index([0, 1]), _index([4, bad])])


def test_gather_nd_meta() -> None:
    a = TensorMeta((3, 4), f32)
    assert ours_meta(
        "gather_nd", a, [TensorMeta((2, 5), i64), TensorMeta((2, 5), DType.int32)]
    ) == TensorMeta((2, 5), f32)
    with pytest.raises(ShapeError, match="one index tensor per dimension"):
        ours_meta("gather_nd", a, [TensorMeta((2,), i64)])
    with pytest.raises(ShapeError, match="one shape"):
        ours_meta("gather_nd", a, [TensorMeta((2,), i64), TensorMeta((3,), i64)])
    with pytest.raises(DTypeError):
        ours_meta("gather_nd", a, [TensorMeta((2,), DType.int16), TensorMeta((2,), i64)])
    with pytest.raises(ShapeError, match="at least one dimension"):
        ours_meta("gather_nd", TensorMeta((), f32), [])


# -- scatter_nd -------------------------------------------------------------------------------------------


def _positions(shape: tuple[int, ...], count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Random coordinates with many duplicates."""
    return [rng.integers(0, max(n // 2, 1), count) for n in shape]


REDUCTIONS = [
    (d, r)
    for d in DTYPES
    for r in ("sum", "prod", "amax", "amin")
    if not (d.is_complex and r in ("amax", "amin"))
]


@pytest.mark.parametrize("dtype, reduce", REDUCTIONS, ids=[f"{d}-{r}" for d, r in REDUCTIONS])
def test_scatter_nd_reductions_match_torch(dtype: DType, reduce: str) -> None:
    rng = rng_for("scatter_nd", dtype, reduce)
    a = random_array((4, 6), dtype, rng, special=False, scale=2.0)
    indices = _positions(a.shape, 15, rng)
    values = random_array((15,), dtype, rng, special=False, scale=2.0)
    (ours,) = run_prim("scatter_nd", a, indices, values, reduce)
    flat = np.ravel_multi_index(indices, a.shape)
    if dtype is DType.bool:
        # torch's scatter_reduce has no bool kernel: logical or / and / or / and.
        combine = {
            "sum": np.logical_or,
            "prod": np.logical_and,
            "amax": np.logical_or,
            "amin": np.logical_and,
        }[reduce]
        expected = a.reshape(-1).copy()
        combine.at(expected, flat, values)
        assert_bitwise(ours, expected.reshape(a.shape))
        return
    theirs = (
        to_torch(a).reshape(-1).scatter_reduce(0, torch.from_numpy(flat), to_torch(values), reduce)
    )
    # torch accumulates float16/bfloat16 step by step in their own precision, we in float32: judge
    # by the float64 result (the "closer than torch" rule).
    wide = np.complex128 if dtype.is_complex else np.float64
    reference = a.reshape(-1).astype(wide)
    {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[reduce].at(
        reference, flat, values.astype(wide)
    )
    verdict = compare(ours, to_numpy(theirs).reshape(a.shape), reference=reference.reshape(a.shape))
    assert verdict, verdict.message


def test_scatter_nd_without_reduce_keeps_the_last_write() -> None:
    a = np.zeros((2, 3), np.int32)
    rows, columns = _index([1, 0, 1, 1, 0]), _index([2, 0, 2, 2, 1])
    values = np.array([10, 20, 30, 40, 50], np.int32)
    (ours,) = run_prim("scatter_nd", a, [rows, columns], values, None)
    np.testing.assert_array_equal(ours, [[20, 50, 0], [0, 0, 40]])


def test_scatter_nd_propagates_nan_through_amax() -> None:
    a = np.array([0.0, 5.0, np.nan], np.float32)
    (ours,) = run_prim(
        "scatter_nd", a, [_index([0, 1, 1, 2])], np.array([np.nan, 1, 7, 3], np.float32), "amax"
    )
    np.testing.assert_array_equal(ours, np.array([np.nan, 7, np.nan], np.float32))


def test_scatter_nd_accumulates_float16_in_float32() -> None:
    # 2048 + 1 + 1 + 1 + 1: in float16 each step of one would be lost (torch's index_put_ gives
    # 2048); accumulated in float32 and rounded once, as torch's scatter_add does, it is 2052.
    a = np.array([2048.0], np.float16)
    (ours,) = run_prim("scatter_nd", a, [_index([0, 0, 0, 0])], np.ones(4, np.float16), "sum")
    assert ours[0] == np.float16(2052.0)
    theirs = torch.scatter_add(
        torch.tensor([2048.0], dtype=torch.float16),
        0,
        torch.zeros(4, dtype=torch.long),
        torch.ones(4, dtype=torch.float16),
    )
    assert theirs.item() == 2052.0


@pytest.mark.parametrize("bad", [-1, 3])
def test_scatter_nd_rejects_out_of_range_indices_and_writes_nothing(bad: int) -> None:
    a = np.zeros((3,), np.float32)
    with pytest.raises(
        ExecutionError, match=rf"index {bad} is out of bounds for dimension 0 with size 3"
    ):
        run_prim("scatter_nd", a, [_index([0, bad])], np.ones(2, np.float32), "sum")
    assert not a.any()


def test_scatter_nd_meta() -> None:
    a = TensorMeta((3, 4), f32)
    index = TensorMeta((5,), i64)
    assert ours_meta("scatter_nd", a, [index, index], TensorMeta((5,), f32), "sum") == a
    with pytest.raises(ShapeError, match="values have shape"):
        ours_meta("scatter_nd", a, [index, index], TensorMeta((4,), f32), None)
    with pytest.raises(DTypeError, match="convert values first"):
        ours_meta("scatter_nd", a, [index, index], TensorMeta((5,), DType.float64), None)
    with pytest.raises(ShapeError, match="reduce must be one of"):
        ours_meta("scatter_nd", a, [index, index], TensorMeta((5,), f32), "mean")
    with pytest.raises(DTypeError, match="ordered dtype"):
        ours_meta(
            "scatter_nd",
            TensorMeta((3,), DType.complex64),
            [index],
            TensorMeta((5,), DType.complex64),
            "amax",
        )


# -- sort ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ORDERED, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_torch_stable_sort(dtype: DType, descending: bool) -> None:
    rng = rng_for("sort", dtype, descending)
    a = random_array((5, 40), dtype, rng, scale=2.0)
    if dtype.is_floating:
        a = np.round(a.astype(np.float64)).astype(dtype.numpy)  # ties, NaN, ±inf, ±0
    elif dtype.is_integer:
        a = (a % 4).astype(dtype.numpy)  # ties
    for dim in (0, 1):
        values, indices = run_prim("sort", a, dim, descending)
        theirs = torch.sort(to_torch(a), dim=dim, descending=descending, stable=True)
        assert_bitwise(indices, to_numpy(theirs.indices), what=f"indices along {dim}")
        assert_bitwise(values, to_numpy(theirs.values), what=f"values along {dim}")


def test_sort_puts_nan_last_and_keeps_ties_in_order() -> None:
    a = np.array([1.0, np.nan, -np.inf, 1.0, np.nan, 0.0, -0.0], np.float32)
    _values, indices = run_prim("sort", a, 0, False)
    np.testing.assert_array_equal(indices, [2, 5, 6, 0, 3, 1, 4])
    _values, indices = run_prim("sort", a, 0, True)
    np.testing.assert_array_equal(indices, [1, 4, 0, 3, 5, 6, 2])


def test_sort_of_a_0_dim_tensor_and_meta() -> None:
    values, indices = run_prim("sort", np.array(3, np.int8), 0, True)
    assert values == 3 and indices.dtype == np.int64 and indices.shape == ()
    assert ours_meta("sort", TensorMeta((2, 3), f32), 1, False) == (
        TensorMeta((2, 3), f32),
        TensorMeta((2, 3), i64),
    )
    with pytest.raises(DTypeError):
        ours_meta("sort", TensorMeta((2,), DType.complex64), 0, False)
    with pytest.raises(ShapeError):
        ours_meta("sort", TensorMeta((2,), f32), 1, False)


# -- nonzero ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nonzero_matches_torch(dtype: DType) -> None:
    rng = rng_for("nonzero", dtype)
    a = random_array((3, 4, 5), dtype, rng)
    a[rng.random(a.shape) < 0.5] = 0
    theirs = to_numpy(torch.nonzero(to_torch(a)))
    (ours,) = run_prim("nonzero", a, theirs.shape[0])
    assert_bitwise(ours, theirs)


def test_nonzero_checks_the_declared_count() -> None:
    a = np.array([[0, 1], [2, 0]], np.int16)
    assert kernel_call("nonzero", a, 2).tolist() == [[0, 1], [1, 0]]
    with pytest.raises(ExecutionError, match="has 2 nonzero element.*declares 3"):
        run_prim("nonzero", a, 3)
    assert ours_meta("nonzero", TensorMeta((), DType.bool), 1) == TensorMeta((1, 0), i64)
    with pytest.raises(ShapeError, match="exceeds"):
        ours_meta("nonzero", TensorMeta((2,), DType.bool), 3)


# -- whole aten graphs: out-of-range indices raise, nothing is read or written out of bounds -------------------


def _lowered(op: str, *args: object, **kwargs: object):
    """The lowered graph of one aten call (recorded with valid arguments) and its input arrays."""
    call = AtenCall(op, args, kwargs)
    graph, arrays = build_graph(call, torch_outputs(call))
    return lower(graph), arrays


def _run_with(graph, arrays: dict, **replacements: np.ndarray) -> list:
    inputs = {**arrays, **replacements}
    before = {name: array.copy() for name, array in inputs.items()}
    try:
        return execute(graph, inputs, check=True)
    finally:
        for name, array in inputs.items():
            np.testing.assert_array_equal(array, before[name], err_msg=f"input {name} was modified")


OUT_OF_RANGE = [
    # (op, args with a valid index, the input name of the index, an out-of-range index, expected message)
    (
        "aten.gather.default",
        (torch.ones(3, 4), 1, torch.tensor([[0, 3]])),
        "a1",
        [[0, 4]],
        "index 4 .* size 4",
    ),
    (
        "aten.gather.default",
        (torch.ones(3, 4), 0, torch.tensor([[0, 2]])),
        "a1",
        [[0, -1]],
        "index -1 .* size 3",
    ),
    (
        "aten.index_select.default",
        (torch.ones(3, 4), 0, torch.tensor([2, 0])),
        "a1",
        [3, 0],
        "index 3 .* size 3",
    ),
    (
        "aten.embedding.default",
        (torch.ones(5, 2), torch.tensor([[4, 0]])),
        "a1",
        [[5, 0]],
        "index 5 .* size 5",
    ),
    (
        "aten.index.Tensor",
        (torch.ones(3, 4), [None, torch.tensor([3, -4])]),
        "a1",
        [4, 0],
        "index 4 .* size 4",
    ),
    (
        "aten.index.Tensor",
        (torch.ones(3, 4), [torch.tensor([-3])]),
        "a1",
        [-4],
        "index -1 .* size 3",
    ),
    (
        "aten.index_put.default",
        (torch.zeros(3), [torch.tensor([1, 2])], torch.ones(2), True),
        "a1",
        [1, 3],
        "index 3 .* size 3",
    ),
    (
        "aten.scatter.src",
        (torch.zeros(2, 3), 1, torch.tensor([[2]]), torch.ones(1, 1)),
        "a1",
        [[3]],
        "index 3 .* size 3",
    ),
    (
        "aten.scatter_add.default",
        (torch.zeros(2, 3), 0, torch.tensor([[1, 0]]), torch.ones(1, 2)),
        "a1",
        [[2, 0]],
        "index 2 .* size 2",
    ),
    (
        "aten.scatter_reduce.two",
        (torch.zeros(4), 0, torch.tensor([1, 0]), torch.ones(2), "amax"),
        "a1",
        [1, -1],
        "index -1 .* size 4",
    ),
]


@pytest.mark.parametrize(
    "op, args, name, bad, message", OUT_OF_RANGE, ids=[f"{c[0]}-{c[3]}" for c in OUT_OF_RANGE]
)
def test_out_of_range_indices_raise_at_execution(
    op: str, args: tuple, name: str, bad: list, message: str
) -> None:
    graph, arrays = _lowered(op, *args)
    _run_with(graph, arrays)  # the recorded index runs
    with pytest.raises(ExecutionError, match=message):
        _run_with(graph, arrays, **{name: np.asarray(bad, arrays[name].dtype)})


def test_masked_scatter_with_too_small_a_source_raises() -> None:
    graph, arrays = _lowered(
        "aten.masked_scatter.default",
        torch.zeros(4),
        torch.tensor([True, False, True, False]),
        torch.ones(2),
    )
    _run_with(graph, arrays)
    with pytest.raises(ExecutionError, match="out of bounds"):
        _run_with(graph, arrays, a1=np.array([True, True, True, False]))


def test_boolean_mask_index_checks_the_recorded_count() -> None:
    mask = torch.tensor([True, False, True])
    graph, arrays = _lowered("aten.index.Tensor", torch.arange(6.0).reshape(3, 2), [mask])
    np.testing.assert_array_equal(_run_with(graph, arrays)[0], [[0, 1], [4, 5]])
    with pytest.raises(ExecutionError, match="has 3 nonzero element.*declares 2"):
        _run_with(graph, arrays, a1=np.array([True, True, True]))


def test_nonzero_graph_checks_the_recorded_count() -> None:
    graph, arrays = _lowered("aten.nonzero.default", torch.tensor([[0, 3], [1, 0]]))
    np.testing.assert_array_equal(_run_with(graph, arrays)[0], [[0, 1], [1, 0]])
    with pytest.raises(ExecutionError, match="declares 2"):
        _run_with(graph, arrays, a0=np.array([[0, 0], [1, 0]]))


def test_graphs_use_only_the_four_extension_prims() -> None:
    used: set[str] = set()
    for op, args, *_ in OUT_OF_RANGE:
        graph, _ = _lowered(op, *args)
        used |= {
            node.op.removeprefix("prims.") for node in graph.nodes if lookup(node.op).extension
        }
    graph, _ = _lowered("aten.topk.default", torch.ones(5), 2)
    used |= {node.op.removeprefix("prims.") for node in graph.nodes if lookup(node.op).extension}
    assert used <= set(EXTENSIONS) and {"gather_nd", "scatter_nd", "sort"} <= used
    assert {name for name, prim in PRIMS.items() if prim.extension} >= set(EXTENSIONS)


def test_lowered_indexing_graphs_print_parse_verify_and_run() -> None:
    from aten2prims.ir.graph import graphs_equal
    from aten2prims.ir.parser import parse
    from aten2prims.passes.verify import verify

    cases = [
        (
            "aten.index.Tensor",
            (
                torch.arange(12.0).reshape(3, 4),
                [torch.tensor([True, False, True]), torch.tensor([1])],
            ),
        ),
        ("aten.index_put.default", (torch.zeros(4), [torch.tensor([1, 1])], torch.ones(2), False)),
        (
            "aten.scatter_reduce.two",
            (torch.zeros(3), 0, torch.tensor([0, 0]), torch.ones(2), "amin"),
            {"include_self": False},
        ),
        ("aten.sort.default", (torch.tensor([2, 1, 2]),)),
    ]
    for op, args, *kwargs in cases:
        graph, arrays = _lowered(op, *args, **(kwargs[0] if kwargs else {}))
        verify(graph)
        parsed = parse(str(graph))
        verify(parsed)
        assert graphs_equal(graph, parsed), op
        for ours, theirs in zip(execute(parsed, arrays, check=True), execute(graph, arrays)):
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("descending", [False, True])
def test_aten_sort_and_topk_are_stable(descending: bool) -> None:
    x = torch.tensor([[2, 1, 2, 0, 1, 2, float("nan"), 0, float("nan")]] * 2)
    graph, arrays = _lowered("aten.sort.default", x, -1, descending)
    values, indices = _run_with(graph, arrays)
    stable = torch.sort(x, dim=-1, descending=descending, stable=True)
    np.testing.assert_array_equal(indices, stable.indices.numpy())
    np.testing.assert_array_equal(values, stable.values.numpy())
    graph, arrays = _lowered("aten.topk.default", x, 5, -1, descending)
    values, indices = _run_with(graph, arrays)
    np.testing.assert_array_equal(indices, stable.indices.numpy()[:, :5])
