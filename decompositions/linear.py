"""Family N: matrix products and convolutions (forward and backward), col2im."""

from __future__ import annotations
