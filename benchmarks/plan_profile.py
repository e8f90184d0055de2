"""Where a call's time goes in our executor, plan step by plan step, next to torch eager's.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/plan_profile.py \\
        [--only REGEX | --model NAME] [--scale full|quick|tiny] [--repeats N] [--warmup N]
        [--top N] [--steps N] [--dir DIR] [--no-eager] [--torch-ops] [--json FILE]

For each model of the suite (`benchmarks/suite.py`; `--only` is a regex over its model names,
`--model` one name, default all of them), exported and saved as `benchmarks/models.py` does
(`--dir` keeps the archives and inputs, under a subdirectory per scale, and reuses them when they
are there), two fresh processes at one thread (started by `models.run_worker`):

- **ours** (no torch imported): the `.pt2` loaded, lowered and planned; after warm-up calls,
  the median CPU time of an uninstrumented call (`execute`), then calls of the plan through an
  instrumented copy of its generated function that reads the thread's CPU time at each step's
  end (and around each member of a segment, which the function runs as one step). Every step
  is filed under a kind (a convolution or matrix product by how the contraction engine runs
  it, depthwise products, another fused kernel, an elementwise ufunc, a copy, a reduction, a
  gather or scatter, ...) and an op (its prim, or its fused kernel and the prims
  it covers). The report gives, with each one's median CPU time per call and its share of the
  steps' sum, the steps grouped by kind, by (kind, op) and by the aten op they were lowered
  from, then the `--steps N` slowest single steps (default 10) with their result's meta;
- **eager**: the model called under `torch.no_grad()`; the median CPU time of a call, then
  torch's profiler over `--repeats` calls: the operators by self time per call (`--torch-ops`:
  also the profiler's own table). The profiler reports wall time, which waiting for a core
  inflates on a loaded machine: compare shares, not milliseconds, with ours.

Reading the thread's CPU time costs about a microsecond per step, which the steps' sum includes;
the whole-call time does not.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# benchmarks/ is not a package: its modules import each other by file name. (This file is not
# named profile.py: with benchmarks/ on sys.path that would shadow the standard library's
# `profile`, which cProfile imports, and torch imports cProfile while building some models.)
sys.path.insert(0, str(Path(__file__).resolve().parent))

import models

SLOWEST = 40  # single steps kept per model (--steps prints as many of them as asked)
# Views and broadcasts that are steps of their own materialize their result: copies too.
COPIES = {"clone", "copy_strided", "reshape", "collapse", "cat", "as_strided_scatter", "as_strided"}
COPIES |= {"broadcast_in_dim", "expand"}
REDUCTIONS = {"sum", "amax", "amin", "prod", "var", "argmax", "argmin", "any", "all"}
GATHERS = ("gather", "scatter", "take", "index")  # substrings of the indexing prims' names


# -- ours ------------------------------------------------------------------------------------------


def step_op(step: Any) -> str:
    """A step's op: its prim, or its fused kernel and the prims the group covers."""
    ops = [node.op.removeprefix("prims.") for node in step.nodes]
    if len(step.nodes) == 1:
        return ops[0] + (" (in place)" if step.out_argument is not None else "")
    kernel = step.kernel
    name = getattr(kernel, "__name__", type(kernel).__name__)
    return f"{name}[{'+'.join(sorted(set(ops)))}]"


def step_kind(step: Any, ran: Any = None) -> tuple[str, str]:
    """(kind, detail) of a step: the kind groups the report; the detail says, for a
    contraction, how the engine runs it (operand matrices, or taps of depthwise products).
    `ran`: the kernel that ran it, when not its own (a segment member's kernel for its rows)."""
    from aten2prims.executor.contraction import ContractionRecipe
    from aten2prims.executor.contraction_fusion import ContractionKernel
    from aten2prims.executor.multiply_accumulate import MultiplyAccumulateRecipe

    kernel = step.kernel if ran is None else ran
    while hasattr(kernel, "kernel"):  # threads.Parted, ReducedParted, unbuffered.Unbuffered
        kernel = kernel.kernel
    # A depthwise product with its padding (padded_products.PaddedContraction) holds its own
    kernel = getattr(kernel, "contraction", kernel)
    op = step.node.op.removeprefix("prims.")
    if isinstance(kernel, ContractionKernel):
        recipes = kernel.recipes()
        recipe = recipes[0] if recipes else None
        epilogue = f" +{sum(1 for e in kernel.epilogue if e.ufunc is not None)} epilogue"
        if isinstance(recipe, MultiplyAccumulateRecipe):
            return "contraction: depthwise products", f"{math.prod(recipe.reduced_shape)} taps"
        if isinstance(recipe, ContractionRecipe):
            engine = "chunked (im2col)" if recipe.levels else "matmul"
            return f"contraction: {engine}", f"x{recipe.x_matrix} y{recipe.y_matrix}{epilogue}"
        return "contraction: ?", ""
    if len(step.nodes) == 1 and op in REDUCTIONS:  # its kernel may be a plan's (row_sums.py)
        return "reduction", ""
    module = type(kernel).__module__ or ""
    if module.startswith("aten2prims.executor.") and type(kernel).__name__ not in (
        "function",
        "ufunc",
    ):
        return f"fused: {module.rsplit('.', 1)[-1]}", ""
    if step.elementwise:
        return "elementwise", ""
    if op in COPIES:
        return "copy", ""
    if op in REDUCTIONS:
        return "reduction", ""
    if any(part in op for part in GATHERS):
        return "gather / scatter", ""
    if len(step.nodes) > 1:  # a group fused by a kernel outside the executor's modules
        return "fused: other", ""
    return "other", ""


