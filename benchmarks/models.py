"""Model speed and memory: the zoo of `examples/models.py` on our NumPy executor against torch eager.

    .venv/bin/python benchmarks/models.py [--size test|medium|both] [--repeats N] [--only REGEX]
                                          [--no-memory] [--no-default-threads]

For each model (exported with `torch.export` and saved with `torch.export.save` into a temporary
directory, as a user would) it measures, all in this one run:

- `aten2prims.load` of the archive and `aten2prims.lower` of the graph (median of repeated calls;
  the first lowering in a fresh process, which also imports the decomposition rules, is shown as
  "cold");
- `aten2prims.execute` against torch eager (`model(*inputs)` under `torch.no_grad()`) on the same
  inputs, median times and their ratio (ours / torch; the target is <= 1.5), once at one thread
  (`torch.set_num_threads(1)`; OPENBLAS/OMP/MKL/ATEN2PRIMS_NUM_THREADS=1 set before NumPy loads) and once
  at the machine's default. Each setting runs in its own subprocess, since BLAS reads its thread
  count once, when NumPy is imported. At one thread the engines alternate call by call and the
  ratio is of process CPU times (as benchmarks/ops.py: not inflated when other processes share
  the cores; the wall-time ratio is printed beside it); at the default thread count they run
  in alternating blocks (a spinning BLAS or OpenMP pool would slow the other down) and the
  ratio is of wall times. "first" is our first call (it builds the plan: optimization passes,
  constant folding, fusion);
- peak memory of one call after a warm-up call, each engine in a fresh subprocess (glibc's mmap
  threshold fixed, so large buffers come and go with the resident set): the growth of the peak resident
  set (VmHWM, reset just before the call) above the resident set before it, and for ours also
  tracemalloc's peak (NumPy reports its buffers to it) and the bytes the plan keeps (folded
  constants).

`--size test` runs the zoo as the tests use it (tiny: it measures per-op overhead); `--size
medium` scales batch, width and sequence to realistic sizes (transformer d_model=256, seq=128,
batch=8; CNN 64 channels at 56x56; MLP 1024 wide, batch 256; ...) by subclasses of the zoo's
modules that keep their `forward`, so both sizes run the same programs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARIABLES = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "ATEN2PRIMS_NUM_THREADS",
)
SIZES = ("test", "medium")
# Each timed loop runs at least this long (and at least --repeats times) per engine.
MIN_SECONDS = 0.5


# -- the zoo at two sizes (torch imported lazily: workers import it after setting threads) ---------


def _zoo() -> Any:
    """examples/models.py, loaded by path (this file is also called models.py)."""
    spec = importlib.util.spec_from_file_location("zoo_models", ROOT / "examples" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["zoo_models"] = module
    spec.loader.exec_module(module)
    return module


def _medium_models(zoo: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], tuple[Any, ...]]]]:
    """The zoo's architectures scaled up: each subclass keeps its parent's `forward`."""
    import torch
    from torch import nn

    class MLP(zoo.MLP):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.fc1 = nn.Linear(1024, 1024)
            self.fc2 = nn.Linear(1024, 1024)

    class CNN(zoo.CNN):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)
            )
            self.block = zoo.ResidualBlock(64)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Linear(64, 10)

    class Encoder(zoo.Encoder):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            layer = nn.TransformerEncoderLayer(
                d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0, batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    class Attention(zoo.Attention):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.attention = nn.MultiheadAttention(256, 8, batch_first=True)

    class Recurrent(zoo.Recurrent):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.lstm = nn.LSTM(128, 256, num_layers=2, batch_first=True)

    class UNet(zoo.UNet):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.down1 = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.SiLU()
            )
            self.down2 = nn.Sequential(
                nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GroupNorm(8, 64), nn.SiLU()
            )
            self.bottom = nn.Sequential(
                nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.GroupNorm(8, 64), nn.SiLU()
            )
            self.up_nearest = nn.Upsample(scale_factor=2, mode="nearest")
            self.up_transposed = nn.ConvTranspose2d(128, 64, 2, stride=2)
            self.up_bilinear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.out = nn.Conv2d(64 + 32, 2, 1)

    class EmbeddingHead(zoo.EmbeddingHead):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.embedding = nn.Embedding(10000, 256)
            self.norm = nn.LayerNorm(256)
            self.fc1 = nn.Linear(256, 1024)
            self.fc2 = nn.Linear(1024, 1000)

    def encoder_inputs() -> tuple[Any, ...]:
        return torch.randn(8, 128, 256), torch.triu(
            torch.full((128, 128), float("-inf")), diagonal=1
        )

    return {
        "mlp": (MLP, lambda: (torch.randn(256, 1024),)),
        "cnn": (CNN, lambda: (torch.randn(8, 3, 112, 112),)),
        "transformer": (Encoder, encoder_inputs),
        "attention": (Attention, lambda: tuple(torch.randn(8, 128, 256) for _ in range(3))),
        "lstm": (Recurrent, lambda: (torch.randn(8, 32, 128),)),
        "unet": (UNet, lambda: (torch.randn(2, 3, 128, 128),)),
        "embedding": (EmbeddingHead, lambda: (torch.randint(0, 10000, (8, 128)),)),
    }


def build(name: str, size: str) -> tuple[Any, tuple[Any, ...]]:
    """The model in eval mode with seeded weights (as `examples/models.py` builds them) and inputs."""
    import torch
    from torch import nn

    zoo = _zoo()
    if size == "test":
        return zoo.build(name)
    make_model, make_inputs = _medium_models(zoo)[name]
    torch.manual_seed(0)
    model = make_model()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval(), make_inputs()


def model_names() -> list[str]:
    return list(_zoo().MODELS)


# -- the parent: export, then measure each model in subprocesses ----------------------------------------


def export(name: str, size: str, directory: Path) -> Path:
    """Saves `<name>-<size>.pt2`, the model's state dict and its inputs; returns the archive."""
    import numpy as np
    import torch

    model, inputs = build(name, size)
    program = torch.export.export(model, inputs).run_decompositions()
    stem = directory / f"{name}-{size}"
    torch.export.save(program, str(stem.with_suffix(".pt2")))
    torch.save(model.state_dict(), str(stem.with_suffix(".state")))
    np.savez(stem.with_suffix(".npz"), *[t.numpy() for t in inputs])
    return stem.with_suffix(".pt2")


