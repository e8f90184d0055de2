"""Loading a graph from a file in our text form (`aten2prims.ir.parser`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import LoadError
from ..ir.graph import Graph
from ..ir.parser import parse
from .common import verified


def load_text(path: str | Path) -> Graph:
    """The graph printed in a text IR file; parse errors name the file, line and column."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise LoadError(
            f"neither a .pt2 archive nor UTF-8 text ({error})", entry=str(path)
        ) from None
    except OSError as error:
        raise LoadError(
            f"cannot read the file: {error.strerror or error}", entry=str(path)
        ) from None
    return verified(parse(text, source_name=str(path)), entry=str(path))
