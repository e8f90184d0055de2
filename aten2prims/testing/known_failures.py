"""Failures recorded on purpose, each with its reason; docs/coverage.md shows them.

An entry must name the overload, why it fails (a torch-vs-NumPy limitation we cannot fix, a
semantic we deliberately do not reproduce, …) and, where it is narrower than the whole op, the
dtypes and/or a regex over the call's description. Never add an entry to hide a bug."""

from __future__ import annotations

from .conformance import KnownFailure

KNOWN_FAILURES: list[KnownFailure] = []
