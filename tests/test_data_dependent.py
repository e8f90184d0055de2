"""Data-dependent sizes against torch: programs whose output sizes depend on their inputs'
values (nonzero, boolean-mask indexing, masked_select, torch.unique, `x.item()` feeding a
slice), exported with torch.export, saved and loaded, lowered once, and run on inputs giving
different sizes, 0 and 1 among them (torch declares such sizes in [0, n]: a lowering must not
refuse a size torch's own exported program accepts).
The executor binds each data-dependent (unbacked) symbol when the data deciding it is known
and refuses a value outside the symbol's range with a ShapeError naming it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import aten2prims
from aten2prims.errors import ShapeError, VerificationError
from aten2prims.ir import graph_difference, parse
from aten2prims.ir.symbolic import evaluate
from aten2prims.passes import eliminate_dead_code, optimize
from aten2prims.passes.verify import verify
from aten2prims.testing.compare import compare


class NonZero(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x > 0)


class MaskIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[x > 0] * 2


class MaskedSelect(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.masked_select(x, y > 0.5) + 1


class ItemSlice(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check_is_size(k)
        torch._check(k <= x.shape[0])
        return x[:k] * 2 + x[:k].sum()


class NonZeroIndex(torch.nn.Module):
    """nonzero's index tensor reads x: its layout copy and a mean over the selection."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        (i,) = torch.nonzero(x > 0, as_tuple=True)
        return x[i] + x[i].mean()


class MaskSoftmax(torch.nn.Module):
    """softmax over the data-dependent dim, and over rows whose count is data-dependent."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = x[x > 0]
        rows = x[x.sum(1) > 0]
        return v.softmax(0), torch.log_softmax(v, 0), rows.reshape(-1, 2).softmax(-1)


class MaskCat(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v = x[x > 0]
        return torch.cat([v, v * 2]), v.sum(0, keepdim=True)


class MaskAnyAll(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = x[x > 0]
        return (v > 1).any(), (v > 1).all(), v * 2


class MaskConv(torch.nn.Module):
    """A convolution over a batch of data-dependent size."""

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x[x.sum((1, 2, 3)) > 0], w)


class NonZeroGatherScatter(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i = torch.nonzero(x[:, 0] > 0).expand(-1, x.shape[1])
        added = torch.zeros_like(x).scatter_add(0, i, torch.ones(i.shape))
        return torch.gather(x, 0, i), added


class UniqueOfMask(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.unique(x[x > 0], return_counts=True)


class MaskPoolResample(torch.nn.Module):
    """Pooling and resampling over a batch of data-dependent size."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = x[x.sum((1, 2, 3)) > 0]
        functional = torch.nn.functional
        return (
            functional.max_pool2d(v, 3, 1, 1, return_indices=True)[1],
            functional.avg_pool2d(v, 2),
            functional.adaptive_avg_pool2d(v, 3),
            functional.adaptive_max_pool2d(v, 3),
            functional.interpolate(v, scale_factor=2.0, mode="nearest"),
            functional.interpolate(v, size=(5, 7), mode="bilinear"),
        )


