"""Sample budgets per (overload, dtype): the suite's default (fast) and docs/coverage.md's (full)."""

FAST_BUDGET = 4
FULL_BUDGET = 64
