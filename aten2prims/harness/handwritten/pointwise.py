"""Hand-written samples for the overloads of decompositions/pointwise.py."""

from __future__ import annotations
