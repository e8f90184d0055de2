"""Family N: pooling (max, average, adaptive; forward and backward) and resampling (upsampling, grid sampling)."""

from __future__ import annotations
