"""The model benchmark's suite (`benchmarks/suite.py`) at its tiny scale: every model builds from
its config (MobileNetV3 from its layer table), exports, saves and loads as a `.pt2`, lowers,
runs on NumPy and passes the benchmark's own correctness check against torch eager and a
float64 run (the harness's model rule); and the benchmark script runs end to end on one model.
No timings are asserted."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _benchmark_modules import load_benchmark
from torch.utils._pytree import tree_leaves

import aten2prims
import prims
from aten2prims.executor import plan_for
from aten2prims.ir import DType, TensorMeta
from prims.builder import Builder

ROOT = Path(__file__).resolve().parents[1]


suite = load_benchmark("suite", "suite.py")
bench = load_benchmark("bench_models", "models.py")
NAMES = [spec.name for spec in suite.SPECS] + [suite.RESNET18.name]


@pytest.mark.parametrize("name", NAMES)
def test_suite_model_lowers_and_matches_torch(name: str, tmp_path: Path) -> None:
    model, inputs = suite.build(name, "tiny")
    program = torch.export.export(model, inputs).run_decompositions()
    torch.export.save(program, tmp_path / "model.pt2")
    with torch.no_grad():
        expected = [t.numpy() for t in tree_leaves(model(*inputs))]
        wide = copy.deepcopy(model).double()
        reference = [
            t.numpy()
            for t in tree_leaves(
                wide(*(t.double() if t.is_floating_point() else t for t in inputs))
            )
        ]
    lowered = aten2prims.lower(aten2prims.load(tmp_path / "model.pt2"))
    outputs = aten2prims.execute(lowered, [t.numpy() for t in inputs])
    ok, message = bench._check(outputs, expected, reference, strict=True)
    assert ok, message


def test_suite_builds_the_same_weights_in_every_process() -> None:
    first, _ = suite.build("mlp", "tiny")
    second, _ = suite.build("mlp", "tiny")
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), key


def test_benchmark_script_runs_end_to_end() -> None:
    """Ours and torch eager on the tiny MLP, in two rounds of timed calls."""
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "models.py"),
            "--scale",
            "tiny",
            "--only",
            "^mlp$",
            "--runtimes",
            "ours,eager",
            "--threads",
            "1",
            "--repeats",
            "1",
            "--rounds",
            "2",
            "--warmup",
            "0",
            "--no-first-call",
        ],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    output = completed.stdout
    # Each runtime's process made a round of timed calls twice, the two taking turns.
    assert re.search(
        r"ours     1 thread\(s\): median [\d.]+ ms \(rounds' medians [\d.]+, [\d.]+\)", output
    ), output
    assert re.search(
        r"eager    1 thread\(s\): median [\d.]+ ms \(rounds' medians [\d.]+, [\d.]+\)", output
    ), output
    assert "median of 2 rounds of 1 calls, the runtimes' processes taking turns" in output
    assert "matches torch" in output
    assert "| mlp | 8x1024 |" in output
    assert "## Geomeans and targets" in output
    assert "OPENBLAS_CORETYPE:" in output


def _plan_profile() -> Any:
    """benchmarks/plan_profile.py, its `import models` given the benchmark's models module (a
    test module elsewhere imports the examples' `models`)."""
    saved = sys.modules.get("models")
    sys.modules["models"] = bench
    try:
        return load_benchmark("plan_profile", "plan_profile.py")
    finally:
        if saved is None:
            del sys.modules["models"]
        else:
            sys.modules["models"] = saved


def test_the_step_profile_times_each_member_of_a_segment() -> None:
    """A segment is one step of the generated function: the profile gives each of its members
    its own CPU time (a softmax's row maximum, exp, row sum and division are not free; the views
    between them are), inside the segment's own time."""
    profile = _plan_profile()
    rows, n = 64, 1 << 14
    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta((rows, n), DType.float32))
        shifted = prims.sub(x, prims.broadcast_in_dim(prims.amax(x, [1]), [rows, n], [0]))
        e = prims.exp(shifted)
        total = prims.broadcast_in_dim(prims.sum(e, [1]), [rows, n], [0])
        graph = builder.finish([prims.div(e, total)])
    plan = plan_for(graph)
    compiled = plan.run
    members = profile.MemberTimes(plan.steps, compiled)
    computing = [
        number for number, step in enumerate(plan.steps) if step.node.op != "prims.broadcast_in_dim"
    ]
    assert sorted(members.origin) == list(range(len(plan.steps))), "one segment of every step"
    assert set(members.origin.values()) == {0}
    timed = profile.TimedRun(compiled, len(plan.steps), members)
    untimed = profile.TimedRun(compiled, len(plan.steps))
    data = {"x": np.random.default_rng(0).standard_normal((rows, n), dtype=np.float32)}
    try:
        plan.run = timed
        with members:
            for _ in range(3):
                aten2prims.execute(graph, data, threads=1)
        plan.run = untimed
        aten2prims.execute(graph, data, threads=1)
    finally:
        plan.run = compiled
    for call in timed.calls:
        assert all(call[number] > 0 for number in computing), call
        assert min(call) >= 0, call  # the first member keeps the rest, never below zero
    # without them, the segment's whole time is its first member's
    (call,) = untimed.calls
    assert call[0] > 0 and not any(call[1:]), call
