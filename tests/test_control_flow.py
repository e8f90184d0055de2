"""Control flow that torch.export keeps (`torch.ops.higher_order.*`) against torch: programs
using `torch.cond`, torch's `map`, `while_loop` and `scan` (an RNN over a dynamic sequence
length) exported, saved with torch.export.save and loaded (and imported with
from_fx), their branches held as nested graphs; lowered (each branch to prims), printed and
parsed back exactly, verified, and run on inputs taking each branch (at several sizes for
dynamic ones). tests/test_to_fx_dynamic.py hands the same programs back to torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch._higher_order_ops.map import map as map_hop
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

import aten2prims
from aten2prims.errors import ParseError, VerificationError
from aten2prims.ir import graph_difference, parse
from aten2prims.passes.verify import verify


class Cond(torch.nn.Module):
    """The branch chosen by the data (the sign of the sum)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
            return (x.sin() + y,)

        def false_fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor]:
            return (x.cos() - y,)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))[0] * 2


class CondTwoResults(torch.nn.Module):
    """Two results, a parameter read by a branch (lifted to an operand), a dtype change."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        def true_fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.lin(x)
            return h.relu(), (h > 0).sum(dim=1)

        def false_fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.lin(x * -1.0)
            return h.tanh(), (h < 0).sum(dim=1)

        a, b = torch.cond(x.mean() > 0.1, true_fn, false_fn, (x,))
        return a + 1, b


class NestedCond(torch.nn.Module):
    """A cond in a branch of a cond."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def inner_true(x: torch.Tensor) -> torch.Tensor:
            return x * 3

        def inner_false(x: torch.Tensor) -> torch.Tensor:
            return x - 3

        def true_fn(x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 7, inner_true, inner_false, (x.exp(),))

        def false_fn(x: torch.Tensor) -> torch.Tensor:
            return x.abs()

        return torch.cond(x[0] > 0, true_fn, false_fn, (x,)) + 1


