"""Hand-written samples for the overloads of decompositions/linear.py."""

from __future__ import annotations
