"""Where a call's time goes in the transformer-family models of the suite, plan step by plan step,
next to torch eager's operators.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/transformer_profile.py \
        [--only REGEX] [--scale full|quick|tiny] [--repeats N] [--top N] [--steps N] [--dir DIR]
        [--no-eager] [--json FILE]

For each model (default: DeiT-tiny, MobileViT-S, BERT, GPT-2, Llama and the zoo's transformer of
`benchmarks/suite.py`), exported and saved as `benchmarks/models.py` does (`--dir` keeps the
archives and inputs, under a subdirectory per scale, and reuses them when they are there), two
fresh processes at one thread:

- **ours** (no torch imported): the `.pt2` loaded, lowered and planned; after warm-up calls,
  every call of the plan runs an instrumented copy of its generated function that reads the
  thread's CPU time around each step. Printed: the median CPU time of a whole call (`execute`,
  uninstrumented), the median of the steps' sum, and the steps grouped by kind (the prim, or
  the fused kernel and the prims it covers) and by the aten op they were lowered from, each
  with its median CPU time per call and its share of the steps' sum (`--steps N`: also the N
  slowest single steps, with their result's meta);
- **eager**: the model called under `torch.no_grad()`; the median CPU time of a call, then
  torch's profiler over `--repeats` calls: the operators by self time per call. The profiler
  reports wall time, which waiting for a core inflates on a loaded machine: compare shares,
  not milliseconds, with ours.

Reading the thread's CPU time costs about a microsecond per step, which the steps' sum
includes; the whole-call time does not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("deit_tiny", "mobilevit_s", "bert", "gpt2", "llama", "transformer")
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "ATEN2PRIMS_NUM_THREADS",
)
WARMUP = 3
SLOWEST = 40  # single steps listed per model (--steps prints as many of them as asked)


def _models_module() -> Any:
    """benchmarks/models.py (its `prepare` exports and saves a model as the benchmark does)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "benchmark_models", ROOT / "benchmarks" / "models.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmark_models"] = module
    spec.loader.exec_module(module)
    return module


# -- ours ------------------------------------------------------------------------------------------


def step_kind(step: Any) -> str:
    """A step's kind: its prim, or its fused kernel and the prims the group covers."""
    ops = [node.op.removeprefix("prims.") for node in step.nodes]
    if len(step.nodes) == 1:
        return ops[0] + (" (in place)" if step.out_argument is not None else "")
    kernel = step.kernel
    name = getattr(kernel, "__name__", type(kernel).__name__)
    return f"{name}[{'+'.join(sorted(set(ops)))}]"


def step_origin(step: Any) -> str:
    """The aten op most of a step's nodes were lowered from."""
    counts: dict[str, int] = defaultdict(int)
    for node in step.nodes:
        counts[node.provenance.origin_op or "(no provenance)"] += 1
    return max(counts, key=lambda origin: counts[origin])


class TimedRun:
    """A plan's generated function with the thread's CPU time read around each step; each call
    appends one list of per-step nanoseconds to `calls`."""

    def __init__(self, compiled: Any, step_count: int) -> None:
        self.compiled = compiled
        self.step_count = step_count
        self.calls: list[list[int]] = []
        lines = compiled.source.splitlines()
        at_line = compiled.step_at_line
        body = ["def run(v, rng, o, _clock, _times):", "    _start = _clock()"]
        for number, line in enumerate(lines[1:], start=2):
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
        self.calls.append(times)

    def failed_step(self, traceback: Any) -> int | None:
        return None


def profile_ours(path: Path, inputs: list[Any], repeats: int) -> dict[str, Any]:
    import aten2prims
    from aten2prims.executor import plan_for

    lowered = aten2prims.lower(aten2prims.load(path))
    for _ in range(WARMUP):
        aten2prims.execute(lowered, inputs, threads=1)
    calls = []
    for _ in range(repeats):
        start = time.process_time()
        aten2prims.execute(lowered, inputs, threads=1)
        calls.append(time.process_time() - start)
    plan = plan_for(lowered)
    compiled = plan.run
    timed = TimedRun(compiled, len(plan.steps))
    plan.run = timed
    try:
        aten2prims.execute(lowered, inputs, threads=1)
        timed.calls.clear()
        for _ in range(repeats):
            aten2prims.execute(lowered, inputs, threads=1)
    finally:
        plan.run = compiled
    per_step = [
        statistics.median(call[i] for call in timed.calls) / 1e9 for i in range(len(plan.steps))
    ]
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_origin: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for step, seconds in zip(plan.steps, per_step):
        for table, key in ((by_kind, step_kind(step)), (by_origin, step_origin(step))):
            table[key][0] += seconds
            table[key][1] += 1
    slowest = sorted(range(len(plan.steps)), key=lambda i: -per_step[i])[:SLOWEST]
    return {
        "slowest": [
            [
                per_step[i],
                step_kind(plan.steps[i]),
                step_origin(plan.steps[i]),
                str(plan.steps[i].node.results[0].meta) if plan.steps[i].node.results else "",
            ]
            for i in slowest
        ],
        "call": statistics.median(calls),
        "steps_sum": statistics.median(sum(call) for call in timed.calls) / 1e9,
        "steps": len(plan.steps),
        "by_kind": dict(by_kind),
        "by_origin": dict(by_origin),
    }


# -- torch eager ---------------------------------------------------------------------------------


