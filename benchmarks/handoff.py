"""What handing work to a second thread costs the executor, against handing it to a second
process that shares the arrays' memory.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/handoff.py \\
        [--rounds 3] [--calls 41] [--elements 1204224] [--rows 2048] [--spin-us 50000]

No torch. One BLAS thread in this process and in the worker process (set before NumPy loads).
Three measurements, made in rounds (each round every variant in turn, 0.5 s apart, so a slow
spell of the machine falls on all of them), each the median over `--calls` timed calls:

- **hand-off**: the round trip of a part that does nothing but wake the other side and be
  waited for. Threads: the executor's own pool (`threads.run_parts` at two threads; the calling
  thread's part waits until the worker thread has started the other), per round trip.
  Processes: a worker process woken by a POSIX semaphore (multiprocessing's), answering by
  another, kept off the caller's CPU as the executor keeps its worker threads; then the same
  with both sides spinning on their semaphore for `--spin-us` before they block.
- **a GIL-bound region**: float32 GELU's chain of NumPy calls as the executor makes it where
  MKL is not used (x·√½, erf's fifteen passes in blocks, +1, ·x, ·0.5; the lowered GELU's
  check for +inf, two passes more, left out: NumPy calls of 5-100 µs each, the interpreter
  running between them) over `--elements` values (default: DeiT-tiny's 8×196×768
  activation): whole on one thread; in two halves on two threads (`run_parts`, each half in
  `vector_math.long_calls` as the executor's shared parts are); in two halves on this process and the worker process, the arrays in
  shared memory (each side erf's short blocks, as one thread runs it), sleeping or spinning
  between calls.
- **a GIL-free region**: a float32 matrix product of `--rows` rows by 256 columns times
  256×1024 (one OpenBLAS call per half, which holds no GIL), the same ways.

Each split is checked to give the whole call's bits. The speed-ups are the one-thread median
over the split's median.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # before NumPy loads its BLAS, here and in the worker

import argparse
import multiprocessing
import statistics
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aten2prims.executor import threads
from prims import erf_float32 as erf_module
from prims import vector_math

SQRT_HALF = np.float32(0.7071067811865476)
INNER = 256  # the product's contracted length
COLUMNS = 1024  # the product's columns
ROUND_PAUSE = 0.5  # seconds between variants
# How long a spinning process tries its semaphore before it blocks (microseconds): about as
# long as ONNX Runtime's threads spin after a call.
SPIN_US = 50_000

# The worker process's commands (the first int64 of the shared control block).
STOP, PING, GELU_HALF, PRODUCT_HALF = 0, 1, 2, 3


def gelu(x: np.ndarray, out: np.ndarray) -> None:
    """float32 GELU of x into out (out is its own scratch) by the lowered chain's NumPy calls,
    less its check for +inf; erf is the prim's float32 kernel without MKL."""
    np.multiply(x, SQRT_HALF, out=out)
    erf_module.erf_float32(out, out)
    np.add(out, np.float32(1), out=out)
    np.multiply(out, x, out=out)
    np.multiply(out, np.float32(0.5), out=out)


class Shared:
    """The arrays both processes see: GELU's input and output, the product's operands and
    result, and the control block."""

    def __init__(self, elements: int, rows: int, name: str | None = None) -> None:
        shapes = {
            "x": (elements,),
            "y": (elements,),
            "a": (rows, INNER),
            "b": (INNER, COLUMNS),
            "c": (rows, COLUMNS),
            "control": (2,),
        }
        sizes = {key: int(np.prod(shape)) * 4 for key, shape in shapes.items()}
        sizes["control"] = 16
        total = sum(sizes.values())
        self.memory = shared_memory.SharedMemory(name=name, create=name is None, size=total)
        self.arrays: dict[str, np.ndarray] = {}
        offset = 0
        for key, shape in shapes.items():
            dtype = np.int64 if key == "control" else np.float32
            self.arrays[key] = np.ndarray(shape, dtype, self.memory.buf, offset)
            offset += sizes[key]

    def close(self) -> None:
        self.arrays.clear()
        self.memory.close()


