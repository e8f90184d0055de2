"""Failures recorded on purpose, each with its reason; docs/coverage.md shows them.

An entry must name the overload, why it fails (a torch-vs-NumPy limitation we cannot fix, a
semantic we deliberately do not reproduce, …) and, where it is narrower than the whole op, the
dtypes and/or a regex over the call's description. Never add an entry to hide a bug."""

from __future__ import annotations

import re

import attrs

from ..ir.dtypes import DType
from .runner import Outcome


@attrs.frozen
class KnownFailure:
    """A failure we record deliberately (shown in docs/coverage.md): `dtypes` (None = all) and
    `pattern` (a regex searched in the call's description, None = every call)."""

    op: str
    reason: str
    dtypes: frozenset[DType] | None = None
    pattern: str | None = None

    def covers(self, outcome: Outcome, dtype: DType) -> bool:
        if self.dtypes is not None and dtype not in self.dtypes:
            return False
        return self.pattern is None or re.search(self.pattern, outcome.call.describe()) is not None


KNOWN_FAILURES: list[KnownFailure] = []
