"""Hand-written samples for the overloads of decompositions/normalization.py."""

from __future__ import annotations
