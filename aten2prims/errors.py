"""The one exception hierarchy of aten2prims.

Every error names what it is about (op, node, entry) and what was expected. No error leaves a
graph half-rewritten or a caller's array modified: passes build new graphs and the executor
never writes into its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping


class Error(Exception):
    """Root of every error aten2prims raises on purpose."""


class LoadError(Error):
    """A file could not be loaded: malformed, truncated, unsafe or unsupported input."""

    def __init__(self, message: str, *, entry: str | None = None) -> None:
        self.entry = entry
        super().__init__(f"{entry}: {message}" if entry else message)


class ParseError(LoadError):
    """The text IR could not be parsed; carries the line and column."""

    def __init__(
        self, message: str, *, line: int, column: int, source_name: str = "<text>"
    ) -> None:
        self.line = line
        self.column = column
        super().__init__(f"{message} (line {line}, column {column})", entry=source_name)


class SchemaError(Error):
    """A function schema string is malformed, or arguments do not bind to it."""


class UnsupportedOpError(Error):
    """Ops without a decomposition rule; names every one of them, with counts."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = dict(sorted(counts.items()))
        listing = ", ".join(f"{op} (x{n})" for op, n in self.counts.items())
        super().__init__(
            f"no decomposition rule for {len(self.counts)} op(s): {listing}; "
            "lower(graph, strict=False) leaves them in place"
        )


class ShapeError(Error):
    """A shape does not satisfy what an op, a prim or the executor requires."""


class DTypeError(Error):
    """A dtype does not satisfy what an op, a prim or the executor requires."""


class VerificationError(Error):
    """A graph is malformed (use before definition, wrong arity, bad attribute, bad meta)."""


class ResultDTypeError(DTypeError):
    """A decomposition rule produced a result whose dtype differs from the node's declared one."""


class ResultShapeError(ShapeError):
    """A decomposition rule produced a result whose shape differs from the node's declared one."""


class LoweringError(Error):
    """A decomposition rule failed on a node; wraps the cause and names the node."""


class ExecutionError(Error):
    """A kernel failed at run time; names the node and its provenance."""


class MemoryBudgetError(ExecutionError):
    """Running a graph would take more memory than the budget allows; raised before allocating."""
