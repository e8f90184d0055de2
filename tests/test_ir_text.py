"""The text form: `parse(format_graph(g))` rebuilds g exactly, and malformed text gives a
ParseError at the right line and column (grammar in docs/ir.md)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import prims
from aten2prims.errors import ParseError
from aten2prims.ir import (
    CPU,
    UNDEFINED,
    Device,
    DType,
    Graph,
    GraphInput,
    GraphOutput,
    InputKind,
    Layout,
    MemoryFormat,
    Node,
    OutputKind,
    Provenance,
    ScalarMeta,
    TensorMeta,
    UndefinedMeta,
    Value,
    format_graph,
    graph_difference,
    parse,
)
from aten2prims.schema import CORE_ATEN_OPS
from prims import Builder
from prims.registry import PRIMS

# -- strategies ------------------------------------------------------------------------------------

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True)
value_names = st.from_regex(r"[A-Za-z0-9_]{1,6}", fullmatch=True)
qualified_names = st.from_regex(
    r"[A-Za-z_][A-Za-z0-9_]{0,5}(\.[A-Za-z_][A-Za-z0-9_]{0,5}){1,2}", fullmatch=True
)
op_names = (
    st.sampled_from(sorted(CORE_ATEN_OPS) + [f"prims.{name}" for name in sorted(PRIMS)])
    | qualified_names
)

tensor_metas = st.builds(
    TensorMeta, st.lists(st.integers(0, 6), max_size=4).map(tuple), st.sampled_from(list(DType))
)
scalar_metas = st.sampled_from([bool, int, float, complex]).map(ScalarMeta)
metas = tensor_metas | scalar_metas | st.just(UNDEFINED)

floats = st.floats() | st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-300, 5e-324, 1e16, -1.5e308]
)
# Strings with quotes, backslashes, control characters, unicode (incl. astral and line separators).
strings = st.text() | st.sampled_from(
    ['"', "\\", 'a "quoted" \\ word', "\n\t\r", "\u2028", "😀 é", "# not a comment", ""]
)
scalar_literals = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**70), 2**70)
    | floats
    | st.builds(complex, floats, floats)
    | strings
    | st.sampled_from(list(DType))
    | st.sampled_from(list(Layout))
    | st.sampled_from(list(MemoryFormat))
    | st.builds(Device, strings)
    | st.just(CPU)
)
literals = st.recursive(
    scalar_literals, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=8
)
provenances = st.builds(
    Provenance,
    st.none() | op_names | st.just("at"),
    st.none() | value_names,
    st.none() | strings | st.just('file.py:12 in "forward"'),
)


@st.composite
def operands(draw: st.DrawFn, defined: list[Value]) -> Any:
    """A literal, a defined value, or a (nested) list mixing them."""
    leaf = literals | st.sampled_from(defined) if defined else literals
    return draw(
        st.recursive(leaf, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=5)
    )


@st.composite
def arbitrary_nodes(draw: st.DrawFn, defined: list[Value], fresh: Any) -> Node:
    """A node of any op (real prims and aten ops, or made-up ones) with arbitrary operands."""
    args = tuple(draw(st.lists(operands(defined), max_size=4)))
    kwargs = draw(st.dictionaries(identifiers, operands(defined), max_size=3))
    results = tuple(Value(fresh(), draw(metas)) for _ in range(draw(st.integers(0, 3))))
    return Node(draw(op_names), args, kwargs, results, draw(provenances))


UNARY_FLOAT_PRIMS = ["exp", "neg", "abs", "sin", "sqrt", "floor", "isfinite", "signbit"]


@st.composite
def prim_nodes(draw: st.DrawFn, defined: list[Value], builder: Builder) -> list[Node]:
    """Nodes made by the prims builders (so their attributes and metas are the real ones)."""
    tensors = [v for v in defined if type(v.meta) is TensorMeta and v.dtype.is_floating]
    if not tensors:
        return []
    x = draw(st.sampled_from(tensors))
    before = len(builder.nodes)
    choice = draw(st.integers(0, 3))
    if choice == 0:
        getattr(prims, draw(st.sampled_from(UNARY_FLOAT_PRIMS)))(x)
    elif choice == 1:
        prims.convert_element_type(x, draw(st.sampled_from(list(DType))))
    elif choice == 2:
        prims.add(x, draw(st.sampled_from([x, 1.5, -0.0, 2, True, math.inf])))
    else:
        prims.broadcast_in_dim(x, [2, *x.shape], list(range(1, x.ndim + 1)))
    nodes = builder.nodes[before:]
    provenance = draw(provenances)
    for node in nodes:
        node.provenance = provenance
    return nodes


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    used: set[str] = set()
    counter = iter(range(10**6))
    builder = Builder("g")

    def fresh() -> str:
        name = draw(value_names)
        while name in used:
            name = f"v{next(counter)}"
        used.add(name)
        builder.reserve(name)  # the prims builders must not hand it out again
        return name

    inputs = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(list(InputKind)))
        target = draw(st.none() | strings | st.just("layer1.0.conv.weight"))
        inputs.append(GraphInput(Value(fresh(), draw(metas)), kind, target))
    defined = [i.value for i in inputs]
    nodes: list[Node] = []
    with builder:
        for _ in range(draw(st.integers(0, 6))):
            if draw(st.booleans()):
                new = draw(prim_nodes(defined, builder))
                used.update(r.name for n in new for r in n.results)
            else:
                new = [draw(arbitrary_nodes(defined, fresh))]
            nodes += new
            defined += [r for n in new for r in n.results]
    outputs = []
    if defined:
        for value in draw(st.lists(st.sampled_from(defined), max_size=4)):
            kind = draw(st.sampled_from(list(OutputKind)))
            outputs.append(GraphOutput(value, kind, draw(st.none() | strings)))
    name = draw(identifiers | qualified_names | st.sampled_from(["inf", "nan", "graph", "return"]))
    return Graph(name, inputs, nodes, outputs)


# -- round trip ------------------------------------------------------------------------------------


@given(graphs())
def test_print_parse_round_trip(graph: Graph) -> None:
    text = format_graph(graph)
    reparsed = parse(text)
    assert graph_difference(graph, reparsed) is None, text
    assert format_graph(reparsed) == text


def test_undefined_results_and_gradient_outputs_round_trip() -> None:
    """A masked backward result prints as `undefined` and parses back as the same kind; a
    training step's gradient outputs keep their roles and targets."""
    text = """\
graph step(%g: f32[2, 4, 6, 6], %x: f32[2, 3, 8, 8], %w: f32[4, 3, 3, 3] parameter "conv.weight") -> (f32[4, 3, 3, 3], f32[2, 3, 8, 8]):
  %gi: f32[2, 3, 8, 8], %gw: f32[4, 3, 3, 3], %undefined_0: undefined = aten.convolution_backward.default(%g, %x, %w, [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
  return (%gw gradient_to_parameter "conv.weight", %gi gradient_to_user_input "x")
"""
    graph = parse(text)
    (node,) = graph.nodes
    undefined = node.results[2]
    assert type(undefined.meta) is UndefinedMeta and undefined.is_undefined
    assert not node.results[0].is_undefined
    assert [o.kind for o in graph.outputs] == [
        OutputKind.GRADIENT_TO_PARAMETER,
        OutputKind.GRADIENT_TO_USER_INPUT,
    ]
    assert [o.target for o in graph.outputs] == ["conv.weight", "x"]
    printed = format_graph(graph)
    assert "%undefined_0: undefined = aten.convolution_backward.default(" in printed
    assert printed.splitlines()[-2:] == text.splitlines()[-2:]  # the header wraps
    assert graph_difference(graph, parse(printed)) is None
    assert format_graph(parse(printed)) == printed
    # `undefined` is a type of its own: it differs from every tensor type
    retyped = parse(text.replace("%undefined_0: undefined", "%undefined_0: f32[4]"))
    assert graph_difference(graph, retyped) is not None


