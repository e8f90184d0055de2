"""The torch.fx importer gives exactly the graph `load` reads from the saved program (names, metas,
operands, roles, provenance and data), and refuses what the reader refuses."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from _pt2_modules import EXAMPLE_INPUTS, export_dynamic, export_everything, save
from torch._decomp import core_aten_decompositions
from torch.fx.experimental.proxy_tensor import make_fx

import aten2prims
from aten2prims import LoadError
from aten2prims.ir import InputKind, OutputKind, graph_difference
from aten2prims.testing.compare import compare


@pytest.fixture(scope="module")
def program() -> torch.export.ExportedProgram:
    return export_everything()


@pytest.fixture(scope="module")
def archive(
    program: torch.export.ExportedProgram, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return save(program, tmp_path_factory.mktemp("fx") / "everything.pt2")


def test_exported_program_imports_as_load_reads_it(program, archive: Path) -> None:
    loaded = aten2prims.load(archive)
    imported = aten2prims.from_fx(program, name="everything")
    assert graph_difference(imported, loaded, compare_data=True) is None
    assert all(node.provenance.source for node in imported.nodes)
    assert {o.kind for o in imported.outputs} == {
        OutputKind.BUFFER_MUTATION,
        OutputKind.USER_OUTPUT,
    }


def test_reloaded_program_imports_as_load_reads_it(archive: Path) -> None:
    """Except for storage offsets of views, which torch's loader does not restore (its fake
    tensors start every view at offset 0; the archive and `load` keep them)."""
    imported = aten2prims.from_fx(torch.export.load(archive), name="everything")
    loaded = aten2prims.load(archive)
    offsets = [r.meta.storage_offset for node in loaded.nodes for r in node.results]
    assert any(offsets)
    for graph in (imported, loaded):
        for node in graph.nodes:
            for result in node.results:
                result.meta = attrs.evolve(result.meta, storage_offset=0)
    assert graph_difference(imported, loaded, compare_data=True) is None


def test_user_input_mutation(tmp_path: Path) -> None:
    class Accumulate(torch.nn.Module):
        def forward(self, total: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            total.add_(x)
            return x * 2

    program = torch.export.export(
        Accumulate(), (torch.zeros(3), torch.ones(3))
    ).run_decompositions()
    imported = aten2prims.from_fx(program, name="accumulate")
    loaded = aten2prims.load(save(program, tmp_path / "accumulate.pt2"))
    assert graph_difference(imported, loaded, compare_data=True) is None
    assert [(o.kind, o.target) for o in imported.outputs] == [
        (OutputKind.USER_INPUT_MUTATION, "total"),
        (OutputKind.USER_OUTPUT, None),
    ]


def test_graph_module_from_make_fx() -> None:
    offsets = torch.tensor([1.0, -2.0, 3.0])

    def normalize_then_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.nn.functional.layer_norm(x + offsets, (3,)).max(dim=1)

    module = make_fx(normalize_then_max, decomposition_table=core_aten_decompositions())(
        torch.randn(2, 3)
    )
    graph = aten2prims.from_fx(module, name="f")
    assert [(i.name, i.kind, i.target) for i in graph.inputs] == [
        ("x_1", InputKind.USER_INPUT, None),
        ("_tensor_constant0", InputKind.CONSTANT, "_tensor_constant0"),
    ]
    np.testing.assert_array_equal(graph.inputs[1].data, offsets.numpy())
    assert [node.op for node in graph.nodes] == [
        "aten.add.Tensor",
        "aten.native_layer_norm.default",
        "aten.max.dim",
    ]
    # getitem nodes name the results, even the unused ones make_fx kept
    assert [r.name for r in graph.nodes[1].results] == ["getitem", "getitem_1", "getitem_2"]
    assert [o.value.name for o in graph.outputs] == ["getitem_3", "getitem_4"]
    assert [str(o.value.meta) for o in graph.outputs] == ["f32[2]", "i64[2]"]


def test_graph_module_with_a_masked_backward_op() -> None:
    """make_fx records a None result of a backward op (output_mask False) in node.meta['val']:
    it becomes an undefined result, named as the `.pt2` reader names it, which the lowering
    does not compute."""
    generator = torch.Generator().manual_seed(0)
    x, grad = torch.randn(2, 5, generator=generator), torch.randn(2, 5, generator=generator)
    _, mean, rstd = torch.ops.aten.native_layer_norm.default(x, [5], None, None, 1e-5)

    def backward(g: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor) -> Any:
        grad_input, _, _ = torch.ops.aten.native_layer_norm_backward.default(
            g, x, [5], mean, rstd, None, None, [True, False, False]
        )
        return (grad_input,)

    module = make_fx(backward)(grad, x, mean, rstd)
    graph = aten2prims.from_fx(module, name="backward")
    (node,) = graph.nodes
    assert [r.name for r in node.results] == ["getitem", "undefined_0", "undefined_1"]
    assert [r.is_undefined for r in node.results] == [False, True, True]
    lowered = aten2prims.lower(graph)
    (ours,) = aten2prims.execute(lowered, [grad.numpy(), x.numpy(), mean.numpy(), rstd.numpy()])
    (expected,) = backward(grad, x, mean, rstd)
    verdict = compare(ours, expected.numpy(), what="grad_input")
    assert verdict, verdict.message


def test_a_getitem_of_a_none_result_reads_the_undefined_value() -> None:
    """An argument that accepts None (native_layer_norm's bias) may read an undefined result
    through getitem; the rule gets None there."""
    graph = torch.fx.Graph()
    names = ("g", "x", "mean", "rstd")
    shapes = ((2, 5), (2, 5), (2, 1), (2, 1))
    g, x, mean, rstd = (graph.placeholder(name) for name in names)
    for placeholder, shape in zip((g, x, mean, rstd), shapes):
        placeholder.meta["val"] = torch.empty(shape)
    node = graph.call_function(
        torch.ops.aten.native_layer_norm_backward.default,
        (g, x, [5], mean, rstd, None, None, [True, False, False]),
    )
    node.meta["val"] = (torch.empty(2, 5), None, None)
    grad_input = graph.call_function(operator.getitem, (node, 0))
    no_bias = graph.call_function(operator.getitem, (node, 2))
    normed = graph.call_function(
        torch.ops.aten.native_layer_norm.default, (grad_input, [5], None, no_bias, 1e-5)
    )
    normed.meta["val"] = (torch.empty(2, 5), torch.empty(2, 1), torch.empty(2, 1))
    out = graph.call_function(operator.getitem, (normed, 0))
    graph.output((out,))
    imported = aten2prims.from_fx(torch.fx.GraphModule(torch.nn.Module(), graph))
    backward, norm = imported.nodes
    assert backward.results[2].name == "undefined_1"
    assert norm.args[3] is backward.results[2]
    lowered = aten2prims.lower(imported)
    generator = torch.Generator().manual_seed(1)
    arrays = [torch.randn(shape, generator=generator) for shape in shapes]
    arrays[3] = arrays[3].abs() + 0.5  # rstd
    (ours,) = aten2prims.execute(lowered, [a.numpy() for a in arrays])
    grad, *_ = torch.ops.aten.native_layer_norm_backward.default(
        arrays[0], arrays[1], [5], arrays[2], arrays[3], None, None, [True, False, False]
    )
    expected, _, _ = torch.ops.aten.native_layer_norm.default(grad, [5], None, None, 1e-5)
    verdict = compare(ours, expected.numpy(), what="output")
    assert verdict, verdict.message


def test_duplicate_getitems_read_one_value() -> None:
    """As torch.export.save does, the first getitem names the result and later ones reuse it."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 3)
    node = graph.call_function(torch.ops.aten.max.dim, (x, 1))
    node.meta["val"] = (torch.empty(2), torch.empty(2, dtype=torch.long))
    first = graph.call_function(operator.getitem, (node, 0))
    again = graph.call_function(operator.getitem, (node, 0))
    total = graph.call_function(torch.ops.aten.add.Tensor, (first, again))
    total.meta["val"] = torch.empty(2)
    graph.output((total,))
    imported = aten2prims.from_fx(torch.fx.GraphModule(torch.nn.Module(), graph))
    maximum, add = imported.nodes
    assert [r.name for r in maximum.results] == ["getitem", "max_dim_unused_1"]
    assert add.args == (maximum.results[0], maximum.results[0])


def test_dynamic_shapes_import_as_load_reads_them(tmp_path: Path) -> None:
    """Symbolic sizes, the size nodes (sym_size, Python's `*` on sizes), a size returned as an
    output and the symbols' ranges and examples: from_fx gives what load reads from the file."""
    program = export_dynamic()
    path = save(program, tmp_path / "doubled.pt2")
    imported = aten2prims.from_fx(program, name="doubled")
    assert graph_difference(imported, aten2prims.load(path), compare_data=True) is None
    assert imported.symbols and any(node.op == "aten.mul.Tensor" for node in imported.nodes)


def test_refuses_symbolic_operators_it_cannot_read() -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2)
    node = graph.call_function(operator.and_, (x, 2))
    graph.output((node,))
    with pytest.raises(LoadError, match="_operator.and_ computes on symbolic sizes"):
        aten2prims.from_fx(torch.fx.GraphModule(torch.nn.Module(), graph))


def test_refuses_ops_outside_core_aten() -> None:
    program = torch.export.export(torch.nn.Linear(4, 3), (EXAMPLE_INPUTS[0],))  # not decomposed
    with pytest.raises(
        LoadError,
        match=r"outside the Core ATen overloads aten2prims knows: aten.linear.default \(1 node",
    ):
        aten2prims.from_fx(program)
    with pytest.raises(LoadError, match="call_module nodes are not supported"):
        aten2prims.from_fx(torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU())))
    traced = torch.fx.symbolic_trace(lambda x: torch.relu(x))
    with pytest.raises(LoadError, match="relu is not an aten op"):
        aten2prims.from_fx(traced)


def test_refuses_other_objects() -> None:
    with pytest.raises(
        LoadError, match="expects a torch.export.ExportedProgram or a torch.fx.GraphModule"
    ):
        aten2prims.from_fx(torch.nn.Linear(2, 2))
