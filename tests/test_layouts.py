"""Strides and storage offsets: metas against torch's prims metas for non-contiguous operands,
the text form, the verifier, the frontends, and every op that reads a layout (as_strided,
as_strided_scatter, sym_stride, sym_storage_offset, clone/_to_copy with a memory format)
against torch eager on real exported programs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from prims_testing import ours_meta, torch_meta

import aten2prims
import prims
from aten2prims.errors import ExecutionError, ParseError, ShapeError, VerificationError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import DType, MemoryFormat, TensorMeta, parse
from aten2prims.ir.layout import same_significant_strides
from aten2prims.passes.verify import verify
from aten2prims.testing.compare import compare
from prims import Builder

f32 = DType.float32

# Operand layouts torch produces: transposed, sliced (with a storage offset), expanded,
# channels-last, a step slice.
LAYOUTS: dict[str, TensorMeta] = {
    "transposed": TensorMeta((4, 3), f32, (1, 4)),
    "sliced": TensorMeta((2, 4), f32, (4, 1), 4),
    "column_slice": TensorMeta((3, 2), f32, (4, 1), 2),
    "step_slice": TensorMeta((3, 2), f32, (4, 2), 1),
    "expanded": TensorMeta((3, 4), f32, (0, 1)),
    "channels_last": TensorMeta((2, 3, 4, 5), f32, (60, 1, 15, 3)),
    "permuted_4d": TensorMeta((2, 4, 5, 3), f32, (60, 5, 1, 20)),
}


def _unary_cases(meta: TensorMeta) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    last = meta.ndim - 1
    cases: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("neg", (meta,), {}),
        ("add", (meta, meta), {}),
        ("add", (meta, TensorMeta(meta.shape, f32)), {}),
        ("convert_element_type", (meta, DType.float64), {}),
        ("transpose", (meta, list(reversed(range(meta.ndim)))), {}),
        ("broadcast_in_dim", (meta, [2, *meta.shape], list(range(1, meta.ndim + 1))), {}),
        ("collapse_view", (meta, 0, last), {}),
        ("collapse", (meta, 0, last), {}),
        ("split_dim", (meta, 0, 1), {}),
        ("squeeze", (TensorMeta((1, *meta.shape), f32, (99, *meta.strides)), [0]), {}),
        ("view_of", (meta,), {}),
        ("view_of_dtype", (meta, DType.int32), {}),
        ("rev", (meta, [0]), {}),
        ("clone", (meta,), {}),
        ("clone", (meta,), {"memory_format": MemoryFormat.preserve_format}),
        ("clone", (meta,), {"memory_format": MemoryFormat.contiguous_format}),
        ("fill", (meta, 2.0), {}),
        ("full_like", (meta, 2.0), {"dtype": f32, "device": None, "requires_grad": False}),
        ("sum", (meta, [0]), {"output_dtype": None}),
        ("reshape", (meta, [meta.numel]), {}),
        ("where", (TensorMeta(meta.shape, DType.bool), meta, meta), {}),
        ("as_strided_scatter", (meta, TensorMeta((1,), f32), [1], [1], meta.storage_offset), {}),
    ]
    if meta.ndim == 4:
        cases.append(("clone", (meta,), {"memory_format": MemoryFormat.channels_last}))
    return cases


META_CASES = [
    pytest.param(name, args, kwargs, id=f"{layout}-{name}-{i}")
    for layout, meta in LAYOUTS.items()
    for i, (name, args, kwargs) in enumerate(_unary_cases(meta))
]


def _device(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: (aten2prims.ir.CPU if k == "device" else v) for k, v in kwargs.items()}


@pytest.mark.parametrize(("name", "args", "kwargs"), META_CASES)
def test_meta_strides_and_offset_are_torchs(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    kwargs = _device(kwargs)
    ours = ours_meta(name, *args, **kwargs)
    if name == "collapse_view" and not _nests(args[0]):
        # torch refuses the view; ours is a contiguous copy (docs/prims.md)
        with pytest.raises(RuntimeError, match="no such view exists"):
            torch_meta(name, *args, **kwargs)
        assert ours == TensorMeta(ours.shape, ours.dtype)
        return
    assert ours == torch_meta(name, *args, **kwargs)


def _nests(meta: TensorMeta) -> bool:
    return all(
        meta.shape[i] == 1
        or meta.shape[i + 1] == 1
        or meta.strides[i] == meta.strides[i + 1] * meta.shape[i + 1]
        for i in range(meta.ndim - 1)
    )


def test_strided_creation_metas_are_torchs() -> None:
    for name, args, kwargs in [
        ("empty_strided", ([2, 3], [1, 2]), {}),
        ("empty_permuted", ([2, 3, 4], [2, 0, 1]), {}),
    ]:
        kwargs = {"dtype": f32, "device": aten2prims.ir.CPU, "requires_grad": False}
        assert ours_meta(name, *args, **kwargs) == torch_meta(name, *args, **kwargs)


# -- the text form and the verifier ------------------------------------------------------------------


def test_text_form_prints_layouts_only_when_not_contiguous() -> None:
    text = (
        "graph g(%x: f32[3, 4]) -> (f32[2, 2]{1, 3}+1):\n"
        "  %t: f32[4, 3]{1, 4} = prims.transpose(%x, permutation=[1, 0])\n"
        "  %w: f32[2, 2]{1, 3}+1 = prims.as_strided(%t, size=[2, 2], stride=[1, 3], storage_offset=1)\n"
        "  return (%w)\n"
    )
    graph = parse(text)
    verify(graph)
    assert str(graph) == text
    assert graph.nodes[0].results[0].meta == TensorMeta((4, 3), f32, (1, 4))
    assert str(TensorMeta((2, 3), f32)) == "f32[2, 3]"
    assert str(TensorMeta((2, 3), f32, (3, 1), 5)) == "f32[2, 3]+5"
    assert str(TensorMeta((), f32, (), 2)) == "f32[]+2"
    # writing the contiguous strides out reads back as the same meta
    assert parse("graph g(%x: f32[2, 3]{3, 1}) -> (f32[2, 3]):\n  return (%x)\n").inputs[
        0
    ].value.meta == TensorMeta((2, 3), f32)


@pytest.mark.parametrize(
    "bad",
    ["f32[2, 3]{1}", "f32[2, 3]{1, -2}", "f32[2, 3]{1, 2}+", "f32[2, 3]{1, 2}+-1", "f32[2]{1.5}"],
)
def test_text_form_rejects_malformed_layouts(bad: str) -> None:
    with pytest.raises(ParseError):
        parse(f"graph g(%x: {bad}) -> ():\n  return ()\n")


def test_verifier_reports_strides_the_meta_rule_does_not_give() -> None:
    text = (
        "graph g(%x: f32[3, 4]) -> (f32[4, 3]):\n"
        "  %t: f32[4, 3] = prims.transpose(%x, permutation=[1, 0])\n"
        "  return (%t)\n"
    )
    with pytest.raises(VerificationError, match=r"f32\[4, 3\]\{1, 4\}"):
        verify(parse(text))


# -- ops that read a layout, against torch eager on exported programs --------------------------------


def _export(fn: Callable[..., torch.Tensor], *inputs: torch.Tensor) -> Any:
    class Module(torch.nn.Module):
        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return fn(*args)

    return torch.export.export(Module(), tuple(inputs)).run_decompositions()


def _check_program(program: Any, inputs: tuple[torch.Tensor, ...], path: Path) -> Any:
    """Load the saved archive and import the program, lower both, check every aten result's
    layout against torch's record, and compare the outputs with torch eager."""
    expected = program.module()(*inputs)
    torch.export.save(program, path)
    loaded = aten2prims.load(path)
    assert aten2prims.ir.graph_difference(loaded, aten2prims.from_fx(program, name="model")) is None
    lowered = aten2prims.lower(loaded)
    verify(lowered)
    recorded = {r.name: r.meta for node in loaded.nodes for r in node.results}
    for node in lowered.nodes:
        for result in node.results:
            if result.name in recorded and result.is_tensor:
                torch_meta_ = recorded[result.name]
                assert same_significant_strides(
                    result.shape, result.strides, torch_meta_.strides
                ), (result, torch_meta_)
                assert result.meta.storage_offset == torch_meta_.storage_offset, result
    feeds = {gi.name: to_numpy(x) for gi, x in zip(loaded.user_inputs, inputs)}
    (ours,) = execute(lowered, feeds)
    assert ours.shape == tuple(expected.shape)
    np.testing.assert_array_equal(ours, to_numpy(expected))
    assert loaded.outputs[0].value.meta.strides == tuple(expected.stride()) or (
        same_significant_strides(expected.shape, loaded.outputs[0].value.strides, expected.stride())
    )
    return lowered


