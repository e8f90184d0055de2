"""`aten2prims.to_fx` of graphs beyond straight-line static ones, against torch eager: control
flow torch.export keeps (`torch.cond`, `map`, `while_loop`, `scan`) handed back as torch's own
higher-order ops with each lowered nested graph a GraphModule submodule, and data-dependent
sizes (nonzero, boolean masks, masked_select, unique, `item()` and `tolist()` driving sizes)
computed in torch by the node whose data decide them. Each program is exported, saved, loaded,
lowered once, handed to torch, and run there at inputs giving different branches, iteration
counts or sizes; the results match torch eager and our executor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_control_flow as control_flow
import test_data_dependent as data_dependent
import torch
from torch.export import Dim

import aten2prims
from aten2prims.backends.to_fx import to_fx
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.testing.compare import compare


def _saved(program: Any, tmp_path: Path, name: str) -> aten2prims.Graph:
    path = tmp_path / f"{name}.pt2"
    torch.export.save(program.run_decompositions(), path)
    return aten2prims.load(path)


def _matches_eager(
    module: torch.nn.Module, lowered: aten2prims.Graph, fx: Any, inputs: tuple[Any, ...], what: str
) -> tuple[Any, ...]:
    """fx(inputs) and our executor each match torch eager; eager's outputs."""
    with torch.no_grad():
        expected = module(*inputs)
        theirs = fx(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    ours = aten2prims.execute(lowered, [t.numpy() for t in inputs])
    assert len(theirs) == len(ours) == len(expected)
    for index, (fx_result, our_result, eager) in enumerate(zip(theirs, ours, expected)):
        want = eager.numpy()
        for got, by in ((to_numpy(fx_result), "to_fx"), (np.asarray(our_result), "execute")):
            assert (got.dtype, got.shape) == (want.dtype, want.shape), (what, by, index)
            verdict = compare(got, want, what=f"{what} via {by}, output {index}")
            assert verdict, verdict.message
    return expected


def _targets(fx: Any) -> set[Any]:
    return {node.target for node in fx.graph.nodes if node.op == "call_function"}


# -- control flow -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(control_flow.CASES))
def test_cond_and_map_run_in_torch_taking_both_branches(name: str, tmp_path: Path) -> None:
    module, shapes, dynamic = control_flow.CASES[name]
    lowered = aten2prims.lower(control_flow._load(name, tmp_path))
    fx = to_fx(lowered)
    op, graph_names = control_flow.OPS.get(name, control_flow.COND)
    assert getattr(torch.ops.higher_order, op.removeprefix("higher_order.")) in _targets(fx)
    submodules = {n.target for n in fx.graph.nodes if n.op == "get_attr"}
    assert set(graph_names) <= submodules
    assert all(isinstance(getattr(fx, g), torch.fx.GraphModule) for g in graph_names)
    sizes: list[list[tuple[int, ...]]] = (
        [shapes] if dynamic is None else [shapes, [(1, 6)], [(9, 6)]]
    )
    # Positive inputs take the true branch of every case's predicate, negative ones the false.
    for seed, sign in ((1, 1.0), (2, -1.0)):
        for shape_list in sizes:
            inputs = control_flow._inputs(seed, sign, shape_list)
            _matches_eager(module, lowered, fx, inputs, f"{name} seed {seed} {shape_list}")


def test_nested_cond_becomes_a_submodule_of_a_branch(tmp_path: Path) -> None:
    fx = to_fx(aten2prims.lower(control_flow._load("nested", tmp_path)))
    true_branch = fx.true_graph_0
    assert torch.ops.higher_order.cond in _targets(true_branch)
    assert isinstance(true_branch.true_graph_0, torch.fx.GraphModule)


def test_a_condition_on_a_size_is_computed_from_the_input_shape(tmp_path: Path) -> None:
    """ShapeCond's predicate after lowering is `sym(5 <= s0)`: an fx comparison of sym_size."""
    fx = to_fx(aten2prims.lower(control_flow._load("shape_cond", tmp_path)))
    assert torch.ops.aten.sym_size.int in _targets(fx)
    for rows in (3, 4, 5, 9):
        x = torch.randn(rows, 6)
        (result,) = fx(x)
        torch.testing.assert_close(result, x.sin() if rows > 4 else x)


def test_while_loop_runs_in_torch_for_any_number_of_iterations(tmp_path: Path) -> None:
    module = control_flow.WhileLoop()
    example = (torch.tensor(0), torch.tensor(3), torch.randn(2, 4))
    lowered = aten2prims.lower(_saved(torch.export.export(module, example), tmp_path, "loop"))
    fx = to_fx(lowered)
    assert torch.ops.higher_order.while_loop in _targets(fx)
    generator = torch.Generator().manual_seed(0)
    for start, stop in ((0, 0), (2, 5), (4, 2), (0, 9)):
        inputs = (torch.tensor(start), torch.tensor(stop), torch.randn(2, 4, generator=generator))
        expected = _matches_eager(module, lowered, fx, inputs, f"loop {start} -> {stop}")
        assert int(expected[0]) == 2 * max(start, stop)


def test_a_loop_condition_returning_a_one_element_tensor_gives_torch_a_0_dim_one() -> None:
    """Our while_loop takes any one-element b8 predicate; torch's takes a 0-dim one."""
    graph = aten2prims.parse(
        """graph g(%i: i64[], %n: i64[]) -> (i64[]):
  %r: i64[] = higher_order.while_loop(@c, @b, [%i], [%n])
    graph c(%i: i64[], %n: i64[]) -> (b8[1, 1]):
      %lt: b8[] = prims.lt(%i, %n)
      %p: b8[1, 1] = prims.broadcast_in_dim(%lt, shape=[1, 1], broadcast_dimensions=[])
      return (%p)
    graph b(%i: i64[], %n: i64[]) -> (i64[]):
      %j: i64[] = prims.add(%i, 3)
      return (%j)
  return (%r)"""
    )
    fx = to_fx(graph)
    for start, stop in ((0, 7), (5, 2)):
        (theirs,) = fx(torch.tensor(start), torch.tensor(stop))
        (ours,) = aten2prims.execute(graph, [np.asarray(start), np.asarray(stop)])
        expected = start if start >= stop else start + 3 * -(-(stop - start) // 3)
        assert int(theirs) == int(ours) == expected


def test_scan_rnn_runs_in_torch_over_sequences_of_several_lengths(tmp_path: Path) -> None:
    module = control_flow.ScanRNN()
    example = (torch.randn(7, 2, 4), torch.randn(2, 5))
    program = torch.export.export(
        module, example, dynamic_shapes=({0: Dim("seq", min=1, max=64)}, None)
    )
    lowered = aten2prims.lower(_saved(program, tmp_path, "rnn"))
    fx = to_fx(lowered)
    assert torch.ops.higher_order.scan in _targets(fx)
    generator = torch.Generator().manual_seed(0)
    for length in (1, 3, 20):
        inputs = (
            torch.randn(length, 2, 4, generator=generator),
            torch.randn(2, 5, generator=generator),
        )
        _matches_eager(module, lowered, fx, inputs, f"rnn over {length} steps")


def test_the_module_of_a_cond_exports_again(tmp_path: Path) -> None:
    """torch.export traces the handed-back module, higher-order op and submodules included."""
    module = control_flow.Cond()
    fx = to_fx(aten2prims.lower(control_flow._load("cond", tmp_path)))
    example = control_flow._inputs(0, 1.0, [(3, 4), (3, 4)])
    program = torch.export.export(fx, example)
    conds = [n for n in program.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert len(conds) == 1
    for seed, sign in ((1, 1.0), (2, -1.0)):
        inputs = control_flow._inputs(seed, sign, [(3, 4), (3, 4)])
        (result,) = program.module()(*inputs)
        torch.testing.assert_close(result, module(*inputs))


# -- data-dependent sizes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(data_dependent.CASES))
def test_data_dependent_sizes_are_computed_in_torch(name: str, tmp_path: Path) -> None:
    module, make, graph = data_dependent._load(name, tmp_path)
    lowered = aten2prims.lower(graph)
    assert any(not s.backed for s in lowered.symbols.values())
    fx = to_fx(lowered)
    sizes = set()
    for seed in range(4):
        inputs = make(torch.Generator().manual_seed(seed))
        expected = _matches_eager(module, lowered, fx, inputs, f"{name} seed {seed}")
        sizes.add(tuple(tuple(t.shape) for t in expected))
    assert len(sizes) >= 2  # one module for data giving different sizes


def test_a_data_dependent_value_outside_its_range_is_refused_in_torch(tmp_path: Path) -> None:
    _, _, graph = data_dependent._load("item_slice", tmp_path)
    fx = to_fx(aten2prims.lower(graph))
    with pytest.raises(
        RuntimeError, match=r"data-dependent symbol u\d+ .* outside its range \[0, 6\]"
    ):
        fx(torch.zeros(6), torch.tensor(9))


def test_the_module_of_a_mask_index_exports_again(tmp_path: Path) -> None:
    """`aten2prims.nonzero` without a count traces to a data-dependent size (its fake kernel),
    so torch.export takes the handed-back module of `x[x > 0] * 2`."""
    module, make, graph = data_dependent._load("mask_index", tmp_path)
    fx = to_fx(aten2prims.lower(graph))
    program = torch.export.export(fx, make(torch.Generator().manual_seed(0)))
    assert torch.ops.aten2prims.nonzero.default in _targets(program.graph_module)
    sizes = set()
    for seed in (1, 2, 3):
        inputs = make(torch.Generator().manual_seed(seed))
        (result,) = program.module()(*inputs)
        expected = module(*inputs)
        torch.testing.assert_close(result, expected)
        sizes.add(tuple(expected.shape))
    assert len(sizes) >= 2


@pytest.mark.parametrize("name", list(data_dependent.UNIQUE_CASES))
def test_unique_counts_are_computed_in_torch(name: str, tmp_path: Path) -> None:
    module, _ = data_dependent.UNIQUE_CASES[name]
    example = torch.tensor([[3, 1, 2], [3, 1, 5]])
    lowered = aten2prims.lower(_saved(torch.export.export(module, (example,)), tmp_path, name))
    fx = to_fx(lowered)
    assert torch.ops.aten2prims.nonzero.default in _targets(fx)
    counts = set()
    for seed in range(4):
        x = torch.randint(0, 2 + seed, (2, 3), generator=torch.Generator().manual_seed(seed))
        expected = _matches_eager(module, lowered, fx, (x,), f"{name} seed {seed}")
        for got, want in zip(fx(x), expected):
            assert torch.equal(got, want)
        counts.add(expected[0].shape[0])
    assert len(counts) >= 2


def test_unique_of_a_dynamic_input_runs_in_torch_at_several_sizes(tmp_path: Path) -> None:
    module = data_dependent.Unique(sorted=True, return_inverse=True, return_counts=True)
    program = torch.export.export(
        module,
        (torch.randint(0, 5, (4, 3)),),
        dynamic_shapes={"x": {0: Dim("batch", min=2, max=64)}},
    )
    lowered = aten2prims.lower(_saved(program, tmp_path, "unique_dynamic"))
    assert {s.backed for s in lowered.symbols.values()} == {True, False}
    fx = to_fx(lowered)
    for rows in (2, 7, 30):
        x = torch.randint(-rows, rows, (rows, 3), generator=torch.Generator().manual_seed(rows))
        _matches_eager(module, lowered, fx, (x,), f"unique of {rows} rows")


def test_tolist_driven_split_asserts_torch_checks_fact_in_torch(tmp_path: Path) -> None:
    module = data_dependent.SplitBySizes()
    x = torch.randn(7, 3)
    program = torch.export.export(module, (x, torch.tensor([3, 4])))
    lowered = aten2prims.lower(_saved(program, tmp_path, "split"))
    fx = to_fx(lowered)
    for sizes in ([3, 4], [0, 7], [6, 1]):
        _matches_eager(module, lowered, fx, (x, torch.tensor(sizes)), f"split {sizes}")
    with pytest.raises(RuntimeError, match=r"lowered assuming u0 \+ u1 == 7"):
        fx(x, torch.tensor([2, 3]))


@pytest.mark.parametrize("name", list(data_dependent.READ_BY_SIZE))
def test_a_producer_read_only_through_its_size_computes_it_in_torch(
    name: str, tmp_path: Path
) -> None:
    """`torch.zeros(torch.nonzero(m).shape[0])`: the nonzero the count is read from is called
    in torch, at counts 0, 1 and several."""
    module, at_count = data_dependent.READ_BY_SIZE[name]
    _, _, lowered = data_dependent._lowered_by_size(name, tmp_path)
    fx = to_fx(lowered)
    for n in (0, 1, 4):
        expected = _matches_eager(module, lowered, fx, at_count(n), f"{name} count {n}")
        assert expected[0].shape[0] == n


@pytest.mark.parametrize("name", list(data_dependent.CHECKED))
def test_a_torch_check_on_symbols_nothing_else_reads_is_asserted_in_torch(
    name: str, tmp_path: Path
) -> None:
    module, passing, failing, refusal = data_dependent.CHECKED[name]
    program = torch.export.export(module, passing)
    fx = to_fx(aten2prims.lower(_saved(program, tmp_path, f"checked_{name}")))
    (result,) = fx(*passing)
    torch.testing.assert_close(result, module(*passing))
    with pytest.raises(RuntimeError, match=refusal):
        fx(*failing)


# -- what is still refused ----------------------------------------------------------------------


def test_a_size_only_the_enclosing_graph_knows_is_passed_into_the_branches() -> None:
    """The branches take an f32[3] and return f32[s0]: s0 comes from the enclosing graph's
    input, handed to them as a trailing int operand of the cond."""
    branch = """    graph {name}(%y: f32[3]) -> (f32[s0]):
      %s: f32[] = prims.{reduce}(%y, dims=[0], output_dtype=None)
      %b: f32[s0] = prims.broadcast_in_dim(%s, shape=[sym(s0)], broadcast_dimensions=[])
      return (%b)
"""
    graph = aten2prims.parse(
        "symbol s0 in [1, 8] example 2\n"
        "graph g(%p: b8[], %x: f32[s0], %y: f32[3]) -> (f32[s0]):\n"
        "  %r: f32[s0] = higher_order.cond(%p, @t, @f, [%y])\n"
        + branch.format(name="t", reduce="sum")
        + branch.format(name="f", reduce="prod")
        + "  %a: f32[s0] = prims.add(%r, %x)\n"
        + "  return (%a)\n"
    )
    fx = to_fx(graph)
    (cond,) = [n for n in fx.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert cond.args[3][-1].target is torch.ops.aten.sym_size.int  # s0, after the operands
    y = torch.tensor([1.5, -2.0, 3.0])
    for pred, rows in ((True, 2), (False, 5)):
        x = torch.randn(rows)
        (theirs,) = fx(torch.tensor(pred), x, y)
        (ours,) = aten2prims.execute(graph, [np.asarray(pred), x.numpy(), y.numpy()])
        want = (y.sum() if pred else y.prod()) + x
        torch.testing.assert_close(theirs, want)
        np.testing.assert_allclose(ours, want.numpy(), rtol=1e-6)
    with pytest.raises(
        RuntimeError, match=r"symbol s0 \(dim 0 of input %x\) is outside its range \[1, 8\]"
    ):
        fx(torch.tensor(True), torch.randn(9), y)


def test_a_data_dependent_size_no_node_computes_is_refused() -> None:
    graph = aten2prims.parse(
        "symbol u0 in [0, inf] unbacked\n"
        "graph g(%x: f32[4]) -> (f32[u0]):\n"
        "  %s: f32[] = prims.sum(%x, dims=[0], output_dtype=None)\n"
        "  %b: f32[u0] = prims.broadcast_in_dim(%s, shape=[sym(u0)], broadcast_dimensions=[])\n"
        "  return (%b)\n"
    )
    with pytest.raises(
        aten2prims.errors.Error,
        match=r"node %b \(prims.broadcast_in_dim\): graph g uses the data-dependent size u0 "
        "before any node of it computes it",
    ):
        to_fx(graph)