def test_long_headers_wrap_one_input_per_line() -> None:
    inputs = [
        GraphInput(Value(f"input_{i}", TensorMeta((128, 64), DType.float32))) for i in range(6)
    ]
    inputs.append(
        GraphInput(
            Value("w", TensorMeta((3,), DType.bfloat16)),
            InputKind.PARAMETER,
            "encoder.layers.0.weight",
        )
    )
    graph = Graph("wide", inputs, [], [GraphOutput(inputs[0].value)])
    text = format_graph(graph)
    assert text.splitlines()[0] == "graph wide("
    assert '    %w: bf16[3] parameter "encoder.layers.0.weight",' in text.splitlines()
    assert graph_difference(graph, parse(text)) is None


def test_literal_kinds_survive() -> None:
    """1, 1.0 and True stay apart; -0.0, nan, inf, complex, strings, enums and devices survive."""
    x = Value("x", TensorMeta((2,), DType.float32))
    kwargs = {
        "i": 1,
        "f": 1.0,
        "b": True,
        "z": -0.0,
        "n": math.nan,
        "p": math.inf,
        "m": -math.inf,
        "tiny": 1e-300,
        "c": complex(-0.0, math.nan),
        "s": 'he said "hi"\\\n',
        "u": "ünï😀",
        "d": DType.bfloat16,
        "l": Layout.strided,
        "mf": MemoryFormat.channels_last,
        "dev": Device("cuda:0"),
        "none": None,
        "nested": ((1, 2.0), (), (x, [x][0]), (True, None)),
    }
    graph = Graph(
        "g", [GraphInput(x)], [Node("aten.foo.default", (x, 3), kwargs, (), Provenance())], []
    )
    text = format_graph(graph)
    assert (
        "i=1, f=1.0, b=True, z=-0.0, n=nan, p=inf, m=-inf, tiny=1e-300, c=complex(-0.0, nan)"
        in text
    )
    assert 'd=bf16, l=strided, mf=channels_last, dev=device("cuda:0"), none=None' in text
    assert graph_difference(graph, parse(text)) is None


