"""The export sweep (aten2prims/testing/export_sweep.py) and its committed table,
docs/export_sweep.md: a cheap subset of subjects run again gives the committed rows, every
overload of a row the table calls ok has a rule, and every overload it calls missing has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from aten2prims.testing.export_sweep import MISSING, OK, OK_EXPORTED, OK_RANDOM, parse_rows, sweep
from decompositions import RULES

TABLE = Path(__file__).resolve().parent.parent / "docs" / "export_sweep.md"
COMMITTED = parse_rows(TABLE.read_text())

# Cheap subjects covering an ok module, a random one in training mode, an embedding bag, the
# non-core overloads of nn.Bilinear, and a function.
SUBSET = ["nn.Linear", "nn.Dropout", "nn.EmbeddingBag", "nn.Bilinear", "F.logsigmoid"]


def test_the_table_lists_modules_and_functions() -> None:
    subjects = {subject for subject, _ in COMMITTED}
    assert len(subjects) > 250
    assert {"nn.Linear", "nn.LSTM", "F.conv2d", "F.embedding_bag"} <= subjects


@pytest.mark.parametrize("name", SUBSET)
def test_the_sweep_reproduces_the_committed_rows(name: str) -> None:
    rows = list(sweep([name]))
    assert rows
    for row in rows:
        committed = COMMITTED[row.subject, row.mode]
        assert (row.ops, row.cells()[3]) == committed, row


def test_ok_rows_have_rules_for_every_overload() -> None:
    for (subject, mode), (ops, result) in COMMITTED.items():
        if result in (OK, OK_RANDOM) or result.startswith(OK_EXPORTED):
            assert all(op in RULES for op in ops), (subject, mode, ops)


def test_missing_rows_name_overloads_without_rules() -> None:
    for (subject, mode), (ops, result) in COMMITTED.items():
        if result.startswith(MISSING):
            named = [op for op in ops if op in result]
            assert named and all(op not in RULES for op in named), (subject, mode, result)
