"""Where a model's time goes in our executor, step by step, next to torch eager's total.

    .venv/bin/python benchmarks/profile_steps.py --model mobilenet_v2 [--scale full|quick]
        [--repeats 5] [--top 25] [--torch-ops]

Builds the model like `benchmarks/models.py` (`benchmarks/suite.py`: seeded weights, exported
with `torch.export`, saved and loaded back with `aten2prims.load`), lowers and plans it, and
runs the plan's generated function instrumented: the same statements with a process-CPU-time
reading around each step. Every step is filed under a kind (a convolution or matrix product by
how the contraction engine runs it, depthwise products, an elementwise ufunc, a copy, a
reduction, a gather, ...) and the report gives per kind and per (kind, op) the median over
`--repeats` calls of the summed CPU time, then the slowest single steps. The instrumented total
is also compared with an uninstrumented call (the clock readings cost about a microsecond per
step). torch eager runs the same model in the same process, one thread, its median CPU time per
call printed beside ours; `--torch-ops` adds torch's profiler's table of its aten ops.

One BLAS thread, one executor thread and one torch thread, set before NumPy loads. Process CPU
time is used throughout: on a shared machine it is not inflated by waiting for a core.
"""

from __future__ import annotations

import os

for _variable in (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "ATEN2PRIMS_NUM_THREADS",
):
    os.environ[_variable] = "1"

import argparse
import collections
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

import aten2prims
from aten2prims.executor import plan_for
from aten2prims.executor.codegen import CompiledRun
from aten2prims.executor.contraction import ContractionRecipe
from aten2prims.executor.contraction_fusion import ContractionKernel
from aten2prims.executor.multiply_accumulate import MultiplyAccumulateRecipe
from aten2prims.executor.plan import Plan
from aten2prims.executor.steps import Step
from aten2prims.executor.threads import running_with
from aten2prims.ir.graph import InputKind

_COPIES = {"clone", "copy_strided", "reshape", "collapse", "cat", "as_strided_scatter"}
_REDUCTIONS = {"sum", "amax", "amin", "prod", "var", "argmax", "argmin", "any", "all"}


def step_kind(step: Step) -> tuple[str, str]:
    """(kind, detail) of a step, for the report's grouping."""
    kernel = step.kernel
    kernel = getattr(kernel, "kernel", kernel)  # threads.Parted and ReducedParted wrap one
    op = step.node.op.removeprefix("prims.")
    if isinstance(kernel, ContractionKernel):
        recipes = kernel.recipes()
        recipe = recipes[0] if recipes else None
        epilogue = f" +{sum(1 for e in kernel.epilogue if e.ufunc is not None)} epilogue"
        if isinstance(recipe, MultiplyAccumulateRecipe):
            return (
                "contraction: depthwise products",
                f"{math.prod(recipe.reduced_shape)} taps{epilogue}",
            )
        if isinstance(recipe, ContractionRecipe) and recipe.levels:
            return "contraction: chunked (im2col)", f"x{recipe.x_matrix} y{recipe.y_matrix}"
        if isinstance(recipe, ContractionRecipe):
            return "contraction: matmul", f"x{recipe.x_matrix} y{recipe.y_matrix}"
        return "contraction: ?", ""
    module = type(kernel).__module__ or ""
    name = type(kernel).__name__
    if module.startswith("aten2prims.executor.") and name not in ("function", "ufunc"):
        return f"fused: {module.rsplit('.', 1)[-1]}", name
    if step.elementwise:
        return "elementwise", op
    if op in _COPIES:
        return "copy", op
    if op in _REDUCTIONS:
        return "reduction", op
    return "other", op


def instrumented(plan: Plan) -> tuple[Callable[..., None], list[float]]:
    """The plan's generated function with a CPU-clock reading around each step's statements;
    the seconds per step accumulate into the returned list."""
    run = plan.run
    assert isinstance(run, CompiledRun)  # what codegen makes
    namespace = dict(run.function.__globals__)
    totals = [0.0] * len(plan.steps)
    namespace["_clock"] = time.process_time
    namespace["_totals"] = totals
    lines = run.source.splitlines()
    out = [lines[0]]
    at_line = run.step_at_line
    previous = -1
    for number, line in enumerate(lines[1:], start=2):  # source line 1 is the def
        step = at_line[number] if number < len(at_line) else -1
        if step != previous and previous >= 0:
            out.append(f"    _totals[{previous}] += _clock() - _t")
        if step != previous and step >= 0:
            out.append("    _t = _clock()")
        out.append(line)
        previous = step
    if previous >= 0:
        out.append(f"    _totals[{previous}] += _clock() - _t")
    exec(compile("\n".join(out) + "\n", "<profiled plan>", "exec"), namespace)
    return namespace["run"], totals


