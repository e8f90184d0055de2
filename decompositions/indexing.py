"""Family S: gather/scatter, index/index_put, embedding, masked_scatter, sorting, topk, nonzero and random ops."""

from __future__ import annotations