class MaskRows(torch.nn.Module):
    """Row-wise ops on rows selected by data; `torch.where` of two selections of the same rows
    (torch asserts their counts equal) broadcasts them as equal, whatever the count."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rows = x[x.sum(1) > 0]
        again = x[x.sum(1) > 0]
        return (
            torch.nn.functional.layer_norm(rows, (4,)),
            rows.topk(2, 1).values,
            torch.nn.functional.pad(rows, (1, 1)),
            torch.where(rows > 0, again, 0.0),
        )


class MaskSortScan(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = x[x > 0]
        return v.sort().values, v.cumsum(0), v.flip(0), v.norm()


def _selecting(shape: tuple[int, ...], count: int, rows: bool = False) -> torch.Tensor:
    """Values in [-2, -1) but for `count` positive ones: elements equal to 10 at scattered
    positions (each makes its row's sum positive), or whole first rows (`rows`)."""
    x = -1 - torch.rand(shape, generator=torch.Generator().manual_seed(count))
    if rows:
        x[:count] = x[:count].abs()
    else:
        positions = torch.randperm(x.numel(), generator=torch.Generator().manual_seed(0))
        x.view(-1)[positions[:count]] = 10.0
    return x


CASES: dict[str, tuple[torch.nn.Module, Any]] = {
    "nonzero": (NonZero(), lambda g: (torch.randn(4, 3, generator=g),)),
    "mask_index": (MaskIndex(), lambda g: (torch.randn(7, generator=g),)),
    "masked_select": (
        MaskedSelect(),
        lambda g: (torch.randn(3, 4, generator=g), torch.rand(4, generator=g)),
    ),
    "item_slice": (
        ItemSlice(),
        lambda g: (torch.randn(6, generator=g), torch.randint(0, 7, (), generator=g)),
    ),
    "nonzero_index": (NonZeroIndex(), lambda g: (torch.randn(7, generator=g),)),
    "mask_softmax": (MaskSoftmax(), lambda g: (torch.randn(6, 4, generator=g),)),
    "mask_cat": (MaskCat(), lambda g: (torch.randn(7, generator=g),)),
    "mask_any_all": (MaskAnyAll(), lambda g: (2 * torch.randn(7, generator=g),)),
    "mask_conv": (
        MaskConv(),
        lambda g: (
            torch.randn(5, 1, 1, 1, generator=g) + 0.1 * torch.randn(5, 2, 5, 5, generator=g),
            torch.randn(3, 2, 3, 3, generator=g),
        ),
    ),
    "nonzero_gather_scatter": (NonZeroGatherScatter(), lambda g: (torch.randn(6, 3, generator=g),)),
    "unique_of_mask": (
        UniqueOfMask(),
        lambda g: (torch.randint(-6, 6, (5,), generator=g).float(),),
    ),
    "mask_pool_resample": (
        MaskPoolResample(),
        lambda g: (
            torch.randn(5, 1, 1, 1, generator=g) + 0.1 * torch.randn(5, 2, 4, 4, generator=g),
        ),
    ),
    "mask_sort_scan": (MaskSortScan(), lambda g: (torch.randn(7, generator=g),)),
    "mask_rows": (
        MaskRows(),
        lambda g: (torch.randn(9, 1, generator=g) + 0.1 * torch.randn(9, 4, generator=g),),
    ),
}

# Inputs whose data makes each case's data-dependent count `n` (masked_select selects n of the
# mask's 4 columns in each of 3 rows).
AT_COUNT: dict[str, Callable[[int], tuple[torch.Tensor, ...]]] = {
    "nonzero": lambda n: (_selecting((4, 3), n),),
    "mask_index": lambda n: (_selecting((7,), n),),
    "masked_select": lambda n: (torch.randn(3, 4), torch.tensor([0.9] * n + [0.1] * (4 - n))),
    "item_slice": lambda n: (torch.randn(6), torch.tensor(n)),
    "nonzero_index": lambda n: (_selecting((7,), n),),
    "mask_softmax": lambda n: (_selecting((6, 4), n),),
    "mask_cat": lambda n: (_selecting((7,), n),),
    "mask_any_all": lambda n: (_selecting((7,), n),),
    "mask_conv": lambda n: (_selecting((5, 2, 5, 5), n, rows=True), torch.randn(3, 2, 3, 3)),
    "nonzero_gather_scatter": lambda n: (_selecting((6, 3), n, rows=True),),
    "unique_of_mask": lambda n: (_selecting((5,), n),),
    "mask_pool_resample": lambda n: (_selecting((5, 2, 4, 4), n, rows=True),),
    "mask_sort_scan": lambda n: (_selecting((7,), n),),
    "mask_rows": lambda n: (_selecting((9, 4), n, rows=True),),
}


def _load(name: str, tmp_path: Path) -> tuple[torch.nn.Module, Any, aten2prims.Graph]:
    module, make = CASES[name]
    example = make(torch.Generator().manual_seed(0))
    path = tmp_path / f"{name}.pt2"
    torch.export.save(torch.export.export(module, example).run_decompositions(), path)
    return module, make, aten2prims.load(path)


@pytest.mark.parametrize("name", list(CASES))
def test_data_dependent_sizes_match_torch_on_inputs_of_several_sizes(
    name: str, tmp_path: Path
) -> None:
    module, make, graph = _load(name, tmp_path)
    assert any(not s.backed for s in graph.symbols.values())
    lowered = aten2prims.lower(graph)
    verify(lowered)
    assert graph_difference(parse(str(lowered)), lowered) is None
    sizes = set()
    for seed in range(6):
        inputs = make(torch.Generator().manual_seed(seed))
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs], check=True)
        expected = _outputs(module(*inputs))
        for index, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{name}, seed {seed}, output {index}")
            assert verdict, verdict.message
        sizes.add(tuple(t.shape for t in expected))
    assert len(sizes) >= 3  # the data gave several output sizes, all from one lowering


