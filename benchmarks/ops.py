"""Speed of our lowered graphs on the NumPy executor against torch's own kernels, one thread each.

    .venv/bin/python benchmarks/ops.py [--repeats N] [--only REGEX]

For each case: a one-node aten graph of the op, lowered to prims and executed by
`aten2prims.execute` (plan built once, as in real use), against `torch.ops.aten.<op>` on the same
inputs; or, for a `torch.nn` module whose exported graph holds several aten ops (hardswish, SiLU, an
LSTM, the blocks of MobileNetV3, EfficientNet-B0 and ConvNeXt-tiny built on the hot spots), that
graph (`torch.export` and its default decompositions, as a user's model exports; an
attention and a DeiT-tiny encoder block among them)
against the module in eager mode; in one process, alternating the two, with torch limited to one thread
(`torch.set_num_threads(1)`) and NumPy's BLAS too (OPENBLAS/OMP/MKL_NUM_THREADS=1, set before
NumPy loads). Prints the median time of each and their ratio (ours / torch; the target is <= 1.5,
1.25 for the hot spots of depthwise convolution, activations and normalizations).
Ops whose rules do not exist yet print "not yet lowered".

Times are the process's CPU time (`time.process_time`): with one thread it equals the wall time
on an idle machine, and it is not inflated when other processes share the cores (a run
preempted halfway would otherwise count the time it spent waiting). The wall-time ratio is
printed alongside.
"""

from __future__ import annotations

import os

# One BLAS thread, set before NumPy or torch load their BLAS (hence the imports below, E402),
# and one executor thread.
for _variable in (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "ATEN2PRIMS_NUM_THREADS",
):
    os.environ[_variable] = "1"

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from aten2prims.executor import execute
from aten2prims.frontends.fx import from_fx
from aten2prims.passes.lower import lower
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph, torch_outputs
from decompositions import RULES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ is not a package
import suite  # the model suite's MobileNetV3 block, after the path above


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(shape, generator=_GENERATOR)


_GENERATOR = torch.Generator().manual_seed(0)


class ModuleCase:
    """A module and its inputs, measured as its exported graph against the module in eager mode."""

    def __init__(self, module: torch.nn.Module, *inputs: torch.Tensor) -> None:
        self.module = module.eval()
        self.inputs = inputs


class _Attention(torch.nn.Module):
    """scaled_dot_product_attention of given q, k, v (exported: the math decomposition, its safe
    softmax included)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _deit_block() -> torch.nn.Module:
    """A DeiT-tiny encoder block: pre-norm, 3 heads of 64, GELU MLP 768."""
    return torch.nn.TransformerEncoderLayer(
        192, 3, 768, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )


class _MBConv(torch.nn.Module):
    """EfficientNet-B0's block: expansion, depthwise 3x3, squeeze-and-excitation, SiLU."""

    def __init__(self, channels: int = 24, expanded: int = 144) -> None:
        super().__init__()
        nn = torch.nn
        self.expand = nn.Sequential(
            nn.Conv2d(channels, expanded, 1, bias=False),
            nn.BatchNorm2d(expanded),
            nn.SiLU(),
            nn.Conv2d(expanded, expanded, 3, padding=1, groups=expanded, bias=False),
            nn.BatchNorm2d(expanded),
            nn.SiLU(),
        )
        self.squeeze = nn.Conv2d(expanded, 6, 1)
        self.excite = nn.Conv2d(6, expanded, 1)
        self.project = nn.Sequential(
            nn.Conv2d(expanded, channels, 1, bias=False), nn.BatchNorm2d(channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.expand(x)
        gate = torch.sigmoid(
            self.excite(torch.nn.functional.silu(self.squeeze(h.mean((2, 3), keepdim=True))))
        )
        return x + self.project(h * gate)


class _ConvNeXtBlock(torch.nn.Module):
    """ConvNeXt-tiny's first-stage block: depthwise 7x7, layer norm, MLP with GELU."""

    def __init__(self, channels: int = 96) -> None:
        super().__init__()
        nn = torch.nn
        self.depthwise = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.up = nn.Linear(channels, 4 * channels)
        self.down = nn.Linear(4 * channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depthwise(x).permute(0, 2, 3, 1)
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(h))))
        return x + h.permute(0, 3, 1, 2)


