"""docs/pipeline.md tells the truth: its ```python snippets run, in order, in one namespace, from
the repository root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "pipeline.md").read_text()
SNIPPETS = re.findall(r"^```python\n(.*?)^```$", DOC, flags=re.MULTILINE | re.DOTALL)


def test_the_walkthrough_has_a_snippet_per_section() -> None:
    assert len(SNIPPETS) == 9


def test_snippets_run_in_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "pipeline_doc"}
    for index, snippet in enumerate(SNIPPETS):
        exec(compile(snippet, f"docs/pipeline.md snippet {index + 1}", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "first divergence: %relu (aten.relu.default)" in printed
    assert "['forward', 'backward']" in printed
    assert "['undefined', 'f32[4, 1, 3, 3]', 'undefined']" in printed
    assert os.getcwd() == str(ROOT)
