"""Static memory planning (aten2prims/executor/arena.py): a plan places its temporaries in an
arena it keeps between calls, so a steady-state call allocates no large temporaries and takes no
page faults for them; results handed to the caller are never memory a later call writes."""

from __future__ import annotations

import resource
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import aten2prims
from aten2prims.executor import plan_for
from aten2prims.frontends.torch_interop import to_numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import build

PAGE = resource.getpagesize()


def _larger_inputs(name: str) -> tuple[torch.Tensor, ...]:
    """Inputs making the zoo's models' intermediates megabytes large."""
    torch.manual_seed(1)
    if name == "cnn":
        return (torch.randn(8, 3, 64, 64),)
    # (batch 32: attention's scores never take memory of their own, attention.py)
    sequence = 128
    mask = torch.triu(torch.full((sequence, sequence), float("-inf")), diagonal=1)
    return torch.randn(32, sequence, 32), mask


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """name -> (lowered graph, inputs, torch's outputs), read back from saved .pt2 archives."""
    directory = tmp_path_factory.mktemp("arena")
    made = {}
    for name in ("cnn", "transformer"):
        model, _ = build(name)
        inputs = _larger_inputs(name)
        program = torch.export.export(model, inputs).run_decompositions()
        torch.export.save(program, directory / f"{name}.pt2")
        graph = aten2prims.lower(aten2prims.load(directory / f"{name}.pt2"))
        with torch.no_grad():
            expected = to_numpy(model(*inputs))
        made[name] = (graph, [to_numpy(t) for t in inputs], expected)
    return made


@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_a_steady_state_call_allocates_no_large_temporaries(name: str, models: dict) -> None:
    graph, inputs, expected = models[name]
    for _ in range(2):  # the first call plans; the second finds every cache warm
        outputs = aten2prims.execute(graph, inputs, threads=1)
    np.testing.assert_allclose(outputs[0], expected, rtol=1e-4, atol=1e-4)
    arena = plan_for(graph).arenas.layout.nbytes
    assert arena >= 4 << 20, "the model's temporaries are megabytes large"
    output_bytes = sum(o.nbytes for o in outputs)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        outputs = aten2prims.execute(graph, inputs, threads=1)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # NumPy reports every buffer it allocates to tracemalloc: the call's peak is its outputs and
    # small change (reductions to a few numbers per row, Python objects), no temporary.
    assert peak <= output_bytes + (256 << 10), (peak, output_bytes, arena)
    faults = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        outputs = aten2prims.execute(graph, inputs, threads=1)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        del outputs
    # Temporaries allocated anew would fault in up to one page per 4 KiB written.
    assert min(faults) <= output_bytes // PAGE + arena // PAGE // 20, (faults, arena // PAGE)


@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_results_are_never_overwritten_by_a_later_call(name: str, models: dict) -> None:
    graph, inputs, _ = models[name]
    first = aten2prims.execute(graph, inputs)
    kept = [o.copy() for o in first]
    other = [np.flip(a, 0).copy() if a.dtype.kind == "f" and a.ndim == 3 else a for a in inputs]
    if name == "cnn":
        other = [-inputs[0]]
    second = aten2prims.execute(graph, other)
    assert not np.array_equal(second[0], kept[0]), "the second call computes something else"
    for a, b in zip(first, kept, strict=True):
        assert a.tobytes() == b.tobytes()
    buffers = plan_for(graph).arenas.take()
    try:
        for result in (*first, *second):
            assert result.flags.writeable and result.flags.owndata
            assert not any(np.shares_memory(result, buffer) for buffer in buffers)
    finally:
        plan_for(graph).arenas.give(buffers)
    for result in second:
        result[...] = 0  # the caller's to write: no later call reads it
    np.testing.assert_array_equal(aten2prims.execute(graph, inputs)[0], kept[0])


def test_buffers_alive_at_once_never_overlap(models: dict) -> None:
    for graph, _, _ in models.values():
        layout = plan_for(graph).arenas.layout
        assert len(layout.buffers) > 5
        for i, a in enumerate(layout.buffers):
            assert a.offset % 64 == 0 and a.offset + a.size <= layout.nbytes
            for b in layout.buffers[i + 1 :]:
                if a.first <= b.last and b.first <= a.last:
                    assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
        # Buffers of disjoint lifetimes share memory: the arena is smaller than their sum.
        assert layout.nbytes < sum(b.size for b in layout.buffers)


