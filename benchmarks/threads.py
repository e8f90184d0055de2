"""Per-call memory traffic and thread scaling of the executor on the model suite.

    .venv/bin/python benchmarks/threads.py [--scale full|quick|tiny] [--only REGEX]
                                           [--repeats N] [--threads N] [--estimate] [--regions]
                                           [--dir DIR]

For each model of `benchmarks/suite.py` (exported with `torch.export` and saved with
`torch.export.save`, as `benchmarks/models.py` does) it runs a few warm-up calls,
then measures steady-state calls of `aten2prims.execute`:

- minor page faults per call (`getrusage`) and tracemalloc's peak per call (NumPy reports its
  buffers to it), against the bytes of the plan's arena and of the call's outputs;
- median wall time at one thread and at `--threads` threads (default 2), the two alternating
  call by call in this one process (BLAS's thread count is set per call through threadpoolctl),
  the process CPU time of both (all threads: what splitting costs), and whether both give
  bit-identical outputs.

On a machine shared with other work the times are noisy; alternating keeps the comparison fair.
When the machine is oversubscribed (more runnable threads than cores) the two threads of a call
wait for each other's time slices and no wall-time speed-up can show; `--estimate` then also
times every part of every parallel region of a one-thread call (thread CPU time) and prints the
speed-up two threads would reach with those parts shared as the executor shares them (two
threads claim a region's parts in order; serial work stays whole), once with free hand-offs
and once with the second thread starting each region `--handoff-us` late (waking a sleeping
thread is not free: without that charge the estimate promised 1.87x where calls ran 1.0x).
`--regions` shows where the two calls' wall times go: the parallel regions, grouped by the
executor function that opened them (products in parts, segments, attention blocks, ...), each
group's wall time per call at one and at `--threads` threads, and the time outside every
region (the steps that run on the calling thread alone), the calls alternating in one process
(a part's own parts, a segment's products', run inside its region and are not counted).
`--dir` keeps the exported archives and inputs (under a subdirectory per scale, as
`benchmarks/plan_profile.py --dir` does) and reuses them when they are there. Without torch
(an interpreter it has no wheel for, such as a free-threaded build) the script measures the
models whose archives `--dir` holds from an earlier run with torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# What waking the second thread for a parallel region cost on an idle two-core KVM guest
# (measured: a worker started its part 25-45 us after the caller handed it over).
HANDOFF_US = 40.0


def _suite_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "benchmark_suite", ROOT / "benchmarks" / "suite.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _models(only: str | None, kept: Path | None) -> tuple[Any, list[str]]:
    """The suite (None without torch) and the names of its models to measure (`only`: a regex
    over them). Without torch (an interpreter torch has no wheel for, such as a free-threaded
    build), the models whose archive and inputs `kept` already holds, from an earlier run with
    torch."""
    try:
        suite = _suite_module()
    except ImportError as missing:
        if kept is None:
            raise SystemExit(
                f"threads.py: the suite's models need torch to be exported ({missing}); without "
                "it, give --dir with the archives a run with torch kept there"
            ) from missing
        found = sorted(p.stem for p in kept.glob("*.pt2") if p.with_suffix(".npz").exists())
        return None, [name for name in found if not only or re.search(only, name)]
    return suite, [s.name for s in suite.SPECS if not only or re.search(only, s.name)]


def _export(suite: Any, name: str, scale: str, directory: Path) -> tuple[Path, list[Any]]:
    """The model saved as a .pt2 archive, and its inputs as arrays."""
    # Only here: the measured calls run on arrays, with torch loaded but idle.
    import torch

    model, inputs = suite.build(name, scale)
    path = directory / f"{name}.pt2"
    torch.export.save(torch.export.export(model, inputs).run_decompositions(), path)
    return path, [t.numpy() for t in inputs]


def _kept(name: str, scale: str, directory: Path) -> tuple[Path, list[Any]]:
    """The model's archive and inputs in `directory`, made there by `benchmarks/models.py`'s
    preparation when they are missing."""
    import numpy as np

    path = directory / f"{name}.pt2"
    arrays_path = directory / f"{name}.npz"
    if not path.exists() or not arrays_path.exists():
        sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/ is not a package
        import models

        models.prepare(name, scale, directory, ort=False)
    with np.load(arrays_path) as arrays:
        count = sum(key.startswith("input_") for key in arrays.files)
        return path, [arrays[f"input_{i}"] for i in range(count)]


def measure(path: Path, inputs: list[Any], threads: int, repeats: int) -> dict[str, Any]:
    import numpy as np

    import aten2prims
    from aten2prims.executor import plan_for

    graph = aten2prims.lower(aten2prims.load(path))
    for _ in range(3):
        aten2prims.execute(graph, inputs, threads=1)
        aten2prims.execute(graph, inputs, threads=threads)
    plan = plan_for(graph)
    faults = []
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        outputs = aten2prims.execute(graph, inputs, threads=1)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del outputs
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    outputs = aten2prims.execute(graph, inputs, threads=1)
    traced = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    output_bytes = sum(o.nbytes for o in outputs if isinstance(o, np.ndarray))
    one: list[float] = []
    many: list[float] = []
    one_cpu: list[float] = []
    many_cpu: list[float] = []
    identical = True
    for _ in range(repeats):
        for count, times, cpu in ((1, one, one_cpu), (threads, many, many_cpu)):
            start, start_cpu = time.perf_counter(), time.process_time()
            result = aten2prims.execute(graph, inputs, threads=count)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            if count == 1:
                reference = result
            else:
                identical &= all(
                    np.asarray(a).tobytes() == np.asarray(b).tobytes()
                    for a, b in zip(reference, result, strict=True)
                )
    return {
        "faults": statistics.median(faults),
        "traced": traced,
        "outputs": output_bytes,
        "arena": plan.arenas.layout.nbytes,
        "one": statistics.median(one),
        "many": statistics.median(many),
        "one_cpu": statistics.median(one_cpu),
        "many_cpu": statistics.median(many_cpu),
        "identical": identical,
    }


def estimate(path: Path, inputs: list[Any], repeats: int, handoff: float) -> float:
    """The two-thread speed-up a one-thread call's part timings allow (see the docstring)."""
    import aten2prims
    from aten2prims.executor import threads

    graph = aten2prims.lower(aten2prims.load(path))
    run_parts = threads.run_parts
    sharing = _sharing_modules()
    saved = [0.0]
    inside = [False]  # a region is open: parts of a part (a segment's product) run in it

    def timed_parts(parts: Any) -> None:
        if inside[0]:
            run_parts(parts)
            return
        times: list[float] = []

        def timed(part: Any) -> Any:
            def run() -> None:
                start = time.thread_time()
                part()
                times.append(time.thread_time() - start)

            return run

        inside[0] = True
        try:
            run_parts([timed(part) for part in parts])
        finally:
            inside[0] = False
        if len(times) >= 2:
            # Two threads claim the parts in order, each the next one when it is free; the
            # second starts `handoff` late (waking a thread), and the caller then waits for it.
            free = [0.0, handoff]
            for spent in times:
                free[free.index(min(free))] += spent
            saved[0] += sum(times) - max(free) - (handoff if free[1] > handoff else 0.0)

    for module in sharing:  # measurement only
        module.run_parts = timed_parts
    try:
        for _ in range(2):
            aten2prims.execute(graph, inputs, threads=1)
        ratios = []
        for _ in range(repeats):
            saved[0] = 0.0
            start = time.thread_time()
            aten2prims.execute(graph, inputs, threads=1)
            total = time.thread_time() - start
            ratios.append(total / (total - saved[0]))
    finally:
        for module in sharing:
            module.run_parts = run_parts
    return statistics.median(ratios)