GRID = torch.arange(12.0).reshape(3, 4)
IMAGE = torch.arange(120.0).reshape(2, 3, 4, 5)

LAYOUT_PROGRAMS: dict[str, tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]] = {
    # the user's report: ours gave [[4, 5], [8, 9]]
    "transposed": (lambda x: x.t().as_strided((2, 2), (1, 3), 1), (GRID,)),
    "row_slice": (lambda x: x[1:].as_strided((2, 3), (4, 1), 5), (GRID,)),
    "column_slice": (lambda x: x[:, 1:3].as_strided((3, 2), (4, 1), 1), (GRID,)),
    "step_slice": (lambda x: x[:, ::2].as_strided((3,), (4,), 2), (GRID,)),
    "expanded": (lambda x: x[:1].expand(3, 4).as_strided((2, 2), (1, 1), 0), (GRID,)),
    "offset_kept": (lambda x: torch.as_strided(x[1:], (2, 2), (1, 2)), (GRID,)),
    "select_then_window": (lambda x: x.t()[2].as_strided((2,), (4,), 2), (GRID,)),
    "channels_last_clone": (
        lambda x: x.clone(memory_format=torch.channels_last).as_strided((6,), (1,), 0),
        (IMAGE,),
    ),
    "channels_last_to": (
        lambda x: x.to(dtype=torch.float64, memory_format=torch.channels_last).as_strided(
            (2, 3), (1, 3), 4
        ),
        (IMAGE,),
    ),
    "contiguous_of_permuted": (
        lambda x: x.permute(0, 2, 3, 1).contiguous().as_strided((4,), (3,), 1),
        (IMAGE,),
    ),
    "preserve_clone_of_permuted": (
        lambda x: x.permute(0, 2, 3, 1).clone().as_strided((4,), (1,), 7),
        (IMAGE,),
    ),
    "slice_scatter_into_transposed": (
        lambda x: torch.slice_scatter(x.t(), torch.ones(2, 3), 0, 1, 3).as_strided(
            (2, 2), (1, 4), 1
        ),
        (GRID,),
    ),
    "select_scatter_into_channels_last": (
        lambda x: torch.select_scatter(
            x.contiguous(memory_format=torch.channels_last), torch.ones(2, 4, 5), 1, 1
        ).as_strided((5,), (1,), 3),
        (IMAGE,),
    ),
    "elementwise_keeps_channels_last": (
        lambda x: (x.contiguous(memory_format=torch.channels_last) + 1).as_strided(
            (3, 2), (1, 3), 0
        ),
        (IMAGE,),
    ),
}