def call_plan(plan: Plan, function: Callable[..., None], inputs: list[np.ndarray]) -> None:
    """One call of a plan's function as `execute` makes it (one thread)."""
    values = plan.initial_values.copy()
    names = [gi.name for gi in plan.inputs if gi.kind is InputKind.USER_INPUT]
    for name, array in zip(names, inputs):
        values[plan.input_slots[name]] = array
    arena = plan.arenas.take()
    try:
        with np.errstate(all="ignore"), running_with(1):
            function(values, None, arena)
    finally:
        plan.arenas.give(arena)


def _cpu(function: Callable[[], Any]) -> float:
    start = time.process_time()
    function()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--scale", default="full", choices=("full", "quick", "tiny"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--torch-ops", action="store_true")
    options = parser.parse_args()
    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import suite  # benchmarks/ is not a package

    model, inputs = suite.build(options.model, options.scale)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "model.pt2"
        program = torch.export.export(model, inputs).run_decompositions()
        torch.export.save(program, str(path))
        graph = aten2prims.load(path)
    lowered = aten2prims.lower(graph)
    plan = plan_for(lowered)
    arrays = [t.numpy() for t in inputs]

    def ours() -> Any:
        return aten2prims.execute(lowered, arrays, threads=1)

    def eager() -> Any:
        with torch.no_grad():
            return model(*inputs)

    ours()
    eager()
    function, totals = instrumented(plan)
    per_step: list[list[float]] = [[] for _ in plan.steps]
    ours_times, eager_times, profiled = [], [], []
    for _ in range(options.repeats):
        ours_times.append(_cpu(ours))
        eager_times.append(_cpu(eager))
        totals[:] = [0.0] * len(totals)
        profiled.append(_cpu(lambda: call_plan(plan, function, arrays)))
        for index, seconds in enumerate(totals):
            per_step[index].append(seconds)
    medians = [statistics.median(times) for times in per_step]
    ours_ms = statistics.median(ours_times) * 1e3
    eager_ms = statistics.median(eager_times) * 1e3
    print(
        f"{options.model} ({options.scale}): {len(lowered.nodes)} prims, {len(plan.steps)} steps; "
        f"median CPU ms of {options.repeats}: ours {ours_ms:.1f}, eager {eager_ms:.1f}, "
        f"ours/eager {ours_ms / eager_ms:.2f}; instrumented {statistics.median(profiled) * 1e3:.1f} "
        f"(steps sum {sum(medians) * 1e3:.1f})"
    )
    by_kind: dict[str, float] = collections.defaultdict(float)
    by_op: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0])
    kinds = [step_kind(step) for step in plan.steps]
    for (kind, detail), seconds, step in zip(kinds, medians, plan.steps):
        by_kind[kind] += seconds
        key = (kind, detail if kind.startswith("fused") else step.node.op.removeprefix("prims."))
        if kind.startswith("contraction"):
            key = (kind, "")
        by_op[key][0] += seconds
        by_op[key][1] += 1
    total = sum(medians)
    print(f"\n{'kind':<36} {'ms':>8} {'share':>6}")
    for kind, seconds in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"{kind:<36} {seconds * 1e3:8.2f} {seconds / total:6.1%}")
    print(f"\n{'kind / op':<56} {'steps':>5} {'ms':>8}")
    for (kind, op), (seconds, count) in sorted(by_op.items(), key=lambda item: -item[1][0])[
        : options.top
    ]:
        print(f"{kind + ' / ' + op:<56} {count:5d} {seconds * 1e3:8.2f}")
    print(f"\nslowest steps:\n{'#':>5} {'kind':<32} {'ms':>7}  result shape, detail")
    order = sorted(range(len(medians)), key=lambda i: -medians[i])[: options.top]
    for index in order:
        step = plan.steps[index]
        kind, detail = kinds[index]
        shape = getattr(step.out_metas[0], "shape", ()) if step.out_metas else ()
        print(
            f"{index:5d} {kind:<32} {medians[index] * 1e3:7.2f}  {list(shape)} "
            f"{detail or step.node.op}"
        )
    if options.torch_ops:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            eager()
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=options.top))


if __name__ == "__main__":
    main()