def wait(semaphore: Any, spin: float) -> None:
    """Acquires `semaphore`, trying without blocking for `spin` seconds first (each try an
    atomic operation in user space: a spinning side notices a post within a microsecond and
    is never woken by the kernel), then blocking."""
    if spin > 0:
        deadline = time.perf_counter() + spin
        while time.perf_counter() < deadline:
            if semaphore.acquire(False):
                return
    semaphore.acquire()


def serve(name: str, elements: int, rows: int, go: Any, done: Any) -> None:
    """The worker process: waits on `go` (spinning first for the control block's microseconds),
    does what the control block says, posts `done`."""
    shared = Shared(elements, rows, name)
    arrays = shared.arrays
    half_elements, half_rows = elements // 2, rows // 2
    try:
        while True:
            wait(go, int(arrays["control"][1]) * 1e-6)
            command = int(arrays["control"][0])
            if command == STOP:
                break
            if command == GELU_HALF:
                gelu(arrays["x"][half_elements:], arrays["y"][half_elements:])
            elif command == PRODUCT_HALF:
                np.matmul(arrays["a"][half_rows:], arrays["b"], out=arrays["c"][half_rows:])
            done.release()
    finally:
        shared.close()


def median_ms(function: Callable[[], None], calls: int, per_call: int = 1) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3 / per_call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=41, help="timed calls per variant and round")
    parser.add_argument("--elements", type=int, default=8 * 196 * 768, help="GELU's values")
    parser.add_argument("--rows", type=int, default=2048, help="the product's rows")
    parser.add_argument(
        "--spin-us", type=int, default=SPIN_US, help="how long a spinning side tries first"
    )
    options = parser.parse_args(argv)
    elements = options.elements - options.elements % 2
    rows = options.rows - options.rows % 2

    import models  # benchmarks/models.py: the machine's lines (no torch imported)

    for line in models.slow_blas_lines() + models.kernel_lines():
        print(line)
    print(f"BLAS: {models.threads_info()}")

    shared = Shared(elements, rows)
    arrays = shared.arrays
    generator = np.random.default_rng(0)
    arrays["x"][...] = generator.standard_normal(elements, dtype=np.float32) * 3
    arrays["a"][...] = generator.standard_normal((rows, INNER), dtype=np.float32)
    arrays["b"][...] = generator.standard_normal((INNER, COLUMNS), dtype=np.float32)
    context = multiprocessing.get_context("spawn")
    go, done = context.Semaphore(0), context.Semaphore(0)
    worker = context.Process(
        target=serve, args=(shared.memory.name, elements, rows, go, done), daemon=True
    )
    worker.start()
    x, y, a, b, c = (arrays[key] for key in "xyabc")
    control = arrays["control"]
    half_elements, half_rows = elements // 2, rows // 2

    placed = [-1]

    def on_worker(command: int) -> None:
        # The worker process kept off the caller's CPU, as the executor keeps its worker threads
        # (threads.py, `place`): left to Linux, a woken worker often shared the waker's CPU and
        # the halves ran one after the other.
        cpu = threads.CURRENT_CPU() if threads.CURRENT_CPU is not None else -1
        if cpu != placed[0] and len(threads.CPUS) > 1 and command != STOP:
            placed[0] = cpu
            os.sched_setaffinity(worker.pid, threads.CPUS - {cpu})
        control[0] = command
        go.release()

    def answered() -> None:
        wait(done, int(control[1]) * 1e-6)

    def process_ping() -> None:
        for _ in range(100):
            on_worker(PING)
            answered()

    started = threading.Event()

    def wait_for_the_other() -> None:
        started.wait()
        started.clear()

    def thread_ping() -> None:
        for _ in range(100):
            threads.run_parts([wait_for_the_other, started.set])

    def gelu_whole() -> None:
        gelu(x, y)

    def gelu_threads() -> None:
        def half(lo: int, hi: int) -> Callable[[], None]:
            def run() -> None:
                with vector_math.long_calls():
                    gelu(x[lo:hi], y[lo:hi])

            return run

        threads.run_parts([half(0, half_elements), half(half_elements, elements)])

    def gelu_processes() -> None:
        on_worker(GELU_HALF)
        gelu(x[:half_elements], y[:half_elements])
        answered()

    def product_whole() -> None:
        np.matmul(a, b, out=c)

    def product_threads() -> None:
        def half(lo: int, hi: int) -> Callable[[], None]:
            def run() -> None:
                np.matmul(a[lo:hi], b, out=c[lo:hi])

            return run

        threads.run_parts([half(0, half_rows), half(half_rows, rows)])

    def product_processes() -> None:
        on_worker(PRODUCT_HALF)
        np.matmul(a[:half_rows], b, out=c[:half_rows])
        answered()

    spin = options.spin_us
    # (name, function, executor threads, round trips per call, the processes' spin in µs)
    variants: list[tuple[str, Callable[[], None], int, int, int]] = [
        ("hand-off, threads (us)", thread_ping, 2, 100, 0),
        ("hand-off, processes (us)", process_ping, 1, 100, 0),
        ("hand-off, spinning processes (us)", process_ping, 1, 100, spin),
        ("GELU, 1 thread (ms)", gelu_whole, 1, 1, 0),
        ("GELU, 2 threads (ms)", gelu_threads, 2, 1, 0),
        ("GELU, 2 processes (ms)", gelu_processes, 1, 1, 0),
        ("GELU, 2 spinning processes (ms)", gelu_processes, 1, 1, spin),
        ("product, 1 thread (ms)", product_whole, 1, 1, 0),
        ("product, 2 threads (ms)", product_threads, 2, 1, 0),
        ("product, 2 processes (ms)", product_processes, 1, 1, 0),
        ("product, 2 spinning processes (ms)", product_processes, 1, 1, spin),
    ]
    try:
        identical = {}
        for name, whole, splits in (
            ("GELU", gelu_whole, (gelu_threads, gelu_processes)),
            ("product", product_whole, (product_threads, product_processes)),
        ):
            target = y if name == "GELU" else c
            whole()
            reference = target.copy()
            same = []
            for index, split in enumerate(splits):
                target[...] = np.nan
                with threads.running_with(2 if index == 0 else 1):
                    split()
                same.append(bool(np.array_equal(target, reference)))
            identical[name] = all(same)
        results: dict[str, list[float]] = {name: [] for name, *_ in variants}
        for round_index in range(options.rounds):
            line = []
            for name, function, thread_count, per_call, spin_us in variants:
                control[1] = spin_us
                time.sleep(ROUND_PAUSE)  # a spinning worker gives up and sleeps meanwhile
                with threads.running_with(thread_count):
                    function()  # warm-up: the pool, the worker's pages
                    value = median_ms(function, options.calls, per_call)
                value *= 1e3 if "(us)" in name else 1
                results[name].append(value)
                line.append(f"{name} {value:.3g}")
            print(f"round {round_index + 1}: " + "; ".join(line))
    finally:
        on_worker(STOP)
        worker.join(timeout=30)
        shared.close()
        shared.memory.unlink()

    print(f"\nmedians over {options.rounds} round(s) of {options.calls} calls:")
    medians = {name: statistics.median(values) for name, values in results.items()}
    for name, value in medians.items():
        print(f"  {name}: {value:.3g}")
    for name in ("GELU", "product"):
        one = medians[f"{name}, 1 thread (ms)"]
        print(
            f"  {name} two-way speed-up: threads {one / medians[f'{name}, 2 threads (ms)']:.2f}x, "
            f"processes {one / medians[f'{name}, 2 processes (ms)']:.2f}x, spinning processes "
            f"{one / medians[f'{name}, 2 spinning processes (ms)']:.2f}x; "
            f"splits give the whole's bits: {identical[name]}"
        )
    return 0 if all(identical.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