class DynamicCond(torch.nn.Module):
    """A cond over a batch of dynamic size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor) -> torch.Tensor:
            return x.softmax(dim=-1)

        def false_fn(x: torch.Tensor) -> torch.Tensor:
            return x.log_softmax(dim=-1)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class ShapeCond(torch.nn.Module):
    """A branch chosen by a dynamic size: after lowering, the predicate is a condition on the
    size's symbol (`sym(5 <= s0)`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor) -> torch.Tensor:
            return x.sin()

        def false_fn(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        return torch.cond(x.shape[0] > 4, true_fn, false_fn, (x,))


class Map(torch.nn.Module):
    """torch's map: a body over the rows of a batch, with a parameter and an extra operand."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 2)

    def forward(self, xs: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        def body(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.lin(x.sin() * y)
            return h, h.argmax()

        a, b = map_hop(body, xs, y)
        return a.sum(dim=0), b


class DynamicMap(torch.nn.Module):
    """map over a leading dim of dynamic size."""

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        def body(x: torch.Tensor) -> torch.Tensor:
            return x.softmax(dim=-1) * x.sum()

        return map_hop(body, xs) + 1


def _inputs(seed: int, sign: float, shapes: list[tuple[int, ...]]) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.rand(shape, generator=generator) * sign + 0.05 * sign for shape in shapes)


CASES: dict[str, tuple[torch.nn.Module, list[tuple[int, ...]], Any]] = {
    "cond": (Cond(), [(3, 4), (3, 4)], None),
    "two_results": (CondTwoResults(), [(2, 4)], None),
    "nested": (NestedCond(), [(5,)], None),
    "dynamic": (DynamicCond(), [(3, 6)], ({0: Dim("batch", min=1, max=16)},)),
    "shape_cond": (ShapeCond(), [(3, 6)], ({0: Dim("batch", min=1, max=16)},)),
    "map": (Map(), [(5, 6), (6,)], None),
    "dynamic_map": (DynamicMap(), [(3, 6)], ({0: Dim("batch", min=1, max=16)},)),
}
# The higher-order op of each case and the names of its graphs.
OPS = {
    "map": ("higher_order.map_impl", ["body_graph_0"]),
    "dynamic_map": ("higher_order.map_impl", ["body_graph_0"]),
}
COND = ("higher_order.cond", ["true_graph_0", "false_graph_0"])


def _export(name: str) -> Any:
    module, shapes, dynamic = CASES[name]
    example = _inputs(0, 1.0, shapes)
    return torch.export.export(module, example, dynamic_shapes=dynamic).run_decompositions()


def _load(name: str, tmp_path: Path) -> aten2prims.Graph:
    path = tmp_path / f"{name}.pt2"
    torch.export.save(_export(name), path)
    return aten2prims.load(path)


def _check_runs(name: str, graph: aten2prims.Graph) -> set[bool]:
    """Run the lowered graph on inputs taking each branch; compare with torch eager."""
    module, shapes, dynamic = CASES[name]
    lowered = aten2prims.lower(graph)
    verify(lowered)
    assert all(node.namespace in ("prims", "higher_order") for node in lowered.nodes)
    branches = set()
    sizes = [shapes] if dynamic is None else [shapes, [(1, 6)], [(9, 6)]]
    for seed, sign in ((1, 1.0), (2, -1.0), (3, 1.0), (4, -1.0)):
        for shape_list in sizes:
            inputs = _inputs(seed, sign, shape_list)
            with torch.no_grad():
                expected = module(*inputs)
            expected = expected if isinstance(expected, tuple) else (expected,)
            ours = aten2prims.execute(lowered, [t.numpy() for t in inputs])
            assert len(ours) == len(expected)
            for got, want in zip(ours, expected):
                assert got.dtype == want.numpy().dtype and got.shape == tuple(want.shape)
                np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
            branches.add(sign > 0)
    return branches


@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_program_loads_lowers_and_runs_both_branches(name: str, tmp_path: Path) -> None:
    graph = _load(name, tmp_path)
    op, names = OPS.get(name, COND)
    (node,) = [node for node in graph.nodes if node.namespace == "higher_order"]
    assert node.op == op and [g.name for g in node.subgraphs()] == names
    assert _check_runs(name, graph) == {True, False}


@pytest.mark.parametrize("name", sorted(CASES))
def test_text_form_round_trips_exactly(name: str, tmp_path: Path) -> None:
    graph = _load(name, tmp_path)
    for g in (graph, aten2prims.lower(graph)):
        text = str(g)
        again = parse(text)
        assert graph_difference(g, again) is None
        assert str(again) == text
        verify(again, allow_custom_ops=True)
    assert f"    graph {OPS.get(name, COND)[1][0]}(" in str(graph)


@pytest.mark.parametrize("name", sorted(CASES))
def test_from_fx_gives_the_saved_graph(name: str, tmp_path: Path) -> None:
    program = _export(name)
    path = tmp_path / f"{name}.pt2"
    torch.export.save(program, path)
    loaded = aten2prims.load(path)
    imported = aten2prims.from_fx(program, name=name)
    assert graph_difference(imported, loaded, compare_data=True) is None
    assert _check_runs(name, imported) == {True, False}


def test_unlowered_graph_runs_too(tmp_path: Path) -> None:
    graph = _load("cond", tmp_path)
    x, y = _inputs(5, -1.0, [(3, 4), (3, 4)])
    (ours,) = aten2prims.execute(graph, [x.numpy(), y.numpy()])
    np.testing.assert_allclose(ours, Cond()(x, y).numpy(), rtol=1e-6)


def test_verifier_refuses_branches_that_disagree(tmp_path: Path) -> None:
    text = str(_load("cond", tmp_path))
    bad = text.replace(
        "graph false_graph_0(%x: f32[3, 4], %y: f32[3, 4]) -> (f32[3, 4]):\n"
        "      %cos: f32[3, 4] = aten.cos.default(%x)",
        "graph false_graph_0(%x: f32[3, 4], %y: f32[3, 4]) -> (f32[3, 4]):\n"
        "      %cos: f32[3, 4] = aten.cos.default(%y)",
    )
    verify(parse(bad), allow_custom_ops=True)  # still well-formed: another operand
    swapped = text.replace(
        "graph true_graph_0(%x: f32[3, 4], %y: f32[3, 4])",
        "graph true_graph_0(%x: f32[3, 4], %y: f64[3, 4])",
    )
    with pytest.raises(VerificationError, match="true branch true_graph_0 takes"):
        verify(parse(swapped.replace("aten.add.Tensor(%sin, %y)", "aten.add.Tensor(%sin, %sin)")))
    fewer = text.replace("[%x, %y])", "[%x])")
    with pytest.raises(VerificationError, match="but the operands are"):
        verify(parse(fewer))
    no_graph = text.replace("@false_graph_0, ", "%x, ").replace(
        "    graph false_graph_0", "    graph unused"
    )
    with pytest.raises(ParseError):
        parse(no_graph)


def test_parser_refuses_a_missing_or_misnamed_nested_graph(tmp_path: Path) -> None:
    text = str(_load("cond", tmp_path))
    with pytest.raises(ParseError, match="expected the nested graph @false_graph_0"):
        parse(text.replace("graph false_graph_0(", "graph other(", 1))
    with pytest.raises(ParseError, match="twice"):
        parse(text.replace("@false_graph_0", "@true_graph_0", 1))
    with pytest.raises(ParseError, match="not a list item"):
        parse(text.replace("[%x, %y]", "[%x, @true_graph_0]", 1))


def _rewrite_model(path: Path, out: Path, edit: Any) -> None:
    import json
    import zipfile

    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.endswith("models/model.json"):
                model = json.loads(data)
                edit(model)
                data = json.dumps(model).encode()
            target.writestr(item, data)


def _cond_node(model: dict[str, Any]) -> dict[str, Any]:
    nodes = model["graph_module"]["graph"]["nodes"]
    return next(n for n in nodes if n["target"] == "torch.ops.higher_order.cond")


def test_reader_bounds_nesting_and_checks_graph_operands(tmp_path: Path) -> None:
    path = tmp_path / "cond.pt2"
    torch.export.save(_export("cond"), path)

    def nest_deeply(model: dict[str, Any]) -> None:
        cond = _cond_node(model)
        pristine = json_copy(cond)
        graph = cond["inputs"][1]["arg"]["as_graph"]["graph"]
        for _ in range(40):  # a cond in the true branch of a cond in ..., 40 deep
            inner = json_copy(pristine)
            inner["inputs"][0]["arg"] = {"as_tensor": {"name": "x"}}  # a value of its graph
            graph["nodes"] = [inner]
            graph = inner["inputs"][1]["arg"]["as_graph"]["graph"]

    def json_copy(obj: Any) -> Any:
        import json

        return json.loads(json.dumps(obj))

    deep = tmp_path / "deep.pt2"
    _rewrite_model(path, deep, nest_deeply)
    with pytest.raises(aten2prims.errors.LoadError, match="nests graphs more than 16 deep"):
        aten2prims.load(deep)

    def graph_into_aten(model: dict[str, Any]) -> None:
        cond = _cond_node(model)
        nodes = model["graph_module"]["graph"]["nodes"]
        mul = next(n for n in nodes if n["target"] == "torch.ops.aten.mul.Tensor")
        mul["inputs"][1]["arg"] = cond["inputs"][1]["arg"]

    misplaced = tmp_path / "misplaced.pt2"
    _rewrite_model(path, misplaced, graph_into_aten)
    with pytest.raises(aten2prims.errors.LoadError, match="of type Graph is not allowed"):
        aten2prims.load(misplaced)

    def unknown_op(model: dict[str, Any]) -> None:
        _cond_node(model)["target"] = "torch.ops.higher_order.invoke_subgraph"

    unknown = tmp_path / "unknown.pt2"
    _rewrite_model(path, unknown, unknown_op)
    with pytest.raises(aten2prims.errors.LoadError, match="invoke_subgraph is not supported"):
        aten2prims.load(unknown)


def test_parser_bounds_nesting() -> None:
    lines = []
    depth = 20
    for level in range(depth):
        pad = "  " + "    " * level
        lines.append(f"{pad}%r{level}: f32[] = higher_order.cond(%p, @t{level}, @t{level}, [%p])")
        lines.append(f"{pad}  graph t{level}(%p: b8[]) -> (f32[]):")
    text = "graph g(%p: b8[]) -> (f32[]):\n" + "\n".join(lines) + "\n"
    with pytest.raises(ParseError, match="graphs nest at most 16 deep"):
        parse(text)


def test_verifier_refuses_a_map_whose_results_are_not_the_stacked_body(tmp_path: Path) -> None:
    text = str(_load("map", tmp_path))
    assert "higher_order.map_impl(@body_graph_0, [%xs], [%y, %p_lin_weight, %p_lin_bias])" in text
    verify(parse(text), allow_custom_ops=True)
    bad = text.replace("%getitem: f32[5, 2]", "%getitem: f32[4, 2]", 1)
    with pytest.raises(VerificationError, match="so the node's results are"):
        verify(parse(bad))
    swapped = text.replace("[%xs], [%y, %p_lin_weight", "[%y], [%xs, %p_lin_weight", 1)
    with pytest.raises(VerificationError, match="takes"):
        verify(parse(swapped))


class WhileLoop(torch.nn.Module):
    """A loop run `n - i` times (data decides), with a parameter and an extra operand."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(
        self, i: torch.Tensor, n: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        def cond_fn(i: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return i < n

        def body_fn(i: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, torch.tanh(self.lin(x)) + x * 0.5

        i_out, x_out = while_loop(cond_fn, body_fn, (i, x))
        return i_out * 2, x_out


def test_while_loop_runs_any_number_of_iterations(tmp_path: Path) -> None:
    module = WhileLoop()
    example = (torch.tensor(0), torch.tensor(3), torch.randn(2, 4))
    program = torch.export.export(module, example).run_decompositions()
    path = tmp_path / "loop.pt2"
    torch.export.save(program, path)
    graph = aten2prims.load(path)
    (node,) = [node for node in graph.nodes if node.namespace == "higher_order"]
    assert node.op == "higher_order.while_loop"
    assert [g.name for g in node.subgraphs()] == [
        "while_loop_cond_graph_0",
        "while_loop_body_graph_0",
    ]
    assert (
        graph_difference(aten2prims.from_fx(program, name="loop"), graph, compare_data=True) is None
    )
    lowered = aten2prims.lower(graph)
    for g in (graph, lowered):
        text = str(g)
        assert graph_difference(parse(text), g) is None and str(parse(text)) == text
    generator = torch.Generator().manual_seed(0)
    for start, stop in ((0, 0), (0, 1), (2, 5), (0, 9), (4, 2)):
        inputs = (torch.tensor(start), torch.tensor(stop), torch.randn(2, 4, generator=generator))
        with torch.no_grad():
            expected = module(*inputs)
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs])
        assert int(ours[0]) == int(expected[0]) == 2 * max(start, stop)
        np.testing.assert_allclose(ours[1], expected[1].numpy(), rtol=1e-5, atol=1e-6)
        assert ours[1].dtype == np.float32 and ours[1].shape == (2, 4)


def test_verifier_refuses_a_loop_body_changing_the_carried_metas(tmp_path: Path) -> None:
    module = WhileLoop()
    example = (torch.tensor(0), torch.tensor(3), torch.randn(2, 4))
    path = tmp_path / "loop.pt2"
    torch.export.save(torch.export.export(module, example).run_decompositions(), path)
    text = str(aten2prims.load(path))
    cond_line = next(line for line in text.splitlines() if "-> (b8[])" in line)
    start = text.index(cond_line)
    end = text.index("return (", start)
    end = text.index("\n", end)
    cond_text = text[start:end]
    returned = cond_text[cond_text.rindex("return (") :]
    bad_cond = cond_text.replace("-> (b8[])", "-> (i64[])").replace(returned, "return (%arg0_1)")
    with pytest.raises(VerificationError, match="expected one bool"):
        verify(parse(text.replace(cond_text, bad_cond)))
    bad = text.replace("%getitem_1: f32[2, 4] =", "%getitem_1: f32[2, 5] =", 1)
    bad = bad.replace(") -> (i64[], f32[2, 4]):", ") -> (i64[], f32[2, 5]):", 1)  # the header
    with pytest.raises(VerificationError, match="but the carried operands are"):
        verify(parse(bad))


class ScanRNN(torch.nn.Module):
    """An RNN cell scanned over a sequence: the last hidden state and every step's output."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.RNNCell(4, 5)

    def forward(self, xs: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        def step(h: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.cell(x, h)
            return h, h * 2

        return scan(step, h0, xs)


def test_scan_rnn_over_a_dynamic_sequence_length(tmp_path: Path) -> None:
    module = ScanRNN()
    example = (torch.randn(7, 2, 4), torch.randn(2, 5))
    seq = Dim("seq", min=1, max=64)
    program = torch.export.export(module, example, dynamic_shapes=({0: seq}, None))
    program = program.run_decompositions()
    path = tmp_path / "rnn.pt2"
    torch.export.save(program, path)
    graph = aten2prims.load(path)
    (node,) = [node for node in graph.nodes if node.namespace == "higher_order"]
    assert node.op == "higher_order.scan"
    assert [g.name for g in node.subgraphs()] == ["scan_combine_graph_0"]
    assert graph.is_dynamic
    imported = aten2prims.from_fx(program, name="rnn")
    assert graph_difference(imported, graph, compare_data=True) is None
    lowered = aten2prims.lower(graph)
    assert not lowered.checks  # one lowering for every length in range
    for g in (graph, lowered):
        text = str(g)
        assert graph_difference(parse(text), g) is None and str(parse(text)) == text
    verify(lowered)
    generator = torch.Generator().manual_seed(0)
    for length in (1, 3, 7, 20):
        inputs = (
            torch.randn(length, 2, 4, generator=generator),
            torch.randn(2, 5, generator=generator),
        )
        with torch.no_grad():
            expected = module(*inputs)
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs])
        for got, want in zip(ours, expected, strict=True):
            assert got.shape == tuple(want.shape) and got.dtype == np.float32
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(aten2prims.errors.ShapeError, match="outside its range"):
        aten2prims.execute(
            lowered, [np.zeros((65, 2, 4), np.float32), np.zeros((2, 5), np.float32)]
        )


def test_verifier_refuses_a_scan_whose_carries_change(tmp_path: Path) -> None:
    module = ScanRNN()
    path = tmp_path / "rnn.pt2"
    program = torch.export.export(module, (torch.randn(3, 2, 4), torch.randn(2, 5)))
    torch.export.save(program.run_decompositions(), path)
    text = str(aten2prims.load(path))
    verify(parse(text))
    bad = text.replace("[%h0], [%xs]", "[%xs], [%h0]", 1)
    with pytest.raises(VerificationError, match="takes"):
        verify(parse(bad))


def test_command_line_shows_the_lowered_branches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from aten2prims.cli import main

    path = tmp_path / "cond.pt2"
    torch.export.save(_export("cond"), path)
    assert main(["lower", "--nested", str(path)]) == 0
    nested = capsys.readouterr().out
    assert "  %getitem: f32[3, 4] = higher_order.cond(" in nested
    assert "    graph true_graph_0(%x: f32[3, 4], %y: f32[3, 4]) -> (f32[3, 4]):" in nested
    assert "      %sin: f32[3, 4] = prims.sin(%x)" in nested
    assert main(["lower", "--format", "json", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    (cond,) = [node for node in document["nodes"] if node["op"] == "higher_order.cond"]
    assert cond["args"][1:3] == ["@true_graph_0", "@false_graph_0"]
    assert [g["name"] for g in cond["graphs"]] == ["true_graph_0", "false_graph_0"]
    assert cond["graphs"][1]["nodes"][0]["op"] == "prims.cos"
    assert main(["run", str(path), "--seed", "3"]) == 0


def test_verifier_refuses_an_undeclared_symbol_in_a_nested_graph() -> None:
    text = (
        "symbol s0 in [1, 8] example 2\n"
        "graph g(%p: b8[], %x: f32[s0]) -> (f32[s0]):\n"
        "  %r: f32[s0] = higher_order.cond(%p, @t, @f, [%x])\n"
        "    graph t(%x: f32[s0]) -> (f32[s0]):\n"
        "      %n: f32[s0] = aten.neg.default(%x)\n"
        "      return (%n)\n"
        "    graph f(%x: f32[s0]) -> (f32[s0]):\n"
        "      %v: f32[s1] = aten.view.default(%x, [sym(s1)])\n"
        "      return (%x)\n"
        "  return (%r)\n"
    )
    verify(parse(text.replace("f32[s1]", "f32[s0]").replace("sym(s1)", "sym(s0)")))
    with pytest.raises(VerificationError, match="in graph f: .*undeclared symbol\\(s\\) s1"):
        verify(parse(text))


class WideBranch(torch.nn.Module):
    """A branch whose intermediate (an n x n table of exp(x_i - y_j)) is far larger than the
    graph's inputs and outputs."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.exp(x[:, None] - y[None, :]).sum(dim=1)

        def false_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x - y

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


def _wide_branch(tmp_path: Path) -> tuple[aten2prims.Graph, list[np.ndarray], np.ndarray]:
    """The lowered WideBranch at n = 1024 (a 4 MiB table), inputs taking the wide branch, and
    torch's result on them."""
    module = WideBranch()
    x, y = torch.rand(1024) + 0.1, torch.rand(1024)
    path = tmp_path / "wide.pt2"
    torch.export.save(torch.export.export(module, (x, y)).run_decompositions(), path)
    with torch.no_grad():
        expected = module(x, y).numpy()
    return aten2prims.lower(aten2prims.load(path)), [x.numpy(), y.numpy()], expected


def test_a_branch_runs_under_the_callers_memory_budget(tmp_path: Path) -> None:
    """A budget the graph's own inputs and outputs fit but the branch's table does not: the call
    raises the error the branch raises when run as a graph of its own."""
    from aten2prims.errors import MemoryBudgetError

    lowered, feed, expected = _wide_branch(tmp_path)
    (node,) = [node for node in lowered.nodes if node.op == "higher_order.cond"]
    branch = next(node.subgraphs())
    budget = 1 << 20  # 1 MiB: the inputs and the result take 12 KiB, the table 4 MiB
    with pytest.raises(MemoryBudgetError) as alone:
        aten2prims.execute(branch, feed, max_memory=budget)
    with pytest.raises(MemoryBudgetError) as nested:
        aten2prims.execute(lowered, feed, max_memory=budget)
    assert str(nested.value) == str(alone.value)
    assert f"running graph {branch.name}" in str(nested.value)
    (ours,) = aten2prims.execute(lowered, feed, max_memory=64 << 20)
    np.testing.assert_allclose(ours, expected, rtol=1e-5)


def test_a_branch_runs_on_the_callers_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results are bit for bit the same at 1 and 3 threads; and a branch takes the caller's
    count, never the default (an unreadable default fails wherever it is consulted)."""
    lowered, feed, expected = _wide_branch(tmp_path)
    (one,) = aten2prims.execute(lowered, feed, threads=1)
    (three,) = aten2prims.execute(lowered, feed, threads=3)
    assert one.tobytes() == three.tobytes()
    np.testing.assert_allclose(one, expected, rtol=1e-5)
    monkeypatch.setenv("ATEN2PRIMS_NUM_THREADS", "not a number")
    with pytest.raises(ValueError, match="ATEN2PRIMS_NUM_THREADS"):
        aten2prims.execute(lowered, feed)
    (again,) = aten2prims.execute(lowered, feed, threads=3)
    assert again.tobytes() == one.tobytes()


class CondRandom(torch.nn.Module):
    """Random ops in both branches: noise added in one, dropout in the other."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor) -> torch.Tensor:
            return x + torch.rand(3, 4)

        def false_fn(x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.dropout(x, 0.5, True)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class MapRandom(torch.nn.Module):
    """A map body drawing noise of its own at each iteration."""

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        def body(x: torch.Tensor) -> torch.Tensor:
            return x + torch.rand(4)

        return map_hop(body, xs)


class SegmentsRandom(torch.nn.Module):
    """A draw before a data-dependent size and one of that size: they run in two segments."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        before = torch.rand(4)
        where = (x > 0).nonzero()
        after = torch.rand(where.shape[0])
        return before, after, where


def _lowered(module: torch.nn.Module, example: torch.Tensor, tmp_path: Path) -> aten2prims.Graph:
    path = tmp_path / f"{type(module).__name__}.pt2"
    torch.export.save(torch.export.export(module, (example,)).run_decompositions(), path)
    return aten2prims.lower(aten2prims.load(path))


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["noise_branch", "dropout_branch"])
def test_a_seeded_call_reproduces_the_random_ops_of_its_branches(
    sign: float, tmp_path: Path
) -> None:
    """The same seed gives the same draws in a branch (with and without check=True), another
    seed other ones, an unseeded call fresh ones; the draws are the branch's (noise in [0, 1),
    dropout's 0 or 2x)."""
    x = torch.full((3, 4), sign)
    lowered = _lowered(CondRandom(), x, tmp_path)
    first = aten2prims.execute(lowered, [x.numpy()], seed=1)
    assert _same(first, aten2prims.execute(lowered, [x.numpy()], seed=1))
    assert _same(first, aten2prims.execute(lowered, [x.numpy()], seed=1, check=True))
    assert not _same(first, aten2prims.execute(lowered, [x.numpy()], seed=2))
    assert not _same(
        aten2prims.execute(lowered, [x.numpy()]), aten2prims.execute(lowered, [x.numpy()])
    )
    (result,) = first
    assert result.shape == (3, 4) and result.dtype == np.float32
    if sign > 0:
        noise = result - 1.0
        assert noise.min() >= 0.0 and noise.max() < 1.0 and len(np.unique(noise)) == 12
    else:
        assert set(np.unique(result)) <= {0.0, -2.0}


def test_a_seeded_call_reproduces_a_map_body_drawing_anew_at_each_iteration(
    tmp_path: Path,
) -> None:
    xs = torch.zeros(6, 4)
    lowered = _lowered(MapRandom(), xs, tmp_path)
    (first,) = aten2prims.execute(lowered, [xs.numpy()], seed=1)
    (again,) = aten2prims.execute(lowered, [xs.numpy()], seed=1)
    (other,) = aten2prims.execute(lowered, [xs.numpy()], seed=2)
    assert first.shape == (6, 4) and first.tobytes() == again.tobytes()
    assert not np.array_equal(first, other)
    assert len({row.tobytes() for row in first}) == 6  # no two iterations draw the same values
    assert first.min() >= 0.0 and first.max() < 1.0


def test_the_segments_of_a_data_dependent_graph_draw_different_streams(tmp_path: Path) -> None:
    """The draw after the cut does not restart the stream of the draw before it."""
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    lowered = _lowered(SegmentsRandom(), x, tmp_path)
    before, after, where = aten2prims.execute(lowered, [x.numpy()], seed=1)
    assert before.shape == after.shape == (4,) and where.shape == (4, 1)
    assert not np.array_equal(before, after)
    assert _same([before, after], aten2prims.execute(lowered, [x.numpy()], seed=1)[:2])
    assert not _same([before, after], aten2prims.execute(lowered, [x.numpy()], seed=2)[:2])