def test_concurrent_calls_of_one_plan_use_separate_arenas(models: dict) -> None:
    graph, inputs, _ = models["transformer"]
    variants = [[inputs[0] * (1 + k / 4), inputs[1]] for k in range(3)]
    expected = [aten2prims.execute(graph, v, threads=1)[0] for v in variants]
    results: list[list[np.ndarray]] = [[] for _ in range(3)]

    def work(k: int) -> None:
        for _ in range(4):
            results[k].append(aten2prims.execute(graph, variants[k], threads=1)[0])

    workers = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for k in range(3):
        assert len(results[k]) == 4
        for result in results[k]:
            assert result.tobytes() == expected[k].tobytes()


def test_check_mode_runs_without_the_arena_and_agrees(models: dict) -> None:
    graph, inputs, _ = models["cnn"]
    checked = aten2prims.execute(graph, inputs, check=True)
    assert checked[0].tobytes() == aten2prims.execute(graph, inputs, threads=1)[0].tobytes()


def _scale_and_shift(view: bool) -> Any:
    """x * alpha + beta per channel (a batch norm's eval form), returned as is or reshaped."""
    import prims
    from aten2prims.ir.dtypes import DType
    from aten2prims.ir.values import TensorMeta
    from prims.builder import Builder

    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((8, 16, 32, 32), DType.float32))
        alpha = builder.add_input("alpha", TensorMeta((16,), DType.float32))
        beta = builder.add_input("beta", TensorMeta((16,), DType.float32))
        shape = [8, 16, 32, 32]
        scaled = prims.mul(x, prims.broadcast_in_dim(alpha, shape, [1]))
        result = prims.add(scaled, prims.broadcast_in_dim(beta, shape, [1]))
        return builder.finish([prims.reshape(result, [8, 16, 1024]) if view else result])


def test_an_output_chain_of_whole_arrays_is_the_outputs_array() -> None:
    """An output written in place into a chain of whole arrays (x * alpha, then + beta in place)
    is that chain's array: its first step makes a new array, outside the arena, and the last
    step writes in place instead of reading one buffer and writing another. Each call returns a
    new array, never one an earlier call returned, with the node-by-node kernels' bits."""
    from aten2prims.executor.reference import run_reference

    graph = _scale_and_shift(view=False)
    steps = plan_for(graph).steps
    mul = next(s for s in steps if s.node.op == "prims.mul")
    add = next(s for s in steps if s.node.op == "prims.add")
    assert add.out_argument == 0 and mul.out_buffer is None and add.out_buffer is None
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((8, 16, 32, 32)).astype(np.float32),
        "alpha": rng.standard_normal(16).astype(np.float32),
        "beta": rng.standard_normal(16).astype(np.float32),
    }
    (first,) = aten2prims.execute(graph, inputs)
    kept = first.copy()
    assert first.base is None and first.flags.writeable
    (expected,) = run_reference(graph, inputs)
    assert first.tobytes() == expected.tobytes()
    (second,) = aten2prims.execute(graph, {**inputs, "x": -inputs["x"]})
    assert second is not first and not np.shares_memory(first, second)
    assert first.tobytes() == kept.tobytes()


def test_an_output_viewing_an_in_place_chain_gets_an_array_of_its_own() -> None:
    """Where the output is a view (a reshape) of the chain's array, the chain stays in the arena
    and the last step writes a new array, which the reshape views."""
    graph = _scale_and_shift(view=True)
    steps = plan_for(graph).steps
    add = next(s for s in steps if s.node.op == "prims.add")
    mul = next(s for s in steps if s.node.op == "prims.mul")
    assert add.out_argument is None and mul.out_buffer is not None
    x = np.ones((8, 16, 32, 32), np.float32)
    (result,) = aten2prims.execute(
        graph, {"x": x, "alpha": np.full(16, 2, np.float32), "beta": np.ones(16, np.float32)}
    )
    assert result.shape == (8, 16, 1024) and np.all(result == 3)
