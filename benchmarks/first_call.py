"""The first call of one model, split into load, lower and plan, each in a fresh process.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        .venv/bin/python benchmarks/first_call.py [--model resnet18] [--scale full]
                                                  [--processes 7] [--pt2 FILE] [--keep FILE]
                                                  [--profile load|lower|plan|run]

The parent builds the model of `benchmarks/suite.py` (default: the ResNet-18-sized model of
docs/performance.md's first-call target, 1x3x224x224), exports it with `torch.export.export(...)
.run_decompositions()` and saves it with `torch.export.save` (or takes an archive given with
`--pt2`; `--keep` saves the one it made). Then it starts `--processes` fresh processes, one at a
time, with one BLAS thread. Each imports `aten2prims`, the rules and what load, lower and plan
use (not timed: reported as "imports"), then times `aten2prims.load` of the archive,
`aten2prims.lower`, the executor's plan and the first `aten2prims.execute` on a random input,
and records the peak resident set the load and the whole first call add (VmHWM above the
resident set after the imports). The table shows every process's wall times and the medians of
wall and process CPU times; load + lower + plan is compared with the target (100 ms). `--profile PHASE` runs one process with that phase
under cProfile and prints its 30 most expensive functions (own time) instead. It first prints
`models.py`'s lines on the slow-kernel variables, the CPU and ours' kernels, and, after the
runs, the BLAS kernel and thread count the processes ran with (threadpoolctl, in the first).

On a busy machine wall times include waiting for a core, and both clocks are inflated by
the other jobs (page faults and cache misses cost more): compare runs made one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ is not a package: suite.py and models.py are imported from it by path
sys.path.insert(0, str(ROOT / "benchmarks"))
TARGET = 0.100  # seconds: load + lower + plan (docs/performance.md)
PHASES = ("load", "lower", "plan", "run")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # VmHWM := VmRSS (Linux >= 4.0)


def worker(path: Path, shape: list[int], profile: str | None) -> dict[str, Any]:
    """One first call in this (fresh) process; torch is never imported."""
    started = time.perf_counter()
    import cProfile
    import pstats

    import numpy as np

    import aten2prims
    import aten2prims.frontends
    import aten2prims.passes
    import decompositions  # noqa: F401  # imported for its side effect (the rules table)
    from aten2prims.executor import plan_for

    imports = time.perf_counter() - started
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    baseline = _rss_kib("VmRSS")
    _reset_peak()
    profiler = cProfile.Profile()
    results: dict[str, Any] = {}
    steps = {
        "load": lambda _: aten2prims.load(path),
        "lower": aten2prims.lower,
        "plan": lambda lowered: (plan_for(lowered), lowered)[1],
        "run": lambda lowered: aten2prims.execute(lowered, [x]),
    }
    value: Any = None
    for phase in PHASES:
        if phase == profile:
            profiler.enable()
        start, start_cpu = time.perf_counter(), time.process_time()
        out = steps[phase](value)
        results[phase] = time.perf_counter() - start
        results[f"{phase}_cpu"] = time.process_time() - start_cpu
        if phase == profile:
            profiler.disable()
        if phase != "run":
            value = out
        if phase == "load":
            results["load_peak_mib"] = (_rss_kib("VmHWM") - baseline) / 1024
    results["peak_mib"] = (_rss_kib("VmHWM") - baseline) / 1024
    results["imports"] = imports
    results["torch_imported"] = "torch" in sys.modules
    import models  # benchmarks/models.py (no torch imported): which BLAS kernel ran, after timing

    results["blas"] = models.threads_info()
    if profile is not None:
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    return results


def _export(model: str, scale: str, target: Path) -> list[int]:
    import suite
    import torch

    module, inputs = suite.build(model, scale)
    program = torch.export.export(module, inputs).run_decompositions()
    torch.export.save(program, str(target))
    return list(inputs[0].shape)


def _input_shape(path: Path) -> list[int]:
    """The first user input's sizes, read by our own loader (no torch)."""
    sys.path.insert(0, str(ROOT))
    import aten2prims

    graph = aten2prims.load(path)
    return [int(size) for size in graph.user_inputs[0].value.shape]


