"""Threads (aten2prims/executor/threads.py): execute(..., threads=N) runs the parts of large
steps on N threads and BLAS on N threads; the results are bit for bit those of one thread, on
real models, and torch agrees with them."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl
import torch
from _model_checks import assert_like_torch

import aten2prims
import prims
from aten2prims.cli import main
from aten2prims.executor import plan as plan_module
from aten2prims.executor import plan_for
from aten2prims.executor import segments as segments_module
from aten2prims.executor import threads as threads_module
from aten2prims.executor.attention import AttentionKernel
from aten2prims.executor.chains import ChainKernel
from aten2prims.executor.contraction_fusion import ContractionKernel
from aten2prims.executor.filled_scatter import FilledScatter
from aten2prims.executor.multiply_accumulate import MultiplyAccumulateRecipe
from aten2prims.executor.padded_products import PaddedContraction
from aten2prims.executor.plan import Plan
from aten2prims.executor.segments import SegmentKernel
from aten2prims.executor.select import Clamp
from aten2prims.executor.threads import (
    PART_BYTES,
    THREADS_VARIABLE,
    Parted,
    ReducedParted,
    default_threads,
    run_parts,
    running_with,
)
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import DType, TensorMeta
from prims import mkl
from prims.builder import Builder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _plan_switches import plan_switches
from _thread_checks import assert_one_threads_bits
from models import build

ROOT = Path(__file__).resolve().parents[1]


def _inputs(name: str) -> tuple[torch.Tensor, ...]:
    """Inputs making the zoo's models' intermediates megabytes large (split into parts)."""
    torch.manual_seed(2)
    if name == "cnn":
        return (torch.randn(8, 3, 64, 64),)
    if name == "unet":
        return (torch.randn(2, 3, 64, 64),)
    if name == "mlp":
        return (torch.randn(65536, 16),)
    sequence = 128
    mask = torch.triu(torch.full((sequence, sequence), float("-inf")), diagonal=1)
    return torch.randn(8, sequence, 32), mask


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict:
    directory = tmp_path_factory.mktemp("threads")
    made = {}
    for name in ("cnn", "transformer", "unet", "mlp"):
        model, _ = build(name)
        inputs = _inputs(name)
        program = torch.export.export(model, inputs).run_decompositions()
        torch.export.save(program, directory / f"{name}.pt2")
        graph = aten2prims.lower(aten2prims.load(directory / f"{name}.pt2"))
        with torch.no_grad():
            expected = to_numpy(model(*inputs))
        made[name] = (graph, [to_numpy(t) for t in inputs], expected)
    return made


@pytest.mark.parametrize("name", ["cnn", "transformer", "unet", "mlp"])
def test_every_thread_count_gives_one_threads_bits(name: str, models: dict) -> None:
    graph, inputs, expected = models[name]
    one = aten2prims.execute(graph, inputs, threads=1)
    np.testing.assert_allclose(one[0], expected, rtol=1e-4, atol=1e-4)
    assert_one_threads_bits(graph, inputs, one, repeats=2)


def test_large_steps_are_split_into_parts(models: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The models above do run in parts: elementwise steps, reductions, chunked convolutions
    and matrix products. (A convolution's recipes are made at its first call: one call first,
    so the test does not depend on another having run.)"""
    for name in models:
        aten2prims.execute(models[name][0], models[name][1], threads=1)
    cnn = plan_for(models["cnn"][0])
    in_segments = {id(m.step) for segment in _segments(models["cnn"][0]) for m in segment.members}
    large = [
        step
        for step in cnn.steps
        if step.elementwise
        and step.out_metas[0].dtype.itemsize * math.prod(step.out_metas[0].shape) >= 2 * PART_BYTES
    ]
    assert all(type(step.kernel) is Parted or id(step) in in_segments for step in large)
    absorbed = [
        entry.function
        for step in cnn.steps
        if isinstance(step.kernel, ContractionKernel)
        for entry in step.kernel.epilogue
        if entry.function is not None
    ]
    assert absorbed, "the ReLUs run in the convolutions' epilogues, on their chunks and parts"
    chunked = [
        recipe
        for step in cnn.steps
        if isinstance(step.kernel, ContractionKernel)
        for recipe in step.kernel.recipes()
        if recipe.levels
    ]
    assert chunked, "a convolution's im2col runs in chunks, which the threads share"
    transformer = plan_for(models["transformer"][0])
    attention = [step.kernel for step in transformer.steps if type(step.kernel) is AttentionKernel]
    assert attention and all(len(kernel.parts) >= 2 for kernel in attention), "blocks as parts"
    # Unfused, the attention's scores are large steps of their own (of 2-4 MiB here: split in
    # parts of 1 MiB).
    monkeypatch.setattr(threads_module, "PART_BYTES", 1 << 20)
    unfused = _unfused_attention_plan(models["transformer"][0])
    assert any(type(step.kernel) is Parted for step in unfused.steps)
    assert any(type(step.kernel) is ReducedParted for step in unfused.steps), "softmax"
    # The MLP's linear layers (65536 rows) run in a segment's row parts.
    mlp = {id(m.step) for segment in _segments(models["mlp"][0]) for m in segment.members}
    products = [
        step
        for step in plan_for(models["mlp"][0]).steps
        if isinstance(step.kernel, ContractionKernel) and id(step) in mlp
    ]
    assert products, "a linear layer's product is shared in a segment's parts"


