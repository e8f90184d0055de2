"""Hand-written samples for the overloads of decompositions/views.py."""

from __future__ import annotations
