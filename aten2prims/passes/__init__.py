"""Graph passes: lowering to prims, canonicalization, common subexpression elimination, dead code
elimination. Each is a plain function from a graph to a graph that never modifies its input.
`verify` checks a graph against the aten schemas and the prims' meta rules.

`lower` does not run the others: the lowered graph stays exactly what the rules emitted (the
printed and `--nested` views, the golden graphs and the harness read it that way). The executor
runs `optimize` when it plans a graph (once per graph, cached), together with its own plan-time
steps (constant folding, fusion); `optimize(lower(g))` gives the tidied graph to anyone who
wants it printed."""

from __future__ import annotations

from ..ir.graph import Graph
from .canonicalize import canonicalize
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .lower import lower
from .verify import verify


def optimize(graph: Graph) -> Graph:
    """Canonicalization, then CSE, then DCE: the graph the executor plans (results bit-identical
    to the input graph's; the same graph object when nothing changes)."""
    return eliminate_dead_code(eliminate_common_subexpressions(canonicalize(graph)))


__all__ = [
    "canonicalize",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "lower",
    "optimize",
    "verify",
]