def test_blas_threads_are_restored_after_a_call(models: dict) -> None:
    graph, inputs, _ = models["mlp"]
    before = [info["num_threads"] for info in threadpoolctl.threadpool_info()]
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        aten2prims.execute(graph, inputs, threads=2)
        assert all(
            info["num_threads"] == 1
            for info in threadpoolctl.threadpool_info()
            if info["user_api"] == "blas"
        )
    assert [info["num_threads"] for info in threadpoolctl.threadpool_info()] == before


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_workers_run_on_cpus_other_than_the_callers() -> None:
    allowed = os.sched_getaffinity(0)
    caller = min(threads_module.CPUS)
    ran_on: list[int] = []
    os.sched_setaffinity(0, {caller})
    try:
        with running_with(3):
            run_parts([lambda: ran_on.append(caller), lambda: None, lambda: None])
            workers = threads_module._CALL.workers
            assert workers is not None
            masks = [os.sched_getaffinity(native_id) for native_id in workers.native_ids]
    finally:
        os.sched_setaffinity(0, allowed)
    assert threads_module.CURRENT_CPU is not None, "glibc's sched_getcpu is found"
    assert workers.away_from == caller
    others = set(threads_module.CPUS - {caller})
    if others:  # every CPU but the caller's: the scheduler still chooses among them
        assert all(mask == others for mask in masks)
    else:  # one CPU: nowhere else to go
        assert all(mask == {caller} for mask in masks)
    assert ran_on == [caller]


def test_the_default_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_VARIABLE, "3")
    assert default_threads() == 3
    monkeypatch.setenv(THREADS_VARIABLE, "zero")
    with pytest.raises(ValueError, match=THREADS_VARIABLE):
        default_threads()
    monkeypatch.delenv(THREADS_VARIABLE)
    assert default_threads() >= 1


def test_a_thread_count_below_one_is_refused(models: dict) -> None:
    graph, inputs, _ = models["mlp"]
    with pytest.raises(ValueError, match="threads"):
        aten2prims.execute(graph, inputs, threads=0)


def test_cli_run_takes_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = ROOT / "examples" / "cnn.pt2"
    inputs = ROOT / "examples" / "cnn.inputs.npz"
    saved = []
    for threads in ("1", "2"):
        out = tmp_path / f"out{threads}.npz"
        command = ["run", str(example), "--inputs", str(inputs), "--output", str(out)]
        assert main([*command, "--threads", threads]) == 0
        with np.load(out) as archive:
            saved.append(archive["output_0"])
    assert saved[0].tobytes() == saved[1].tobytes()
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(example), "--threads", "0"])
    assert exit_.value.code == 2
    assert "positive integer" in capsys.readouterr().err


def test_a_result_written_into_an_operand_read_transposed_is_not_split() -> None:
    """add(a, transpose(a)) written into a's buffer (a dies there): parts would read elements
    an earlier part already overwrote; the step runs whole and NumPy copies the transpose.
    (Reduced after, by a row maximum, not negated: add and neg would be an elementwise chain,
    chains.py; a row sum would be BLAS's, row_sums.py, not NumPy's bits.)"""
    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((1024, 1024), DType.float32))
        a = prims.exp(x)
        graph = builder.finish([prims.amax(prims.add(a, prims.transpose(a, [1, 0])), [1])])
    data = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    add = next(s for s in plan_for(graph).steps if s.node.op == "prims.add")
    assert type(add.kernel) is Parted and add.out_argument == 0, "in place, and split"
    expected = np.max(np.exp(data) + np.exp(data).T, axis=1)
    for threads in (1, 2):
        result = aten2prims.execute(graph, {"x": data}, threads=threads)[0]
        assert result.tobytes() == expected.tobytes()


