"""Hand-written samples for the overloads of decompositions/indexing.py.

OpInfo never reaches scatter.value, randperm or native_dropout, reaches scatter_reduce only
through its first variant (amax) within a small budget, and rarely shows the hard cases: None
entries, broadcasting and separated index tensors, boolean masks, duplicate indices, NaNs and
ties in sorts. Each generator lists its cases and starts the list at a different place for each
dtype, so that at the fast budget (4 samples per dtype, hand-written first) every case runs for
some dtype and OpInfo's samples keep room; the full budget runs every case for every dtype.

Out-of-range indices are not here: torch rejects them, so the harness would only count them as
"unsupported by torch"; tests/test_prims_extension.py checks that our execution raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ...ir.dtypes import DType
from ..record import AtenCall
from .common import ALL, COMPLEX, FLOATS, INTS, NAN, ORDERED, random_tensor, torch_dtype
from .registry import handwritten

Case = Callable[[DType], AtenCall | None]


def _ints(values: Any, dtype: Any = None) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.int64 if dtype is None else dtype)


def _mask(shape: Sequence[int], seed: int = 0) -> Any:
    import torch

    generator = torch.Generator().manual_seed(seed + 100)
    return torch.rand(tuple(shape), generator=generator) < 0.5


def _call(op: str, *args: Any, **kwargs: Any) -> AtenCall:
    return AtenCall(op, args, kwargs, origin="handwritten")


def _rotated(cases: Sequence[Case], dtype: DType) -> Iterator[AtenCall]:
    """Every case, starting at a dtype-dependent place (see the module docstring)."""
    start = (list(DType).index(dtype) * 3) % len(cases)
    for case in (*cases[start:], *cases[:start]):
        call = case(dtype)
        if call is not None:
            yield call


# -- gather, index_select, embedding ----------------------------------------------------------------


@handwritten("aten.gather.default", ALL)
def _gather_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.gather.default"
    cases: list[Case] = [
        lambda d: _call(
            op,
            random_tensor((4, 5, 3), d),
            1,
            _ints([[[0, 4, 4]], [[3, 3, 0]]]).expand(2, 2, 3).contiguous(),
        ),
        lambda d: _call(op, random_tensor((), d), 0, _ints(0)),
        lambda d: _call(op, random_tensor((6,), d), -1, _ints([5, 0, 5, 2], torch.int32)),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.index_select.default", ALL)
def _index_select_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.index_select.default"
    cases: list[Case] = [
        lambda d: _call(op, random_tensor((3, 4, 2), d), -2, _ints([3, 0, 3], torch.int32)),
        lambda d: _call(op, random_tensor((3, 4), d), 0, _ints(2)),
        lambda d: _call(op, random_tensor((), d), 0, _ints([0])),
        lambda d: _call(op, random_tensor((3, 0), d), 1, _ints([], torch.int64)),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.embedding.default", ALL)
def _embedding_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.embedding.default"
    cases: list[Case] = [
        lambda d: _call(op, random_tensor((7, 3), d), _ints([[0, 6, 2], [6, 6, 1]])),
        # padding_idx only affects the gradient: the padding row is still looked up.
        lambda d: _call(op, random_tensor((5, 2), d), _ints([1, 0, 1], torch.int32), 1),
        lambda d: _call(op, random_tensor((4, 4), d), _ints(3)),
    ]
    yield from _rotated(cases, dtype)


# -- index, index_put --------------------------------------------------------------------------------


@handwritten("aten.index.Tensor", ALL)
def _index_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.index.Tensor"
    cases: list[Case] = [
        # None entries and index tensors that broadcast against each other (adjacent: in place)
        lambda d: _call(
            op, random_tensor((3, 4, 5, 2), d), [None, _ints([[0], [3]]), _ints([1, -1, 4])]
        ),
        # separated index tensors: the broadcast dims go first
        lambda d: _call(
            op, random_tensor((3, 4, 5), d), [_ints([2, -3]), None, _ints([[4], [0]], torch.int32)]
        ),
        # a boolean mask (data-dependent result shape) with a trailing sliced dim
        lambda d: _call(op, random_tensor((4, 3, 2), d), [_mask((4, 3))]),
        # a mask after a sliced dim, with an integer index broadcasting against its count
        lambda d: _call(op, random_tensor((2, 5, 3), d), [None, _mask((5,), seed=1), _ints([1])]),
        # a deprecated uint8 mask, as graphs may carry it
        lambda d: _call(op, random_tensor((5, 2), d), [_mask((5,), seed=2).to(torch.uint8)]),
        # an all-false mask: an empty result
        lambda d: _call(op, random_tensor((3, 2), d), [torch.zeros(3, dtype=torch.bool), None]),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.index_put.default", ALL)
def _index_put_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.index_put.default"

    def accumulate_duplicates(d: DType) -> AtenCall:
        return _call(
            op,
            random_tensor((5, 3), d),
            [_ints([1, 4, 1, 1])],
            random_tensor((4, 3), d, seed=1),
            True,
        )

    def accumulate_broadcast(d: DType) -> AtenCall:
        return _call(
            op,
            random_tensor((4, 3), d),
            [_ints([[0], [2]]), _ints([0, 2, 0])],
            random_tensor((3,), d, seed=2),
            True,
        )

    def put_negative(d: DType) -> AtenCall:
        return _call(
            op,
            random_tensor((3, 4, 2), d),
            [None, _ints([-1, 0])],
            random_tensor((2, 1), d, seed=3),
        )

    def put_separated(d: DType) -> AtenCall:
        return _call(
            op,
            random_tensor((3, 4, 2), d),
            [_ints([2, 0]), None, _ints([1, 0])],
            random_tensor((2, 4), d, seed=4),
        )

    def mask_scalar_value(d: DType) -> AtenCall:
        return _call(op, random_tensor((4, 3), d), [_mask((4, 3))], random_tensor((), d, seed=5))

    def mask_row_values(d: DType) -> AtenCall:
        return _call(
            op,
            random_tensor((4, 3), d),
            [_mask((4,), seed=3)],
            random_tensor((3,), d, seed=6),
            True,
        )

    def mask_full_values(d: DType) -> AtenCall:
        mask = _mask((5,), seed=4)
        return _call(
            op, random_tensor((5, 2), d), [mask], random_tensor((int(mask.sum()), 2), d, seed=7)
        )

    def duplicates_last_wins(d: DType) -> AtenCall:
        # Without accumulate torch leaves the winner unspecified; its serial CPU kernel and our
        # policy both keep the last value.
        return _call(
            op, random_tensor((4,), d), [_ints([2, 2, 0, 2])], random_tensor((4,), d, seed=8)
        )

    yield from _rotated(
        [
            accumulate_duplicates,
            accumulate_broadcast,
            put_negative,
            put_separated,
            mask_scalar_value,
            mask_row_values,
            mask_full_values,
            duplicates_last_wins,
        ],
        dtype,
    )


# -- scatter, scatter_add, scatter_reduce ----------------------------------------------------------------


@handwritten("aten.scatter.value", ALL)
def _scatter_value_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.scatter.value"
    value = True if dtype is DType.bool else (2.5 if dtype.is_floating or dtype.is_complex else 3)
    cases: list[Case] = [
        lambda d: _call(op, random_tensor((4, 3), d), 0, _ints([[3, 0, 1], [3, 3, 2]]), value),
        lambda d: _call(
            op, random_tensor((2, 3, 4), d), -1, _ints([[[0, 3]], [[1, 1]]], torch.int32), value
        ),
        lambda d: _call(op, random_tensor((5,), d), 0, _ints([], torch.int64), value),
        lambda d: _call(
            op, random_tensor((3, 2), d), 1, _ints([[1], [0], [1]]), False if d.is_bool else 1
        ),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.scatter.src", ALL)
def _scatter_src_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.scatter.src"
    cases: list[Case] = [
        # src larger than index: only src[:index.shape] is used
        lambda d: _call(
            op,
            random_tensor((4, 3), d),
            0,
            _ints([[3, 0], [1, 2]]),
            random_tensor((3, 3), d, seed=1),
        ),
        lambda d: _call(op, random_tensor((), d), 0, _ints(0), random_tensor((), d, seed=2)),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.scatter_add.default", ALL)
def _scatter_add_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.scatter_add.default"
    cases: list[Case] = [
        # every row of the index hits row 1 or 2: duplicates accumulate
        lambda d: _call(
            op,
            random_tensor((3, 4), d),
            0,
            _ints([[1, 2, 1, 1], [1, 1, 2, 1], [2, 1, 1, 2]]),
            random_tensor((4, 4), d, seed=3),
        ),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.scatter_reduce.two", ORDERED + COMPLEX)
def _scatter_reduce_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.scatter_reduce.two"
    modes: tuple[str, ...] = (
        ("sum", "prod", "mean") if dtype.is_complex else ("sum", "prod", "mean", "amax", "amin")
    )
    if dtype is DType.bool:
        modes = ("sum", "prod", "amax", "amin")  # torch has no bool mean
    index = _ints(
        [[0, 0, 2], [2, 0, 2], [0, 3, 3], [0, 0, 0]]
    )  # duplicates; row 1 of self is never hit

    def case(mode: str, include_self: bool) -> Case:
        def make(d: DType) -> AtenCall:
            # integer means of mixed signs exercise torch's rounding (floor division)
            self = random_tensor((4, 3), d, seed=11)
            src = random_tensor((4, 3), d, seed=12)
            if d.is_floating and mode in ("amax", "amin", "sum"):
                self[0, 0] = NAN  # NaN propagates
            return _call(op, self, 0, index, src, mode, include_self=include_self)

        return make

    yield from _rotated(
        [case(mode, include_self) for mode in modes for include_self in (True, False)], dtype
    )


# -- select_scatter, slice_scatter, masked_scatter --------------------------------------------------------


@handwritten("aten.select_scatter.default", ALL)
def _select_scatter_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.select_scatter.default"
    cases: list[Case] = [
        lambda d: _call(op, random_tensor((3, 4), d), random_tensor((3,), d, seed=1), 1, -4),
        lambda d: _call(op, random_tensor((2, 0, 3), d), random_tensor((0, 3), d, seed=1), 0, 1),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.slice_scatter.default", ALL)
def _slice_scatter_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.slice_scatter.default"
    cases: list[Case] = [
        lambda d: _call(
            op, random_tensor((3, 7), d), random_tensor((3, 2), d, seed=1), 1, -5, 100, 3
        ),
        lambda d: _call(op, random_tensor((4, 2), d), random_tensor((0, 2), d, seed=1), 0, 3, 1),
        lambda d: _call(op, random_tensor((5,), d), random_tensor((5,), d, seed=1), 0, None, None),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.masked_scatter.default", ALL)
def _masked_scatter_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.masked_scatter.default"
    cases: list[Case] = [
        # source larger than needed; its elements are consumed in row-major order of the mask
        lambda d: _call(
            op, random_tensor((2, 3, 4), d), _mask((3, 4)), random_tensor((30,), d, seed=1)
        ),
        lambda d: _call(
            op, random_tensor((3,), d), _mask((2, 3), seed=1), random_tensor((2, 3), d, seed=2)
        ),
    ]
    yield from _rotated(cases, dtype)


# -- nonzero, sort, topk ------------------------------------------------------------------------------------


@handwritten("aten.nonzero.default", ALL)
def _nonzero_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.nonzero.default"

    def specials(d: DType) -> AtenCall | None:
        if not d.is_floating:
            return None
        return _call(
            op, torch.tensor([[0.0, -0.0, NAN], [1.0, 0.0, float("-inf")]]).to(torch_dtype(d))
        )

    cases: list[Case] = [
        specials,
        lambda d: _call(op, random_tensor((), d)),
        lambda d: _call(op, torch.zeros((2, 3), dtype=torch_dtype(d))),
        lambda d: _call(op, random_tensor((2, 3, 2), d, seed=1)),
    ]
    yield from _rotated(cases, dtype)


def _ties_and_nans(dtype: DType) -> Any:
    import torch

    rows: list[list[float]] = [
        [1, 3, NAN, 3, 0, 1, 3, NAN],
        [2, 2, 2, 2, 2, 2, 2, 2],
        [NAN, 0, 5, -1, 5, 0, NAN, 5],
    ]
    if not dtype.is_floating:
        rows = [
            [0 if v != v else abs(v) if dtype is DType.uint8 else v for v in row] for row in rows
        ]
    return torch.tensor(rows, dtype=torch.float64).to(torch_dtype(dtype))


@handwritten("aten._unique2.default", ORDERED)
def _unique2_samples(dtype: DType) -> Iterator[AtenCall]:
    """Distinct values with ties and NaNs (each NaN its own value, as in torch), every
    combination of inverse and counts, an all-equal and an empty input. Inverses are asked of
    inputs without NaN: which of several NaN results an input NaN maps to is up to
    the sort (torch's is not stable)."""
    import torch

    op = "aten._unique2.default"

    def without_nans(d: DType) -> Any:
        ties = _ties_and_nans(d)
        return ties.masked_fill(ties != ties, 4)

    cases: list[Case] = [
        lambda d: _call(op, without_nans(d), True, True, True),
        lambda d: _call(op, _ties_and_nans(d), True, False, True),
        lambda d: _call(op, _ties_and_nans(d)[0], True, False, True),
        lambda d: _call(op, without_nans(d)[2], False, True, False),
        lambda d: _call(op, _ties_and_nans(d)[1], True, True, True),
        lambda d: _call(op, torch.zeros((0, 3), dtype=torch_dtype(d)), True, True, True),
    ]
    yield from _rotated(cases, dtype)


def _repeated_slices(dtype: DType) -> Any:
    """[5, 3, 8]: the NaN-free ties' rows, repeated (some consecutively) along dim 0; along
    dim 2 (columns [i, :, j]) some slices repeat too."""
    import torch

    ties = _ties_and_nans(dtype)
    ties = ties.masked_fill(ties != ties, 4)
    rows = torch.stack([ties, ties.flip(0), ties, ties.flip(0), ties.roll(1, 0)])
    return rows[[0, 0, 1, 2, 2]]


@handwritten("aten.unique_dim.default", ORDERED)
def _unique_dim_samples(dtype: DType) -> Iterator[AtenCall]:
    """Distinct slices along each dim (rows, columns, the middle dim of a 3-D tensor), with
    repeats and all-equal slices, an empty input. NaN-free: torch's slice comparison treats a
    NaN as neither less than nor equal to anything, which orders rows holding one arbitrarily."""
    import torch

    op = "aten.unique_dim.default"
    cases: list[Case] = [
        lambda d: _call(op, _repeated_slices(d), 0, True, True, True),
        lambda d: _call(op, _repeated_slices(d)[:, 0], 1, True, False, True),
        lambda d: _call(op, _repeated_slices(d), 1, False, True, False),
        lambda d: _call(op, _repeated_slices(d)[0], -1, True, True, True),
        lambda d: _call(op, _repeated_slices(d)[:, 1, :4], 0, True, False, False),
        lambda d: _call(op, torch.zeros((0, 3), dtype=torch_dtype(d)), 0, True, True, True),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.unique_consecutive.default", ORDERED)
def _unique_consecutive_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.unique_consecutive.default"
    cases: list[Case] = [
        lambda d: _call(op, _ties_and_nans(d), True, True),
        lambda d: _call(op, _ties_and_nans(d)[1], False, True),
        lambda d: _call(op, random_tensor((), d), True, False),
        lambda d: _call(op, _repeated_slices(d), True, True, 0),
        lambda d: _call(op, _repeated_slices(d)[:, 0], False, True, -1),
        lambda d: _call(op, _repeated_slices(d), True, False, 1),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.sort.default", ORDERED)
def _sort_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.sort.default"
    cases: list[Case] = [
        lambda d: _call(op, _ties_and_nans(d)),
        lambda d: _call(op, _ties_and_nans(d), 1, True),
        lambda d: _call(op, _ties_and_nans(d), 0, True),
        lambda d: _call(op, random_tensor((), d)),
        lambda d: _call(op, random_tensor((2, 0), d), 1),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.topk.default", ORDERED[1:])
def _topk_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.topk.default"
    cases: list[Case] = [
        lambda d: _call(op, _ties_and_nans(d), 3),
        lambda d: _call(op, _ties_and_nans(d), 4, 1, False),
        lambda d: _call(op, _ties_and_nans(d), 2, 0, True, False),
        lambda d: _call(op, _ties_and_nans(d), 0),
        lambda d: _call(op, _ties_and_nans(d), 8, -1, False),
    ]
    yield from _rotated(cases, dtype)


# -- random: rand, randn, randperm, native_dropout ------------------------------------------------------------


def _random_samples(op: str, dtype: DType) -> Iterator[AtenCall]:
    """Enough samples of each dtype to fill the fast budget (OpInfo reaches these ops only through
    slow samplers such as pca_lowrank); a large one first, for the statistics' sake."""
    import torch

    options = dict(dtype=torch_dtype(dtype), device=torch.device("cpu"), pin_memory=False)
    yield _call(op, [40, 50], **options)
    if dtype is DType.float32:
        yield _call(op, [1000])  # the default dtype
        yield _call(op, [3, 0])
    yield _call(op, [2, 3, 4], **options)
    yield _call(op, [], **options)
    yield _call(op, [7], **options)


@handwritten("aten.rand.default", (*FLOATS, *COMPLEX))
def _rand_samples(dtype: DType) -> Iterator[AtenCall]:
    yield from _random_samples("aten.rand.default", dtype)


@handwritten("aten.randn.default", (*FLOATS, *COMPLEX))
def _randn_samples(dtype: DType) -> Iterator[AtenCall]:
    yield from _random_samples("aten.randn.default", dtype)


@handwritten(
    "aten.randperm.default",
    (
        DType.uint8,
        DType.int16,
        DType.int32,
        DType.int64,
        DType.float16,
        DType.float32,
        DType.float64,
    ),
)
def _randperm_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    cpu = torch.device("cpu")
    sizes = {DType.uint8: 256, DType.float16: 2049}
    yield _call(
        "aten.randperm.default",
        sizes.get(dtype, 1000),
        dtype=torch_dtype(dtype),
        device=cpu,
        pin_memory=False,
    )
    if dtype is DType.int64:
        yield _call("aten.randperm.default", 0, device=cpu)
        yield _call("aten.randperm.default", 1, device=cpu)
        yield _call("aten.randperm.default", 10)


@handwritten("aten.native_dropout.default", (*FLOATS, *COMPLEX))
def _native_dropout_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.native_dropout.default"
    cases: list[Case] = [
        lambda d: _call(op, random_tensor((40, 50), d), 0.3, True),
        lambda d: _call(op, random_tensor((20, 30), d, seed=1), 0.5, None),  # None means training
        lambda d: _call(op, random_tensor((4, 5), d, seed=2), 0.5, False),
        lambda d: _call(op, random_tensor((30,), d, seed=3), 0.0, True),
        lambda d: _call(op, random_tensor((30,), d, seed=4), 1.0, True),
        lambda d: _call(op, random_tensor((0, 3), d), 0.5, True),
    ]
    yield from _rotated(cases, dtype)


@handwritten("aten.rrelu_with_noise_functional.default", FLOATS)
def _rrelu_with_noise_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.rrelu_with_noise_functional.default"
    x = random_tensor((40, 50), dtype)
    x[0, :3] = torch.tensor([NAN, 0.0, -0.0])
    noise = torch.zeros_like(x)
    yield _call(op, x, noise, 0.2, 0.4, False)  # evaluation: leaky_relu, noise unchanged
    if dtype is DType.float16:
        return  # torch's CPU kernel runs only evaluation mode in float16
    yield _call(op, x, noise, 0.125, 1 / 3, True)
    yield _call(op, random_tensor((30, 40), dtype, seed=1), noise[:30, :40], 0.1, 0.9, True)
    yield _call(op, x[:7], noise[:7], 0.5, 0.5, True)  # lower = upper: one slope
    yield _call(op, x[:0], noise[:0], 0.125, 1 / 3, True)  # empty


@handwritten("aten.bernoulli.p", (*ORDERED,))
def _bernoulli_p_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.bernoulli.p"
    target = torch.zeros((40, 50), dtype=torch_dtype(dtype))
    yield _call(op, target, 0.3)
    yield _call(op, target[:7], 0.0)
    yield _call(op, target[:7], 1.0)
    yield _call(op, target[:0], 0.5)  # empty


@handwritten("aten.exponential.default", FLOATS)
def _exponential_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    target = torch.zeros((40, 50), dtype=torch_dtype(dtype))
    yield _call("aten.exponential.default", target, 1.0)
    yield _call("aten.exponential.default", target[:20], 3.5)
    yield _call("aten.exponential.default", target[:0], 1.0)  # empty


# -- random, not Core ATen: *_like draws, randint, normal's forms, uniform ----------------------------


def _transposed(shape: Sequence[int], dtype: DType, seed: int = 0) -> Any:
    """A non-contiguous tensor of `dtype` (the *_like ops lay their result out like it)."""
    return random_tensor(tuple(reversed(shape)), dtype, seed).t()


def _like_samples(op: str, dtype: DType) -> Iterator[AtenCall]:
    """Draws like a tensor of `dtype`; like an integer or bool tensor, with a dtype given."""
    import torch

    if not (dtype.is_floating or dtype.is_complex):
        for given in (torch.float32, torch.complex128, torch.float16):
            yield _call(op, random_tensor((30, 40), dtype), dtype=given)
        return
    yield _call(op, random_tensor((40, 50), dtype))
    yield _call(op, _transposed((30, 40), dtype, 1))
    yield _call(op, random_tensor((0, 3), dtype))
    if dtype is DType.float32:
        yield _call(op, random_tensor((30, 40), dtype), dtype=torch.float64)


@handwritten("aten.rand_like.default", (*FLOATS, *COMPLEX, DType.int64))
def _rand_like_samples(dtype: DType) -> Iterator[AtenCall]:
    yield from _like_samples("aten.rand_like.default", dtype)


@handwritten("aten.randn_like.default", (DType.bool, *FLOATS, *COMPLEX))
def _randn_like_samples(dtype: DType) -> Iterator[AtenCall]:
    yield from _like_samples("aten.randn_like.default", dtype)


# Ranges of integers each dtype holds (bool: [0, 2); uint8: its whole range).
_INTEGER_RANGES = {DType.bool: (0, 2), DType.uint8: (0, 256), DType.int8: (-128, 128)}


@handwritten("aten.randint_like.default", ORDERED)
def _randint_like_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.randint_like.default"
    _, high = _INTEGER_RANGES.get(dtype, (0, 10))
    yield _call(op, random_tensor((40, 50), dtype), high)
    yield _call(op, _transposed((30, 40), dtype, 1), high)
    if dtype is DType.float64:
        yield _call(op, random_tensor((40, 50), dtype), 2000)  # ties rare: ascents
    yield _call(op, random_tensor((0, 3), dtype), high)


@handwritten("aten.randint_like.low_dtype", ORDERED)
def _randint_like_low_dtype_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.randint_like.low_dtype"
    low, high = _INTEGER_RANGES.get(dtype, (-7, 20))
    yield _call(op, random_tensor((40, 50), dtype), low, high)
    yield _call(op, random_tensor((7,), dtype), high - 1, high)  # one integer
    if dtype is DType.float32:  # another dtype given
        yield _call(op, random_tensor((30, 40), dtype), -7, 20, dtype=torch.int16)
        yield _call(op, random_tensor((30, 40), dtype), 0, 2, dtype=torch.bool)


@handwritten("aten.randint.default", ORDERED)
def _randint_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.randint.default"
    _, high = _INTEGER_RANGES.get(dtype, (0, 1000))
    cpu = torch.device("cpu")
    yield _call(op, high, [40, 50], dtype=torch_dtype(dtype), device=cpu, pin_memory=False)
    if dtype is DType.int64:
        yield _call(op, 10, [2000])  # the default dtype, int64
        yield _call(op, 3, [0, 4])


@handwritten("aten.randint.low", ORDERED)
def _randint_low_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.randint.low"
    low, high = _INTEGER_RANGES.get(dtype, (-50, 50))
    cpu = torch.device("cpu")
    yield _call(op, low, high, [40, 50], dtype=torch_dtype(dtype), device=cpu, pin_memory=False)
    if dtype is DType.int64:
        yield _call(op, -(2**40), 2**40 + 7, [2000])  # wide: rare ties
        yield _call(op, 2**62, 2**62 + 3, [500])  # far from zero


@handwritten("aten.normal.Tensor_float", (*FLOATS, *COMPLEX))
def _normal_tensor_float_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.normal.Tensor_float"
    yield _call(op, random_tensor((40, 50), dtype), 2.5)
    yield _call(op, _transposed((30, 40), dtype, 1))  # std 1 by default
    yield _call(op, random_tensor((7,), dtype, 2), 0.0)  # the mean itself
    yield _call(op, random_tensor((0, 3), dtype), 1.0)


@handwritten("aten.normal.float_Tensor", FLOATS)
def _normal_float_tensor_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.normal.float_Tensor"
    std = random_tensor((40, 50), dtype, positive=True)
    std[0, :5] = 0.0  # draws of the mean itself
    yield _call(op, -1.5, std)
    yield _call(op, 3.0, _transposed((30, 40), dtype, 1).abs())
    yield _call(op, 0.0, std[:0])


@handwritten("aten.normal.Tensor_Tensor", (*FLOATS, *COMPLEX))
def _normal_tensor_tensor_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.normal.Tensor_Tensor"
    real = dtype.real if dtype.is_complex else dtype
    yield _call(op, random_tensor((40, 50), dtype), random_tensor((40, 50), real, 1, positive=True))
    # broadcast: a column of means against a row of deviations (of another dtype)
    yield _call(
        op, random_tensor((40, 1), dtype, 2), random_tensor((50,), DType.float64, 3, positive=True)
    )
    yield _call(op, random_tensor((0, 3), dtype), random_tensor((3,), real, positive=True))


@handwritten("aten.normal.float_float", (*FLOATS, *COMPLEX))
def _normal_float_float_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.normal.float_float"
    yield _call(op, 1.5, 3.0, [40, 50], dtype=torch_dtype(dtype))
    if dtype is DType.float32:
        yield _call(op, -2.0, 0.5, [1000])  # the default dtype
        yield _call(op, 0.0, 0.0, [7])  # the mean itself
        yield _call(op, 0.0, 1.0, [0, 3], device=torch.device("cpu"))


@handwritten("aten.normal_functional.default", (*FLOATS, *COMPLEX))
def _normal_functional_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.normal_functional.default"
    yield _call(op, random_tensor((40, 50), dtype), 1.0, 2.0)
    yield _call(op, _transposed((30, 40), dtype, 1))  # N(0, 1)
    yield _call(op, random_tensor((0, 3), dtype), -1.0, 0.5)


@handwritten("aten.uniform.default", (*FLOATS, *COMPLEX))
def _uniform_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.uniform.default"
    yield _call(op, random_tensor((40, 50), dtype), -2.0, 3.0)
    yield _call(op, _transposed((30, 40), dtype, 1))  # [0, 1)
    yield _call(op, random_tensor((7,), dtype), 2.0, 2.0)  # from = to
    yield _call(op, random_tensor((0, 3), dtype), 0.0, 1.0)


@handwritten("aten.multinomial.default", FLOATS)
def _multinomial_samples(dtype: DType) -> Iterator[AtenCall]:
    """Weights with zeros (never drawn while a positive one is left), unnormalized, in rows and
    alone; many rows for the first draws without replacement, which follow the weights."""
    import torch

    op = "aten.multinomial.default"
    kind = torch_dtype(dtype)
    row = torch.tensor([0.1, 0.0, 0.5, 2.0, 0.0, 1.4], dtype=kind)
    rows = random_tensor((400, 6), dtype, positive=True)
    rows[:, 4] = 0.0
    yield _call(op, row, 2000, True)
    yield _call(op, rows, 3)  # without replacement
    yield _call(op, rows[:5], 300, True)
    yield _call(op, row, 6)  # every category: the zero weights last
    yield _call(op, torch.tensor([[0.2, 0.8, 0.0]], dtype=kind), 1)
    yield _call(op, rows[:0], 2)  # no rows


@handwritten("aten.log_normal.default", FLOATS)
def _log_normal_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.log_normal.default"
    # exp(N(1, 2)) overflows float16 now and then: a narrower one there
    mean, std = (0.0, 1.0) if dtype is DType.float16 else (1.0, 2.0)
    yield _call(op, random_tensor((40, 50), dtype), mean, std)
    yield _call(op, _transposed((30, 40), dtype, 1), -1.0, 0.5)
    yield _call(op, random_tensor((0, 3), dtype))


@handwritten("aten.cauchy.default", (DType.bfloat16, DType.float32, DType.float64))
def _cauchy_samples(dtype: DType) -> Iterator[AtenCall]:
    """Not float16: Cauchy's tails overflow it (torch's too)."""
    op = "aten.cauchy.default"
    yield _call(op, random_tensor((40, 50), dtype))
    yield _call(op, _transposed((30, 40), dtype, 1), 3.0, 0.25)
    yield _call(op, random_tensor((0, 3), dtype), 0.0, 2.0)


@handwritten("aten.geometric.default", (*INTS, *FLOATS))
def _geometric_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.geometric.default"
    yield _call(op, random_tensor((40, 50), dtype), 0.3)
    yield _call(op, random_tensor((30, 40), dtype, 1), 0.9)
    yield _call(op, random_tensor((0, 3), dtype), 0.5)


@handwritten("aten.random.to", ORDERED)
def _random_to_samples(dtype: DType) -> Iterator[AtenCall]:
    _, high = _INTEGER_RANGES.get(dtype, (0, 100))
    yield _call("aten.random.to", random_tensor((40, 50), dtype), high)
    yield _call("aten.random.to", random_tensor((0, 3), dtype), high)


@handwritten("aten.random.from", ORDERED)
def _random_from_samples(dtype: DType) -> Iterator[AtenCall]:
    low, high = _INTEGER_RANGES.get(dtype, (-20, 30))
    yield _call("aten.random.from", random_tensor((40, 50), dtype), low, high)
    if dtype in (DType.bool, DType.uint8, DType.int8, DType.int16, DType.float16, DType.bfloat16):
        yield _call("aten.random.from", random_tensor((40, 50), dtype, 1), low, None)  # to max


@handwritten(
    "aten.random.default",
    (DType.bool, DType.uint8, DType.int8, DType.int16, DType.int32, *FLOATS[:3]),
)
def _random_default_samples(dtype: DType) -> Iterator[AtenCall]:
    """Not int64 nor float64: their ranges hold more than 2^53 integers (refused)."""
    yield _call("aten.random.default", random_tensor((40, 50), dtype))
