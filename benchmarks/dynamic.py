"""Dynamic shapes against static ones: the models of `examples/dynamic_models.py` exported once
with their dynamic dims and once static (the same weights and example inputs), each saved with
`torch.export.save` and read back with `aten2prims.load`.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/dynamic.py \\
        [--only REGEX] [--repeats N]

For each model it prints (medians of `--repeats` calls in CPU time, the dynamic and the static
call alternating, one BLAS thread):

- lowering: `aten2prims.lower` of the dynamic graph / of the static graph (target <= 1.2);
- execution at an already-seen size: `aten2prims.execute` of the dynamic lowering at the
  example size / of the static lowering (target <= 1.05); the dynamic call binds the symbols,
  checks ranges and run-time checks, and finds the static specialization in its cache;
- planning at a new size: the first call at a size not seen before (binding, specialization of
  the graph, the static planner's passes and folding), in ms per 1,000 prims of the lowered
  graph, beside the same first call of the static graph.

Timings on a shared machine are noisy: compare ratios of runs made together. CPU time
(`time.process_time`, every thread of the process) is less disturbed by other jobs than wall
time; calls alternate between the two graphs so that a change of load moves both alike.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # after the thread settings, which BLAS reads once

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from dynamic_models import MODELS, build

import aten2prims
from aten2prims.executor.run import _PLANNED


def _alternating_medians(functions: dict, repeats: int) -> dict:
    """Median CPU seconds of each function, the functions called in turn `repeats` times."""
    times: dict = {key: [] for key in functions}
    for _ in range(repeats):
        for key, function in functions.items():
            start = time.process_time()
            function()
            times[key].append(time.process_time() - start)
    return {key: statistics.median(values) for key, values in times.items()}


def _one(name: str, directory: Path, repeats: int) -> None:
    model, example, dynamic, sizes = build(name)
    paths = {}
    for kind, shapes in (("dynamic", dynamic), ("static", None)):
        program = torch.export.export(model, example, dynamic_shapes=shapes).run_decompositions()
        paths[kind] = directory / f"{name}_{kind}.pt2"
        torch.export.save(program, paths[kind])
    graphs = {kind: aten2prims.load(path) for kind, path in paths.items()}
    lowering = _alternating_medians(
        {kind: lambda g=g: aten2prims.lower(g) for kind, g in graphs.items()}, repeats
    )
    lowered = {kind: aten2prims.lower(g) for kind, g in graphs.items()}
    feed = [t.numpy() for t in example]
    firsts = {}
    for kind, graph in lowered.items():
        start = time.process_time()
        aten2prims.execute(graph, feed)
        firsts[kind] = time.process_time() - start
    # Many more calls than lowerings: each is short, and its median needs them.
    run = _alternating_medians(
        {kind: lambda g=g: aten2prims.execute(g, feed) for kind, g in lowered.items()},
        repeats * 20,
    )
    # A new size: the example's batch or sequence changed, planned from scratch.
    other = [t.numpy() for t in sizes[1]]
    planned = _PLANNED[lowered["dynamic"]]
    before = len(planned.specialized)
    start = time.process_time()
    aten2prims.execute(lowered["dynamic"], other)
    new_size = time.process_time() - start
    assert len(planned.specialized) == before + 1
    prims = len(lowered["dynamic"].nodes)
    print(
        f"{name:6} {prims:5d} prims | lower {lowering['dynamic'] * 1e3:8.1f} / "
        f"{lowering['static'] * 1e3:8.1f} ms = {lowering['dynamic'] / lowering['static']:.2f}x | "
        f"run {run['dynamic'] * 1e3:7.2f} / {run['static'] * 1e3:7.2f} ms = "
        f"{run['dynamic'] / run['static']:.3f}x | new size {new_size * 1e3:7.1f} ms "
        f"({new_size * 1e6 / prims:.1f} ms per 1000 prims; static first call "
        f"{firsts['static'] * 1e6 / prims:.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=".", help="models whose name matches this regex")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        "model  prims | lowering dynamic / static | execution at a seen size | first call at a new size"
    )
    with tempfile.TemporaryDirectory() as directory:
        for name in MODELS:
            if re.search(args.only, name):
                _one(name, Path(directory), args.repeats)


if __name__ == "__main__":
    main()
