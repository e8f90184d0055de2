"""aten2prims: lower Core ATen graphs to torch Prims and run them on NumPy.

import aten2prims
g = aten2prims.load("model.pt2")          # no torch needed; also text IR files
lg = aten2prims.lower(g)                   # prims only
outs = aten2prims.execute(lg, {"x": x})    # list of NumPy arrays
"""

from __future__ import annotations

import os
from os import PathLike
from typing import Any

from .errors import (
    DTypeError,
    Error,
    ExecutionError,
    LoadError,
    LoweringError,
    MemoryBudgetError,
    ParseError,
    SchemaError,
    ShapeError,
    UnsupportedOpError,
    VerificationError,
)
from .ir import DType, Graph, Node, TensorMeta, Value, parse

__all__ = [
    "DType",
    "DTypeError",
    "Error",
    "ExecutionError",
    "Graph",
    "LoadError",
    "LoweringError",
    "MemoryBudgetError",
    "Node",
    "ParseError",
    "SchemaError",
    "ShapeError",
    "TensorMeta",
    "UnsupportedOpError",
    "Value",
    "VerificationError",
    "bisect",
    "default_rules",
    "execute",
    "from_fx",
    "load",
    "lower",
    "parse",
    "to_fx",
]
__version__ = "0.1.0"


def lower(graph: Graph, *, strict: bool = True, keep: Any = None, rules: Any = None) -> Graph:
    """A new graph with every aten node expanded into prims by its decomposition rule.

    `keep` leaves chosen aten nodes intact: overload names or shell-style patterns
    (`{"aten.convolution.*", "aten.mm.default"}`), or a predicate on the node. `rules` is the rule
    table (default: `default_rules()`; build another with `default_rules().with_rule(op, fn)`).
    Raises UnsupportedOpError naming every op that is neither kept nor has a rule (with counts),
    unless `strict=False`, which leaves those nodes in place. The input graph is never modified."""
    # Lazy: every submodule import runs this package first, and the layers above ir import it.
    from .passes.lower import lower as _lower

    return _lower(graph, strict=strict, keep=keep, registry=rules)


def default_rules() -> Any:
    """The table of every decomposition rule (`decompositions.RuleRegistry`): the start of a
    custom table, `default_rules().with_rule("mylib.fused_gelu.default", fn)`, which leaves the
    default one unchanged."""
    # Lazy: as for lower.
    from decompositions import default_rules as _default_rules

    return _default_rules()


def execute(
    graph: Graph,
    inputs=(),
    *,
    seed: int | None = None,
    check: bool = False,
    return_all_outputs: bool = False,
    max_memory: int | None = None,
    threads: int | None = None,
) -> list:
    """Run a graph on NumPy and return its user outputs (user outputs and a loss; every output,
    mutations and gradients included, with `return_all_outputs=True`) as arrays (lowering it
    first if it still holds aten nodes). `inputs` maps input names to arrays or lists the user inputs in order;
    parameters, buffers and constants with stored data are filled in. `seed` makes random ops
    reproducible, those of nested graphs (branches, loop bodies) included; `check=True` verifies
    every intermediate's shape and dtype against its meta.
    A graph needing more than `max_memory` bytes (default: the machine's memory) is refused with
    MemoryBudgetError before anything is allocated. `threads` (default: the machine's cores, or
    the ATEN2PRIMS_NUM_THREADS environment variable) share the parts of large steps (matrix
    products included); results are the same bit for bit for every thread count."""
    # Lazy: every submodule import runs this package first, and the layers above ir import it.
    from .executor import execute as _execute

    return _execute(
        graph,
        inputs,
        seed=seed,
        check=check,
        return_all_outputs=return_all_outputs,
        max_memory=max_memory,
        threads=threads,
    )


def load(path: str | PathLike[str], *, max_memory: int | None = None) -> Graph:
    """The graph in a `.pt2` archive written by `torch.export.save` (read without torch and
    without unpickling; parameters, buffers and constants come as GraphInput.data) or in a text
    IR file. Raises LoadError naming the file and the archive entry at fault. An archive whose
    tensors need more than `max_memory` bytes (default: the machine's memory) is refused."""
    # Lazy: every submodule import runs this package first, and the layers above ir import it.
    from .frontends import load as load_file

    return load_file(os.fspath(path), max_memory=max_memory)


def from_fx(obj: object, *, name: str = "graph") -> Graph:
    """The graph of a `torch.export.ExportedProgram` or a `torch.fx.GraphModule` of Core ATen
    ops, identical to what `load` gives for the program saved with `torch.export.save`
    (imports torch)."""
    # Lazy: the fx importer loads torch.
    from .frontends.fx import from_fx as import_fx

    return import_fx(obj, name=name)


def to_fx(graph: Graph, *, adapt: bool = True) -> object:
    """A `torch.fx.GraphModule` whose nodes call `torch.ops.prims` (and `torch.ops.aten2prims` for
    the extension prims) computing a lowered graph in torch (imports torch). `adapt=False`
    calls torch's prims exactly as the nodes state them, without the documented adapters for
    the cases where torch's prims differ (docs/pipeline.md)."""
    # Lazy: to_fx loads torch.
    from .backends.to_fx import to_fx as export_fx

    return export_fx(graph, adapt=adapt)


def bisect(graph: Graph, inputs: Any = (), rules: Any = None, *, seed: int = 0) -> Any:
    """Run an aten graph in torch node by node and check each aten node's prims expansion on the
    inputs torch used for it; the report names the first node that diverges (imports torch)."""
    # Lazy: the harness loads torch.
    from .testing.bisect import bisect as run_bisect

    return run_bisect(graph, inputs, rules, seed=seed)
