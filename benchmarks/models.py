"""Whole-model speed, first-call time and peak memory: our NumPy executor against torch eager,
torch.compile (inductor) and ONNX Runtime, on the suite of `benchmarks/suite.py`.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        .venv/bin/python benchmarks/models.py [--quick] [--only REGEX] [--threads 1,2]
                                              [--runtimes ours,eager,inductor,ort]
                                              [--repeats 5] [--rounds 3] [--warmup 3]
                                              [--first-call-processes 5] [--json FILE]
                                              [--no-first-call] [--clock wall|cpu]
    .venv/bin/python benchmarks/models.py --from-json FILE [--from-json FILE ...] [--clock cpu]

(`--from-json` prints the tables of saved runs, merged: e.g. one run without inductor and one of
inductor alone. `--clock cpu` shows process CPU times instead of wall times.)

The parent process builds each model (seeded random weights, from its config: no downloads),
exports it once with `torch.export` and saves it with `torch.export.save` to a temporary
directory (the archive we run), exports it to ONNX for ONNX Runtime, and records torch eager's
outputs and a float64 run of the same model. Then it starts one fresh process per (model,
runtime, thread count), so each runtime has the process to itself (one (model, thread count) at
a time, its runtimes' processes started one after another):

- `ours`: `aten2prims.load` of the archive, `aten2prims.lower`, the plan, `aten2prims.execute`
  (no torch imported);
- `eager`: the model built from its config in that process, called under `torch.no_grad()`;
- `inductor`: the same model through `torch.compile` (default mode; inductor's cache is a fresh
  directory per run, shared by that run's processes);
- `ort`: an `onnxruntime.InferenceSession` of the ONNX file, CPU provider, sequential execution
  (no torch imported).

Thread count N: OMP/OPENBLAS/MKL_NUM_THREADS=N in the process's environment (read when NumPy and
torch load their libraries), `torch.set_num_threads(N)`, ONNX Runtime's `intra_op_num_threads=N`;
ours passes `threads=N` to `execute` when it takes it (its BLAS threads otherwise).

Each process: the **first call** (from the artifact to the first result: ours load + lower + plan
+ run; ORT session creation + run; inductor compilation + run; eager the first run of the built
module), then the correctness check of that first result (ours: the harness's model rule against
torch eager and the float64 run; a row whose check fails is aborted with the reason; the other
runtimes are checked more loosely and flagged) and `--warmup` more calls. Then the timed calls,
in `--rounds` rounds: in each round every runtime's process makes `--repeats` timed calls in
turn while the others wait (idle; the order rotates by one each round), so a slow spell of the
machine (another guest on the host taking CPU time) falls on every runtime alike instead of on
whichever ran during it; the median wall time over every round's calls is reported, with each
round's median beside it. **Peak memory**: the process's peak resident set above its
resident set right after its imports (the high-water mark VmHWM, i.e. `ru_maxrss`, before the
check, and again from a reset just after it, so the check's own arrays are not counted): model
weights, compilation, plans and working buffers all count, identically for every runtime.

Output: per thread count, a table of median times and ratios (ours / the other runtime) and one
of first-call times and peak memory; geomeans per column and thread count next to the targets;
the first call of a ResNet-18-sized model split into load, lower and plan (the medians over
`--first-call-processes` fresh processes, one first call each). `--quick` runs the same models
on small inputs with fewer calls, one round and one first-call process (a code-path check, not
a measurement).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNTIMES = ("ours", "eager", "inductor", "ort")
LABELS = {"ours": "ours", "eager": "eager", "inductor": "inductor", "ort": "ORT"}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# Set on some machines to force slow generic OpenBLAS kernels that users do not have.
SLOW_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
WORKER_TIMEOUT = 1800.0  # seconds, per message of a worker (a first call compiles)
# A worker's messages to the parent: the lines of its stdout that start with this.
REPLY_MARK = "@@models.py "
# Seconds of rest before each round of a runtime's timed calls: the threads another runtime
# leaves spinning after its calls (OpenMP's, ONNX Runtime's) go to sleep meanwhile.
ROUND_PAUSE = 0.1

# The targets (issue 14), printed next to the geomeans.
TARGET_EAGER_GEOMEAN = 0.8
TARGET_EAGER_MAX = 1.25
TARGET_INDUCTOR_GEOMEAN = 1.0
TARGET_ORT_GEOMEAN = 2.0
TARGET_FIRST_CALL = 0.100  # seconds: load + lower + plan of the ResNet-18-sized model
# The harness's model rule (tests/test_models.py): an output passes `compare` against torch
# eager with the float64 run as reference, or its largest error against the float64 run is
# within this factor of torch eager's own.
MODEL_ERROR_FACTOR = 2.0
# The other runtimes are only checked for gross errors (a wrong export): largest error against
# the float64 run within this factor of torch eager's own, or 1e-4 of the output's magnitude.
LOOSE_ERROR_FACTOR = 20.0


def suite_module() -> Any:
    """benchmarks/suite.py (torch imported: the parent and the torch workers only)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import suite  # benchmarks/ is not a package

    return suite