def step_origin(step: Any) -> str:
    """The aten op most of a step's nodes were lowered from."""
    counts: dict[str, int] = defaultdict(int)
    for node in step.nodes:
        counts[node.provenance.origin_op or "(no provenance)"] += 1
    return max(counts, key=lambda origin: counts[origin])


class TimedRun:
    """A plan's generated function with the thread's CPU time read at each step's end; each call
    appends one list of per-step nanoseconds to `calls`. It stands in for `plan.run`, so the
    executor's own call (inputs, arena, error state, one thread) is what gets timed."""

    def __init__(self, compiled: Any, step_count: int, members: MemberTimes | None = None):
        self.step_count = step_count
        self.members = members
        self.calls: list[list[int]] = []
        lines = compiled.source.splitlines()
        at_line = compiled.step_at_line
        body = ["def run(v, rng, o, _clock, _times):", "    _start = _clock()"]
        for number, line in enumerate(lines[1:], start=2):  # source line 1 is the def
            body.append(line)
            step = at_line[number]
            following = at_line[number + 1] if number + 1 < len(at_line) else None
            if step >= 0 and following != step:
                body.append(f"    _end = _clock(); _times[{step}] += _end - _start; _start = _end")
        namespace = dict(compiled.function.__globals__)
        exec(compile("\n".join(body) + "\n", "<timed plan>", "exec"), namespace)
        self.function: Callable[..., None] = namespace["run"]

    def __call__(self, values: list[Any], rng: Any, arena: tuple[Any, ...] = ()) -> None:
        times = [0] * self.step_count
        self.function(values, rng, arena, time.thread_time_ns, times)
        if self.members is not None:
            self.members.move(times)
        self.calls.append(times)

    def failed_step(self, traceback: Any) -> int | None:
        return None


class MemberTimes:
    """A segment (`segments.py`) is one step of the generated function, timed as its first
    member: while this is entered, its parts read the thread's CPU time around each member, so
    `move` can give every member its own time (the rest of the segment's time, its views and
    hand-out, stays with the first member). One thread only: parts then run on the caller's."""

    def __init__(self, steps: list[Any], compiled: Any) -> None:
        from aten2prims.executor.segments import SegmentKernel

        number = {id(step): index for index, step in enumerate(steps)}
        self.origin: dict[int, int] = {}  # a member's step number -> its segment's
        self.segment_members: list[tuple[int, Any]] = []
        for kernel in compiled.function.__globals__.values():
            if isinstance(kernel, SegmentKernel):
                numbers = [number[id(member.step)] for member in kernel.members]
                self.origin.update((member, numbers[0]) for member in numbers)
                self.segment_members.extend(zip(numbers, kernel.members))
        self.number = number
        self.spent: dict[int, int] = defaultdict(int)  # a member's step number -> ns, this call

    def __enter__(self) -> MemberTimes:
        from aten2prims.executor import segments

        self.original = original = segments._Part.__call__
        spent, number = self.spent, self.number

        def timed(part: Any) -> None:
            work = part.work
            try:
                for item in work:  # one member at a time, through the part's own code
                    part.work = [item]
                    start = time.thread_time_ns()
                    original(part)
                    spent[number[id(item[0].step)]] += time.thread_time_ns() - start
            finally:
                part.work = work

        # (restored on exit)
        segments._Part.__call__ = timed  # type: ignore[method-assign,assignment]  # a patch
        return self

    def __exit__(self, *exc: object) -> None:
        from aten2prims.executor import segments

        segments._Part.__call__ = self.original  # type: ignore[method-assign]  # (enter's)

    def row_kernels(self) -> dict[int, Any]:
        """The kernels members of a row count (a product's rows) ran, by step number: a step's
        own kernel then stays unplanned."""
        return {
            number: next(iter(member.row_kernels.values()))
            for number, member in self.segment_members
            if member.row_kernels
        }

    def move(self, times: list[int]) -> None:
        """Moves this call's member times from their segment's step to their own, and starts
        the next call's."""
        for member, ns in self.spent.items():
            times[self.origin[member]] -= ns
            times[member] += ns
        self.spent.clear()