def test_nested_view_groups_nodes_under_their_aten_node() -> None:
    with Builder("g") as b:
        x = b.add_input("x", TensorMeta((3,), DType.float16))
        b.provenance = Provenance("aten.exp.default", "exp", "model.py:7")
        y = prims.exp(prims.convert_element_type(x, DType.float32))
        b.provenance = Provenance("aten.neg.default", "neg")
        z = prims.neg(y)
        b.provenance = Provenance()
        graph = b.finish([prims.abs(z)])
    assert graph.format(nested=True).splitlines() == [
        "graph g(%x: f16[3]) -> (f32[3]):",
        '  aten.exp.default -> %exp  # at "model.py:7"',
        "    %0: f32[3] = prims.convert_element_type(%x, dtype=f32)",
        "    %1: f32[3] = prims.exp(%0)",
        "  aten.neg.default -> %neg",
        "    %2: f32[3] = prims.neg(%1)",
        "  %3: f32[3] = prims.abs(%2)",
        "  return (%3)",
    ]


def test_comments_and_blank_lines_are_free_text() -> None:
    text = """
# a model
graph g(%x: f32[2]) -> (f32[2]):  # header comment

  # own-line comment
  %y: f32[2] = prims.neg(%x)  # aten.neg.default %neg at "m.py:1"
  return (%y)  # end
"""
    graph = parse(text)
    assert graph.nodes[0].provenance == Provenance("aten.neg.default", "neg", "m.py:1")


# -- parse errors ---------------------------------------------------------------------------------

GOOD = """graph g(%x: f32[2], %w: f32[2] parameter "w") -> (f32[2]):
  %y: f32[2] = prims.add(%x, %w)
  return (%y)
"""


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        (
            GOOD.replace("prims.add(%x, %w)", "prims.add(%x, %q)"),
            2,
            30,
            "%q is used before it is defined",
        ),
        (
            GOOD.replace("%w: f32[2] parameter", "%x: f32[2] parameter"),
            1,
            21,
            "%x is defined twice",
        ),
        (GOOD.replace("%y: f32[2] = ", "%x: f32[2] = "), 2, 3, "%x is defined twice"),
        (GOOD.replace("%x: f32[2],", "%x: f33[2],"), 1, 13, "expected a type"),
        (GOOD.replace("%x: f32[2],", "%x: f32[-2],"), 1, 17, "non-negative integer size"),
        (GOOD.replace('"w"', '"w'), 1, 42, "unterminated string"),
        (GOOD.replace("  return (%y)\n", ""), 3, 1, "expected 'return'"),
        (
            GOOD.replace("-> (f32[2])", "-> (f32[3])"),
            3,
            3,
            "declares results (f32[3]) but returns (f32[2])",
        ),
        (GOOD.replace("-> (f32[2])", "-> (f32[2], i64[])"), 3, 3, "declares results"),
        (GOOD.replace("return (%y)", "return (%z)"), 3, 11, "%z is used before it is defined"),
        (GOOD.replace("prims.add", "add"), 2, 16, "qualified op name"),
        (GOOD.replace("(%x, %w)", "(a=%x, %w)"), 2, 32, "positional operand after a named one"),
        (GOOD.replace("(%x, %w)", "(a=%x, a=%w)"), 2, 32, "argument a given twice"),
        (GOOD.replace("(%x, %w)", "(%x, foo)"), 2, 30, "expected an operand"),
        (
            GOOD.replace("(%x, %w)", "(%x, %w)  # aten.add.Tensor junk"),
            2,
            16,
            "expected provenance",
        ),
        (GOOD.replace("(%x, %w)", "(%x, complex(1, x))"), 2, 41, "expected a float"),
        (GOOD.replace("(%x, %w)", "(%x, %w"), 2, 32, "expected ,"),
        (GOOD + "  %z: f32[2] = prims.neg(%y)\n", 4, 3, "expected end of input after 'return'"),
        (GOOD.replace("graph g", "grph g"), 1, 1, "expected graph"),
        (GOOD.replace("prims.add(%x, %w)", "prims.add(%x, %w) extra"), 2, 34, "expected newline"),
        (GOOD.replace("(%x, %w)", "(%x, @)"), 2, 30, "unexpected character '@'"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 60 else None,
)
def test_parse_errors_point_at_the_problem(text: str, line: int, column: int, message: str) -> None:
    parse(GOOD)  # the unmodified text is fine
    with pytest.raises(ParseError) as caught:
        parse(text)
    error = caught.value
    assert message in str(error)
    assert (error.line, error.column) == (line, column), str(error)
    assert f"(line {line}, column {column})" in str(error)


def test_parse_error_names_the_source() -> None:
    with pytest.raises(ParseError, match=r"^model\.txt: .*expected graph"):
        parse("nothing here", source_name="model.txt")
