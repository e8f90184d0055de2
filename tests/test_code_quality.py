"""The linters and the type checker as part of the suite (configured in pyproject.toml), so that
the README's test command — and CI, which runs exactly it — checks them too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_passes(command: list[str]) -> None:
    tool = BIN / command[0]
    assert tool.exists(), f"{command[0]} is not installed in {BIN}: pip install -e '.[test]'"
    result = subprocess.run(
        [str(tool), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
