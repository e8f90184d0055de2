"""The verifier catches each class of malformed graph its docstring lists, naming the node."""

from __future__ import annotations

import numpy as np
import pytest

import prims
from aten2prims.errors import VerificationError
from aten2prims.ir import (
    DType,
    Graph,
    GraphInput,
    GraphOutput,
    Node,
    ScalarMeta,
    TensorMeta,
    Value,
    parse,
)
from aten2prims.passes.verify import verify
from prims import Builder

F32 = TensorMeta((2, 3), DType.float32)


def graph_from(text: str) -> Graph:
    """Text is the shortest way to write a malformed node (the parser does not check ops)."""
    return parse(text)


def value(name: str, meta: TensorMeta | ScalarMeta = F32) -> Value:
    return Value(name, meta)


def rejects(graph: Graph, message: str, **options: bool) -> None:
    with pytest.raises(VerificationError, match=message):
        verify(graph, **options)


def test_a_well_formed_graph_passes() -> None:
    with Builder("good") as b:
        x = b.add_input("x", F32)
        n = b.add_input("n", ScalarMeta(int))
        y = prims.broadcast_in_dim(prims.exp(x), [4, 2, 3], [1, 2])
        z = prims.convert_element_type(prims.add(y, 2.5), DType.float64)
        graph = b.finish([z])
    graph.nodes.append(
        Node(
            "aten.add.Tensor",
            (z, z),
            {"alpha": n},
            (value("w", TensorMeta((4, 2, 3), DType.float64)),),
        )
    )
    graph.nodes.append(
        Node("aten.max.dim", (x, 1), {}, (value("m"), value("i", TensorMeta((2,), DType.int64))))
    )
    pieces = tuple(value(f"s{i}", TensorMeta((1, 3), DType.float32)) for i in range(2))
    graph.nodes.append(Node("aten.split_with_sizes.default", (x, (1, 1)), {}, pieces))
    graph.nodes.append(
        Node("aten._local_scalar_dense.default", (x,), {}, (value("item", ScalarMeta(float)),))
    )
    verify(graph)
    verify(parse(str(graph)))


def test_use_before_definition() -> None:
    x, y, z = value("x"), value("y"), value("z")
    graph = Graph(
        "g",
        [GraphInput(x)],
        [Node("prims.neg", (y,), {}, (z,)), Node("prims.neg", (x,), {}, (y,))],
        [],
    )
    rejects(graph, r"^node 0 \(%z = prims\.neg\): %y is used before it is defined")


def test_a_node_reading_its_own_result() -> None:
    x, y = value("x"), value("y")
    graph = Graph("g", [GraphInput(x)], [Node("prims.add", (x, y), {}, (y,))], [])
    rejects(graph, r"^node 0 \(%y = prims\.add\): %y is used before it is defined")


def test_use_inside_a_nested_operand_before_definition() -> None:
    x, y = value("x"), value("y", TensorMeta((4, 3), DType.float32))
    late = value("late")
    graph = Graph("g", [GraphInput(x)], [Node("aten.cat.default", ((x, late),), {}, (y,))], [])
    rejects(graph, r"^node 0 \(%y = aten\.cat\.default\): %late is used before it is defined")


def test_duplicate_definition() -> None:
    x, y = value("x"), value("y")
    graph = Graph(
        "g",
        [GraphInput(x)],
        [Node("prims.neg", (x,), {}, (y,)), Node("prims.exp", (x,), {}, (y,))],
        [],
    )
    rejects(graph, r"^node 1 \(%y = prims\.exp\): %y is defined twice")


def test_duplicate_name() -> None:
    x = value("x")
    graph = Graph("g", [GraphInput(x)], [Node("prims.neg", (x,), {}, (value("x"),))], [])
    rejects(graph, r"^node 0 \(%x = prims\.neg\): the name %x is used by two values")
    graph = Graph("g", [GraphInput(x), GraphInput(value("x"))], [], [])
    rejects(graph, r"^input %x: the name %x is used by two values")