def _run_worker(arguments: list[str], *, one_thread: bool) -> dict[str, Any]:
    environment = dict(os.environ)
    if arguments[0] == "memory":
        # A fixed mmap threshold: glibc otherwise raises it after the first large free, and
        # later large buffers come from the heap, reused without showing in the resident set.
        environment["MALLOC_MMAP_THRESHOLD_"] = str(1 << 17)
        environment["MALLOC_TRIM_THRESHOLD_"] = str(1 << 17)
    for variable in THREAD_VARIABLES:
        if one_thread:
            environment[variable] = "1"
        else:
            environment.pop(variable, None)
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"worker {arguments} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def measure_model(
    name: str, size: str, directory: Path, options: argparse.Namespace
) -> dict[str, Any]:
    common = [
        "--model",
        name,
        "--size",
        size,
        "--dir",
        str(directory),
        "--repeats",
        str(options.repeats),
    ]
    result: dict[str, Any] = {"model": name}
    result["one"] = _run_worker(["speed", *common, "--threads", "1"], one_thread=True)
    if not options.no_default_threads:
        result["default"] = _run_worker(
            ["speed", *common, "--threads", "default"], one_thread=False
        )
    if not options.no_memory:
        result["ours_memory"] = _run_worker(
            ["memory", *common, "--engine", "ours"], one_thread=True
        )
        result["torch_memory"] = _run_worker(
            ["memory", *common, "--engine", "torch"], one_thread=True
        )
    return result


def _ms(seconds: float) -> str:
    return (
        f"{seconds * 1e3:.3f}"
        if seconds < 0.01
        else f"{seconds * 1e3:.1f}"
        if seconds < 1
        else f"{seconds * 1e3:.0f}"
    )


