"""Frontends: where graphs come from.

- `load(path)`: a `.pt2` archive written by `torch.export.save` (read without torch and without
  unpickling) or a text IR file, told apart by content;
- `from_fx(obj)`: a `torch.export.ExportedProgram` or `torch.fx.GraphModule` in memory (imports
  torch when called).

Both give the same Graph for the same program; docs/frontends.md says what each accepts.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import LoadError
from ..ir.graph import Graph
from .fx import from_fx
from .pt2 import load_pt2
from .text import load_text

# Every zip file starts with a local file header; a truncated archive still does.
_ZIP_MAGIC = b"PK\x03\x04"


def load(path: str | Path, *, max_memory: int | None = None) -> Graph:
    """The graph in a `.pt2` archive or a text IR file. Raises LoadError for a missing,
    unreadable, malformed or unsupported file, naming the file (and the archive entry).
    `max_memory` bounds the bytes an archive's tensors may take (default: the machine's)."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            head = file.read(len(_ZIP_MAGIC))
    except FileNotFoundError:
        raise LoadError("no such file", entry=str(path)) from None
    except OSError as error:
        raise LoadError(
            f"cannot read the file: {error.strerror or error}", entry=str(path)
        ) from None
    return load_pt2(path, max_memory=max_memory) if head == _ZIP_MAGIC else load_text(path)


__all__ = ["from_fx", "load", "load_pt2", "load_text"]