def test_invalid_meta() -> None:
    x = value("x")
    graph = Graph(
        "g", [GraphInput(x)], [Node("prims.neg", (x,), {}, (Value("y", "f32[2, 3]"),))], []
    )  # type: ignore[arg-type]  # wrong on purpose
    rejects(graph, r"^node 0 \(%y = prims\.neg\): %y has no valid meta")


def test_operand_of_a_type_the_ir_does_not_hold() -> None:
    x = value("x")
    graph = Graph(
        "g",
        [GraphInput(x)],
        [Node("aten.view.default", (x, [6]), {}, (value("y", TensorMeta((6,), DType.float32)),))],
        [],
    )
    rejects(
        graph, r"^node 0 \(%y = aten\.view\.default\): operand \[6\] of type list is not allowed"
    )
    graph.nodes[0].args = (x, np.int64(6))
    rejects(graph, r"operand np\.int64\(6\) of type int64 is not allowed")


def test_unknown_prim() -> None:
    rejects(
        graph_from(
            "graph g(%x: f32[2]) -> ():\n  %y: f32[2] = prims.frobnicate(%x)\n  return ()\n"
        ),
        r"^node 0 \(%y = prims\.frobnicate\): unknown prim",
    )


def test_unknown_aten_op() -> None:
    graph = graph_from(
        "graph g(%x: f32[2]) -> ():\n  %y: f32[2] = aten.frobnicate.default(%x)\n  return ()\n"
    )
    rejects(
        graph, r"^node 0 \(%y = aten\.frobnicate\.default\): no schema is known for this aten op"
    )
    verify(graph, allow_unknown_ops=True)


def test_unknown_namespace() -> None:
    graph = graph_from("graph g(%x: f32[2]) -> ():\n  %y: f32[2] = mylib.op(%x)\n  return ()\n")
    rejects(graph, r"^node 0 \(%y = mylib\.op\): unknown op namespace 'mylib'")
    verify(graph, allow_unknown_ops=True)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("prims.add(%x)", r"takes 2 tensor operand\(s\), got 1"),
        ("prims.add(%x, %x, %x)", r"takes 2 tensor operand\(s\), got 3"),
        ("prims.neg()", r"takes 1 tensor operand\(s\), got 0"),
    ],
)
def test_prim_with_wrong_arity(call: str, message: str) -> None:
    graph = graph_from(f"graph g(%x: f32[2]) -> ():\n  %y: f32[2] = {call}\n  return ()\n")
    rejects(graph, rf"^node 0 \(%y = prims\.\w+\): {message}")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("aten.neg.default()", r"aten\.neg\.default: missing argument 'self'"),
        (
            "aten.neg.default(%x, %x)",
            r"aten\.neg\.default: takes 1 positional argument\(s\), got 2",
        ),
        ("aten.add.Tensor(%x, %x, beta=2)", r"aten\.add\.Tensor: unknown argument 'beta'"),
        ("aten.add.Tensor(%x, self=%x)", r"aten\.add\.Tensor: argument 'self' given twice"),
    ],
)
def test_aten_op_with_wrong_arity(call: str, message: str) -> None:
    graph = graph_from(f"graph g(%x: f32[2]) -> ():\n  %y: f32[2] = {call}\n  return ()\n")
    rejects(graph, rf"^node 0 \(%y = aten\.\w+\.\w+\): {message}")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "prims.convert_element_type(%x, dtype=5)",
            r"argument 'dtype' expects ScalarType \(got int 5\)",
        ),
        (
            'prims.convert_element_type(%x, dtype="f64")',
            r"argument 'dtype' expects ScalarType \(got str 'f64'\)",
        ),
        (
            "prims.broadcast_in_dim(%x, shape=[2, 2.0], broadcast_dimensions=[1])",
            r"argument 'shape' expects SymInt",
        ),
        (
            "prims.broadcast_in_dim(%x, shape=2, broadcast_dimensions=[1])",
            r"argument 'shape' expects SymInt\[\] \(got int 2\)",
        ),
        ('prims.add(%x, "two")', r"argument 'other' expects Tensor \(got str 'two'\)"),
        ("prims.add(%x, %n)", r"argument 'other' expects Tensor \(got %n: int\)"),
        ("aten.sum.dim_IntList(%x, [0], 1)", r"argument 'keepdim' expects bool \(got int 1\)"),
        (
            "aten.mean.dim(%x, [0], False, dtype=strided)",
            r"argument 'dtype' expects ScalarType\? \(got Layout",
        ),
        ('aten.add.Tensor(%x, %x, alpha="1")', r"argument 'alpha' expects Scalar \(got str '1'\)"),
    ],
)
def test_wrong_attribute_types(call: str, message: str) -> None:
    graph = graph_from(f"graph g(%x: f32[2], %n: int) -> ():\n  %y: f32[2] = {call}\n  return ()\n")
    rejects(graph, rf"^node 0 \(%y = \w+\.\w+(\.\w+)?\): {message}")