def _mb(count: float) -> str:
    return f"{count / 2**20:.2f}"


def print_table(size: str, rows: list[dict[str, Any]]) -> None:
    one_threads = rows[0]["one"]["threads"] if rows else 1
    default_threads = next((r["default"]["threads"] for r in rows if "default" in r), None)
    print(f"\n== size {size}: times in ms (medians), ratio = ours / torch eager; memory in MiB ==")
    header = (
        f"{'model':<12} {'nodes':>11} {'steps':>5} {'load':>6} {'lower':>6} {'cold':>6} {'first':>7} | "
        f"{'ours':>8} {'torch':>8} {'ratio':>5} {'wall':>5} ({one_threads} thread, cpu time)"
    )
    if default_threads is not None:
        header += f" | {'ours':>8} {'torch':>8} {'ratio':>5} ({default_threads} threads, wall)"
    if any("ours_memory" in row for row in rows):
        header += f" | {'ours rss':>8} {'ours tm':>8} {'folded':>7} {'torch':>8} {'ratio':>5}"
    print(header)
    for row in rows:
        one = row["one"]
        line = (
            f"{row['model']:<12} {one['aten_nodes']:>4}->{one['prims_nodes']:<5} {one['steps']:>5} "
            f"{_ms(one['load']):>6} {_ms(one['lower']):>6} {_ms(one['lower_cold']):>6} {_ms(one['first']):>7} | "
            f"{_ms(one['ours_cpu']):>8} {_ms(one['torch_cpu']):>8} {one['ours_cpu'] / one['torch_cpu']:5.2f} "
            f"{one['ours'] / one['torch']:5.2f}{'':>21}"
        )
        if "default" in row:
            default = row["default"]
            line += f" | {_ms(default['ours']):>8} {_ms(default['torch']):>8} {default['ours'] / default['torch']:5.2f}{'':>20}"
        if "ours_memory" in row:
            ours, theirs = row["ours_memory"], row["torch_memory"]
            ratio = ours["rss"] / theirs["rss"] if theirs["rss"] > 0 else float("nan")
            line += (
                f" | {_mb(ours['rss']):>8} {_mb(ours['traced']):>8} {_mb(ours['resident']):>7} "
                f"{_mb(theirs['rss']):>8} {ratio:5.2f}"
            )
        print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=(*SIZES, "both"), default="both")
    parser.add_argument(
        "--repeats", type=int, default=15, help="at least this many timed calls per engine"
    )
    parser.add_argument("--only", default=None, help="regex over model names")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-default-threads", action="store_true")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", default="1", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker is not None:
        return worker(options)
    warnings.filterwarnings("ignore")
    sizes = SIZES if options.size == "both" else (options.size,)
    names = [n for n in model_names() if not options.only or re.search(options.only, n)]
    with tempfile.TemporaryDirectory(prefix="aten2prims-bench-") as temporary:
        directory = Path(temporary)
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} cpu(s); exporting to {directory}",
            flush=True,
        )
        for size in sizes:
            rows = []
            for name in names:
                export(name, size, directory)
                rows.append(measure_model(name, size, directory, options))
            print_table(size, rows)
    return 0


# -- workers (fresh processes) ------------------------------------------------------------------------


def _setup(options: argparse.Namespace) -> tuple[Any, Any, Any, list[Any], tuple[Any, ...]]:
    """(aten2prims, the loaded graph, torch model, NumPy inputs, torch inputs)."""
    warnings.filterwarnings("ignore")
    import numpy as np
    import torch

    if options.threads == "1":
        torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    import aten2prims

    stem = Path(options.dir) / f"{options.model}-{options.size}"
    model, _ = build(options.model, options.size)
    model.load_state_dict(torch.load(str(stem.with_suffix(".state"))))
    with np.load(stem.with_suffix(".npz")) as archive:
        arrays = [archive[f"arr_{i}"] for i in range(len(archive.files))]
    tensors = tuple(torch.from_numpy(a.copy()) for a in arrays)
    return aten2prims, stem.with_suffix(".pt2"), model, arrays, tensors


