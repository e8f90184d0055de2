"""Hand-written samples for the overloads of decompositions/reductions.py."""

from __future__ import annotations