@pytest.mark.parametrize("case", sorted(LAYOUT_PROGRAMS))
def test_layout_reading_ops_match_torch(case: str, tmp_path: Path) -> None:
    fn, inputs = LAYOUT_PROGRAMS[case]
    _check_program(_export(fn, *inputs), inputs, tmp_path / "model.pt2")


def test_the_users_case_gives_torchs_values(tmp_path: Path) -> None:
    fn, inputs = LAYOUT_PROGRAMS["transposed"]
    program = _export(fn, *inputs)
    torch.export.save(program, tmp_path / "m.pt2")
    loaded = aten2prims.load(tmp_path / "m.pt2")
    (ours,) = execute(aten2prims.lower(loaded), {loaded.user_inputs[0].name: GRID.numpy()})
    np.testing.assert_array_equal(ours, [[1.0, 4.0], [2.0, 5.0]])


def test_sym_stride_and_storage_offset_read_the_layout() -> None:
    text = (
        "graph g(%x: f32[3, 4]) -> (int, int, int):\n"
        "  %t: f32[4, 3]{1, 4} = aten.permute.default(%x, [1, 0])\n"
        "  %s: f32[3, 3]{1, 4}+1 = aten.slice.Tensor(%t, 0, 1, 4, 1)\n"
        "  %a: int = aten.sym_stride.int(%s, 0)\n"
        "  %b: int = aten.sym_stride.int(%s, 1)\n"
        "  %c: int = aten.sym_storage_offset.default(%s)\n"
        "  return (%a, %b, %c)\n"
    )
    lowered = aten2prims.lower(parse(text))
    torch_view = GRID.permute(1, 0)[1:4]
    assert execute(lowered, {"x": GRID.numpy()}) == [
        *torch_view.stride(),
        torch_view.storage_offset(),
    ]


