"""Hand-written samples for the overloads of decompositions/pooling.py."""

from __future__ import annotations
