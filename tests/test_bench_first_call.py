"""benchmarks/first_call.py end to end on the bundled CNN archive, with torch absent (the
archive given with --pt2 needs no export): it says whether the slow-kernel variables are set and
which BLAS kernel the fresh processes ran, and times every phase. No timings are asserted."""

from __future__ import annotations

import re

from _benchmark_modules import ROOT, run_benchmark


def test_first_call_reports_the_blas_it_ran_on_without_torch() -> None:
    arguments = ["--pt2", str(ROOT / "examples" / "cnn.pt2"), "--processes", "1"]
    completed = run_benchmark("first_call.py", arguments, torch_absent=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    lines = completed.stdout.splitlines()
    # Set or not, each variable gets its line (this machine's environment is left as it is).
    for variable in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        line = next(line for line in lines if line.startswith(f"{variable}: "))
        assert line.endswith("not set") or "SET to" in line, line
    blas = next(line for line in lines if line.startswith("BLAS in the processes: "))
    assert re.search(r"openblas \S+ kernel \S+ .* 1 thread\(s\)", blas), blas
    assert re.search(r"^ +0 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ ", completed.stdout, re.M)
    assert "torch imported: False" in completed.stdout
