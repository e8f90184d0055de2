"""Shape and view prims (prims/shape.py) against torch.ops.prims: values bit for bit over every
dtype and several NumPy layouts, meta rules against torch's meta, rejections, and zero-copy views."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from prims_testing import (
    DTYPES,
    LAYOUTS,
    assert_bitwise,
    kernel_call,
    ours_meta,
    random_array,
    rng_for,
    run_prim,
    symbolic,
    torch_meta,
    torch_prim,
    with_layout,
)

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import MemoryFormat, TensorMeta
from prims.registry import PRIMS

T = symbolic
# torch's as_strided meta reads the (deprecated) TypedStorage of its operand.
# Reinterpreted bytes include signalling NaNs, which NumPy warns about when compare() widens them.
pytestmark = [
    pytest.mark.filterwarnings("ignore:TypedStorage is deprecated"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
]

# (prim, input shapes, attributes). Every case runs on every dtype and layout.
CASES: list[tuple[str, tuple[tuple[int, ...], ...], dict[str, Any]]] = [
    ("as_strided", ((3, 4),), dict(size=[2, 2], stride=[4, 1], storage_offset=1)),
    (
        "as_strided",
        ((3, 4),),
        dict(size=[3, 4], stride=[0, 1], storage_offset=0),
    ),  # overlapping reads
    ("as_strided", ((12,),), dict(size=[2, 3], stride=[1, 4], storage_offset=2)),
    (
        "as_strided",
        ((2, 3),),
        dict(size=[0, 5], stride=[1, 1], storage_offset=40),
    ),  # empty window: any offset
    ("as_strided", ((2, 3),), dict(size=[6], stride=[1], storage_offset=0)),
    ("as_strided", ((),), dict(size=[1, 1], stride=[7, 3], storage_offset=0)),
    ("as_strided_scatter", ((3, 4), (2, 2)), dict(size=[2, 2], stride=[4, 1], storage_offset=1)),
    ("as_strided_scatter", ((12,), (3, 2)), dict(size=[3, 2], stride=[1, 3], storage_offset=2)),
    ("as_strided_scatter", ((2, 3), (0, 2)), dict(size=[0, 2], stride=[1, 1], storage_offset=0)),
    ("collapse", ((2, 3, 4),), dict(start=0, end=1)),
    ("collapse", ((2, 3, 4),), dict(start=0, end=2)),
    ("collapse", ((2, 3, 4),), dict(start=1, end=1)),
    ("collapse", ((),), dict(start=0, end=0)),
    ("collapse", ((2, 0, 3),), dict(start=1, end=2)),
    ("collapse_view", ((2, 3, 4),), dict(start=1, end=2)),
    ("collapse_view", ((2, 3, 4),), dict(start=0, end=2)),
    ("collapse_view", ((),), dict(start=0, end=0)),
    ("split_dim", ((4, 6),), dict(dim=1, outer_length=2)),
    ("split_dim", ((4, 6),), dict(dim=0, outer_length=4)),
    ("split_dim", ((4, 0),), dict(dim=1, outer_length=3)),
    ("squeeze", ((1, 3, 1),), dict(dimensions=[0, 2])),
    ("squeeze", ((1, 3, 1),), dict(dimensions=[])),
    ("squeeze", ((1,),), dict(dimensions=[0])),
    ("transpose", ((2, 3, 4),), dict(permutation=[2, 0, 1])),
    ("transpose", ((),), dict(permutation=[])),
    ("view_of", ((2, 3),), {}),
    ("view_of", ((),), {}),
    ("reshape", ((2, 3, 4),), dict(shape=[4, 6])),
    ("reshape", ((2, 3, 4),), dict(shape=[24])),
    ("reshape", ((),), dict(shape=[1, 1])),
    ("reshape", ((0, 3),), dict(shape=[3, 0, 5])),
    ("rev", ((2, 3, 4),), dict(dims=[0, 2])),
    ("rev", ((2, 3, 4),), dict(dims=[])),
    ("rev", ((),), dict(dims=[0])),
    ("cat", (((2, 3), (1, 3), (0, 3)),), dict(dim=0)),
    ("cat", (((2, 1), (2, 4)),), dict(dim=1)),
    ("cat", (((5,),),), dict(dim=0)),
    ("clone", ((2, 3, 4, 5),), dict(memory_format=MemoryFormat.channels_last)),
    ("clone", ((2, 3),), dict(memory_format=None)),
    ("clone", ((),), dict(memory_format=MemoryFormat.preserve_format)),
    ("copy_strided", ((2, 3),), dict(stride=[1, 2])),
]


def _case_id(case: tuple[str, tuple[Any, ...], dict[str, Any]]) -> str:
    name, shapes, attributes = case
    return f"{name}-{shapes}-{attributes}".replace(" ", "")


def _inputs(shapes: tuple[Any, ...], dtype: DType, layout: str, key: Any) -> list[Any]:
    rng = rng_for(key)
    inputs: list[Any] = []
    for shape in shapes:
        if shape and isinstance(shape[0], tuple):  # a list of tensors (cat)
            inputs.append([with_layout(random_array(s, dtype, rng), layout) for s in shape])
        else:
            inputs.append(with_layout(random_array(shape, dtype, rng), layout))
    return inputs


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_against_torch(case: tuple[str, tuple[Any, ...], dict[str, Any]], dtype: DType) -> None:
    name, shapes, attributes = case
    for layout in LAYOUTS:
        inputs = _inputs(shapes, dtype, layout, (name, shapes, str(attributes), dtype, layout))
        (ours,) = run_prim(name, *inputs, **attributes)
        expected = torch_prim(name, *inputs, **attributes)
        assert_bitwise(ours, expected, what=f"prims.{name} on {layout} {dtype.short} input")


def _symbolic_args(shapes: tuple[Any, ...], dtype: DType) -> list[Any]:
    return [
        [T(s, dtype) for s in shape] if shape and isinstance(shape[0], tuple) else T(shape, dtype)
        for shape in shapes
    ]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_meta_matches_torch(case: tuple[str, tuple[Any, ...], dict[str, Any]]) -> None:
    name, shapes, attributes = case
    for dtype in (DType.float32, DType.bool, DType.complex128, DType.bfloat16):
        args = _symbolic_args(shapes, dtype)
        if name == "as_strided" and shapes == ((),):
            continue  # torch's meta looks at the storage of the meta tensor; covered by test_against_torch
        assert ours_meta(name, *args, **attributes) == torch_meta(name, *args, **attributes)


# Dtype reinterpretation: every pair of dtypes, including different element sizes (torch's view(dtype)).
@pytest.mark.parametrize("source", DTYPES, ids=str)
def test_view_of_dtype(source: DType) -> None:
    rng = rng_for("view_of_dtype", source)
    for target in DTYPES:
        for shape in ((2, 4), (3, 16), ()):
            meta = T(shape, source)
            try:
                expected_meta = torch_meta("view_of_dtype", meta, target)
            except RuntimeError:
                with pytest.raises(ShapeError):
                    ours_meta("view_of_dtype", meta, target)
                continue
            assert ours_meta("view_of_dtype", meta, target) == expected_meta
            for layout in (
                ("contiguous", "transposed")
                if target.itemsize == source.itemsize
                else ("contiguous",)
            ):
                # Bools hold 0/1 in torch; reinterpreting other bytes as bool is not portable.
                values = random_array(shape, source, rng)
                if target is DType.bool:
                    values = (rng.random(shape) < 0.5).astype(source.numpy)
                x = with_layout(values, layout)
                (ours,) = run_prim("view_of_dtype", x, target)
                assert_bitwise(
                    ours, torch_prim("view_of_dtype", x, target), what=f"{source}->{target}"
                )


def test_view_of_dtype_of_a_non_contiguous_last_dim_copies() -> None:
    x = with_layout(np.arange(16, dtype=np.float32).reshape(2, 8), "strided")
    (ours,) = run_prim("view_of_dtype", x, DType.float16)
    assert_bitwise(ours, np.ascontiguousarray(x).view(np.float16))


# -- views are views, and inputs stay unwritten ---------------------------------------------------------------

VIEW_CASES = [
    ("as_strided", dict(size=[2, 2], stride=[4, 1], storage_offset=1)),
    ("collapse_view", dict(start=0, end=1)),
    ("split_dim", dict(dim=1, outer_length=2)),
    ("squeeze", dict(dimensions=[])),
    ("transpose", dict(permutation=[1, 0])),
    ("view_of", {}),
    ("view_of_dtype", dict(dtype=DType.int32)),
    ("view_of_dtype", dict(dtype=DType.float16)),
]


@pytest.mark.parametrize(("name", "attributes"), VIEW_CASES, ids=lambda x: str(x))
def test_view_prims_return_views(name: str, attributes: dict[str, Any]) -> None:
    assert PRIMS[name].view
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    result = kernel_call(name, x, **attributes)
    assert np.shares_memory(result, x), f"prims.{name} copied a contiguous operand"
    if name == "as_strided":
        assert not result.flags.writeable  # windows may overlap: never writable


def test_views_of_views_stay_zero_copy() -> None:
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    t = kernel_call("transpose", x, permutation=[2, 0, 1])
    assert np.shares_memory(kernel_call("squeeze", t, dimensions=[]), x)
    assert np.shares_memory(kernel_call("split_dim", x, dim=2, outer_length=2), x)


NON_VIEW = ["as_strided_scatter", "collapse", "reshape", "rev", "cat", "clone", "copy_strided"]


@pytest.mark.parametrize("name", NON_VIEW)
def test_non_view_prims_are_not_views(name: str) -> None:
    assert not PRIMS[name].view  # run_prim checks every result of these for shared memory


def test_as_strided_reads_the_row_major_elements_of_any_layout() -> None:
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    for layout in LAYOUTS:
        x = with_layout(base, layout)
        (ours,) = run_prim("as_strided", x, [4, 2], [1, 4], 1)
        assert_bitwise(ours, np.lib.stride_tricks.as_strided(base.reshape(-1)[1:], (4, 2), (8, 32)))


def test_as_strided_of_0dim_window() -> None:
    # torch's meta fails on size [] (reduce() of an empty list); the window is one element.
    (ours,) = run_prim("as_strided", np.arange(6, dtype=np.int16).reshape(2, 3), [], [], 4)
    assert ours.shape == () and ours == 4


def test_reshape_of_0dim_to_0dim() -> None:
    # torch's meta fails on shape [] (reduce() of an empty list); the reshape is an identity.
    (ours,) = run_prim("reshape", np.array(2.5, np.float32), [])
    assert ours.shape == () and ours == 2.5


def test_squeeze_may_name_a_dimension_twice() -> None:
    # torch's meta allows it (its eager kernel does not); the result is unambiguous.
    meta = T((1, 3, 1), DType.float32)
    assert ours_meta("squeeze", meta, [0, 0, 2]) == torch_meta("squeeze", meta, [0, 0, 2])
    (ours,) = run_prim("squeeze", np.zeros((1, 3, 1), np.float32), [0, 0, 2])
    assert ours.shape == (3,)


# -- rejections -----------------------------------------------------------------------------------------------

f32 = DType.float32
# (prim, args, kwargs): cases torch's meta rejects; ours must raise ShapeError or DTypeError.
REJECTED_BY_TORCH_META: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("as_strided", (T((12,), f32), [3, 2], [4, 1], 5), {}),  # window past the end
    ("as_strided", (T((12,), f32), [3, 2], [4, 1], 4), {}),  # one past the end
    ("as_strided", (T((12,), f32), [3, 2], [4, 1], -1), {}),
    ("as_strided", (T((12,), f32), [3, 2], [-4, 1], 8), {}),
    ("as_strided", (T((12,), f32), [3, 2], [4], 0), {}),
    ("as_strided", (T((12,), f32), [-3, 2], [4, 1], 0), {}),
    ("as_strided", (T((0,), f32), [1], [1], 0), {}),
    ("as_strided_scatter", (T((12,), f32), T((3, 2), f32), [3, 2], [4, 1], 5), {}),
    ("as_strided_scatter", (T((12,), f32), T((2, 3), f32), [3, 2], [4, 1], 2), {}),
    ("as_strided_scatter", (T((12,), f32), T((3, 2), f32), [3, -2], [4, 1], 2), {}),
    ("collapse", (T((2, 3, 4), f32), 2, 1), {}),
    ("collapse", (T((2, 3, 4), f32), -2, 2), {}),
    ("collapse", (T((2, 3, 4), f32), 1, 3), {}),
    ("collapse_view", (T((2, 3, 4), f32), 1, 3), {}),
    ("split_dim", (T((4, 6), f32), 1, 4), {}),
    ("split_dim", (T((4, 6), f32), -1, 2), {}),
    ("split_dim", (T((4, 6), f32), 1, 0), {}),
    ("split_dim", (T((4, 6), f32), 2, 1), {}),
    ("split_dim", (T((), f32), 0, 1), {}),
    ("squeeze", (T((1, 3, 1), f32), [1]), {}),
    ("squeeze", (T((1, 3, 1), f32), [-1]), {}),
    ("squeeze", (T((1, 3, 1), f32), [3]), {}),
    ("squeeze", (T((), f32), [0]), {}),
    ("transpose", (T((1, 3, 1), f32), [0, -1, 1]), {}),
    ("transpose", (T((1, 3, 1), f32), [0, 1]), {}),
    ("transpose", (T((1, 3, 1), f32), [0, 1, 1]), {}),
    ("view_of_dtype", (T((), f32), DType.float16), {}),
    ("view_of_dtype", (T((2, 3), DType.int8), DType.float16), {}),
    ("reshape", (T((2, 3), f32), [4, 2]), {}),
    ("reshape", (T((2, 3), f32), [-1, 2]), {}),
    ("rev", (T((2, 3), f32), [-1]), {}),
    ("rev", (T((2, 3), f32), [2]), {}),
    ("cat", ([T((2,), f32), T((2,), f32)], -1), {}),
    ("cat", ([T((2,), f32), T((2,), f32)], 1), {}),
    ("cat", ([T((), f32), T((), f32)], 0), {}),
    ("cat", ([], 0), {}),
    ("cat", ([T((0,), f32), T((2, 3), f32)], 0), {}),
    ("cat", ([T((2, 3), f32), T((2, 4), f32)], 0), {}),
    ("clone", (T((2, 3), f32),), dict(memory_format=MemoryFormat.channels_last)),
    ("clone", (T((2, 3, 4, 5), f32),), dict(memory_format=MemoryFormat.channels_last_3d)),
    ("copy_strided", (T((2, 3), f32), [1]), {}),
]


@pytest.mark.parametrize(
    ("name", "args", "kwargs"), REJECTED_BY_TORCH_META, ids=lambda x: str(x)[:60]
)
def test_rejected_like_torch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(Exception):  # noqa: B017 - torch raises assorted exception types
        torch_meta(name, *args, **kwargs)
    with pytest.raises((ShapeError, DTypeError)):
        ours_meta(name, *args, **kwargs)


# Cases torch's meta lets through but its eager kernels reject: ours rejects them at build time.
REJECTED_BY_TORCH_KERNEL: list[tuple[str, tuple[Any, ...]]] = [
    (
        "as_strided_scatter",
        (np.zeros(12, np.float32), np.zeros((2, 2), np.float32), [2, 2], [0, 1], 0),
    ),
    ("rev", (np.zeros((2, 3), np.float32), [1, 1])),
]


@pytest.mark.parametrize(("name", "args"), REJECTED_BY_TORCH_KERNEL, ids=lambda x: str(x)[:40])
def test_rejected_like_torch_kernels(name: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(RuntimeError):
        torch_prim(name, *args)
    with pytest.raises((ShapeError, DTypeError)):
        run_prim(name, *args)


def test_prims_take_one_dtype_where_torch_would_promote() -> None:
    # torch's cat meta keeps the first dtype while its kernel promotes; as_strided_scatter's kernel
    # casts src. Prims are strict: decompositions convert explicitly.
    with pytest.raises(DTypeError):
        ours_meta("cat", [T((2,), f32), T((2,), DType.float64)], 0)
    with pytest.raises(DTypeError):
        ours_meta("as_strided_scatter", T((12,), f32), T((3, 2), DType.int64), [3, 2], [4, 1], 2)
    assert torch_meta("cat", [T((2,), f32), T((2,), DType.float64)], 0).dtype is f32


def test_as_strided_scatter_writes_the_copy_not_the_input() -> None:
    x = np.zeros((3, 4), np.int32)
    src = np.arange(4, dtype=np.int32).reshape(2, 2)
    (ours,) = run_prim("as_strided_scatter", x, src, [2, 2], [4, 1], 5)
    assert_bitwise(ours, torch_prim("as_strided_scatter", x, src, [2, 2], [4, 1], 5))
    assert not x.any()


def test_collapse_view_of_a_non_contiguous_operand_copies() -> None:
    # torch would refuse a view of non-nesting strides; a stride-free graph cannot see strides,
    # so the kernel gives the same values (copying when NumPy cannot view).
    x = with_layout(np.arange(24, dtype=np.float32).reshape(2, 3, 4), "transposed")
    (ours,) = run_prim("collapse_view", x, 1, 2)
    assert_bitwise(ours, np.ascontiguousarray(x).reshape(2, 12))


def test_torch_schemas() -> None:
    for name in [
        "as_strided",
        "as_strided_scatter",
        "collapse",
        "collapse_view",
        "split_dim",
        "squeeze",
        "transpose",
        "view_of",
        "view_of_dtype",
        "reshape",
        "rev",
        "cat",
        "clone",
        "copy_strided",
    ]:
        schema = str(getattr(torch.ops.prims, name).default._schema).removeprefix("prims::")
        assert PRIMS[name].schema.text == schema


def test_view_metas_carry_torchs_strides_and_offset() -> None:
    meta = ours_meta("transpose", T((2, 3), f32), [1, 0])
    assert (
        meta == TensorMeta((3, 2), f32, (1, 3)) == torch_meta("transpose", T((2, 3), f32), [1, 0])
    )
    window = ours_meta("as_strided", T((3, 4), f32), [2, 2], [1, 4], 5)
    assert window == TensorMeta((2, 2), f32, (1, 4), 5)
    assert window == torch_meta("as_strided", T((3, 4), f32), [2, 2], [1, 4], 5)