def _spawn(path: Path, shape: list[int], profile: str | None) -> dict[str, Any]:
    environment = dict(os.environ)
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        environment[variable] = "1"
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [environment.get("PYTHONPATH")])]
    )
    command = [sys.executable, __file__, "--worker", str(path), "--shape", json.dumps(shape)]
    if profile:
        command += ["--profile", profile]
    completed = subprocess.run(
        command, env=environment, capture_output=True, text=True, check=False
    )
    if profile:
        print(completed.stderr, file=sys.stderr)
    if completed.returncode != 0:
        raise SystemExit(f"worker failed: {completed.stderr.strip()[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18", help="a model of benchmarks/suite.py")
    parser.add_argument("--scale", default="full", choices=("full", "quick", "tiny"))
    parser.add_argument("--processes", type=int, default=7, help="fresh processes, one at a time")
    parser.add_argument("--pt2", type=Path, help="time this archive instead of exporting one")
    parser.add_argument("--keep", type=Path, help="also save the exported archive here")
    parser.add_argument("--profile", choices=PHASES, help="profile one phase in one process")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker is not None:
        result = worker(options.worker, json.loads(options.shape), options.profile)
        print(json.dumps(result))
        return 0
    import models  # benchmarks/models.py: the machine's lines (no torch imported)

    for line in models.slow_blas_lines() + models.kernel_lines():
        print(line)
    with tempfile.TemporaryDirectory(prefix="aten2prims-first-call-") as temporary:
        if options.pt2 is not None:
            path = options.pt2
            shape = _input_shape(path)
        else:
            path = options.keep or Path(temporary) / f"{options.model}.pt2"
            shape = _export(options.model, options.scale, path)
        size = path.stat().st_size / 2**20
        print(f"{path.name}: {size:.1f} MiB, input {'x'.join(map(str, shape))}, 1 thread")
        if options.profile:
            _spawn(path, shape, options.profile)
            return 0
        runs = [_spawn(path, shape, None) for _ in range(options.processes)]
    print(f"BLAS in the processes: {runs[0]['blas']}")
    print("process  load ms  lower ms  plan ms  ready ms  run ms  load peak MiB  peak MiB")
    for index, run in enumerate(runs):
        ready = run["load"] + run["lower"] + run["plan"]
        print(
            f"{index:7d}  {1e3 * run['load']:7.1f}  {1e3 * run['lower']:8.1f}  "
            f"{1e3 * run['plan']:7.1f}  {1e3 * ready:8.1f}  {1e3 * run['run']:6.1f}  "
            f"{run['load_peak_mib']:13.0f}  {run['peak_mib']:8.0f}"
        )
    for clock, suffix in (("wall", ""), ("CPU", "_cpu")):
        median = {p: statistics.median(run[p + suffix] for run in runs) for p in PHASES}
        ready = statistics.median(sum(run[p + suffix] for p in PHASES[:3]) for run in runs)
        verdict = "met" if ready <= TARGET else "MISSED"
        print(
            f"median {clock}: load {1e3 * median['load']:.1f} ms + lower "
            f"{1e3 * median['lower']:.1f} ms + plan {1e3 * median['plan']:.1f} ms = "
            f"{1e3 * ready:.1f} ms (target <= {1e3 * TARGET:.0f} ms: {verdict}); "
            f"first run {1e3 * median['run']:.1f} ms"
        )
    median = {"imports": statistics.median(run["imports"] for run in runs)}
    print(
        f"imports (not counted) {1e3 * median['imports']:.0f} ms; peak "
        f"{statistics.median(r['load_peak_mib'] for r in runs):.0f} MiB after load, "
        f"{statistics.median(r['peak_mib'] for r in runs):.0f} MiB after the first run; "
        f"torch imported: {any(r['torch_imported'] for r in runs)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