def _grouped(rows: list[tuple[str, float]]) -> dict[str, list[float]]:
    """key -> [summed seconds, step count]."""
    table: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for key, seconds in rows:
        table[key][0] += seconds
        table[key][1] += 1
    return dict(table)


def profile_ours(path: Path, inputs: list[Any], repeats: int, warmup: int) -> dict[str, Any]:
    import aten2prims
    from aten2prims.executor import plan_for

    lowered = aten2prims.lower(aten2prims.load(path))
    for _ in range(warmup):
        aten2prims.execute(lowered, inputs, threads=1)
    calls = []
    for _ in range(repeats):
        start = time.process_time()
        aten2prims.execute(lowered, inputs, threads=1)
        calls.append(time.process_time() - start)
    plan = plan_for(lowered)
    compiled = plan.run
    members = MemberTimes(plan.steps, compiled)
    timed = TimedRun(compiled, len(plan.steps), members)
    plan.run = timed
    instrumented = []
    try:
        with members:
            aten2prims.execute(lowered, inputs, threads=1)
            timed.calls.clear()
            for _ in range(repeats):
                start = time.process_time()
                aten2prims.execute(lowered, inputs, threads=1)
                instrumented.append(time.process_time() - start)
    finally:
        plan.run = compiled
    per_step = [
        statistics.median(call[i] for call in timed.calls) / 1e9 for i in range(len(plan.steps))
    ]
    ran = members.row_kernels()
    kinds = [step_kind(step, ran.get(number)) for number, step in enumerate(plan.steps)]
    ops = [step_op(step) for step in plan.steps]
    origins = [step_origin(step) for step in plan.steps]
    slowest = sorted(range(len(plan.steps)), key=lambda i: -per_step[i])[:SLOWEST]
    return {
        "prims": len(lowered.nodes),
        "steps": len(plan.steps),
        "call": statistics.median(calls),
        "instrumented": statistics.median(instrumented),
        "steps_sum": statistics.median(sum(call) for call in timed.calls) / 1e9,
        "by_kind": _grouped([(kind, s) for (kind, _), s in zip(kinds, per_step)]),
        "by_kind_op": _grouped(
            [(f"{kind} / {op}", s) for (kind, _), op, s in zip(kinds, ops, per_step)]
        ),
        "by_origin": _grouped(list(zip(origins, per_step))),
        "slowest": [
            {
                "index": i,
                "seconds": per_step[i],
                "kind": kinds[i][0],
                "op": ops[i],
                "detail": kinds[i][1],
                "origin": origins[i],
                "meta": str(plan.steps[i].node.results[0].meta)
                if plan.steps[i].node.results
                else "",
            }
            for i in slowest
        ],
    }


# -- torch eager ---------------------------------------------------------------------------------


