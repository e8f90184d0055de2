"""benchmarks/threads.py end to end on the suite's tiny MLP: with torch (exporting it into
`--dir`), then with torch absent, on the archive that run kept (as under an interpreter torch
has no wheel for); without torch and without `--dir` it says what it needs. No timings are
asserted."""

from __future__ import annotations

import re
from pathlib import Path

from _benchmark_modules import run_benchmark


def _mlp_row(output: str) -> re.Match[str] | None:
    return re.search(
        r"^mlp +0 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ .* True$", output, re.M
    )


def test_threads_benchmark_runs_without_torch_on_kept_archives(tmp_path: Path) -> None:
    arguments = ["--scale", "tiny", "--only", "^mlp$", "--repeats", "1", "--dir", str(tmp_path)]
    with_torch = run_benchmark("threads.py", arguments, torch_absent=False)
    assert with_torch.returncode == 0, with_torch.stderr[-2000:]
    assert _mlp_row(with_torch.stdout), with_torch.stdout
    assert (tmp_path / "tiny" / "mlp.pt2").exists()

    without = run_benchmark("threads.py", arguments, torch_absent=True)
    assert without.returncode == 0, without.stderr[-2000:]
    assert _mlp_row(without.stdout), without.stdout


def test_threads_benchmark_without_torch_or_archives_says_what_it_needs() -> None:
    completed = run_benchmark(
        "threads.py", ["--scale", "tiny", "--only", "^mlp$"], torch_absent=True
    )
    assert completed.returncode != 0
    assert "need torch to be exported" in completed.stderr
    assert "give --dir" in completed.stderr