def profile_eager(name: str, scale: str, repeats: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    suite = _models_module()._suite()
    model, inputs = suite.build(name, scale)
    with torch.no_grad():
        for _ in range(WARMUP):
            model(*inputs)
        calls = []
        for _ in range(repeats):
            start = time.process_time()
            model(*inputs)
            calls.append(time.process_time() - start)
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            for _ in range(repeats):
                model(*inputs)
    by_op: dict[str, list[float]] = {}
    for event in profiler.key_averages():
        by_op[event.key] = [event.self_cpu_time_total / 1e6 / repeats, event.count / repeats]
    return {"call": statistics.median(calls), "by_op": by_op}


# -- the report ----------------------------------------------------------------------------------------


def _table(title: str, rows: dict[str, list[float]], total: float, top: int) -> list[str]:
    lines = [f"  {title}"]
    ranked = sorted(rows.items(), key=lambda item: -item[1][0])
    for key, (seconds, count) in ranked[:top]:
        share = seconds / total if total else 0.0
        lines.append(f"    {seconds * 1e3:8.2f} ms {share:6.1%}  x{count:<5g} {key}")
    rest = sum(seconds for _, (seconds, _) in ranked[top:])
    if rest:
        lines.append(
            f"    {rest * 1e3:8.2f} ms {rest / total:6.1%}         (the other {len(ranked) - top})"
        )
    return lines


def report(
    name: str, ours: dict[str, Any] | None, eager: dict[str, Any] | None, top: int, steps: int
) -> str:
    lines = [f"== {name}"]
    if ours is not None:
        ratio = f", ours / eager {ours['call'] / eager['call']:.2f}" if eager else ""
        lines.append(
            f"  ours: call {ours['call'] * 1e3:.1f} ms CPU (median), steps' sum "
            f"{ours['steps_sum'] * 1e3:.1f} ms over {ours['steps']} steps{ratio}"
        )
        lines += _table("by kind", ours["by_kind"], ours["steps_sum"], top)
        lines += _table("by aten op", ours["by_origin"], ours["steps_sum"], top)
        if steps:
            lines.append("  slowest steps")
            for seconds, kind, origin, meta in ours["slowest"][:steps]:
                lines.append(f"    {seconds * 1e3:8.3f} ms  {kind}  <- {origin}  {meta}")
    if eager is not None:
        total = sum(seconds for seconds, _ in eager["by_op"].values())
        lines.append(
            f"  eager: call {eager['call'] * 1e3:.1f} ms CPU (median); profiler self time "
            f"{total * 1e3:.1f} ms (wall)"
        )
        lines += _table("by operator (self time)", eager["by_op"], total, top)
    return "\n".join(lines)


def _worker(options: argparse.Namespace) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    directory = Path(options.dir)
    if options.worker == "ours":
        import numpy as np

        with np.load(directory / f"{options.model}.npz") as arrays:
            count = sum(1 for key in arrays.files if key.startswith("input_"))
            inputs = [arrays[f"input_{i}"] for i in range(count)]
        result = profile_ours(directory / f"{options.model}.pt2", inputs, options.repeats)
        result["torch_imported"] = "torch" in sys.modules
        return result
    return profile_eager(options.model, options.scale, options.repeats)


def _spawn(runtime: str, name: str, directory: Path, options: argparse.Namespace) -> Any:
    environment = dict(os.environ)
    for variable in THREAD_VARIABLES:
        environment[variable] = "1"
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [environment.get("PYTHONPATH")])]
    )
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        runtime,
        "--model",
        name,
        "--scale",
        options.scale,
        "--dir",
        str(directory),
        "--repeats",
        str(options.repeats),
    ]
    completed = subprocess.run(
        command, env=environment, capture_output=True, text=True, check=False
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        tail = completed.stderr.strip().splitlines()[-3:] or ["(no output)"]
        print(f"  {runtime} failed (exit {completed.returncode}): {' | '.join(tail)}", flush=True)
        return None
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="regex over the model names")
    parser.add_argument("--scale", choices=("full", "quick", "tiny"), default="full")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--top", type=int, default=12, help="rows per table")
    parser.add_argument(
        "--steps", type=int, default=0, help=f"also list the slowest steps (at most {SLOWEST})"
    )
    parser.add_argument("--dir", default=None, help="keep (and reuse) the archives here")
    parser.add_argument("--no-eager", action="store_true", help="profile ours only")
    parser.add_argument("--json", default=None, help="also save the profiles to this file")
    parser.add_argument("--worker", choices=("ours", "eager"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        print(json.dumps(_worker(options)))
        return 0
    names = [name for name in MODELS if not options.only or re.search(options.only, name)]
    temporary = None
    if options.dir is None:
        temporary = tempfile.TemporaryDirectory()
        directory = Path(temporary.name)
    else:
        directory = Path(options.dir) / options.scale
        directory.mkdir(parents=True, exist_ok=True)
    saved: dict[str, Any] = {}
    try:
        models = None
        for name in names:
            if not (directory / f"{name}.pt2").exists() or not (directory / f"{name}.npz").exists():
                if models is None:
                    warnings.filterwarnings("ignore")
                    models = _models_module()
                models.prepare(name, options.scale, directory, ort=False)
            ours = _spawn("ours", name, directory, options)
            eager = None if options.no_eager else _spawn("eager", name, directory, options)
            saved[name] = {"ours": ours, "eager": eager}
            print(report(name, ours, eager, options.top, options.steps), flush=True)
    finally:
        if temporary is not None:
            temporary.cleanup()
    if options.json:
        Path(options.json).write_text(json.dumps(saved, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