def _sharing_modules() -> list[Any]:
    """Every executor module that runs parts (each imports run_parts by name)."""
    from aten2prims import executor
    from aten2prims.executor import threads

    return [threads] + [
        module
        for module in vars(executor).values()
        if getattr(module, "run_parts", None) is threads.run_parts and module is not threads
    ]


def regions(path: Path, inputs: list[Any], threads: int, repeats: int) -> list[tuple[str, ...]]:
    """Rows (group, regions per call, ms at 1 thread, ms at `threads`, speed-up): the wall time
    of the parallel regions of a call by the function that opened them, and outside them."""
    import aten2prims
    from aten2prims.executor import threads as executor_threads

    graph = aten2prims.lower(aten2prims.load(path))
    for _ in range(3):
        aten2prims.execute(graph, inputs, threads=1)
        aten2prims.execute(graph, inputs, threads=threads)
    run_parts = executor_threads.run_parts
    opened: list[tuple[str, float]] = []
    inside = [False]  # a region is open: parts of a part (a segment's product) run in it

    def timed_parts(parts: Any) -> None:
        if len(parts) < 2 or inside[0]:
            run_parts(parts)
            return
        code = sys._getframe(1).f_code
        inside[0] = True
        start = time.perf_counter()
        try:
            run_parts(parts)
        finally:
            inside[0] = False
        opened.append((getattr(code, "co_qualname", code.co_name), time.perf_counter() - start))

    sharing = _sharing_modules()
    per_count: dict[int, list[dict[str, tuple[int, float]]]] = {1: [], threads: []}
    for module in sharing:  # measurement only
        module.run_parts = timed_parts
    try:
        for _ in range(repeats):
            for count in (1, threads):
                opened.clear()
                start = time.perf_counter()
                aten2prims.execute(graph, inputs, threads=count)
                call = time.perf_counter() - start
                groups: dict[str, tuple[int, float]] = {}
                for name, spent in opened:
                    number, total = groups.get(name, (0, 0.0))
                    groups[name] = (number + 1, total + spent)
                groups["(outside regions)"] = (0, call - sum(spent for _, spent in opened))
                groups["(whole call)"] = (0, call)
                per_count[count].append(groups)
    finally:
        for module in sharing:
            module.run_parts = run_parts
    names = sorted(
        {name for calls in per_count.values() for call in calls for name in call},
        key=lambda name: -statistics.median(call.get(name, (0, 0.0))[1] for call in per_count[1]),
    )
    rows = []
    for name in names:
        one = statistics.median(call.get(name, (0, 0.0))[1] for call in per_count[1])
        many = statistics.median(call.get(name, (0, 0.0))[1] for call in per_count[threads])
        number = per_count[1][0].get(name, (0, 0.0))[0]
        rows.append(
            (
                name,
                str(number) if number else "",
                f"{one * 1e3:.2f}",
                f"{many * 1e3:.2f}",
                f"{one / many:.2f}x" if many else "",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("full", "quick", "tiny"), default="full")
    parser.add_argument("--only", default=None, help="regex over model names")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--estimate", action="store_true", help="also the ideal 2-thread speed-up")
    parser.add_argument(
        "--handoff-us",
        type=float,
        default=HANDOFF_US,
        help="what --estimate charges per parallel region for waking the second thread",
    )
    parser.add_argument(
        "--regions", action="store_true", help="also the wall time per kind of parallel region"
    )
    parser.add_argument("--dir", default=None, help="keep (and reuse) the archives here")
    options = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    kept = None
    if options.dir is not None:
        kept = Path(options.dir) / options.scale
        kept.mkdir(parents=True, exist_ok=True)
    suite, names = _models(options.only, kept)
    print(
        f"{'model':12} {'faults/call':>11} {'traced MB':>9} {'outputs MB':>10} {'arena MB':>8} "
        f"{'1 thread ms':>11} {f'{options.threads} threads ms':>13} {'speed-up':>8} "
        f"{'CPU ms 1 / N':>15} identical"
    )
    with tempfile.TemporaryDirectory() as temporary:
        for name in names:
            if kept is not None:
                path, inputs = _kept(name, options.scale, kept)
            else:
                path, inputs = _export(suite, name, options.scale, Path(temporary))
            r = measure(path, inputs, options.threads, options.repeats)
            print(
                f"{name:12} {r['faults']:>11.0f} {r['traced'] / 1e6:>9.2f} "
                f"{r['outputs'] / 1e6:>10.2f} {r['arena'] / 1e6:>8.2f} {r['one'] * 1e3:>11.2f} "
                f"{r['many'] * 1e3:>13.2f} {r['one'] / r['many']:>8.2f} "
                f"{r['one_cpu'] * 1e3:>6.1f} / {r['many_cpu'] * 1e3:<6.1f} {r['identical']}",
                flush=True,
            )
            if options.estimate:
                ideal = estimate(path, inputs, options.repeats, 0.0)
                charged = estimate(path, inputs, options.repeats, options.handoff_us * 1e-6)
                print(
                    f"{'':12} 2-thread speed-up from part timings: {ideal:.2f}x with free "
                    f"hand-offs, {charged:.2f}x at {options.handoff_us:.0f} us per hand-off"
                )
            if options.regions:
                print(
                    f"{'':12} {'opened by':38} {'per call':>8} {'1 thread ms':>11} "
                    f"{f'{options.threads} threads ms':>13} {'speed-up':>8}"
                )
                for group, number, one, many, gain in regions(
                    path, inputs, options.threads, options.repeats
                ):
                    print(f"{'':12} {group[:38]:38} {number:>8} {one:>11} {many:>13} {gain:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
