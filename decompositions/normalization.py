"""Family N: batch/layer/group normalization (forward and backward), embedding bags, distances and FFTs."""

from __future__ import annotations
