"""The table of hand-written samples: `@handwritten(op, dtypes)` registers a generator of
`AtenCall`s for the dtypes it covers (the modules of this package use it; `samples` reads it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...ir.dtypes import DType
from ..record import AtenCall

HandwrittenSamples = Callable[[DType], Iterable[AtenCall]]
HANDWRITTEN: dict[str, list[tuple[frozenset[DType], HandwrittenSamples]]] = {}


def handwritten(
    op: str, dtypes: Iterable[DType]
) -> Callable[[HandwrittenSamples], HandwrittenSamples]:
    """Register a generator of hand-written samples of `op` for each of `dtypes`:
    `fn(dtype) -> iterable of AtenCall`."""

    def decorate(function: HandwrittenSamples) -> HandwrittenSamples:
        HANDWRITTEN.setdefault(op, []).append((frozenset(dtypes), function))
        return function

    return decorate