def test_a_forked_child_runs_on_threads_of_its_own(models: dict) -> None:
    """Pools are per process: a child forked after a call makes its own (the parent's
    threads do not exist in it)."""
    import multiprocessing

    graph, inputs, _ = models["cnn"]
    expected = aten2prims.execute(graph, inputs, threads=2)[0]
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        result = pool.apply_async(_run_in_child, (graph, inputs)).get(timeout=300)
    assert result.tobytes() == expected.tobytes()


def _run_in_child(graph: object, inputs: list[np.ndarray]) -> np.ndarray:
    return aten2prims.execute(graph, inputs, threads=2)[0]  # type: ignore[arg-type]  # a Graph


def _unfused_attention_plan(graph: aten2prims.Graph) -> Plan:
    """A new plan of the graph whose attention runs as its unfused steps (attention.py)."""
    with plan_switches(FUSE_ATTENTION=False):
        return plan_module.build_plan(graph)


def _lowered_like_torch(
    model: torch.nn.Module, tensors: tuple[torch.Tensor, ...], path: Path
) -> tuple[aten2prims.Graph, list[np.ndarray], list[np.ndarray]]:
    """The model exported, saved at `path` and lowered, its inputs as arrays, and its results
    at one thread, checked against torch's."""
    torch.export.save(torch.export.export(model, tensors).run_decompositions(), path)
    graph = aten2prims.lower(aten2prims.load(path))
    inputs = [to_numpy(t) for t in tensors]
    one = aten2prims.execute(graph, inputs, threads=1)
    assert_like_torch(one, model, tensors)
    return graph, inputs, one


def _segments(graph: object, plan: Plan | None = None) -> list[SegmentKernel]:
    plan = plan or plan_for(graph)  # type: ignore[arg-type]  # a Graph
    namespace = plan.run.function.__globals__  # type: ignore[attr-defined]  # codegen's function
    return [kernel for kernel in namespace.values() if isinstance(kernel, SegmentKernel)]


def test_runs_of_row_wise_steps_share_one_parallel_region(models: dict) -> None:
    """A softmax (amax, sub, exp, sum, div and the views between) and a layer norm's steps
    run as segments: one hand-off between threads for the run, not one per step. (A softmax
    between the two products of an attention runs inside the attention's blocks,
    attention.py: here the plan that leaves attention unfused.)"""
    graph = models["transformer"][0]
    segments = _segments(graph, _unfused_attention_plan(graph))
    kinds = [tuple(member.kind for member in segment.members) for segment in segments]
    assert any(k.count("reduce") >= 2 and k.count("map") >= 3 for k in kinds), kinds
    assert all(len(segment.bounds) >= 2 for segment in segments)
    # (The CNN has no such run: its batch norms and ReLUs run in the convolutions' epilogues:
    # test_large_steps_are_split_into_parts.)


def test_a_segment_never_reads_rows_another_part_writes() -> None:
    """mul(z, v) reads all of `a` (v is a seen as one row, broadcast along z's rows); add(a, 1)
    is then written into a's buffer (a dies there). In one segment each part would overwrite
    rows of `a` that the other parts' mul still reads, so the add starts a segment of its own."""
    n = 4096
    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((8, n), DType.float32))
        z = builder.add_input("z", TensorMeta((8, 8, n), DType.float32))
        a = prims.exp(x)
        product = prims.mul(z, prims.broadcast_in_dim(a, [8, 8, n], [1, 2]))
        graph = builder.finish([prims.neg(product), prims.neg(prims.add(a, 1.0))])
    rng = np.random.default_rng(0)
    data = {
        "x": rng.standard_normal((8, n)).astype(np.float32),
        "z": rng.standard_normal((8, 8, n)).astype(np.float32),
    }
    add = next(step for step in plan_for(graph).steps if step.node.op == "prims.add")
    assert add.out_argument == 0, "written into a's buffer"
    for segment in _segments(graph):
        ops = [member.step.node.op for member in segment.members]
        assert "prims.add" not in ops or "prims.mul" not in ops, ops
    a = np.exp(data["x"])
    for threads in (1, 2, 4):
        product, added = aten2prims.execute(graph, data, threads=threads)
        assert product.tobytes() == (-(data["z"] * a)).tobytes()
        assert added.tobytes() == (-(a + np.float32(1.0))).tobytes()


