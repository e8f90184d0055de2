"""Resource limits shared by the readers and the executor: how much memory a load or a run may
take (the memory budget), and how large a JSON entry may be. docs/frontends.md lists them all."""

from __future__ import annotations

import math
import os
import re
from typing import Any

from .errors import MemoryBudgetError

try:  # imported with the module, not in the first load (POSIX only)
    import resource
except ImportError:  # not POSIX
    resource = None  # type: ignore[assignment]  # no address-space limit to read there

# A model.json or payload config larger than this is refused before it is read.
MAX_JSON_BYTES = 256 * 2**20
# Graphs nest (a cond branch holding a cond, ...) at most this deep in an archive or a text file.
MAX_GRAPH_DEPTH = 16

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[kmgt]?)(?:i?b)?", re.ASCII)


def default_memory_budget() -> int:
    """The machine's physical memory; a quarter of the address-space limit (RLIMIT_AS) when one
    is set and smaller, since interpreter, libraries and kernel temporaries share that space."""
    try:
        budget = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        budget = 8 * 2**30
    if resource is None:
        return budget
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            budget = min(budget, soft // 4)
    except (ValueError, OSError):
        pass
    return budget


def parse_size(text: str) -> int:
    """'512M', '2GiB', '1.5g', '1000000' -> bytes. Raises ValueError naming what is expected."""
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"expected a size such as 4096, 512M or 2G, found {text!r}")
    size = float(match["number"]) * _UNITS[match["unit"]]
    if not math.isfinite(size) or size < 1:
        raise ValueError(f"expected a positive size, found {text!r}")
    return int(size)


def format_bytes(nbytes: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} bytes"


def over_budget(what: str, needed: int, max_memory: int | None) -> None:
    """Raise MemoryBudgetError when `needed` bytes exceed the budget (default: the machine's)."""
    budget = default_memory_budget() if max_memory is None else max_memory
    if needed > budget:
        raise MemoryBudgetError(
            f"{what} needs up to {format_bytes(needed)}, over the memory budget of "
            f"{format_bytes(budget)}; raise it with --max-memory or execute(..., max_memory=...)"
        )


def nbytes(meta: Any) -> int:
    """The bytes of a value of this meta (0 for scalars)."""
    return _nbytes(meta)


def _nbytes(meta: Any) -> int:
    shape = getattr(meta, "shape", None)
    if shape is None:
        return 0
    return math.prod(shape) * meta.dtype.itemsize