def test_prim_attributes_in_the_wrong_order_or_missing() -> None:
    swapped = "prims.broadcast_in_dim(%x, broadcast_dimensions=[0], shape=[2])"
    graph = graph_from(f"graph g(%x: f32[2]) -> ():\n  %y: f32[2] = {swapped}\n  return ()\n")
    rejects(
        graph,
        r"^node 0 \(%y = prims\.broadcast_in_dim\): attributes must be \['shape', 'broadcast_dimensions'\], "
        r"got \['broadcast_dimensions', 'shape'\]",
    )
    missing = "prims.broadcast_in_dim(%x, shape=[2])"
    graph = graph_from(f"graph g(%x: f32[2]) -> ():\n  %y: f32[2] = {missing}\n  return ()\n")
    rejects(
        graph, r"^node 0 \(%y = prims\.broadcast_in_dim\): attributes must be .*got \['shape'\]"
    )
    operand_as_attribute = "prims.neg(self=%x)"
    graph = graph_from(
        f"graph g(%x: f32[2]) -> ():\n  %y: f32[2] = {operand_as_attribute}\n  return ()\n"
    )
    rejects(graph, r"^node 0 \(%y = prims\.neg\): takes 1 tensor operand\(s\), got 0")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "%y: f64[2] = prims.neg(%x)",
            r"results are typed \(f64\[2\]\) but the meta rule gives \(f32\[2\]\)",
        ),
        (
            "%y: f32[3] = prims.neg(%x)",
            r"results are typed \(f32\[3\]\) but the meta rule gives \(f32\[2\]\)",
        ),
        (
            "%y: f32[2], %z: f32[2] = prims.neg(%x)",
            r"results are typed \(f32\[2\], f32\[2\]\) but the meta rule gives \(f32\[2\]\)",
        ),
        (
            "%y: f32[2] = prims.signbit(%x)",
            r"results are typed \(f32\[2\]\) but the meta rule gives \(b8\[2\]\)",
        ),
        (
            "%y: f32[2] = prims.add(%x, %i)",
            r"its meta rule rejects the operands: .*different dtypes: f32 and i64",
        ),
        (
            "%y: f32[2] = prims.broadcast_in_dim(%x, shape=[3], broadcast_dimensions=[0])",
            r"its meta rule rejects the operands: .*cannot broadcast",
        ),
    ],
)
def test_result_meta_disagreeing_with_the_meta_rule(line: str, message: str) -> None:
    graph = graph_from(f"graph g(%x: f32[2], %i: i64[2]) -> ():\n  {line}\n  return ()\n")
    rejects(graph, rf"^node 0 \(%y(, %z)? = prims\.\w+\): {message}")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%a: f32[2] = aten.max.dim(%x, 0)", r"has 1 result\(s\), its schema returns 2"),
        (
            "%a: f32[2], %b: i64[2], %c: i64[2] = aten.max.dim(%x, 0)",
            r"has 3 result\(s\), its schema returns 2",
        ),
        ("aten.neg.default(%x)", r"has 0 result\(s\), its schema returns 1"),
        ("%a: float = aten.neg.default(%x)", r"result %a is float, the schema returns Tensor"),
        (
            "%a: f32[] = aten._local_scalar_dense.default(%x)",
            r"result %a is f32\[\], the schema returns Scalar",
        ),
    ],
)
def test_aten_node_with_wrong_results(line: str, message: str) -> None:
    graph = graph_from(f"graph g(%x: f32[2]) -> ():\n  {line}\n  return ()\n")
    rejects(graph, rf"^node 0 \((%a(, %b, %c)? = )?aten\.[\w.]+\): {message}")