class _InvertedResidual(torch.nn.Module):
    """MobileNetV2's block: a 1x1 expansion, a 3x3 depthwise convolution (of `stride`) and a
    1x1 projection, each with a batch norm, the first two with `activation`; a residual add
    when the shapes allow."""

    def __init__(
        self, channels: int, out: int, stride: int, activation: type[torch.nn.Module]
    ) -> None:
        super().__init__()
        hidden = channels * 6
        self.layers = torch.nn.Sequential(
            torch.nn.Conv2d(channels, hidden, 1, bias=False),
            torch.nn.BatchNorm2d(hidden),
            activation(),
            torch.nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            torch.nn.BatchNorm2d(hidden),
            activation(),
            torch.nn.Conv2d(hidden, out, 1, bias=False),
            torch.nn.BatchNorm2d(out),
        )
        self.residual = stride == 1 and channels == out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layers(x)
        return x + y if self.residual else y


@pytest.fixture(scope="module")
def inverted_residuals(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """Three MobileNet blocks (ReLU6, SiLU, hardswish; strides 1, 2, 1) on 4x16x56x56 images:
    their depthwise inputs are padded copies of several MiB, split into parts."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        _InvertedResidual(16, 16, 1, torch.nn.ReLU6),
        _InvertedResidual(16, 24, 2, torch.nn.SiLU),
        _InvertedResidual(24, 24, 1, torch.nn.Hardswish),
    )
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):  # statistics of a trained network
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.5, 0.5)
    model.eval()
    inputs = (torch.randn(4, 16, 56, 56),)
    path = tmp_path_factory.mktemp("inverted") / "blocks.pt2"
    torch.export.save(torch.export.export(model, inputs).run_decompositions(), path)
    return aten2prims.lower(aten2prims.load(path)), [to_numpy(t) for t in inputs], (model, inputs)


@pytest.mark.parametrize("use_mkl", [True, False])
def test_inverted_residual_blocks_give_one_threads_bits(
    inverted_residuals: tuple, use_mkl: bool
) -> None:
    """With MKL the depthwise convolutions run as batched axpys (the strided one over phase
    images) in parts shared by the threads; without it, as NumPy chunks on the calling thread.
    Either way every thread count gives one thread's bits."""
    if use_mkl and mkl.library() is None:
        pytest.skip(mkl.unavailable_reason)
    graph, inputs, (model, tensors) = inverted_residuals
    with contextlib.nullcontext() if use_mkl else mkl.disabled():
        one = aten2prims.execute(graph, inputs, threads=1)
        assert_like_torch(one, model, tensors)
        assert_one_threads_bits(graph, inputs, one, repeats=2)
    if use_mkl:
        depthwise = [
            recipe
            for step in plan_for(graph).steps
            if isinstance(step.kernel, (ContractionKernel, PaddedContraction))
            for recipe in step.kernel.recipes()
            if isinstance(recipe, MultiplyAccumulateRecipe)
        ]
        assert len(depthwise) == 3
        assert all(recipe.axpy is not None for recipe in depthwise)
        assert [recipe.axpy.phases is not None for recipe in depthwise] == [False, True, False]
        assert all(len(recipe.axpy.parts) >= 4 for recipe in depthwise)


def test_a_large_padding_is_written_in_parts(inverted_residuals: tuple) -> None:
    """The depthwise convolutions' padded inputs (4x96x58x58 float32, 5 MiB): the window is
    copied in parts (decided by the plan) that the threads share (where the padded input is
    made: a padding fused with its product makes it for products that read it, strided ones)."""
    graph, inputs, _ = inverted_residuals
    aten2prims.execute(graph, inputs, threads=1)
    steps = plan_for(graph).steps
    paddings = [s.kernel for s in steps if isinstance(s.kernel, FilledScatter)]
    paddings += [s.kernel.scatter for s in steps if isinstance(s.kernel, PaddedContraction)]
    large = [k for k in paddings if math.prod(k.shape) * k.dtype.itemsize >= 2 * PART_BYTES]
    assert large, [k.shape for k in paddings]
    assert all(len(kernel.window_parts) >= 2 for kernel in large)


@pytest.mark.parametrize(("size", "aligned"), [(64, True), (50, False)])
def test_a_product_in_parts_runs_its_epilogue_in_its_parts(size: int, aligned: bool) -> None:
    """A 1x1 convolution with a batch norm on one size x size image: its product is made in 4
    parts of its merged (height x width) columns; the batch norm's scale and shift run in each
    part's own task when every part is whole rows of the image (64 x 64 in parts of 1024),
    else afterwards over the whole result (50 x 50 in parts of 625). Either way every thread
    count gives one thread's bits."""
    torch.manual_seed(4)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(256, 64, 1, bias=False), torch.nn.BatchNorm2d(64)
    ).eval()
    model[1].running_var.uniform_(0.5, 2.0)
    inputs = (torch.randn(1, 256, size, size),)
    graph = aten2prims.from_fx(torch.export.export(model, inputs).run_decompositions())
    data = [to_numpy(t) for t in inputs]
    one = aten2prims.execute(graph, data, threads=1)
    assert_like_torch(one, model, inputs)
    (kernel,) = [s.kernel for s in plan_for(graph).steps if isinstance(s.kernel, ContractionKernel)]
    assert kernel.epilogue, "the batch norm is the product's epilogue"
    (recipe,) = kernel.recipes()
    assert recipe.parts is not None and len(recipe.parts[1]) == 4
    assert (recipe.part_indices is not None) is aligned
    assert_one_threads_bits(graph, data, one)