def test_window_outside_the_operands_elements_is_an_error_not_a_value() -> None:
    """x is x[:, ::2] of a 3x4 tensor: storage position 1 lies between its elements (torch would
    read its base there), so a window reading it fails when run; one reaching past x's last
    element is rejected when the graph is built."""
    builder = Builder("g")
    x = builder.add_input("x", TensorMeta((3, 2), f32, (4, 2), 0))
    with builder:
        y = prims.as_strided(x, [2], [1], 0)
        z = prims.as_strided(x, [2], [2], 2)
    graph = builder.finish([y, z])
    values = np.arange(6, dtype=np.float32).reshape(3, 2)
    with pytest.raises(ExecutionError, match="no element of the operand occupies"):
        execute(graph, {"x": values})
    with builder, pytest.raises(ShapeError, match="holds only positions 0..10"):
        prims.as_strided(x, [2], [1], 10)


def test_overlapping_operand_whose_values_disagree_is_an_error() -> None:
    builder = Builder("g")
    x = builder.add_input("x", TensorMeta((2, 3), f32, (0, 1)))  # an expanded row
    with builder:
        y = prims.as_strided(x, [3], [1], 0)
    graph = builder.finish([y])
    row = np.arange(3, dtype=np.float32)
    (ours,) = execute(graph, {"x": np.stack([row, row])})
    np.testing.assert_array_equal(ours, row)
    with pytest.raises(ExecutionError, match="share a storage position"):
        execute(graph, {"x": np.stack([row, row + 1])})


# -- a channels-last model -------------------------------------------------------------------------


class _ChannelsLastCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.features(x)
        return self.head(features.flatten(1)), features


def test_channels_last_cnn_exports_lowers_and_matches_torch(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = _ChannelsLastCNN().eval().to(memory_format=torch.channels_last)
    with torch.no_grad():
        model.features[1].running_mean.uniform_(-0.5, 0.5)
        model.features[1].running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    program = torch.export.export(model, (x,)).run_decompositions()
    torch.export.save(program, tmp_path / "cnn.pt2")
    loaded = aten2prims.load(tmp_path / "cnn.pt2")
    assert aten2prims.ir.graph_difference(loaded, aten2prims.from_fx(program, name="cnn")) is None
    (user_input,) = loaded.user_inputs
    assert user_input.value.strides == tuple(x.stride())  # channels-last, as exported
    convolutions = [n for n in loaded.nodes if n.op == "aten.convolution.default"]
    # torch's kernels keep channels-last
    assert convolutions and all(n.results[0].strides[1] == 1 for n in convolutions)
    lowered = aten2prims.lower(loaded)
    verify(lowered)
    # torch's prims metas make a convolution computed from products and sums contiguous while
    # torch's kernel kept channels-last: the lowering copies the result into torch's layout
    relaid = [n for n in lowered.nodes if n.op == "prims.copy_strided"]
    assert {n.provenance.origin for n in relaid} >= {n.results[0].name for n in convolutions}
    recorded = {r.name: r.meta for node in loaded.nodes for r in node.results}
    checked = set()
    for node in lowered.nodes:
        for result in node.results:
            if result.name in recorded:
                expected = recorded[result.name]
                assert same_significant_strides(result.shape, result.strides, expected.strides)
                assert result.meta.storage_offset == expected.storage_offset
                checked.add(result.name)
    assert {n.results[0].name for n in convolutions} <= checked and len(checked) >= 10
    with torch.no_grad():
        logits, features = model(x)
    ours = execute(lowered, {user_input.name: to_numpy(x)})
    for actual, wanted, what in zip(ours, (logits, features), ("logits", "features")):
        outcome = compare(actual, to_numpy(wanted), what=what)
        assert outcome, outcome.message


def test_reads_layout_marks_exactly_the_kernels_taking_layouts() -> None:
    import inspect

    from prims.registry import PRIMS

    marked = {
        name
        for name, definition in PRIMS.items()
        if definition.kernel is not None
        and "layouts" in inspect.signature(definition.kernel).parameters
    }
    assert marked == {name for name, d in PRIMS.items() if d.reads_layout}
    assert marked == {"as_strided", "as_strided_scatter"}
    # the same array read through two layouts: a transpose's storage is the untransposed order
    kernel = PRIMS["as_strided"].kernel
    values = np.arange(12.0).reshape(4, 3)
    as_contiguous = kernel(values, [3], [1], 0, layouts=(((3, 1), 0),))
    as_transposed = kernel(values, [3], [1], 0, layouts=(((1, 4), 0),))
    np.testing.assert_array_equal(as_contiguous, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(as_transposed, [0.0, 3.0, 6.0])
