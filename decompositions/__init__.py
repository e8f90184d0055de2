"""Decomposition rules: Core ATen overloads expressed in prims (DESIGN §6)."""