def _depthwise(
    c: int, size: int, kernel: int, stride: int = 1
) -> tuple[str, Callable[[], AtenCall]]:
    label = f"depthwise N=1 C={c} {size}x{size} k{kernel}" + (f" s{stride}" if stride > 1 else "")
    return label, lambda: AtenCall(
        "aten.convolution.default",
        (
            _randn(1, c, size, size),
            _randn(c, 1, kernel, kernel),
            _randn(c),
            [stride, stride],
            [kernel // 2, kernel // 2],
            [1, 1],
            False,
            [0, 0],
            c,
        ),
        {},
    )


def _conv(
    n: int, c_in: int, c_out: int, size: int, kernel: int, stride: int = 1
) -> tuple[str, Callable[[], AtenCall]]:
    padding = kernel // 2
    label = f"N={n} {c_in}->{c_out} {size}x{size} k{kernel} s{stride}"
    return label, lambda: AtenCall(
        "aten.convolution.default",
        (
            _randn(n, c_in, size, size),
            _randn(c_out, c_in, kernel, kernel),
            _randn(c_out),
            [stride, stride],
            [padding, padding],
            [1, 1],
            False,
            [0, 0],
            1,
        ),
        {},
    )


CASES: list[tuple[str, str, Callable[[], AtenCall | ModuleCase]]] = [
    (
        "aten.mm.default",
        "1024x1024 @ 1024x1024",
        lambda: AtenCall("aten.mm.default", (_randn(1024, 1024), _randn(1024, 1024)), {}),
    ),
    (
        "aten.mm.default",
        "256x4096 @ 4096x512",
        lambda: AtenCall("aten.mm.default", (_randn(256, 4096), _randn(4096, 512)), {}),
    ),
    (
        "aten.bmm.default",
        "32 x 256x256 @ 256x256",
        lambda: AtenCall("aten.bmm.default", (_randn(32, 256, 256), _randn(32, 256, 256)), {}),
    ),
    (
        "aten.bmm.default",
        "96 x 128x64 @ 64x128",
        lambda: AtenCall("aten.bmm.default", (_randn(96, 128, 64), _randn(96, 64, 128)), {}),
    ),
    (
        "aten.addmm.default",
        "linear 512x1024 -> 4096",
        lambda: AtenCall(
            "aten.addmm.default", (_randn(4096), _randn(512, 1024), _randn(1024, 4096)), {}
        ),
    ),
    ("aten.convolution.default", *_conv(8, 64, 64, 56, 3)),
    ("aten.convolution.default", *_conv(8, 128, 128, 28, 3)),
    ("aten.convolution.default", *_conv(8, 256, 256, 14, 3)),
    ("aten.convolution.default", *_conv(8, 128, 256, 28, 3, stride=2)),
    ("aten.convolution.default", *_conv(1, 64, 64, 56, 3)),
    ("aten.convolution.default", *_depthwise(96, 112, 3)),
    ("aten.convolution.default", *_depthwise(96, 56, 7)),
    ("aten.convolution.default", *_depthwise(96, 112, 3, stride=2)),
    ("aten.convolution.default", *_depthwise(768, 7, 7)),
    # EfficientNet-B0's 5x5 layers (torch runs them with oneDNN; its 3x3 ones without)
    ("aten.convolution.default", *_depthwise(672, 14, 5)),
    ("aten.convolution.default", *_depthwise(144, 56, 5, stride=2)),
    ("aten.convolution.default", *_conv(8, 64, 256, 56, 1)),
    ("aten.convolution.default", *_conv(8, 256, 64, 56, 1)),
    ("aten.convolution.default", *_conv(8, 1024, 256, 14, 1)),
    (
        "aten.convolution.default",
        "transposed N=8 128->64 28x28 k2 s2 (U-Net)",
        lambda: AtenCall(
            "aten.convolution.default",
            (
                _randn(8, 128, 28, 28),
                _randn(128, 64, 2, 2),
                _randn(64),
                [2, 2],
                [0, 0],
                [1, 1],
                True,
                [0, 0],
                1,
            ),
            {},
        ),
    ),
    (
        "aten.convolution.default",
        "transposed N=8 128->64 16x16 k4 s2 p1 (DCGAN)",
        lambda: AtenCall(
            "aten.convolution.default",
            (
                _randn(8, 128, 16, 16),
                _randn(128, 64, 4, 4),
                None,
                [2, 2],
                [1, 1],
                [1, 1],
                True,
                [0, 0],
                1,
            ),
            {},
        ),
    ),
    (
        "aten.upsample_nearest2d.vec",
        "N=8 C=64 56x56 x2",
        lambda: AtenCall(
            "aten.upsample_nearest2d.vec", (_randn(8, 64, 56, 56), None, [2.0, 2.0]), {}
        ),
    ),
    (
        "aten.upsample_bilinear2d.vec",
        "N=8 C=64 56x56 x2",
        lambda: AtenCall(
            "aten.upsample_bilinear2d.vec", (_randn(8, 64, 56, 56), None, False, [2.0, 2.0]), {}
        ),
    ),
    (
        "aten.grid_sampler_2d.default",
        "N=8 C=64 56x56 bilinear zeros",
        lambda: AtenCall(
            "aten.grid_sampler_2d.default",
            (
                _randn(8, 64, 56, 56),
                torch.rand(8, 56, 56, 2, generator=_GENERATOR) * 2 - 1,
                0,
                0,
                False,
            ),
            {},
        ),
    ),
    (
        "aten.max_pool2d_with_indices.default",
        "N=8 C=64 112x112 k3 s2 p1",
        lambda: AtenCall(
            "aten.max_pool2d_with_indices.default",
            (_randn(8, 64, 112, 112), [3, 3], [2, 2], [1, 1]),
            {},
        ),
    ),
    (
        "aten.native_layer_norm.default",
        "8x196x768 over 768",
        lambda: AtenCall(
            "aten.native_layer_norm.default",
            (_randn(8, 196, 768), [768], _randn(768), _randn(768), 1e-5),
            {},
        ),
    ),
    (
        "aten.native_batch_norm.default",
        "N=8 C=64 56x56 training",
        lambda: AtenCall(
            "aten.native_batch_norm.default",
            (
                _randn(8, 64, 56, 56),
                _randn(64),
                _randn(64),
                torch.zeros(64),
                torch.ones(64),
                True,
                0.1,
                1e-5,
            ),
            {},
        ),
    ),
    (
        "aten.native_batch_norm.default",
        "N=8 C=64 56x56 eval",
        lambda: AtenCall(
            "aten.native_batch_norm.default",
            (
                _randn(8, 64, 56, 56),
                _randn(64),
                _randn(64),
                torch.zeros(64),
                torch.ones(64),
                False,
                0.1,
                1e-5,
            ),
            {},
        ),
    ),
    (
        "aten.relu.default",
        "8x196x768",
        lambda: AtenCall("aten.relu.default", (_randn(8, 196, 768),), {}),
    ),
    (
        "aten.hardtanh.default",
        "relu6 1x96x112x112",
        lambda: AtenCall("aten.hardtanh.default", (_randn(1, 96, 112, 112), 0.0, 6.0), {}),
    ),
    (
        "aten.gelu.default",
        "8x196x768 erf",
        lambda: AtenCall("aten.gelu.default", (_randn(8, 196, 768),), {}),
    ),
    (
        "aten._softmax.default",
        "4x3x197x197 over the last dim",
        lambda: AtenCall("aten._softmax.default", (_randn(4, 3, 197, 197), -1, False), {}),
    ),
    (
        "module",
        "sdpa 4x3x197x64 (DeiT-tiny)",
        lambda: ModuleCase(
            _Attention(), _randn(4, 3, 197, 64), _randn(4, 3, 197, 64), _randn(4, 3, 197, 64)
        ),
    ),
    (
        "module",
        "DeiT-tiny block 4x197x192",
        lambda: ModuleCase(_deit_block(), _randn(4, 197, 192)),
    ),
    (
        "module",
        "Hardswish 1x96x112x112",
        lambda: ModuleCase(torch.nn.Hardswish(), _randn(1, 96, 112, 112)),
    ),
    (
        "aten.sigmoid.default",
        "4x96x112x112",
        lambda: AtenCall("aten.sigmoid.default", (_randn(4, 96, 112, 112),), {}),
    ),
    (
        "module",
        "SiLU 4x96x112x112",
        lambda: ModuleCase(torch.nn.SiLU(), _randn(4, 96, 112, 112)),
    ),
    (
        "module",
        "LSTM 256->256 seq 64 N=8",
        lambda: ModuleCase(torch.nn.LSTM(256, 256), _randn(64, 8, 256)),
    ),
    (
        "module",
        "MobileNetV3 block 16->64 112x112",
        lambda: ModuleCase(
            suite.MobileNetV3Block(16, 3, 64, 16, False, "HS", 1), _randn(1, 16, 112, 112)
        ),
    ),
    (
        "module",
        "EfficientNet block 24->144 56x56",
        lambda: ModuleCase(_MBConv(), _randn(1, 24, 56, 56)),
    ),
    (
        "module",
        "ConvNeXt block 96 56x56",
        lambda: ModuleCase(_ConvNeXtBlock(), _randn(1, 96, 56, 56)),
    ),
]


def _time(function: Callable[[], Any]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    function()
    return time.process_time() - cpu, time.perf_counter() - wall


def _engines(case: AtenCall | ModuleCase) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(ours, torch's) runs of a case."""
    if isinstance(case, ModuleCase):
        program = torch.export.export(case.module, case.inputs).run_decompositions()
        lowered = lower(from_fx(program))
        arrays: Any = [t.numpy() for t in case.inputs]
        module, inputs = case.module, case.inputs

        def theirs() -> Any:
            with torch.no_grad():
                return module(*inputs)

    else:
        call = case
        graph, arrays = build_graph(call, torch_outputs(call))
        lowered = lower(graph)
        packet = getattr(torch.ops.aten, call.op.split(".")[1])
        torch_op = getattr(packet, call.op.split(".")[2])

        def theirs() -> Any:
            with torch.no_grad():
                return torch_op(*call.args, **call.kwargs)

    def ours() -> Any:
        return execute(lowered, arrays)

    return ours, theirs


def measure(case: AtenCall | ModuleCase, repeats: int) -> tuple[float, float, float]:
    """Median CPU seconds of (ours, torch) and the ratio of their median wall times, alternating
    runs after one warm-up each."""
    ours, theirs = _engines(case)

    ours()
    theirs()
    our_times, torch_times = [], []
    for _ in range(repeats):
        our_times.append(_time(ours))
        torch_times.append(_time(theirs))
    wall = statistics.median(t[1] for t in our_times) / statistics.median(t[1] for t in torch_times)
    return (
        statistics.median(t[0] for t in our_times),
        statistics.median(t[0] for t in torch_times),
        wall,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default=None, help="regex over 'op case'")
    options = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; repeats {options.repeats}; median CPU times in ms")
    print(f"{'op':<38} {'case':<32} {'ours':>9} {'torch':>9} {'ratio':>6} {'wall':>6}")
    for op, label, make in CASES:
        if options.only and not re.search(options.only, f"{op} {label}"):
            continue
        short = op.removeprefix("aten.")
        if op != "module" and op not in RULES:
            print(f"{short:<38} {label:<32} {'not yet lowered':>26}")
            continue
        ours, theirs, wall = measure(make(), options.repeats)
        print(
            f"{short:<38} {label:<32} {ours * 1e3:9.2f} {theirs * 1e3:9.2f} {ours / theirs:6.2f} {wall:6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