def test_a_clamp_after_a_convolution_runs_in_its_epilogue(inverted_residuals: tuple) -> None:
    """ReLU6 reads only its convolution's result: its clamp runs in the convolution's epilogue
    (on each chunk or part, in the same parallel region). SiLU and hardswish read theirs twice
    (x * sigmoid(x), x * relu6(x + 3) / 6), as one elementwise chain (chains.py) whose one
    operand is the convolution's result: the chain runs in the epilogue too, and none of their
    steps is left outside (the values: test_inverted_residual_blocks_give_one_threads_bits)."""
    graph, inputs, _ = inverted_residuals
    aten2prims.execute(graph, inputs, threads=1)
    steps = plan_for(graph).steps
    # A depthwise product with its padding fused (padded_products.py) holds its contraction.
    products = [getattr(step.kernel, "contraction", step.kernel) for step in steps]
    absorbed = [
        entry.function
        for kernel in products
        if isinstance(kernel, ContractionKernel)
        for entry in kernel.epilogue
        if entry.function is not None
    ]
    clamps = [function for function in absorbed if isinstance(function, Clamp)]
    chains = [function for function in absorbed if isinstance(function, ChainKernel)]
    assert len(clamps) == 2, "the first block's expansion and depthwise ReLU6"
    assert len(chains) == 4, "SiLU and hardswish after the other blocks' two convolutions"
    assert len(absorbed) == len(clamps) + len(chains)
    kernels = [getattr(step.kernel, "kernel", step.kernel) for step in steps]  # Parted's own
    assert np.negative not in kernels, "SiLU's sigmoid runs in its chain"
    assert not any(isinstance(k, Clamp) for k in kernels), "hardswish's relu6(x+3): its chain"


