"""The `--nested` view (`format_nested`): every node of the input graph, printed whole, with the
prims it became indented beneath it; `aten2prims lower --nested` prints it. The plain text form is
untouched by it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import aten2prims
from aten2prims.cli import main
from aten2prims.ir import Node, format_graph, format_node, parse
from aten2prims.ir.printer import format_nested
from aten2prims.passes.lower import lower
from decompositions import RULES
from decompositions.registry import RuleRegistry

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

GRAPH = """\
graph g(%x: f32[2, 3], %y: f16[2, 3]) -> (f32[2], i64[2], f32[2, 3]):
  %a: f32[2, 3] = aten.add.Tensor(%x, %y)  # at "model.py:3 in forward"
  %v: f32[2, 3] = aten.view.default(%a, [2, 3])  # at "model.py:4 in forward"
  %unused: f32[2, 3] = aten.neg.default(%x)
  %also_unused: f32[2, 3] = aten.abs.default(%unused)
  %values: f32[2], %indices: i64[2] = aten.max.dim(%v, 1)  # at "model.py:6 in forward"
  return (%values, %indices, %v)
"""


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "g.ir"
    path.write_text(GRAPH)
    return path


def _bare(node: Node) -> str:
    return format_node(Node(node.op, node.args, node.kwargs, node.results))


def test_each_aten_line_with_its_prims_beneath() -> None:
    aten = parse(GRAPH)
    lowered = aten2prims.lower(aten)
    lines = format_nested(aten, lowered).splitlines()
    from_max = [f"    {_bare(n)}" for n in lowered.nodes if n.provenance.origin == "values"]
    assert from_max  # max.dim became prims
    assert lines == [
        "graph g(%x: f32[2, 3], %y: f16[2, 3]) -> (f32[2], i64[2], f32[2, 3]):",
        '  %a: f32[2, 3] = aten.add.Tensor(%x, %y)  # at "model.py:3 in forward"',
        "    %0: f32[2, 3] = prims.convert_element_type(%y, dtype=f32)",  # the promotion, explicit
        "    %a: f32[2, 3] = prims.add(%x, %0)",
        '  %v: f32[2, 3] = aten.view.default(%a, [2, 3])  # at "model.py:4 in forward"',
        "    # no prims: its results are existing values, unchanged",
        "  %unused: f32[2, 3] = aten.neg.default(%x)",
        "    # no prims: its results are unused",  # used only by a node whose results are unused
        "  %also_unused: f32[2, 3] = aten.abs.default(%unused)",
        "    # no prims: its results are unused",
        '  %values: f32[2], %indices: i64[2] = aten.max.dim(%v, 1)  # at "model.py:6 in forward"',
        *from_max,
        "  return (%values, %indices, %a)",
    ]


def test_every_prim_of_a_real_model_sits_once_beneath_its_origin() -> None:
    aten = aten2prims.load(EXAMPLES / "transformer.pt2")
    lowered = aten2prims.lower(aten)
    lines = format_nested(aten, lowered).splitlines()
    aten_lines = {f"  {format_node(node)}": node for node in aten.nodes}
    assert [line for line in lines if line in aten_lines] == list(aten_lines)  # each once, in order
    placed: Counter[tuple[str, str]] = Counter()
    owner = None
    first = lines.index(next(iter(aten_lines)))  # the header lists inputs indented too
    for line in lines[first:]:
        if line in aten_lines:
            owner = aten_lines[line].results[0].name
        elif line.startswith("    %"):
            placed[(owner, line[4:])] += 1
    expected = Counter((node.provenance.origin, _bare(node)) for node in lowered.nodes)
    assert placed == expected


def test_a_graph_of_prims_is_shown_as_it_is() -> None:
    lowered = aten2prims.lower(parse(GRAPH))
    assert format_nested(lowered, aten2prims.lower(lowered)) == format_graph(lowered)


def test_a_node_left_unlowered_says_so() -> None:
    graph = parse(
        "graph g(%x: f32[3]) -> (f32[3]):\n"
        "  %a: f32[3] = aten.exp.default(%x)\n"
        "  %b: f32[3] = aten.neg.default(%a)\n"
        "  return (%b)\n"
    )
    only_neg = RuleRegistry()
    only_neg.register("aten.neg.default")(RULES.get("aten.neg.default").function)
    partial = lower(graph, strict=False, registry=only_neg)
    assert format_nested(graph, partial).splitlines()[1:] == [
        "  %a: f32[3] = aten.exp.default(%x)",
        "    # kept as it is",
        "  %b: f32[3] = aten.neg.default(%a)",
        "    %b: f32[3] = prims.neg(%a)",
        "  return (%b)",
    ]


def test_cli_lower_nested_prints_the_nested_view(graph_file: Path, capsys) -> None:
    aten = aten2prims.load(graph_file)
    assert main(["lower", str(graph_file), "--nested"]) == 0
    assert capsys.readouterr().out == format_nested(aten, aten2prims.lower(aten))


def test_cli_plain_lower_is_the_parseable_text_form(graph_file: Path, capsys) -> None:
    lowered = aten2prims.lower(aten2prims.load(graph_file))
    assert main(["lower", str(graph_file)]) == 0
    out = capsys.readouterr().out
    assert out == format_graph(lowered) == str(parse(out))
    assert "aten." not in out.replace("# aten.", "")  # aten names only in provenance comments
    assert main(["lower", str(graph_file), "--aten"]) == 0
    assert capsys.readouterr().out == GRAPH
