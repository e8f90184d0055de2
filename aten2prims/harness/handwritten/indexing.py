"""Hand-written samples for the overloads of decompositions/indexing.py."""

from __future__ import annotations