@pytest.mark.parametrize("value", [0.0, 1.5])
def test_a_padding_in_parts_fills_its_border(value: float) -> None:
    """A constant padding of a 6 MiB tensor: its window is copied in parts and its border (a
    fill of `value`, into an arena buffer that held other data at the previous call) filled
    as one more part, at every thread count the same bits as torch's."""
    torch.manual_seed(5)

    class Padded(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            padded = torch.nn.functional.pad(x * 2.0, (1, 2, 3, 1), value=value)
            return padded.sum(dim=1)  # the padding is an intermediate (an arena buffer)

    model = Padded()
    inputs = (torch.randn(4, 24, 128, 128),)
    graph = aten2prims.from_fx(torch.export.export(model, inputs).run_decompositions())
    data = [to_numpy(t) for t in inputs]
    with torch.no_grad():
        expected = to_numpy(model(*inputs))
    aten2prims.execute(graph, data, threads=1)
    (padding,) = [s.kernel for s in plan_for(graph).steps if isinstance(s.kernel, FilledScatter)]
    assert len(padding.window_parts) >= 2 and padding.border
    for threads in (1, 2, 3, 4):
        for _ in range(2):
            (result,) = aten2prims.execute(graph, data, threads=threads)
            np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
            assert result.tobytes() == aten2prims.execute(graph, data, threads=1)[0].tobytes()


def test_a_relu_after_a_linear_layer_runs_in_its_epilogue(tmp_path: Path) -> None:
    """A ReLU whose input may hold -0.0 (a linear layer's) is a `Clamp` looking for -0.0, which
    may write over x element for element: it reads only the product's result, so it runs in
    the product's epilogue (on each chunk, in the product's parallel region) instead of as one
    more region; every thread count gives one thread's bits, torch agrees."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU()).eval()
    inputs = (torch.randn(8, 64, 256),)
    path = tmp_path / "linear_relu.pt2"
    torch.export.save(torch.export.export(model, inputs).run_decompositions(), path)
    graph = aten2prims.lower(aten2prims.load(path))
    data = [to_numpy(inputs[0])]
    one = aten2prims.execute(graph, data, threads=1)
    assert_like_torch(one, model, inputs)
    assert_one_threads_bits(graph, data, one)
    steps = plan_for(graph).steps
    assert not [step.node.op for step in steps if step.elementwise], "no ReLU step of its own"
    (product,) = [step.kernel for step in steps if isinstance(step.kernel, ContractionKernel)]
    absorbed = [entry.function for entry in product.epilogue if entry.function is not None]
    assert len(absorbed) == 1 and isinstance(absorbed[0], Clamp), product.epilogue
    assert absorbed[0].bits is not None


def test_a_large_gelu_runs_in_parts_of_long_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 erf makes many short NumPy calls (its passes over blocks of 64K elements), and
    two threads making such calls hand the GIL to each other at nearly every call: a GELU's
    chain is never a member of a segment, and it is split into parts (as a SiLU's chain is) only
    with a result of at least SHORT_CALLS_PART_BYTES (8 MiB here, 2 MiB below it), whose erf
    passes run over long blocks (`vector_math.long_calls`) when several threads share them.
    Every thread count gives one thread's bits, torch agrees."""
    torch.manual_seed(4)
    large, small = torch.randn(8, 256, 1024), torch.randn(8, 64, 1024)
    plans = []
    long_calls = []
    original = prims.vector_math.long_calls

    def counted() -> AbstractContextManager[None]:
        long_calls.append(threading.get_ident())
        return original()

    monkeypatch.setattr(threads_module.vector_math, "long_calls", counted)
    for module, x in ((torch.nn.GELU(), large), (torch.nn.GELU(), small), (torch.nn.SiLU(), large)):
        path = tmp_path / "module.pt2"
        torch.export.save(torch.export.export(module, (x,)).run_decompositions(), path)
        graph = aten2prims.lower(aten2prims.load(path))
        one = aten2prims.execute(graph, [to_numpy(x)], threads=1)
        assert_like_torch(one, module, (x,))
        assert not long_calls, "one thread: erf's own blocks"
        assert_one_threads_bits(graph, [to_numpy(x)], one)
        plans.append((plan_for(graph), len(long_calls)))
        long_calls.clear()
    (large_plan, large_calls), (small_plan, small_calls), (silu_plan, silu_calls) = plans

    def chains(plan: Plan) -> list[tuple[ChainKernel, str]]:
        """(chain kernel, how it runs) of every chain of the plan's run."""
        namespace = plan.run.function.__globals__  # type: ignore[attr-defined]  # codegen's
        found = []
        for kernel in namespace.values():
            if isinstance(kernel, ChainKernel):
                found.append((kernel, "whole"))
            elif isinstance(kernel, Parted) and isinstance(kernel.kernel, ChainKernel):
                found.append((kernel.kernel, f"parts, long calls {kernel.long_calls}"))
            elif isinstance(kernel, SegmentKernel):
                found += [
                    (m.kernel, "segment")
                    for m in kernel.members
                    if isinstance(m.kernel, ChainKernel)
                ]
        return found

    assert [(k.short_calls, how) for k, how in chains(large_plan)] == [
        (True, "parts, long calls True")
    ]
    assert [(k.short_calls, how) for k, how in chains(small_plan)] == [(True, "whole")]
    assert [(k.short_calls, how) for k, how in chains(silu_plan)] == [
        (False, "parts, long calls False")
    ]
    # assert_one_threads_bits runs 2, 3 and 4 threads: each part of the large GELU's 4 in long
    # calls, on whichever thread runs it.
    assert (large_calls, small_calls, silu_calls) == (3 * 4, 0, 0)


def test_products_join_the_segments_around_them(models: dict) -> None:
    """The CNN's stem convolution (with its batch norm and ReLU in the epilogue) and its max
    pooling's windows and their copies run on the rows (images) of one segment's parts: one
    hand-off between threads for the run of them. (Its block's convolutions, 8x16x32x32, are
    too small to share by images: test_products_in_segments_compute_the_whole_products.)"""
    graph, inputs, _ = models["cnn"]
    aten2prims.execute(graph, inputs, threads=1)
    segments = _segments(graph)
    members = [m for segment in segments for m in segment.members]
    assert any(isinstance(m.step.kernel, ContractionKernel) for m in members if m.kind == "rows")
    ops = [m.step.node.op for m in members]
    assert "prims.as_strided" in ops and "prims.clone" in ops, ops
    maximum = next(m for m in members if m.step.node.op == "prims.maximum")
    segment = next(s for s in segments if maximum in s.members)
    assert isinstance(segment.members[0].step.kernel, ContractionKernel), "after the stem"


class _Products(torch.nn.Module):
    """Convolutions (padded, strided, grouped, depthwise, with bias or batch norm, a ReLU,
    a residual), a max pooling padded with -inf, and linear layers, whose results are large
    enough to join segments."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 64, 3, stride=2, padding=1)
        self.norm = torch.nn.BatchNorm2d(64)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)  # padded with -inf
        self.grouped = torch.nn.Conv2d(64, 64, 3, padding=1, groups=4)
        self.depthwise = torch.nn.Conv2d(64, 64, 3, groups=64)
        self.pointwise = torch.nn.Conv2d(64, 64, 1)
        self.head = torch.nn.Linear(64, 256)
        self.tail = torch.nn.Linear(256, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.norm(self.stem(x))))
        x = torch.relu(self.grouped(x)) + x
        x = self.pointwise(self.depthwise(x))
        rows = x.permute(0, 2, 3, 1).reshape(-1, 64)  # [batch * 900, 64]
        return self.tail(torch.relu(self.head(rows)))


@pytest.mark.parametrize("batch", [5, 8])
def test_products_in_segments_compute_the_whole_products(
    batch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Products joined to segments compute, part by part (of 1 or 2 images; an odd batch
    splits unevenly), what torch does; every thread count gives one thread's bits; and the
    plan without them (each product its own regions) gives the same values. (The segments'
    bytes unbounded here, so that every product joins: their bound is tested below.)"""
    monkeypatch.setattr(segments_module, "MAX_SEGMENT_BYTES", 1 << 40)
    torch.manual_seed(4)
    model = _Products().eval()
    with torch.no_grad():
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 2.0)
    tensors = (torch.randn(batch, 3, 128, 128),)
    path = tmp_path / "products.pt2"
    graph, inputs, one = _lowered_like_torch(model, tensors, path)
    assert_one_threads_bits(graph, inputs, one, repeats=2)
    members = [m for segment in _segments(graph) for m in segment.members if m.kind == "rows"]
    products = [m for m in members if isinstance(m.step.kernel, ContractionKernel)]
    assert len(products) >= 6, [m.step.node.op for m in members]
    paddings = [m.step.kernel for m in members if isinstance(m.step.kernel, FilledScatter)]
    assert any(not kernel.zeros for kernel in paddings), "the pooling's -inf padding"
    assert any(kernel.zeros for kernel in paddings), "a convolution's zero padding"
    assert any(len(m.step.out_metas[0].shape) == 2 for m in products), "a linear layer"
    monkeypatch.setattr(segments_module, "ROW_KERNELS_JOIN", False)
    alone = aten2prims.lower(aten2prims.load(path))
    whole = aten2prims.execute(alone, inputs, threads=1)
    assert not any(m.kind == "rows" for s in _segments(alone) for m in s.members)
    np.testing.assert_allclose(one[0], whole[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("rows", "shared"), [(256, False), (2048, True)])
def test_a_linear_layer_of_few_rows_makes_its_own_parts(
    rows: int, shared: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A linear layer's rows are its product's matrix rows: in a segment's parts (up to four)
    each part would be a product of a quarter of them, reading the weight whole, which
    OpenBLAS makes slower below a few hundred rows. So with fewer than ROW_SPLIT_MIN_ROWS rows
    the products stay steps of their own, in parts along the weight's columns or in chunks
    (an epilogue's); with more they join a segment (its bytes unbounded here); both give one
    thread's bits at every thread count."""
    monkeypatch.setattr(segments_module, "MAX_SEGMENT_BYTES", 1 << 40)
    torch.manual_seed(5)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1024)
    ).eval()
    tensors = (torch.randn(rows, 512),)
    graph, inputs, one = _lowered_like_torch(model, tensors, tmp_path / "linear.pt2")
    assert_one_threads_bits(graph, inputs, one, repeats=2)
    joined = [
        m.step
        for segment in _segments(graph)
        for m in segment.members
        if isinstance(m.step.kernel, ContractionKernel)
    ]
    products = [s for s in plan_for(graph).steps if isinstance(s.kernel, ContractionKernel)]
    assert len(products) == 2
    if not shared:
        assert not joined
        for step in products:  # in parts along the columns, or in chunks (the ReLU's)
            (recipe,) = step.kernel.recipes()
            assert recipe.levels or (recipe.parts is not None and recipe.parts[0] == 1), recipe
    else:
        assert len(joined) == 2


def test_a_segments_results_are_bounded_so_the_arena_keeps_reusing_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment's results live through its whole run: it ends before they pass
    MAX_SEGMENT_BYTES, and the plan's arena is then smaller than with segments unbounded; the
    values are the same."""
    torch.manual_seed(4)
    model = _Products().eval()
    tensors = (torch.randn(8, 3, 128, 128),)
    path = tmp_path / "products.pt2"
    torch.export.save(torch.export.export(model, tensors).run_decompositions(), path)
    inputs = [to_numpy(t) for t in tensors]
    bound = 1 << 22
    monkeypatch.setattr(segments_module, "MAX_SEGMENT_BYTES", bound)
    bounded = aten2prims.lower(aten2prims.load(path))
    found = _segments(bounded)
    assert len(found) >= 2
    for segment in found:
        sizes = [
            math.prod(m.step.out_metas[0].shape) * 4 for m in segment.members if m.kind != "view"
        ]
        assert sum(sizes) - sizes[0] <= bound, sizes  # the first result may be larger alone
    one = aten2prims.execute(bounded, inputs, threads=1)
    assert_one_threads_bits(bounded, inputs, one, repeats=2)
    monkeypatch.setattr(segments_module, "MAX_SEGMENT_BYTES", 1 << 40)
    unbounded = aten2prims.lower(aten2prims.load(path))
    assert plan_for(bounded).arenas.layout.nbytes < plan_for(unbounded).arenas.layout.nbytes
    np.testing.assert_allclose(
        one[0], aten2prims.execute(unbounded, inputs, threads=1)[0], rtol=1e-5, atol=1e-5
    )


def test_a_small_batch_keeps_the_products_own_parts(tmp_path: Path) -> None:
    """One image: no segment of rows; the convolution's own chunks are the threads' share."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 64, 3, padding=1), torch.nn.ReLU()).eval()
    tensors = (torch.randn(1, 16, 128, 128),)
    graph, inputs, one = _lowered_like_torch(model, tensors, tmp_path / "one.pt2")
    assert_one_threads_bits(graph, inputs, one)
    assert not _segments(graph)


def test_a_part_opens_no_region_of_its_own() -> None:
    """run_parts inside a part runs that part's parts on the thread running it, in order."""
    seen: list[tuple[int, int]] = []
    threads_in_inner: list[set[int]] = []

    def inner(outer: int) -> None:
        idents: set[int] = set()

        def part(number: int) -> Callable[[], None]:
            def run() -> None:
                idents.add(threading.get_ident())
                seen.append((outer, number))

            return run

        run_parts([part(number) for number in range(4)])
        threads_in_inner.append(idents)

    with running_with(2):
        run_parts([lambda outer=outer: inner(outer) for outer in range(4)])
    assert sorted(seen) == [(o, n) for o in range(4) for n in range(4)]
    for outer in range(4):
        assert [n for o, n in seen if o == outer] == [0, 1, 2, 3]
    assert all(len(idents) == 1 for idents in threads_in_inner)


@pytest.mark.parametrize("within", [True, False])
def test_a_window_reading_other_rows_ends_a_segment(within: bool) -> None:
    """Windows of y = -exp(x) (8 rows of n) multiplied with z: a window row i of y's row i
    (stride n) is a view the segment reads by rows; one of half rows (stride n / 2: window rows
    2i and 2i + 1 are y's row i) reads rows other parts write, so its reader starts a new
    segment. The results are numpy's at every thread count either way."""
    n = 1 << 16
    half = n // 2
    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((8, n), DType.float32))
        z = builder.add_input("z", TensorMeta((8, half), DType.float32))
        y = prims.neg(prims.exp(x))
        windows = prims.as_strided(y, [8, half], [n if within else half, 1], 0)
        graph = builder.finish([prims.mul(windows, z)])
    rng = np.random.default_rng(1)
    data = {
        "x": rng.standard_normal((8, n)).astype(np.float32),
        "z": rng.standard_normal((8, half)).astype(np.float32),
    }
    for segment in _segments(graph):
        ops = [member.step.node.op for member in segment.members]
        assert ("prims.neg" in ops and "prims.mul" in ops) == within, ops
    y = -np.exp(data["x"])
    windows = y[:, :half] if within else y.reshape(-1)[: 8 * half].reshape(8, half)
    for threads in (1, 2, 4):
        (result,) = aten2prims.execute(graph, data, threads=threads)
        assert result.tobytes() == (windows * data["z"]).tobytes(), threads