@pytest.mark.parametrize("name", list(CASES))
def test_a_call_repeating_the_data_dependent_sizes_plans_nothing(name: str, tmp_path: Path) -> None:
    """The cut before each data-dependent node and the rest's specialization per value are
    cached with the graph: repeated sizes plan nothing, new ones plan, and earlier ones stay
    planned."""
    from aten2prims.executor.run import plans_built

    module, make, graph = _load(name, tmp_path)
    lowered = aten2prims.lower(graph)
    first = make(torch.Generator().manual_seed(0))
    # The same data-dependent sizes from other data: the tensors reversed along dim 0.
    reversed_ = tuple(t.flip(0) if t.ndim else t for t in first)

    def shapes(inputs: tuple[torch.Tensor, ...]) -> list[tuple[int, ...]]:
        return [tuple(t.shape) for t in _outputs(module(*inputs))]

    second = next(
        inputs
        for seed in range(1, 20)
        for inputs in [make(torch.Generator().manual_seed(seed))]
        if shapes(inputs) != shapes(first)
    )
    built = []
    for inputs in (first, first, reversed_, second, first, second):
        before = plans_built()
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs])
        built.append(plans_built() - before)
        for index, (mine, theirs) in enumerate(zip(ours, _outputs(module(*inputs)), strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{name}, output {index}")
            assert verdict, verdict.message
    assert built[0] > 0 and built[3] > 0  # a new data-dependent size is planned
    assert built[1:3] == [0, 0] and built[4:] == [0, 0]


def test_a_data_dependent_value_outside_its_range_is_refused(tmp_path: Path) -> None:
    _, _, graph = _load("item_slice", tmp_path)
    lowered = aten2prims.lower(graph)
    x = np.zeros(6, np.float32)
    with pytest.raises(
        ShapeError, match=r"data-dependent symbol u\d+ = 9 .* outside its range \[0, 6\]"
    ):
        aten2prims.execute(lowered, [x, np.asarray(9)])


def test_sizes_from_data_agree_with_each_prims_kernel_and_torch() -> None:
    from prims.registry import PRIMS

    tagged = {name: d for name, d in PRIMS.items() if d.sizes_from_data is not None}
    assert set(tagged) == {"nonzero"}
    rng = np.random.default_rng(0)
    for shape in [(5,), (3, 4), (2, 0, 3), ()]:
        a = np.asarray(rng.standard_normal(shape) > 0)
        sizes = tagged["nonzero"].sizes_from_data(a)
        result = tagged["nonzero"].kernel(a, **sizes)
        np.testing.assert_array_equal(result, torch.nonzero(torch.from_numpy(a)).numpy())


class SplitBySizes(torch.nn.Module):
    """Sizes read with tolist() drive a split; torch._check ties them to the input's size."""

    def forward(self, x: torch.Tensor, sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = sizes.tolist()
        torch._check_is_size(a)
        torch._check_is_size(b)
        torch._check(a + b == x.shape[0])
        first, second = torch.split(x, [a, b])
        return first.sum(0), second * 2


def test_tolist_driven_split_under_torch_check_matches_torch(tmp_path: Path) -> None:
    x = torch.randn(7, 3)
    path = tmp_path / "split.pt2"
    program = torch.export.export(SplitBySizes(), (x, torch.tensor([3, 4])))
    torch.export.save(program.run_decompositions(), path)
    lowered = aten2prims.lower(aten2prims.load(path))
    assert any(str(check) == "u0 + u1 == 7" for check in lowered.checks)  # torch._check's fact
    for sizes in ([3, 4], [0, 7], [7, 0], [1, 6], [6, 1]):
        split = torch.tensor(sizes)
        outputs = aten2prims.execute(lowered, [x.numpy(), split.numpy()], check=True)
        for index, (ours, theirs) in enumerate(zip(outputs, SplitBySizes()(x, split))):
            verdict = compare(ours, theirs.numpy(), what=f"split {sizes} output {index}")
            assert verdict, verdict.message
    with pytest.raises(ShapeError, match=r"lowered assuming u0 \+ u1 == 7, which fails"):
        aten2prims.execute(lowered, [x.numpy(), np.asarray([2, 3])])


class Unique(torch.nn.Module):
    def __init__(self, **options: bool) -> None:
        super().__init__()
        self.options = options

    def forward(self, x: torch.Tensor) -> Any:
        return torch.unique(x, **self.options)


class UniqueConsecutive(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return torch.unique_consecutive(x, return_inverse=True, return_counts=True)


UNIQUE_CASES: dict[str, tuple[torch.nn.Module, str]] = {
    "unique_inverse_counts": (
        Unique(sorted=True, return_inverse=True, return_counts=True),
        "aten._unique2.default",
    ),
    "unique_counts": (Unique(sorted=True, return_counts=True), "aten._unique2.default"),
    "unique_unsorted_inverse": (
        Unique(sorted=False, return_inverse=True),
        "aten._unique2.default",
    ),
    "unique_consecutive": (UniqueConsecutive(), "aten.unique_consecutive.default"),
}


def _unique_lowered(
    module: torch.nn.Module, op: str, example: torch.Tensor, name: str, tmp_path: Path
) -> aten2prims.Graph:
    """The module exported (it must call `op`), saved, loaded with an unbacked symbol, lowered,
    verified and round-tripped through the text form."""
    program = torch.export.export(module, (example,)).run_decompositions()
    assert op in {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    path = tmp_path / f"{name}.pt2"
    torch.export.save(program, path)
    graph = aten2prims.load(path)
    assert any(not s.backed for s in graph.symbols.values())
    lowered = aten2prims.lower(graph)
    verify(lowered)
    assert graph_difference(parse(str(lowered)), lowered) is None
    return lowered


@pytest.mark.parametrize("name", list(UNIQUE_CASES))
def test_unique_counts_bind_when_run_and_match_torch_exactly(name: str, tmp_path: Path) -> None:
    """torch.unique's number of distinct values is an unbacked symbol: one lowering serves
    inputs with different numbers of them; values, inverse and counts equal torch's."""
    module, op = UNIQUE_CASES[name]
    lowered = _unique_lowered(module, op, torch.tensor([[3, 1, 2], [3, 1, 5]]), name, tmp_path)
    counts = set()
    for seed in range(7):
        x = torch.randint(0, 2 + seed, (2, 3), generator=torch.Generator().manual_seed(seed))
        if seed == 6:
            x = torch.full((2, 3), 4)  # one distinct value (none: see unique_of_mask)
        ours = aten2prims.execute(lowered, [x.numpy()], check=True)
        expected = module(x)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for index, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{name} seed {seed} output {index}")
            assert verdict, verdict.message
            assert mine.dtype == theirs.numpy().dtype and np.array_equal(mine, theirs.numpy())
        counts.add(expected[0].shape[0])
    assert len(counts) >= 3 and 1 in counts


def test_unique_of_a_dynamic_input_matches_torch_at_several_sizes(tmp_path: Path) -> None:
    """A dynamic batch and a data-dependent count in one graph: both bind when it runs."""
    module = Unique(sorted=True, return_inverse=True, return_counts=True)
    batch = torch.export.Dim("batch", min=2, max=64)
    program = torch.export.export(
        module, (torch.randint(0, 5, (4, 3)),), dynamic_shapes={"x": {0: batch}}
    )
    path = tmp_path / "unique_dynamic.pt2"
    torch.export.save(program.run_decompositions(), path)
    lowered = aten2prims.lower(aten2prims.load(path))
    assert {s.backed for s in lowered.symbols.values()} == {True, False}
    for rows in (2, 7, 30, 64):
        x = torch.randint(-rows, rows, (rows, 3), generator=torch.Generator().manual_seed(rows))
        ours = aten2prims.execute(lowered, [x.numpy()], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, module(x), strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{rows} rows, output {index}")
            assert verdict, verdict.message


class UniqueSlices(torch.nn.Module):
    def __init__(self, consecutive: bool = False, **options: Any) -> None:
        super().__init__()
        self.consecutive, self.options = consecutive, options

    def forward(self, x: torch.Tensor) -> Any:
        if self.consecutive:
            return torch.unique_consecutive(x, **self.options)
        return torch.unique(x, **self.options)


UNIQUE_DIM_CASES: dict[str, tuple[UniqueSlices, str]] = {
    "rows_inverse_counts": (
        UniqueSlices(dim=0, return_inverse=True, return_counts=True),
        "aten.unique_dim.default",
    ),
    "columns_counts": (UniqueSlices(dim=1, return_counts=True), "aten.unique_dim.default"),
    "columns_unsorted_inverse": (
        UniqueSlices(dim=-1, sorted=False, return_inverse=True),
        "aten.unique_dim.default",
    ),
    "rows_values_only": (UniqueSlices(dim=0), "aten.unique_dim.default"),
    "consecutive_rows": (
        UniqueSlices(True, dim=0, return_inverse=True, return_counts=True),
        "aten.unique_consecutive.default",
    ),
    "consecutive_columns": (
        UniqueSlices(True, dim=1, return_counts=True),
        "aten.unique_consecutive.default",
    ),
}
# [4, 5] inputs: duplicated rows and columns (some consecutive), all equal, all distinct, and
# slices that tie on their first entries and differ later (the lexicographic order's depth).
SLICE_INPUTS = [
    torch.tensor([[3, 1, 2, 3, 1], [3, 1, 5, 3, 1], [3, 1, 2, 3, 1], [0, 0, 0, 0, 0]]),
    torch.full((4, 5), 7),
    torch.arange(20).reshape(4, 5) * 7 % 20 - 9,
    torch.tensor([[1, 1, 1, 2, 1], [1, 1, 1, 2, 1], [1, 1, 0, 0, 1], [1, 1, 1, 2, 1]]),
    torch.tensor([[5, 5, 5, 5, 4], [2, 2, -1, 2, 2], [0, 0, 0, 0, 0], [9, 9, 9, 9, 9]]),
    torch.tensor([[0, 0, 1, 1, 0], [0, 1, 0, 1, 0], [1, 0, 0, 1, 1], [0, 0, 1, 1, 0]]),
]


@pytest.mark.parametrize("name", list(UNIQUE_DIM_CASES))
def test_unique_slices_bind_when_run_and_match_torch_exactly(name: str, tmp_path: Path) -> None:
    """torch.unique / unique_consecutive with dim: the number of distinct slices is an unbacked
    symbol bound when the node runs; slices, inverse and counts equal torch's (its CPU kernel
    returns inverse and counts with a dim whether asked or not)."""
    module, op = UNIQUE_DIM_CASES[name]
    lowered = _unique_lowered(module, op, SLICE_INPUTS[0], name, tmp_path)
    counts = set()
    for index, x in enumerate(SLICE_INPUTS):
        ours = aten2prims.execute(lowered, [x.numpy()], check=True)
        expected = module(x)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for position, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
            assert mine.dtype == theirs.numpy().dtype and np.array_equal(mine, theirs.numpy()), (
                f"{name} input {index} output {position}: {mine} != {theirs}"
            )
        counts.add(expected[0].shape[module.options["dim"]])
    assert len(counts) >= 3


def test_unique_rows_of_a_dynamic_input_match_torch_at_several_sizes(tmp_path: Path) -> None:
    """A dynamic number of rows and a data-dependent number of distinct ones in one graph."""
    module = UniqueSlices(dim=0, return_inverse=True, return_counts=True)
    rows = torch.export.Dim("rows", min=2, max=64)
    example = torch.randint(0, 2, (6, 3), generator=torch.Generator().manual_seed(0))
    program = torch.export.export(module, (example,), dynamic_shapes={"x": {0: rows}})
    path = tmp_path / "unique_rows_dynamic.pt2"
    program = program.run_decompositions()
    torch.export.save(program, path)
    graph = aten2prims.load(path)
    # from_fx reads the same graph (torch's runtime assertions on u0 hold no meta value)
    assert graph_difference(aten2prims.from_fx(program, name=graph.name), graph) is None
    lowered = aten2prims.lower(graph)
    assert {s.backed for s in lowered.symbols.values()} == {True, False}
    for count in (2, 7, 30, 64):
        x = torch.randint(0, 2, (count, 3), generator=torch.Generator().manual_seed(count))
        ours = aten2prims.execute(lowered, [x.numpy()], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, module(x), strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{count} rows, output {index}")
            assert verdict, verdict.message


def _outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("name", list(CASES))
def test_data_dependent_counts_of_zero_and_one_run_as_in_torch(name: str, tmp_path: Path) -> None:
    """Data selecting nothing, or one element, is valid input: torch's exported program runs it
    (the spec of what must be accepted), and so does the lowering, with torch eager's results."""
    module, program = _exported(name)
    lowered = aten2prims.lower(_saved_and_loaded(program, name, tmp_path))
    shapes = []
    for n in (0, 1):
        inputs = AT_COUNT[name](n)
        expected = _outputs(module(*inputs))
        for accepted, theirs in zip(_outputs(program.module()(*inputs)), expected, strict=True):
            assert torch.equal(accepted, theirs) or torch.allclose(accepted, theirs)
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{name}, count {n}, output {index}")
            assert verdict, verdict.message
        shapes.append([tuple(t.shape) for t in expected])
    assert any(0 in shape for shape in shapes[0])  # count 0 really made something empty
    assert shapes[0] != shapes[1]


@pytest.mark.parametrize("name", list(CASES))
def test_no_recorded_check_refuses_a_data_dependent_size_of_zero_or_one(
    name: str, tmp_path: Path
) -> None:
    """Decisions that only pick a layout or a shortcut for empty tensors record no check on a
    data-dependent size, so every check the lowering records holds when each such size is 0, and
    when it is 1 (torch declares them in [0, n])."""
    _, program = _exported(name)
    lowered = aten2prims.lower(_saved_and_loaded(program, name, tmp_path))
    unbacked = {name for name, s in lowered.symbols.items() if not s.backed}
    assert unbacked and all(lowered.symbols[u].lower == 0 for u in unbacked)
    for n in (0, 1):
        binding = dict.fromkeys(unbacked, n)
        failing = [str(c) for c in lowered.checks if not evaluate(c, binding)]
        assert not failing, f"{name}: checks failing with every data-dependent size {n}: {failing}"


def _exported(name: str) -> tuple[torch.nn.Module, Any]:
    module, make = CASES[name]
    example = make(torch.Generator().manual_seed(0))
    return module, torch.export.export(module, example).run_decompositions()


def _saved_and_loaded(program: Any, name: str, tmp_path: Path) -> aten2prims.Graph:
    path = tmp_path / f"{name}.pt2"
    torch.export.save(program, path)
    return aten2prims.load(path)


# -- a producer read only through the size it decides ----------------------------------------


class NonZeroCountFull(torch.nn.Module):
    """nonzero read only through its count: zeros and new_ones of that length."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.nonzero(x > 0)
        return torch.zeros(idx.shape[0]) + 1, x.new_ones(idx.shape[0], 2)


class NonZeroCountArange(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = torch.nonzero(x > 0)
        return torch.arange(idx.shape[0]) * 3


class MaskCountZeros(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(x[x > 0].shape[0], 3)


class MaskedSelectCountFull(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.full((torch.masked_select(x, y > 0.5).shape[0],), 7.0)


class UniqueCountOnes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones(torch.unique(x[x > 0]).shape[0], dtype=torch.int64)


class ItemCountArange(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 6)
        return torch.arange(k, dtype=torch.float32) + x.sum()


def _distinct_positives(count: int) -> torch.Tensor:
    """Seven values, `count` distinct positive ones among them."""
    x = -torch.ones(7)
    x[:count] = torch.arange(1, count + 1, dtype=torch.float32)
    return x


# Each module and inputs making its data-dependent count (the first output's length) `n`.
READ_BY_SIZE: dict[str, tuple[torch.nn.Module, Callable[[int], tuple[torch.Tensor, ...]]]] = {
    "nonzero_full": (NonZeroCountFull(), lambda n: (_selecting((7,), n),)),
    "nonzero_arange": (NonZeroCountArange(), lambda n: (_selecting((7,), n),)),
    "mask_zeros": (MaskCountZeros(), lambda n: (_selecting((7,), n),)),
    "masked_select_full": (
        MaskedSelectCountFull(),
        lambda n: (torch.randn(4), torch.tensor([0.9] * n + [0.1] * (4 - n))),
    ),
    "unique_ones": (UniqueCountOnes(), lambda n: (_distinct_positives(n),)),
    "item_arange": (ItemCountArange(), lambda n: (torch.randn(6), torch.tensor(n))),
}


def _lowered_by_size(name: str, tmp_path: Path) -> tuple[torch.nn.Module, Any, aten2prims.Graph]:
    module, at_count = READ_BY_SIZE[name]
    program = torch.export.export(module, at_count(3)).run_decompositions()
    return module, program, aten2prims.lower(_saved_and_loaded(program, name, tmp_path))


@pytest.mark.parametrize("name", list(READ_BY_SIZE))
def test_a_producer_read_only_through_its_size_binds_it_at_counts_0_1_and_several(
    name: str, tmp_path: Path
) -> None:
    """`torch.zeros(torch.nonzero(m).shape[0])`: no tensor reads the nonzero, its count does.
    The lowered graph declares each data-dependent symbol read from a node it keeps, and runs
    as torch eager at every count."""
    module, at_count = READ_BY_SIZE[name]
    _, program, lowered = _lowered_by_size(name, tmp_path)
    verify(lowered)
    assert graph_difference(parse(str(lowered)), lowered) is None
    computed = {result.name for node in lowered.nodes for result in node.results}
    unbacked = [s for s in lowered.symbols.values() if not s.backed]
    assert unbacked and all(s.value in computed for s in unbacked)
    for n in (0, 1, 4):
        inputs = at_count(n)
        expected = _outputs(module(*inputs))
        assert expected[0].shape[0] == n  # the data gave the count asked for
        for accepted, theirs in zip(_outputs(program.module()(*inputs)), expected, strict=True):
            assert torch.equal(accepted, theirs)
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{name}, count {n}, output {index}")
            assert verdict, verdict.message


class NonZeroCountRand(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.rand(torch.nonzero(x > 0).shape[0])


def test_random_values_of_a_data_dependent_length_have_torchs_shape(tmp_path: Path) -> None:
    module = NonZeroCountRand()
    program = torch.export.export(module, (_selecting((7,), 3),)).run_decompositions()
    lowered = aten2prims.lower(_saved_and_loaded(program, "rand", tmp_path))
    for n in (0, 1, 5):
        x = _selecting((7,), n)
        expected = module(x)
        (ours,) = aten2prims.execute(lowered, [x.numpy()], seed=n, check=True)
        assert (ours.dtype, ours.shape) == (expected.numpy().dtype, tuple(expected.shape))
        assert ((0 <= ours) & (ours < 1)).all()
    assert len(set(ours.tolist())) == 5  # five draws, not one value repeated


def test_a_kept_aten_producer_is_the_declared_source(tmp_path: Path) -> None:
    """Partial lowering keeps `aten.nonzero`: torch's op decides its count, so the symbol is
    read from it and the executor lowers it when it runs the graph."""
    module, at_count = READ_BY_SIZE["nonzero_full"]
    program = torch.export.export(module, at_count(3)).run_decompositions()
    graph = _saved_and_loaded(program, "kept", tmp_path)
    lowered = aten2prims.lower(graph, keep="aten.nonzero.default")
    (source,) = [s.value for s in lowered.symbols.values() if not s.backed]
    assert [n.op for n in lowered.nodes if source in {r.name for r in n.results}] == [
        "aten.nonzero.default"
    ]
    for n in (0, 2):
        ours = aten2prims.execute(lowered, [t.numpy() for t in at_count(n)], check=True)
        for mine, theirs in zip(ours, module(*at_count(n)), strict=True):
            np.testing.assert_array_equal(mine, theirs.numpy())


def test_graph_passes_keep_the_node_a_symbol_is_read_from() -> None:
    """Text IR run through the passes directly: DCE (alone and in `optimize`) keeps the nonzero
    u0 is read from, though nothing reads its result."""
    graph = parse(
        "symbol u0 in [0, 6] unbacked from %nz\n"
        "graph g(%x: f32[6]) -> (f32[u0]):\n"
        "  %m: b8[6] = prims.gt(%x, 0.0)\n"
        "  %nz: i64[u0, 1] = prims.nonzero(%m, count=sym(u0))\n"
        "  %z: f32[u0] = prims.full(shape=[sym(u0)], fill_value=0.0, dtype=f32, "
        'device=device("cpu"), requires_grad=False)\n'
        "  return (%z)\n"
    )
    verify(graph)
    for tidy in (eliminate_dead_code, optimize):
        assert tidy(graph) is graph  # nothing is dead
    x = torch.tensor([1.0, -1.0, 2.0, -3.0, 4.0, -5.0])
    (ours,) = aten2prims.execute(graph, [x.numpy()], check=True)
    np.testing.assert_array_equal(ours, torch.zeros(torch.nonzero(x > 0).shape[0]).numpy())
    # Without its declared source the symbol is read from nowhere: the verifier says so.
    orphan = parse(str(graph).replace("from %nz", "from %gone"))
    with pytest.raises(VerificationError, match=r"symbol u0: declared read from %gone"):
        verify(orphan)


def test_a_merged_source_moves_the_symbols_read_from_it() -> None:
    """CSE merges two `item()`s of one tensor: u1, read from the second, is read from the
    first, which stays (the passes never leave a symbol read from a value gone)."""
    graph = parse(
        "symbol u0 in [0, 4] unbacked from %a\n"
        "symbol u1 in [0, 4] unbacked from %b\n"
        "graph g(%x: f32[4], %n: i64[]) -> (f32[u0], f32[u1]):\n"
        "  %a: int = prims.item(%n)\n"
        "  %b: int = prims.item(%n)\n"
        "  %s: f32[u0] = prims.as_strided(%x, size=[sym(u0)], stride=[1], storage_offset=0)\n"
        "  %t: f32[u1] = prims.as_strided(%x, size=[sym(u1)], stride=[1], storage_offset=0)\n"
        "  return (%s, %t)\n"
    )
    tidied = optimize(graph)
    assert [n.op for n in tidied.nodes].count("prims.item") == 1
    assert {s.value for s in tidied.symbols.values()} == {"a"}
    verify(tidied)
    x = torch.arange(4.0)
    for tried in (graph, tidied):
        first, second = aten2prims.execute(tried, [x.numpy(), np.asarray(3)], check=True)
        np.testing.assert_array_equal(first, x[:3].numpy())
        np.testing.assert_array_equal(second, x[:3].numpy())


# -- checks torch's program makes on a symbol nothing else reads -----------------------------


class ItemChecked(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 5)
        return x * 2


class NonZeroChecked(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._check(torch.nonzero(x > 0).shape[0] <= 5)
        return x * 2


class ItemCheckedEven(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        torch._check(n.item() % 2 == 0)
        return x * 2


class TolistCheckedSum(torch.nn.Module):
    def forward(self, x: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
        a, b = sizes.tolist()
        torch._check(a + b == 7)
        return x * 2


# module, inputs passing its torch._check, inputs failing it, how our run and to_fx's refuse
CHECKED: dict[
    str, tuple[torch.nn.Module, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...], str]
] = {
    "item_range": (
        ItemChecked(),
        (torch.randn(3), torch.tensor(5)),
        (torch.randn(3), torch.tensor(6)),
        r"data-dependent symbol u0 .*outside its range \[0, 5\]",
    ),
    "nonzero_range": (
        NonZeroChecked(),
        (_selecting((7,), 5),),
        (_selecting((7,), 6),),
        r"data-dependent symbol u0 .*outside its range \[0, 5\]",
    ),
    "item_even": (
        ItemCheckedEven(),
        (torch.randn(3), torch.tensor(4)),
        (torch.randn(3), torch.tensor(3)),
        r"lowered assuming \(u0%2\) == 0",
    ),
    "tolist_sum": (
        TolistCheckedSum(),
        (torch.randn(3), torch.tensor([3, 4])),
        (torch.randn(3), torch.tensor([3, 5])),
        r"lowered assuming u0 \+ u1 == 7",
    ),
}


@pytest.mark.parametrize("name", list(CHECKED))
def test_a_torch_check_on_symbols_nothing_else_reads_is_still_checked(
    name: str, tmp_path: Path
) -> None:
    """`torch._check(k <= 5)` narrows u0's range to [0, 5], `torch._check(a + b == 7)` is a
    check of the graph: torch's program asserts both though nothing else reads k, a or b, and so
    does the lowered graph (binding the symbols checks their ranges and the checks on them)."""
    module, passing, failing, refusal = CHECKED[name]
    program = torch.export.export(module, passing).run_decompositions()
    lowered = aten2prims.lower(_saved_and_loaded(program, f"checked_{name}", tmp_path))
    (ours,) = aten2prims.execute(lowered, [t.numpy() for t in passing], check=True)
    np.testing.assert_array_equal(ours, module(*passing).numpy())
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        program.module()(*failing)
    with pytest.raises(ShapeError, match=refusal):
        aten2prims.execute(lowered, [t.numpy() for t in failing])


class SplitByIndices(torch.nn.Module):
    """tensor_split at a tensor of indices: each slice's bounds are values read from data, and
    torch gives each slice a fresh unbacked size (and offset); a downstream op (`cat` of the
    pieces, and a `new_ones` of each one's size) reads those sizes."""

    def forward(self, x: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, ...]:
        first, middle, last = torch.tensor_split(x, indices, 0)
        ones = first.new_ones(middle.shape[0], last.shape[0])
        return first * 2, middle + 1, last.sum(0), torch.cat([last, first]), ones


# Indices into 7 rows: increasing, equal (an empty middle), unsorted (a slice whose end precedes
# its start is empty), at and past the end, 0, and negative (counting from the end).
SPLIT_INDICES = [[2, 5], [3, 3], [0, 0], [5, 2], [7, 7], [0, 7], [9, 12], [6, 30], [-2, 5], [-9, 3]]


def test_tensor_split_by_an_index_tensor_matches_torch_at_every_index(tmp_path: Path) -> None:
    """torch declares each slice's size a fresh unbacked symbol of the slice node; the lowering
    identifies it with the rule's size of the slice, an expression of the indices read: one
    lowering runs every split, with no run-time check on the indices (none is needed)."""
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(0))
    program = torch.export.export(SplitByIndices(), (x, torch.tensor([2, 5]))).run_decompositions()
    graph = _saved_and_loaded(program, "split_by_indices", tmp_path)
    declared = {s.name for s in graph.symbols.values() if not s.backed and s.value is not None}
    # from_fx reads the same graph from the live program
    assert graph_difference(aten2prims.from_fx(program, name=graph.name), graph) is None
    lowered = aten2prims.lower(graph)
    verify(lowered)
    assert graph_difference(parse(str(lowered)), lowered) is None
    # The slices' fresh sizes are replaced by their expressions of the two indices read.
    fresh = declared - lowered.symbols.keys()
    assert fresh and not any(re.search(rf"\b{f}\b", str(lowered)) for f in fresh)
    assert lowered.checks == []
    shapes = set()
    for indices in SPLIT_INDICES:
        split = torch.tensor(indices)
        expected = SplitByIndices()(x, split)
        for accepted, theirs in zip(program.module()(x, split), expected, strict=True):
            assert torch.equal(accepted, theirs)  # torch's exported program runs it too
        ours = aten2prims.execute(lowered, [x.numpy(), split.numpy()], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"split at {indices}, output {index}")
            assert verdict, verdict.message
        shapes.add(tuple(tuple(t.shape) for t in expected))
    assert len(shapes) == len(SPLIT_INDICES) - 1  # only [7, 7] and [9, 12] split alike
    # The lowered graph converted back to torch computes the slices' sizes from the indices too.
    module = aten2prims.to_fx(lowered)
    for indices in ([5, 2], [9, 12], [-2, 5]):
        split = torch.tensor(indices)
        for index, (mine, theirs) in enumerate(
            zip(module(x, split), SplitByIndices()(x, split), strict=True)
        ):
            assert mine.shape == theirs.shape and torch.allclose(mine, theirs), (indices, index)


def test_tensor_split_of_a_dynamic_input_matches_torch_at_several_sizes(tmp_path: Path) -> None:
    """A dynamic number of rows and data-dependent split points in one graph."""
    rows = torch.export.Dim("rows", min=2, max=64)
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(1))
    program = torch.export.export(
        SplitByIndices(),
        (x, torch.tensor([2, 5])),
        dynamic_shapes={"x": {0: rows}, "indices": None},
    ).run_decompositions()
    lowered = aten2prims.lower(_saved_and_loaded(program, "split_dynamic", tmp_path))
    for count, indices in [(2, [1, 1]), (7, [5, 2]), (30, [-4, 40]), (64, [10, 63])]:
        x = torch.randn(count, 3, generator=torch.Generator().manual_seed(count))
        split = torch.tensor(indices)
        ours = aten2prims.execute(lowered, [x.numpy(), split.numpy()], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, SplitByIndices()(x, split), strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"{count} rows at {indices}, {index}")
            assert verdict, verdict.message


class SliceAtValues(torch.nn.Module):
    """Slices between bounds read with tolist(), along two dims, one with a step: torch gives
    each a fresh unbacked size and offset, as for tensor_split."""

    def forward(self, x: torch.Tensor, bounds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = bounds.tolist()
        return x[start:end] + 1, x[:, start:end:2]


def test_slices_at_bounds_read_from_data_match_torch_at_every_bound(tmp_path: Path) -> None:
    x = torch.randn(7, 7, generator=torch.Generator().manual_seed(2))
    program = torch.export.export(SliceAtValues(), (x, torch.tensor([1, 5]))).run_decompositions()
    lowered = aten2prims.lower(_saved_and_loaded(program, "slice_at_values", tmp_path))
    assert lowered.checks == []
    for bounds in ([1, 5], [0, 7], [3, 1], [-3, 9], [6, 8], [2, 3], [-20, -1]):
        split = torch.tensor(bounds)
        ours = aten2prims.execute(lowered, [x.numpy(), split.numpy()], check=True)
        for index, (mine, theirs) in enumerate(zip(ours, SliceAtValues()(x, split), strict=True)):
            verdict = compare(mine, theirs.numpy(), what=f"bounds {bounds}, output {index}")
            assert verdict, verdict.message


# A slice at a bound read from data, whose size the graph declares as a fresh unbacked symbol of
# a narrower range than the slice's size can take.
SLICE_OF_DECLARED_RANGE = """symbol u0 in [-inf, inf] unbacked from %n
symbol u1 in [0, 3] unbacked
graph g(%x: f32[10], %t: i64[]) -> (f32[u1]):
  %n: int = aten._local_scalar_dense.default(%t)
  %s: f32[u1] = aten.slice.Tensor(%x, 0, 0, %n)
  return (%s)
"""


def test_a_fresh_size_identified_with_the_rules_keeps_its_declared_range() -> None:
    """u1 becomes the slice's size computed from u0, and its range [0, 3] a run-time check of
    that size: a slice longer than 3 is refused, naming the check; a range no value of the
    expression meets is refused while lowering, naming the node and the symbol."""
    lowered = aten2prims.lower(parse(SLICE_OF_DECLARED_RANGE))
    assert "u1" not in lowered.symbols and len(lowered.checks) == 1
    x = np.arange(10, dtype=np.float32)
    for start, expected in [(2, x[:2]), (3, x[:3]), (0, x[:0]), (-8, x[:-8])]:
        (ours,) = aten2prims.execute(lowered, [x, np.asarray(start)], check=True)
        np.testing.assert_array_equal(ours, expected)
    with pytest.raises(ShapeError, match=r"lowered assuming .* <= 3, which fails for u0 = 5"):
        aten2prims.execute(lowered, [x, np.asarray(5)])
    with pytest.raises(
        ShapeError, match=r"aten.slice.Tensor -> %s: the graph declares the size u1 in \[11, 20\]"
    ):
        aten2prims.lower(parse(SLICE_OF_DECLARED_RANGE.replace("[0, 3]", "[11, 20]")))


class ArangeToValue(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return torch.arange(n.item()) + x.sum()


def test_arange_to_a_value_read_from_data_runs_at_every_count(tmp_path: Path) -> None:
    """arange's length from a value read from data is exact (no check that it is positive):
    0 and 1 run, as in torch's exported program."""
    x = torch.randn(3, generator=torch.Generator().manual_seed(3))
    program = torch.export.export(ArangeToValue(), (x, torch.tensor(4))).run_decompositions()
    lowered = aten2prims.lower(_saved_and_loaded(program, "arange_to_value", tmp_path))
    assert lowered.checks == []
    for n in (0, 1, 4, 9):
        count = torch.tensor(n)
        expected = ArangeToValue()(x, count)
        assert torch.equal(program.module()(x, count), expected)
        (ours,) = aten2prims.execute(lowered, [x.numpy(), count.numpy()], check=True)
        verdict = compare(ours, expected.numpy(), what=f"arange({n})")
        assert verdict, verdict.message
