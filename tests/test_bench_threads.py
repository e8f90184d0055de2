"""benchmarks/threads.py end to end on the suite's tiny MLP: with torch (exporting it into
`--dir`), then with torch absent, on the archive that run kept (as under an interpreter torch
has no wheel for); without torch and without `--dir` it says what it needs. No timings are
asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "threads.py"


def _run(arguments: list[str], *, torch_absent: bool) -> subprocess.CompletedProcess[str]:
    # sys.modules["torch"] = None makes every `import torch` raise ModuleNotFoundError.
    code = (
        "import runpy, sys\n"
        + ("sys.modules['torch'] = None\n" if torch_absent else "")
        + f"sys.argv = [{str(SCRIPT)!r}] + {arguments!r}\n"
        + f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def _mlp_row(output: str) -> re.Match[str] | None:
    return re.search(
        r"^mlp +0 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ .* True$", output, re.M
    )


def test_threads_benchmark_runs_without_torch_on_kept_archives(tmp_path: Path) -> None:
    arguments = ["--scale", "tiny", "--only", "^mlp$", "--repeats", "1", "--dir", str(tmp_path)]
    with_torch = _run(arguments, torch_absent=False)
    assert with_torch.returncode == 0, with_torch.stderr[-2000:]
    assert _mlp_row(with_torch.stdout), with_torch.stdout
    assert (tmp_path / "tiny" / "mlp.pt2").exists()

    without = _run(arguments, torch_absent=True)
    assert without.returncode == 0, without.stderr[-2000:]
    assert _mlp_row(without.stdout), without.stdout


def test_threads_benchmark_without_torch_or_archives_says_what_it_needs() -> None:
    completed = _run(["--scale", "tiny", "--only", "^mlp$"], torch_absent=True)
    assert completed.returncode != 0
    assert "need torch to be exported" in completed.stderr
    assert "give --dir" in completed.stderr
