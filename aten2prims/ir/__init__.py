"""The IR, data only: dtypes, metas, values, nodes, graphs and their text form. Checking a graph
against schemas and prims is a pass (`aten2prims.passes.verify`)."""

from .dtypes import ALL_DTYPES, Category, DType
from .graph import (
    NO_PROVENANCE,
    Graph,
    GraphInput,
    GraphOutput,
    InputKind,
    Node,
    OutputKind,
    Provenance,
    graph_difference,
    graphs_equal,
)
from .parser import parse
from .printer import format_graph, format_node, format_operand
from .values import (
    CPU,
    UNDEFINED,
    Device,
    Layout,
    MemoryFormat,
    Meta,
    ScalarMeta,
    TensorMeta,
    UndefinedMeta,
    Value,
    iter_values,
    map_values,
)

__all__ = [
    "ALL_DTYPES",
    "CPU",
    "NO_PROVENANCE",
    "UNDEFINED",
    "Category",
    "DType",
    "Device",
    "Graph",
    "GraphInput",
    "GraphOutput",
    "InputKind",
    "Layout",
    "MemoryFormat",
    "Meta",
    "Node",
    "OutputKind",
    "Provenance",
    "ScalarMeta",
    "TensorMeta",
    "UndefinedMeta",
    "Value",
    "format_graph",
    "format_node",
    "format_operand",
    "graph_difference",
    "graphs_equal",
    "iter_values",
    "map_values",
    "parse",
]
