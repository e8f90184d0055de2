"""Family S: views and shape changes, concatenation, flips, repeats, padding, creation and metadata ops."""

from __future__ import annotations