def _median_time(function: Callable[[], Any], repeats: int) -> float:
    times = []
    start = time.perf_counter()
    while len(times) < repeats or (time.perf_counter() - start < MIN_SECONDS and len(times) < 1000):
        t = time.perf_counter()
        function()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def speed_worker(options: argparse.Namespace) -> dict[str, Any]:
    aten2prims, path, model, arrays, tensors = _setup(options)
    import torch

    from aten2prims.executor import plan_for

    start = time.perf_counter()
    graph = aten2prims.load(path)
    first_load = time.perf_counter() - start
    start = time.perf_counter()
    lowered = aten2prims.lower(graph)
    lower_cold = time.perf_counter() - start
    load = min(first_load, _median_time(lambda: aten2prims.load(path), 3))
    lower = _median_time(lambda: aten2prims.lower(graph), 5)
    start = time.perf_counter()
    aten2prims.execute(lowered, arrays)
    first = time.perf_counter() - start

    def ours() -> Any:
        return aten2prims.execute(lowered, arrays)

    def theirs() -> Any:
        with torch.no_grad():
            return model(*tensors)

    theirs()
    ours_times: list[float] = []
    torch_times: list[float] = []
    # At one thread the engines alternate call by call. With several threads they run in blocks:
    # a BLAS or OpenMP pool keeps spinning for a while after its last call and would slow the
    # other engine's threads down on the same cores.
    block = 1 if options.threads == "1" else max(1, options.repeats // 3)
    ours_cpu: list[float] = []
    torch_cpu: list[float] = []
    start = time.perf_counter()
    while len(ours_times) < options.repeats or (
        time.perf_counter() - start < 2 * MIN_SECONDS and len(ours_times) < 1000
    ):
        for function, times, cpu_times in (
            (ours, ours_times, ours_cpu),
            (theirs, torch_times, torch_cpu),
        ):
            for _ in range(block):
                t, c = time.perf_counter(), time.process_time()
                function()
                times.append(time.perf_counter() - t)
                cpu_times.append(time.process_time() - c)
    return {
        "threads": torch.get_num_threads(),
        "aten_nodes": len(graph.nodes),
        "prims_nodes": len(lowered.nodes),
        "steps": len(plan_for(lowered).steps),
        "load": load,
        "lower": lower,
        "lower_cold": lower_cold,
        "first": first,
        "ours": statistics.median(ours_times),
        "torch": statistics.median(torch_times),
        "ours_cpu": statistics.median(ours_cpu),
        "torch_cpu": statistics.median(torch_cpu),
    }


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_peak() -> None:
    """Resets VmHWM to the current resident set (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def memory_worker(options: argparse.Namespace) -> dict[str, Any]:
    """Peak growth of one call above the resident set before it (plan built beforehand)."""
    import gc
    import tracemalloc

    aten2prims, path, model, arrays, tensors = _setup(options)
    import torch

    result: dict[str, Any] = {"traced": 0, "resident": 0}
    if options.engine == "ours":
        from aten2prims.executor import plan_for

        lowered = aten2prims.lower(aten2prims.load(path))
        plan = plan_for(lowered)
        result["resident"] = getattr(plan, "resident_bytes", 0)

        def call() -> Any:
            return aten2prims.execute(lowered, arrays)
    else:

        def call() -> Any:
            with torch.no_grad():
                return model(*tensors)

    call()  # warm-up: lazy imports, thread pools, first-call caches (its outputs are dropped)
    gc.collect()
    gc.disable()
    before = _resident_bytes()
    _reset_peak()
    outputs = call()
    result["rss"] = max(0, _peak_bytes() - before)
    del outputs
    if options.engine == "ours":
        tracemalloc.start()
        call()
        result["traced"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result


def worker(options: argparse.Namespace) -> int:
    result = speed_worker(options) if options.worker == "speed" else memory_worker(options)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