# -- the parent -------------------------------------------------------------------------------------


def available_runtimes() -> dict[str, str]:
    """Runtime -> "" when it can run here, else why not."""
    missing: dict[str, str] = {"ours": "", "eager": ""}
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("gcc")
    missing["inductor"] = "" if compiler else "no C++ compiler for inductor's CPU code"
    absent = [m for m in ("onnxruntime", "onnx", "onnxscript") if not importlib.util.find_spec(m)]
    missing["ort"] = f"{', '.join(absent)} not installed" if absent else ""
    return missing


def environment_lines() -> list[str]:
    import numpy as np
    import torch

    lines = [
        f"python {sys.version.split()[0]}, numpy {np.__version__}, torch {torch.__version__}, "
        f"{os.cpu_count()} cpu(s)"
    ]
    lines += slow_blas_lines()
    for variable in THREAD_VARIABLES:
        if variable in os.environ:
            lines.append(f"{variable}={os.environ[variable]} (each worker sets its own)")
    return lines + kernel_lines()


def slow_blas_lines() -> list[str]:
    """Whether the variables that force slow OpenBLAS kernels are set (no torch imported)."""
    lines = []
    for variable in SLOW_BLAS_VARIABLES:
        value = os.environ.get(variable)
        lines.append(
            f"{variable}: "
            + (
                "not set"
                if value is None
                else f"SET to {value!r} -- it forces slow OpenBLAS kernels; rerun under "
                "`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`"
            )
        )
    return lines


def kernel_lines() -> list[str]:
    """The CPU, and which kernels ours runs on it (prims/mkl.py and prims/openblas.py decide
    per process; the workers see the same environment and CPU)."""
    from prims import mkl

    model = next(
        (
            line.partition(":")[2].strip()
            for line in _cpuinfo().splitlines()
            if line.startswith("model name")
        ),
        "unknown model",
    )
    from prims import openblas

    if mkl.library() is not None:
        kernels = "MKL's for large products, depthwise products and erf, NumPy's otherwise"
    else:
        blas = openblas.library()
        kernels = f"NumPy's (MKL not used: {mkl.unavailable_reason}); " + (
            f"accumulating products through {blas.path.name} (ctypes)"
            if blas is not None
            else f"no OpenBLAS through ctypes: {openblas.unavailable_reason}"
        )
    return [f"cpu: {model} ({mkl.cpu_vendor() or 'vendor unknown'})", f"ours' kernels: {kernels}"]


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


def prepare(name: str, scale: str, directory: Path, ort: bool) -> dict[str, Any]:
    """Builds the model, saves `<name>.pt2`, `<name>.onnx` and `<name>.npz` (inputs, torch
    eager's outputs, the float64 run's); returns the preparation's facts."""
    import copy

    import numpy as np
    import torch
    from torch.utils._pytree import tree_leaves

    suite = suite_module()
    model, inputs = suite.build(name, scale)
    facts: dict[str, Any] = {"model": name, "input": suite.BY_NAME[name].shape(scale)}
    start = time.perf_counter()
    program = torch.export.export(model, inputs).run_decompositions()
    torch.export.save(program, str(directory / f"{name}.pt2"))
    facts["export"] = time.perf_counter() - start
    del program
    with torch.no_grad():
        expected = [t.numpy() for t in tree_leaves(model(*inputs))]
        wide = copy.deepcopy(model).double()
        reference = [
            t.numpy()
            for t in tree_leaves(
                wide(*(t.double() if t.is_floating_point() else t for t in inputs))
            )
        ]
        del wide
    arrays = {f"input_{i}": t.numpy() for i, t in enumerate(inputs)}
    arrays |= {f"expected_{i}": a for i, a in enumerate(expected)}
    arrays |= {f"reference_{i}": a for i, a in enumerate(reference)}
    np.savez(directory / f"{name}.npz", **arrays)
    if ort:
        start = time.perf_counter()
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                torch.onnx.export(model, inputs, str(directory / f"{name}.onnx"), dynamo=True)
            facts["onnx_export"] = time.perf_counter() - start
        except Exception as error:  # reported in the row; the other runtimes still run
            first_line = str(error).splitlines()[0] if str(error) else ""
            facts["onnx_error"] = f"ONNX export failed: {type(error).__name__}: {first_line}"[:300]
    return facts


