"""benchmarks/handoff.py runs end to end on small sizes (its worker process, the executor's
pool, every variant), and its check that each split gives the whole call's bits fails when a
split does not. No timings are asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--rounds", "1", "--calls", "2", "--elements", "131072", "--rows", "64"]
SMALL += ["--spin-us", "2000"]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _main_with(prelude: str) -> str:
    return (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import handoff\n"
        f"{prelude}\n"
        f"sys.exit(handoff.main({SMALL!r}))\n"
    )


def test_handoff_benchmark_runs_end_to_end() -> None:
    completed = _run(_main_with(""))
    assert completed.returncode == 0, completed.stderr[-2000:]
    output = completed.stdout
    assert "OPENBLAS_CORETYPE:" in output
    assert "BLAS: " in output
    for name in (
        "hand-off, threads (us)",
        "hand-off, processes (us)",
        "hand-off, spinning processes (us)",
        "GELU, 2 spinning processes (ms)",
        "product, 2 threads (ms)",
    ):
        assert re.search(rf"  {re.escape(name)}: [\d.e+-]+\n", output), (name, output)
    for name in ("GELU", "product"):
        assert re.search(
            rf"{name} two-way speed-up: threads [\d.]+x, processes [\d.]+x, spinning processes "
            r"[\d.]+x; splits give the whole's bits: True",
            output,
        ), output


# Wrong GELUs in this process (the worker process keeps the right one). Changing each call's
# first value: the whole call's result differs in its first value, the split on threads in
# the first values of both halves (the split on processes agrees with the whole). Changing
# every value: the whole call and the split on threads agree, the split on processes has the
# worker's right half.
WRONG_SPLITS = {
    "threads": "out[0] += 1",
    "processes": "out += 1",
}


@pytest.mark.parametrize("wrong_split", sorted(WRONG_SPLITS))
def test_a_split_with_other_bits_fails_the_benchmark(wrong_split: str) -> None:
    wrong = (
        "right = handoff.gelu\n"
        "def wrong(x, out):\n"
        "    right(x, out)\n"
        f"    {WRONG_SPLITS[wrong_split]}\n"
        "handoff.gelu = wrong"
    )
    completed = _run(_main_with(wrong))
    assert completed.returncode == 1, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "GELU two-way speed-up" in completed.stdout
    assert "splits give the whole's bits: False" in completed.stdout
    assert "product two-way speed-up" in completed.stdout
