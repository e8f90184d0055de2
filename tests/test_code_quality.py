"""The linters and the type checker as part of the suite (configured in pyproject.toml), so that
the README's test command — and CI, which runs exactly it — checks them too."""

from __future__ import annotations

import re
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


_PRAGMA = re.compile(r"#\s*(noqa\b[:\w, ]*|type:\s*ignore(\[[\w, -]+\])?|fmt:\s*(skip|off|on))")


def test_every_pragma_says_why() -> None:
    """A `noqa`, `type: ignore` or `fmt:` pragma is followed on its line by a reason ("- why" or
    a comment), or has a comment line directly above it."""
    bare = []
    for path in sorted(ROOT.glob("**/*.py")):
        if ".venv" in path.parts or "build" in path.parts:
            continue
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            match = _PRAGMA.search(line)
            if match is None:
                continue
            after = line[match.end() :].strip()
            above = lines[number - 2].strip() if number > 1 else ""
            if not after.lstrip("-# ").strip() and not above.startswith("#"):
                bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert bare == [], "pragmas without a reason:\n" + "\n".join(bare)