def profile_eager(name: str, scale: str, repeats: int, warmup: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    model, inputs = models.suite_module().build(name, scale)
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        calls = []
        for _ in range(repeats):
            start = time.process_time()
            model(*inputs)
            calls.append(time.process_time() - start)
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            for _ in range(repeats):
                model(*inputs)
    averages = profiler.key_averages()
    by_op = {
        event.key: [event.self_cpu_time_total / 1e6 / repeats, event.count / repeats]
        for event in averages
    }
    # The profiler's own table too (--torch-ops prints it): the worker is not told the options.
    table = averages.table(sort_by="self_cpu_time_total", row_limit=SLOWEST)
    return {"call": statistics.median(calls), "by_op": by_op, "table": table}


# -- the report ----------------------------------------------------------------------------------------


def _table(title: str, rows: dict[str, list[float]], total: float, top: int) -> list[str]:
    lines = [f"  {title}"]
    ranked = sorted(rows.items(), key=lambda item: -item[1][0])
    for key, (seconds, count) in ranked[:top]:
        share = seconds / total if total else 0.0
        lines.append(f"    {seconds * 1e3:8.2f} ms {share:6.1%}  x{count:<5g} {key}")
    rest = sum(seconds for _, (seconds, _) in ranked[top:])
    if rest:
        share = rest / total if total else 0.0
        lines.append(
            f"    {rest * 1e3:8.2f} ms {share:6.1%}         (the other {len(ranked) - top})"
        )
    return lines


def report(
    name: str,
    ours: dict[str, Any] | None,
    eager: dict[str, Any] | None,
    top: int,
    steps: int,
    torch_table: bool = False,
) -> str:
    lines = [f"== {name}"]
    if ours is not None:
        ratio = f", ours / eager {ours['call'] / eager['call']:.2f}" if eager else ""
        lines.append(
            f"  ours: {ours['prims']} prims, {ours['steps']} steps; call "
            f"{ours['call'] * 1e3:.1f} ms CPU (median){ratio}; instrumented call "
            f"{ours['instrumented'] * 1e3:.1f} ms, steps' sum {ours['steps_sum'] * 1e3:.1f} ms"
        )
        lines += _table("by kind", ours["by_kind"], ours["steps_sum"], top)
        lines += _table("by kind / op", ours["by_kind_op"], ours["steps_sum"], top)
        lines += _table("by aten op", ours["by_origin"], ours["steps_sum"], top)
        if steps:
            lines.append("  slowest steps")
            for step in ours["slowest"][:steps]:
                detail = f" ({step['detail']})" if step["detail"] else ""
                lines.append(
                    f"    {step['seconds'] * 1e3:8.3f} ms  #{step['index']:<5d} {step['kind']} / "
                    f"{step['op']}{detail}  <- {step['origin']}  {step['meta']}"
                )
    if eager is not None:
        total = sum(seconds for seconds, _ in eager["by_op"].values())
        lines.append(
            f"  eager: call {eager['call'] * 1e3:.1f} ms CPU (median); profiler self time "
            f"{total * 1e3:.1f} ms (wall)"
        )
        lines += _table("by operator (self time)", eager["by_op"], total, top)
        if torch_table:
            lines.append(eager["table"])
    return "\n".join(lines)


def _worker(options: argparse.Namespace) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    directory = Path(options.dir)
    if options.worker == "ours":
        import numpy as np

        with np.load(directory / f"{options.model}.npz") as arrays:
            count = sum(1 for key in arrays.files if key.startswith("input_"))
            inputs = [arrays[f"input_{i}"] for i in range(count)]
        result = profile_ours(
            directory / f"{options.model}.pt2", inputs, options.repeats, options.warmup
        )
        result["torch_imported"] = "torch" in sys.modules
        return result
    return profile_eager(
        options.model,
        options.scale,
        options.repeats,
        options.warmup,
    )


def _spawn(runtime: str, name: str, directory: Path, options: argparse.Namespace) -> Any:
    result = models.run_worker(runtime, name, 1, directory, options, Path(__file__).resolve())
    if "error" in result:
        print(f"  {runtime}: {result['error']}", flush=True)
        return None
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="regex over the suite's model names")
    parser.add_argument("--model", default=None, help="one model of the suite, by name")
    parser.add_argument("--scale", choices=("full", "quick", "tiny"), default="full")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up calls")
    parser.add_argument("--top", type=int, default=15, help="rows per table")
    parser.add_argument(
        "--steps", type=int, default=10, help=f"slowest single steps listed (at most {SLOWEST})"
    )
    parser.add_argument("--dir", default=None, help="keep (and reuse) the archives here")
    parser.add_argument("--no-eager", action="store_true", help="profile ours only")
    parser.add_argument(
        "--torch-ops", action="store_true", help="also print torch's profiler table for eager"
    )
    parser.add_argument("--json", default=None, help="also save the profiles to this file")
    parser.add_argument("--worker", choices=("ours", "eager"), help=argparse.SUPPRESS)
    parser.add_argument("--threads", default="1", help=argparse.SUPPRESS)  # run_worker passes it
    options = parser.parse_args(argv)
    if options.worker:
        print(json.dumps(_worker(options)))
        return 0
    warnings.filterwarnings("ignore")
    suite = models.suite_module()
    names = [
        spec.name
        for spec in suite.SPECS
        if (options.model is None or spec.name == options.model)
        and (options.only is None or re.search(options.only, spec.name))
    ]
    if options.model is not None and options.model not in suite.BY_NAME:
        parser.error(f"no model {options.model!r} in the suite: {', '.join(suite.BY_NAME)}")
    if options.model is not None and not names:  # a model outside SPECS, e.g. resnet18
        names = [options.model]
    temporary = None
    if options.dir is None:
        temporary = tempfile.TemporaryDirectory()
        directory = Path(temporary.name)
    else:
        directory = Path(options.dir) / options.scale
        directory.mkdir(parents=True, exist_ok=True)
    saved: dict[str, Any] = {}
    try:
        for name in names:
            if not (directory / f"{name}.pt2").exists() or not (directory / f"{name}.npz").exists():
                models.prepare(name, options.scale, directory, ort=False)
            ours = _spawn("ours", name, directory, options)
            eager = None if options.no_eager else _spawn("eager", name, directory, options)
            saved[name] = {"ours": ours, "eager": eager}
            print(
                report(name, ours, eager, options.top, options.steps, options.torch_ops), flush=True
            )
    finally:
        if temporary is not None:
            temporary.cleanup()
    if options.json:
        Path(options.json).write_text(json.dumps(saved, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