def test_undefined_output() -> None:
    x = value("x")
    stray = value("stray")
    graph = Graph(
        "g", [GraphInput(x)], [Node("prims.neg", (x,), {}, (value("y"),))], [GraphOutput(stray)]
    )
    rejects(graph, r"^output 0: %stray is not defined in the graph")
    graph.outputs = [GraphOutput(x), GraphOutput("y")]  # type: ignore[arg-type]  # wrong on purpose
    rejects(graph, r"^output 1: 'y' is not defined in the graph")


# -- undefined tensors (masked backward results) ------------------------------------------------

MASKED = (
    "%gi: f32[2, 3, 8, 8], %gw: f32[4, 3, 3, 3], %u: undefined = "
    "aten.convolution_backward.default(%g, %x, %w, [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, "
    "[True, True, False])"
)
HEADER = "graph g(%g: f32[2, 4, 6, 6], %x: f32[2, 3, 8, 8], %w: f32[4, 3, 3, 3])"


def test_undefined_results_of_aten_nodes_pass() -> None:
    graph = graph_from(f"{HEADER} -> (f32[4, 3, 3, 3]):\n  {MASKED}\n  return (%gw)\n")
    verify(graph)
    assert graph.nodes[0].results[2].is_undefined
    # read where the schema accepts None (native_layer_norm's bias is a Tensor?)
    graph = graph_from(
        f"{HEADER} -> (f32[2, 3, 8, 8]):\n  {MASKED}\n"
        "  %y: f32[2, 3, 8, 8], %m: f32[2, 3, 8, 1], %r: f32[2, 3, 8, 1] = "
        "aten.native_layer_norm.default(%gi, [8], None, %u, 1e-05)\n  return (%y)\n"
    )
    verify(graph)


@pytest.mark.parametrize(
    ("line", "returned", "message"),
    [
        (
            "%y: f32[2, 3, 8, 8] = aten.neg.default(%u)",
            "%y",
            r"^node 1 \(%y = aten\.neg\.default\): argument 'self' expects Tensor "
            r"\(got %u: undefined\)",
        ),
        (
            "%y: f32[4, 3, 8, 8] = aten.cat.default([%gi, %u])",
            "%y",
            r"argument 'tensors' expects Tensor \(got %u: undefined\)",
        ),
        (
            "%y: f32[4] = prims.neg(%u)",
            "%y",
            r"^node 1 \(%y = prims\.neg\): argument 'self' expects",
        ),
        ("%y: f32[2] = mylib.f.default(%u)", "%y", r"reads %u, an undefined tensor \(None\)"),
        (
            "%y: undefined = prims.neg(%gi)",
            "%gi",
            r"^node 1 \(%y = prims\.neg\): results are typed",
        ),
        (
            "%y: undefined = aten._local_scalar_dense.default(%gi)",
            "%gi",
            r"result %y is undefined, the schema returns Scalar",
        ),
        ("", "%u", r"^output 0: %u is an undefined tensor \(None\)"),
    ],
)
def test_undefined_values_are_refused_where_none_is_not_allowed(
    line: str, returned: str, message: str
) -> None:
    body = f"  {MASKED}\n" + (f"  {line}\n" if line else "")
    declared = "undefined" if returned == "%u" else ""
    returns = returned if returned == "%u" else ""
    graph = graph_from(f"{HEADER} -> ({declared}):\n{body}  return ({returns})\n")
    rejects(graph, message, allow_custom_ops=True)


def test_an_undefined_graph_input_is_refused() -> None:
    graph = graph_from("graph g(%u: undefined) -> ():\n  return ()\n")
    rejects(graph, r"^input %u: an undefined tensor \(None\) cannot be a graph input")