def _worker_command(
    script: Path,
    runtime: str,
    name: str,
    threads: int,
    directory: Path,
    options: argparse.Namespace,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a worker process at `threads` threads."""
    environment = dict(os.environ)
    for variable in THREAD_VARIABLES:
        environment[variable] = str(threads)
    environment["TORCHINDUCTOR_CACHE_DIR"] = str(directory / "inductor-cache")
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [environment.get("PYTHONPATH")])]
    )
    command = [
        sys.executable,
        str(script),
        "--worker",
        runtime,
        "--model",
        name,
        "--scale",
        options.scale,
        "--threads",
        str(threads),
        "--dir",
        str(directory),
        "--repeats",
        str(options.repeats),
        "--warmup",
        str(options.warmup),
    ]
    return command, environment


def run_worker(
    runtime: str,
    name: str,
    threads: int,
    directory: Path,
    options: argparse.Namespace,
    script: Path,
) -> dict[str, Any]:
    """Runs `script --worker RUNTIME` (a script whose worker measures and ends on its own:
    `benchmarks/plan_profile.py`'s) in a fresh process at `threads` threads; its last line of
    output, as JSON."""
    command, environment = _worker_command(script, runtime, name, threads, directory, options)
    try:
        completed = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
            timeout=WORKER_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {WORKER_TIMEOUT:.0f} s"}
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        tail = completed.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return {"error": f"worker failed (exit {completed.returncode}): {tail[0][:300]}"}
    return json.loads(lines[-1])


class _Worker:
    """One runtime's process for one row (this file's `--worker`): it makes its first call, the
    check and the warm-up calls when started, then a round of timed calls per `time` command,
    and reports its peak memory on `end`. Its stderr goes to a file (a pipe left unread would
    block it)."""

    def __init__(
        self, runtime: str, name: str, threads: int, directory: Path, options: argparse.Namespace
    ) -> None:
        command, environment = _worker_command(
            Path(__file__).resolve(), runtime, name, threads, directory, options
        )
        self.errors = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            command,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )

    def ask(self, command: str | None = None) -> dict[str, Any]:
        """The worker's next message (after sending `command`); {"error": ...} when it ended or
        took longer than WORKER_TIMEOUT (it is then killed)."""
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            process.kill()

        timer = threading.Timer(WORKER_TIMEOUT, kill)
        timer.start()
        try:
            if command is not None:
                process.stdin.write(command + "\n")
                process.stdin.flush()
            for line in process.stdout:
                if line.startswith(REPLY_MARK):
                    return dict(json.loads(line[len(REPLY_MARK) :]))
        except OSError:  # the worker is gone (a broken pipe): reported below
            pass
        finally:
            timer.cancel()
        code = process.wait()
        if timed_out.is_set():
            return {"error": f"timed out after {WORKER_TIMEOUT:.0f} s"}
        self.errors.seek(0)
        tail = self.errors.read().strip().splitlines()[-1:] or ["(no output)"]
        return {"error": f"worker failed (exit {code}): {tail[0][:300]}"}

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.errors.close()


def run_row(
    runtimes: list[str],
    name: str,
    threads: int,
    directory: Path,
    options: argparse.Namespace,
    unavailable: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each runtime's result for one (model, thread count): one process per runtime, started one
    after another (first calls and compilations never overlap); then `options.rounds` rounds,
    each runtime's process making one round of timed calls in turn (the order rotating by one
    each round, a pause before each), so a slow spell of the machine falls on every runtime
    alike; the median over every round's calls. `unavailable`: runtimes not run, with why.
    An error of ours aborts the row (timing a wrong result means nothing)."""
    row: dict[str, dict[str, Any]] = {}
    workers: dict[str, _Worker] = {}
    try:
        for runtime in runtimes:
            if unavailable and runtime in unavailable:
                row[runtime] = {"error": unavailable[runtime]}
                continue
            worker_process = _Worker(runtime, name, threads, directory, options)
            workers[runtime] = worker_process
            row[runtime] = worker_process.ask()
            if "error" in row[runtime]:
                worker_process.close()
                del workers[runtime]
                if runtime == "ours":
                    return row
        timed: dict[str, dict[str, list[float]]] = {
            runtime: {"times": [], "cpu_times": [], "rounds": []} for runtime in workers
        }
        for round_number in range(options.rounds):
            order = list(workers)
            shift = round_number % len(order) if order else 0
            for runtime in order[shift:] + order[:shift]:
                time.sleep(ROUND_PAUSE)  # another runtime's spinning threads go to sleep
                reply = workers[runtime].ask("time")
                if "error" in reply:
                    row[runtime] = reply
                    workers.pop(runtime).close()
                    continue
                timed[runtime]["times"] += reply["times"]
                timed[runtime]["cpu_times"] += reply["cpu_times"]
                if reply["times"]:
                    timed[runtime]["rounds"].append(statistics.median(reply["times"]))
        for runtime, worker_process in list(workers.items()):
            final = worker_process.ask("end")
            if "error" in final:
                row[runtime] = final
                continue
            calls = timed[runtime]
            row[runtime] |= final | {
                "median": statistics.median(calls["times"]) if calls["times"] else math.nan,
                "cpu": statistics.median(calls["cpu_times"]) if calls["cpu_times"] else math.nan,
                "times": calls["times"],
                "round_medians": calls["rounds"],
            }
    finally:
        for worker_process in workers.values():
            worker_process.close()
    return row


def _median_first_call(firsts: list[dict[str, Any]]) -> dict[str, Any]:
    """The ResNet-18-sized model's first calls, one per process, as one result: the median of
    each time over the processes (and of load + lower + plan, the target's sum), every
    process's sum kept; the first failure instead, if one failed."""
    failed = [first for first in firsts if "error" in first]
    if failed:
        return failed[0]
    merged = {
        key: value for key, value in firsts[0].items() if key not in ("times", "round_medians")
    }
    for key in ("imports", "load", "lower", "plan", "run", "first", "median", "cpu", "peak"):
        merged[key] = statistics.median(first[key] for first in firsts)
    merged["ready_each"] = [first["load"] + first["lower"] + first["plan"] for first in firsts]
    merged["ready"] = statistics.median(merged["ready_each"])
    merged["processes"] = len(firsts)
    return merged


def measure(options: argparse.Namespace) -> dict[str, Any]:
    suite = suite_module()
    available = available_runtimes()
    runtimes = [r for r in options.runtimes.split(",") if r]
    for runtime in runtimes:
        if runtime not in RUNTIMES:
            raise SystemExit(f"unknown runtime {runtime!r}; choose from {', '.join(RUNTIMES)}")
    skipped = {r: available[r] for r in runtimes if available[r]}
    runtimes = [r for r in runtimes if not available[r]]
    thread_counts = [int(t) for t in options.threads.split(",") if t]
    names = [s.name for s in suite.SPECS if not options.only or re.search(options.only, s.name)]
    results: dict[str, Any] = {
        "scale": options.scale,
        "repeats": options.repeats,
        "rounds": options.rounds,
        "warmup": options.warmup,
        "environment": environment_lines(),
        "runtimes": runtimes,
        "skipped": skipped,
        "threads": thread_counts,
        "models": [],
        "legend": {s.name: s.what for s in suite.SPECS},
    }
    for line in results["environment"]:
        print(line, flush=True)
    for runtime, why in skipped.items():
        print(f"{runtime}: not run ({why})", flush=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aten2prims-bench-") as temporary:
        directory = Path(temporary)
        for name in names:
            try:
                facts = prepare(name, options.scale, directory, "ort" in runtimes)
            except Exception as error:  # the row is aborted with the reason; the others run
                message = f"export failed: {type(error).__name__}: {str(error).splitlines()[0]}"[
                    :300
                ]
                print(f"{name}: {message}", flush=True)
                failed = {"error": message}
                results["models"].append(
                    {
                        "model": name,
                        "input": suite.BY_NAME[name].shape(options.scale),
                        "runs": {str(t): {"ours": failed} for t in thread_counts},
                    }
                )
                continue
            print(
                f"{name} ({facts['input']}): exported in {facts['export']:.1f} s"
                + (f", ONNX in {facts['onnx_export']:.1f} s" if "onnx_export" in facts else "")
                + (f"; {facts['onnx_error']}" if "onnx_error" in facts else ""),
                flush=True,
            )
            facts["runs"] = {}
            for threads in thread_counts:
                unavailable = {"ort": facts["onnx_error"]} if "onnx_error" in facts else None
                row = run_row(runtimes, name, threads, directory, options, unavailable)
                for runtime, result in row.items():
                    print(f"  {_progress(runtime, threads, result)}", flush=True)
                facts["runs"][str(threads)] = row
            results["models"].append(facts)
            for suffix in (".pt2", ".npz", ".onnx", ".onnx.data"):
                (directory / f"{name}{suffix}").unlink(missing_ok=True)
        if options.first_call and "ours" in runtimes:
            prepare(suite.RESNET18.name, options.scale, directory, ort=False)
            firsts = [
                run_row(["ours"], suite.RESNET18.name, 1, directory, options)["ours"]
                for _ in range(options.first_call_processes)
            ]
            first = _median_first_call(firsts)
            first["input"] = suite.RESNET18.shape(options.scale)
            results["first_call"] = first
            print(f"  {_progress('ours', 1, first)}", flush=True)
    results["seconds"] = time.perf_counter() - started
    return results


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several saved runs as one: each (model, thread count, runtime) cell from the last run
    that has it; the runtimes, thread counts and models of all of them."""
    merged = dict(runs[0])
    merged["runtimes"] = [r for r in RUNTIMES if any(r in run["runtimes"] for run in runs)]
    merged["threads"] = sorted({t for run in runs for t in run["threads"]})
    merged["skipped"] = {
        r: why
        for run in runs
        for r, why in run.get("skipped", {}).items()
        if r not in merged["runtimes"]
    }
    models: dict[str, dict[str, Any]] = {}
    for run in runs:
        for model in run["models"]:
            into = models.setdefault(model["model"], {**model, "runs": {}})
            for threads, row in model["runs"].items():
                into["runs"].setdefault(threads, {}).update(row)
        if "first_call" in run:
            merged["first_call"] = run["first_call"]
    merged["models"] = list(models.values())
    if len(runs) > 1:
        merged.pop("seconds", None)
        merged["environment"] = runs[0]["environment"] + [f"merged from {len(runs)} runs"]
    return merged


def _progress(runtime: str, threads: int, result: dict[str, Any]) -> str:
    head = f"{runtime:<8} {threads} thread(s): "
    if "error" in result:
        return head + result["error"]
    rounds = result.get("round_medians", [])
    spread = (
        f" (rounds' medians {', '.join(_ms(value) for value in rounds)})" if len(rounds) > 1 else ""
    )
    text = (
        f"median {_ms(result['median'])} ms{spread}, first call {_ms(result['first'])} ms, "
        f"peak {_mib(result['peak'])} MiB; {result['check']}"
    )
    if result.get("torch_imported"):
        text += " (torch was imported in this process)"
    return head + text + f"; {result['threads_info']}"


# -- tables ---------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    milliseconds = seconds * 1e3
    return (
        f"{milliseconds:.2f}"
        if milliseconds < 10
        else f"{milliseconds:.1f}"
        if milliseconds < 100
        else f"{milliseconds:.0f}"
    )


def _mib(count: float) -> str:
    return f"{count / 2**20:.0f}"


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def _cell(run: dict[str, Any] | None, key: str, form: Callable[[float], str]) -> str:
    if run is None:
        return ""
    if "error" in run:
        return "failed"
    return form(run[key]) + ("!" if run.get("suspect") else "")


def _ratio(ours: dict[str, Any] | None, theirs: dict[str, Any] | None, key: str) -> float | None:
    if not ours or not theirs or "error" in ours or "error" in theirs:
        return None
    return ours[key] / theirs[key] if theirs[key] > 0 else None


def print_report(results: dict[str, Any], clock: str = "wall") -> None:
    """The tables; `clock="cpu"` shows the median process CPU times instead of wall times (on a
    loaded machine, at one thread, they are not inflated by the time spent waiting for a core)."""
    key = "median" if clock == "wall" else "cpu"
    runtimes = results["runtimes"]
    others = [r for r in runtimes if r != "ours"]
    rounds = results.get("rounds", 1)  # saved runs from before the rounds made one
    calls = (
        f"median of {rounds} rounds of {results['repeats']} calls, the runtimes' processes "
        "taking turns,"
        if rounds > 1
        else f"median of {results['repeats']} calls"
    )
    print(
        f"\n# Model benchmark ({results['scale']} inputs; {calls} after the first call and "
        f"{results['warmup']} warm-up calls)\n"
    )
    for line in results["environment"]:
        print(f"- {line}")
    for runtime, why in results.get("skipped", {}).items():
        print(f"- {runtime}: not run ({why})")
    blas = {}
    for model in results["models"]:
        for threads, row in model["runs"].items():
            for runtime, run in row.items():
                if "threads_info" in run:
                    blas.setdefault((runtime, threads), run["threads_info"])
    for (runtime, threads), info in sorted(blas.items()):
        print(f"- {runtime}, {threads} thread(s): {info}")
    if "seconds" in results:
        print(f"- run took {results['seconds'] / 60:.1f} min")
    errors = []
    summary: list[str] = []
    for threads in [str(t) for t in results["threads"]]:
        print(f"\n## {threads} thread(s): median {clock} time (ms) and ours / other\n")
        print(
            "| model | input | "
            + " | ".join(LABELS[r] for r in runtimes)
            + "".join(f" | ours / {LABELS[r]}" for r in others)
            + " |"
        )
        print("|---" * (2 + len(runtimes) + len(others)) + "|")
        ratios: dict[str, list[tuple[float, str]]] = {r: [] for r in others}
        memory: list[tuple[float, str]] = []
        for model in results["models"]:
            row = model["runs"].get(threads, {})
            if not row:
                continue  # not run at this thread count (a merged partial run)
            cells = [_cell(row.get(r), key, _ms) for r in runtimes]
            ratio_cells = []
            for runtime in others:
                ratio = _ratio(row.get("ours"), row.get(runtime), key)
                ratio_cells.append("" if ratio is None else f"{ratio:.2f}")
                if ratio is not None:
                    ratios[runtime].append((ratio, model["model"]))
            memory_ratio = _ratio(row.get("ours"), row.get("eager"), "peak")
            if memory_ratio is not None:
                memory.append((memory_ratio, model["model"]))
            print(
                f"| {model['model']} | {model['input']} | " + " | ".join(cells + ratio_cells) + " |"
            )
            for runtime, run in row.items():
                if "error" in run:
                    errors.append(
                        f"{model['model']}, {runtime}, {threads} thread(s): {run['error']}"
                    )
                elif run.get("suspect"):
                    errors.append(
                        f"{model['model']}, {runtime}, {threads} thread(s): {run['check']}"
                    )
        print(
            f"\n## {threads} thread(s): first call (ms) and peak memory (MiB above the imports)\n"
        )
        print(
            "| model | "
            + " | ".join(f"first {LABELS[r]}" for r in runtimes)
            + " | "
            + " | ".join(f"peak {LABELS[r]}" for r in runtimes)
            + " | peak ours / eager |"
        )
        print("|---" * (2 + 2 * len(runtimes)) + "|")
        for model in results["models"]:
            row = model["runs"].get(threads, {})
            if not row:
                continue  # not run at this thread count (a merged partial run)
            memory_ratio = _ratio(row.get("ours"), row.get("eager"), "peak")
            print(
                f"| {model['model']} | "
                + " | ".join(_cell(row.get(r), "first", _ms) for r in runtimes)
                + " | "
                + " | ".join(_cell(row.get(r), "peak", _mib) for r in runtimes)
                + f" | {'' if memory_ratio is None else f'{memory_ratio:.2f}'} |"
            )
        summary.append(f"\n{threads} thread(s):")
        for runtime in others:
            values = [v for v, _ in ratios[runtime]]
            if not values:
                continue
            geomean = _geomean(values)
            worst, worst_name = max(ratios[runtime])
            target = {
                "eager": TARGET_EAGER_GEOMEAN,
                "inductor": TARGET_INDUCTOR_GEOMEAN,
                "ort": TARGET_ORT_GEOMEAN,
            }[runtime]
            line = (
                f"- ours / {LABELS[runtime]}: geomean {geomean:.2f} over {len(values)} model(s) "
                f"(target <= {target}: {'met' if geomean <= target else 'MISSED'}); "
                f"max {worst:.2f} ({worst_name})"
            )
            if runtime == "eager":
                above = [
                    f"{n} {v:.2f}"
                    for v, n in sorted(ratios[runtime], reverse=True)
                    if v > TARGET_EAGER_MAX
                ]
                line += (
                    f" (target: none above {TARGET_EAGER_MAX}: "
                    + ("met" if not above else f"MISSED by {', '.join(above)}")
                    + ")"
                )
            summary.append(line)
        if memory:
            above = [f"{n} {v:.2f}" for v, n in sorted(memory, reverse=True) if v > 1.0]
            summary.append(
                f"- peak memory ours / eager: geomean {_geomean([v for v, _ in memory]):.2f}, "
                f"max {max(memory)[0]:.2f} (target <= 1 on every model: "
                + ("met" if not above else f"MISSED by {', '.join(above)}")
                + ")"
            )
    print("\n## Geomeans and targets")
    for line in summary:
        print(line)
    first = results.get("first_call")
    if first:
        print(
            f"\n## First call of a ResNet-18-sized model ({first.get('input', '')}), ours, 1 thread\n"
        )
        if "error" in first:
            print(f"failed: {first['error']}")
        else:
            ready = first.get("ready", first["load"] + first["lower"] + first["plan"])
            each = first.get("ready_each", [ready])
            print(
                f"(imports of `aten2prims` and of what load, lower and plan use: "
                f"{_ms(first['imports'])} ms, once per process)\n"
            )
            print(
                f"load {_ms(first['load'])} ms + lower {_ms(first['lower'])} ms + plan "
                f"{_ms(first['plan'])} ms; load + lower + plan {_ms(ready)} ms "
                f"(target <= {TARGET_FIRST_CALL * 1e3:.0f} ms: "
                f"{'met' if ready <= TARGET_FIRST_CALL else 'MISSED'}); then the first run "
                f"{_ms(first['run'])} ms, later runs {_ms(first['median'])} ms"
            )
            if len(each) > 1:
                print(
                    f"(medians over {len(each)} processes; load + lower + plan in each: "
                    + ", ".join(_ms(value) for value in each)
                    + " ms)"
                )
    if errors:
        print("\n## Aborted or flagged cells\n")
        for error in errors:
            print(f"- {error}")
    print("\n## Models\n")
    for name, what in results["legend"].items():
        print(f"- {name}: {what}")


# -- workers (one runtime per fresh process) ---------------------------------------------------------


def _rss_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    """Resets VmHWM to the current resident set (Linux >= 4.0); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


def _load_arrays(path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    import numpy as np

    with np.load(path) as archive:

        def take(prefix: str) -> list[Any]:
            count = sum(1 for key in archive.files if key.startswith(prefix))
            return [archive[f"{prefix}{i}"] for i in range(count)]

        return take("input_"), take("expected_"), take("reference_")


def _check(
    outputs: list[Any], expected: list[Any], reference: list[Any], strict: bool
) -> tuple[bool, str]:
    """Ours (strict): the harness's model rule. Others: gross errors only."""
    import numpy as np

    if len(outputs) != len(expected):
        return False, f"{len(outputs)} outputs, torch eager gives {len(expected)}"
    worst = 0.0
    for index, (ours, theirs, wide) in enumerate(zip(outputs, expected, reference)):
        ours = np.asarray(ours)
        if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
            return False, (
                f"output {index}: {ours.dtype}{list(ours.shape)} where torch eager gives "
                f"{theirs.dtype}{list(theirs.shape)}"
            )
        our_error = float(np.max(np.abs(ours.astype(np.float64) - wide), initial=0.0))
        torch_error = float(np.max(np.abs(theirs.astype(np.float64) - wide), initial=0.0))
        worst = max(worst, our_error / torch_error if torch_error > 0 else 0.0)
        if strict:
            from aten2prims.testing.compare import compare

            verdict = compare(ours, theirs, reference=wide, what=f"output {index}")
            if not verdict and not (
                verdict.reason == "value" and our_error <= MODEL_ERROR_FACTOR * torch_error
            ):
                return False, (
                    f"differs from torch eager beyond the model rule: {verdict.message}; "
                    f"against the float64 run ours errs up to {our_error:.3g}, torch eager {torch_error:.3g}"
                )
        elif our_error > LOOSE_ERROR_FACTOR * torch_error + 1e-4 * float(
            np.max(np.abs(wide), initial=0.0)
        ):
            return False, (
                f"output {index} errs up to {our_error:.3g} against the float64 run, torch eager "
                f"{torch_error:.3g}"
            )
    return True, f"matches torch (error {worst:.2g}x torch eager's against float64)"


def threads_info() -> str:
    """The BLAS and OpenMP libraries loaded, with their kernels and thread counts
    (threadpoolctl's view)."""
    from threadpoolctl import threadpool_info

    parts = []
    for library in threadpool_info():
        name = library.get("internal_api", library.get("prefix", "?"))
        version = library.get("version") or ""
        architecture = library.get("architecture")
        parts.append(
            f"{name} {version}"
            + (f" kernel {architecture}" if architecture else "")
            + f" ({Path(library.get('filepath', '')).name}) {library.get('num_threads')} thread(s)"
        )
    return "; ".join(parts) or "no BLAS or OpenMP library loaded"


def worker(options: argparse.Namespace) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    runtime, threads = options.worker, int(options.threads)
    directory = Path(options.dir)
    import numpy  # noqa: F401  # imported before the baseline in every runtime

    if runtime == "ours":
        start = time.perf_counter()
        import aten2prims

        # What load, lower and plan import on first use (SciPy among them), imported here so
        # the first call and the baseline exclude it; its time is reported as "imports".
        import aten2prims.frontends
        import aten2prims.passes
        import decompositions  # noqa: F401  # imported for its side effect (the rules table)
        from aten2prims.executor import plan_for
        from aten2prims.testing import compare as _  # the check's import, not counted

        imports = time.perf_counter() - start
    elif runtime == "ort":
        import onnxruntime
    else:
        import torch

        torch.set_num_threads(threads)
        suite = suite_module()
        suite.BY_NAME[options.model].preload()  # transformers' lazy modules, as torch's imports
    import threadpoolctl  # noqa: F401  # likewise

    baseline = _rss_bytes("VmRSS")
    inputs, expected, reference = _load_arrays(directory / f"{options.model}.npz")
    result: dict[str, Any] = {}
    call: Callable[[], list[Any]]
    start = time.perf_counter()
    if runtime == "ours":
        graph = aten2prims.load(directory / f"{options.model}.pt2")
        loaded = time.perf_counter()
        lowered = aten2prims.lower(graph)
        lowered_at = time.perf_counter()
        plan = plan_for(lowered)
        planned = time.perf_counter()
        keywords: dict[str, Any] = {}
        if "threads" in inspect.signature(aten2prims.execute).parameters:
            keywords["threads"] = threads
        result["execute_threads"] = bool(keywords)

        def call() -> list[Any]:
            return aten2prims.execute(lowered, inputs, **keywords)

        outputs = call()
        result |= {
            "imports": imports,
            "torch_imported": "torch" in sys.modules,
            "load": loaded - start,
            "lower": lowered_at - loaded,
            "plan": planned - lowered_at,
            "run": time.perf_counter() - planned,
            "aten_nodes": len(graph.nodes),
            "prims_nodes": len(lowered.nodes),
            "steps": len(plan.steps),
        }
    elif runtime == "ort":
        settings = onnxruntime.SessionOptions()
        settings.intra_op_num_threads = threads
        settings.inter_op_num_threads = 1
        settings.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        session = onnxruntime.InferenceSession(
            str(directory / f"{options.model}.onnx"), settings, providers=["CPUExecutionProvider"]
        )
        names = [i.name for i in session.get_inputs()]
        if len(names) != len(inputs):
            raise RuntimeError(f"the ONNX model takes inputs {names}, the model {len(inputs)}")
        feeds = dict(zip(names, inputs))

        def call() -> list[Any]:
            return session.run(None, feeds)

        outputs = call()
    else:
        from torch.utils._pytree import tree_leaves

        model, _ = suite.build(options.model, options.scale)
        tensors = tuple(torch.from_numpy(a) for a in inputs)
        module = torch.compile(model) if runtime == "inductor" else model
        start = time.perf_counter()

        def call() -> list[Any]:
            with torch.no_grad():
                return [t.numpy() for t in tree_leaves(module(*tensors))]

        outputs = call()
    result["first"] = time.perf_counter() - start
    peak = _rss_bytes("VmHWM")
    ok, message = _check(outputs, expected, reference, strict=runtime == "ours")
    if not ok and runtime == "ours":
        return {"error": f"aborted: ours {message}"}  # the parent ends the row
    result["check"] = message
    result["suspect"] = not ok
    del outputs, expected, reference
    reset = _reset_peak()
    for _ in range(options.warmup):
        call()
    _reply(result)
    # The parent's commands (one per line): `time` makes `--repeats` timed calls (one round),
    # `end` reports the peak memory and the libraries' threads, then the process ends.
    for line in sys.stdin:
        command = line.strip()
        if command == "time":
            times, cpu_times = [], []
            for _ in range(options.repeats):
                t, c = time.perf_counter(), time.process_time()
                call()
                times.append(time.perf_counter() - t)
                cpu_times.append(time.process_time() - c)
            _reply({"times": times, "cpu_times": cpu_times})
        elif command == "end":
            break
        else:
            raise SystemExit(f"unknown command {command!r}")
    peak = max(peak, _rss_bytes("VmHWM")) if reset else _rss_bytes("VmHWM")
    return {
        "threads": threads,
        "peak": peak - baseline,
        "threads_info": (
            f"onnxruntime {onnxruntime.__version__} intra_op_num_threads={threads}; "
            if runtime == "ort"
            else f"torch {torch.__version__} get_num_threads()={torch.get_num_threads()}; "
            if runtime in ("eager", "inductor")
            else f"execute(threads={threads}); "
            if result.get("execute_threads")
            else ""
        )
        + threads_info(),
    }


def _reply(message: dict[str, Any]) -> None:
    """One message to the parent: a marked line of JSON on stdout (a library's own prints to
    stdout are other lines)."""
    print(REPLY_MARK + json.dumps(message), flush=True)


# -- command line ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, 1 warm-up, 3 repeats")
    parser.add_argument("--scale", choices=("full", "quick", "tiny"), default=None)
    parser.add_argument("--only", default=None, help="regex over model names")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed calls per round (default 5; 3 with --quick)",
    )
    parser.add_argument("--warmup", type=int, default=None, help="warm-up calls (default 3)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds of timed calls, the runtimes taking turns (default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--first-call-processes",
        type=int,
        default=None,
        help="processes timing the ResNet-18-sized first call (default 5; 1 with --quick)",
    )
    parser.add_argument("--no-first-call", dest="first_call", action="store_false")
    parser.add_argument("--json", default=None, help="also save the results to this file")
    parser.add_argument(
        "--from-json",
        action="append",
        default=None,
        help="print the tables of a saved run; given several times, of the runs merged (e.g. "
        "one run of ours,eager,ort and one of inductor on the same machine)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="the times the tables show: wall (default) or the process's CPU time",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    options.scale = options.scale or ("quick" if options.quick else "full")
    if options.repeats is None:
        options.repeats = 3 if options.quick else 5
    if options.warmup is None:
        options.warmup = 1 if options.quick else 3
    if options.rounds is None:
        options.rounds = 1 if options.quick else 3
    if options.first_call_processes is None:
        options.first_call_processes = 1 if options.quick else 5
    if options.rounds < 1 or options.first_call_processes < 1:
        parser.error("--rounds and --first-call-processes must be at least 1")
    if options.worker is not None:
        _reply(worker(options))
        return 0
    if options.from_json:
        print_report(
            merge([json.loads(Path(path).read_text()) for path in options.from_json]),
            options.clock,
        )
        return 0
    warnings.filterwarnings("ignore")
    results = measure(options)
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=1))
    print_report(results, options.clock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
