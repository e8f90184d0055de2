"""Real models end to end: each model of the zoo (`examples/models.py`) and a few more paths of
Core ATen, exported with torch.export at test time, saved with `torch.export.save` and read back
with `aten2prims.load` (the user's path), lowered to prims, run on NumPy and compared with torch
eager on the same inputs (dtype and shape exact, values within torch's tolerance)."""

from __future__ import annotations

import copy
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_leaves

import aten2prims
import prims
from aten2prims.cli import main
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import Graph, format_graph, graph_difference
from aten2prims.passes.verify import verify
from aten2prims.testing.model_outputs import judge_output
from aten2prims.testing.torch_run import run_with_torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import MODELS, build, export_program

# -- models beyond the zoo -------------------------------------------------------------------------


class SequenceClassifier(nn.Module):
    """The 1-d and index-producing paths: a depthwise dilated Conv1d with reflect padding,
    hardtanh, leaky_relu, AvgPool1d, causal scaled_dot_product_attention, cumsum, log_softmax,
    topk and argmax (integer outputs, compared exactly)."""

    def __init__(self) -> None:
        super().__init__()
        self.depthwise = nn.Conv1d(8, 8, 3, padding=2, dilation=2, groups=8, padding_mode="reflect")
        self.pointwise = nn.Conv1d(8, 16, 1)
        self.pool = nn.AvgPool1d(2)
        self.qkv = nn.Linear(16, 48)
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hidden = F.leaky_relu(self.pointwise(F.hardtanh(self.depthwise(x))), 0.1)
        hidden = self.pool(hidden).transpose(1, 2)
        query, key, value = self.qkv(hidden).chunk(3, dim=-1)
        hidden = hidden + F.scaled_dot_product_attention(query, key, value, is_causal=True)
        log_probs = F.log_softmax(self.head(hidden.cumsum(dim=1)), dim=-1)
        values, indices = log_probs.topk(2, dim=-1)
        return log_probs, values, indices, log_probs.argmax(dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(size) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class LowPrecisionBlock(nn.Module):
    """A pre-norm MLP block run in bfloat16 or float16: every op computes in float32 and rounds
    back (explicit converts), plus a cast of the half result to float32 (`_to_copy`)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = RMSNorm(32)
        self.up = nn.Linear(32, 64)
        self.down = nn.Linear(64, 32)
        self.out_norm = nn.LayerNorm(32)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = x + self.down(F.gelu(self.up(self.norm(x)), approximate="tanh"))
        return torch.softmax(self.out_norm(hidden), dim=-1), hidden.float().sum(-1)


def _low_precision(dtype: torch.dtype) -> Callable[[], tuple[nn.Module, tuple[Any, ...]]]:
    def make() -> tuple[nn.Module, tuple[Any, ...]]:
        torch.manual_seed(0)
        return LowPrecisionBlock().to(dtype).eval(), (torch.randn(4, 6, 32, dtype=dtype),)

    return make


def _sequence_classifier() -> tuple[nn.Module, tuple[Any, ...]]:
    torch.manual_seed(0)
    return SequenceClassifier().eval(), (torch.randn(2, 8, 20),)


EXTRA: dict[str, Callable[[], tuple[nn.Module, tuple[Any, ...]]]] = {
    "sequence_classifier": _sequence_classifier,
    "low_precision_bf16": _low_precision(torch.bfloat16),
    "low_precision_f16": _low_precision(torch.float16),
}
# A chain of half-precision ops compounds one-ulp roundings that torch's own kernels differ by
# (its vectorized and scalar bf16 rsqrt disagree), so these are judged against the model run in
# float64 as well (`aten2prims.testing.model_outputs`, as `aten2prims check FILE` judges models).
NEEDS_REFERENCE = {"low_precision_bf16", "low_precision_f16"}
NAMES = [*MODELS, *EXTRA]


# -- one export, load and lowering per model, shared by the tests --------------------------------------


@attrs.frozen
class Case:
    program: Any  # torch.export.ExportedProgram
    path: Path  # the saved archive
    graph: Graph  # read back from the saved archive
    printed_before_lowering: str
    lowered: Graph
    inputs: dict[str, np.ndarray]
    expected: list[np.ndarray]
    reference: list[np.ndarray] | None


def _export(name: str) -> tuple[Any, nn.Module, tuple[Any, ...]]:
    if name in MODELS:
        program, inputs = export_program(name)
        model, _ = build(name)  # the same seeded weights
        return program, model, inputs
    model, inputs = EXTRA[name]()
    return torch.export.export(model, inputs).run_decompositions(), model, inputs


def _outputs(model: nn.Module, inputs: tuple[Any, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        return [to_numpy(t) for t in tree_leaves(model(*inputs))]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Case]:
    made: dict[str, Case] = {}
    directory = tmp_path_factory.mktemp("models")

    def case(name: str) -> Case:
        if name not in made:
            program, model, inputs = _export(name)
            path = directory / f"{name}.pt2"
            torch.export.save(program, path)
            graph = aten2prims.load(path)
            printed = format_graph(graph)
            feed = {i.name: to_numpy(t) for i, t in zip(graph.user_inputs, inputs, strict=True)}
            reference = None
            if name in NEEDS_REFERENCE:
                reference = _outputs(
                    copy.deepcopy(model).double(), tuple(t.double() for t in inputs)
                )
            made[name] = Case(
                program,
                path,
                graph,
                printed,
                aten2prims.lower(graph),
                feed,
                _outputs(model, inputs),
                reference,
            )
        return made[name]

    return case


# -- the tests ---------------------------------------------------------------------------------------------


def _assert_matches(outputs: list[Any], case: Case, name: str) -> list[float]:
    assert len(outputs) == len(case.expected)
    errors = []
    for index, (ours, theirs) in enumerate(zip(outputs, case.expected)):
        reference = case.reference[index] if case.reference is not None else None
        verdict = judge_output(ours, theirs, reference, what=f"{name} output {index}")
        assert verdict, verdict.message
        errors.append(verdict.comparison.max_abs_error)
    return errors


@pytest.mark.parametrize("name", NAMES)
def test_model_matches_torch_eager(name: str, cases: Callable[[str], Case]) -> None:
    case = cases(name)
    # check=True: every prim's result has exactly the shape and dtype its node's meta says
    outputs = aten2prims.execute(case.lowered, case.inputs, check=True)
    _assert_matches(outputs, case, name)


@pytest.mark.parametrize("name", NAMES)
def test_lowered_graph_is_prims_only_verified_and_traceable(
    name: str, cases: Callable[[str], Case]
) -> None:
    case = cases(name)
    assert {node.namespace for node in case.lowered.nodes} == {"prims"}
    verify(case.lowered)
    assert format_graph(case.graph) == case.printed_before_lowering  # lowering built a new graph
    # every prim names the aten node it came from, so the --nested view can place it
    aten_ops = {node.results[0].name: node.op for node in case.graph.nodes}
    for node in case.lowered.nodes:
        assert aten_ops.get(node.provenance.origin) == node.provenance.origin_op, node
    assert [o.value.meta for o in case.lowered.outputs] == [
        o.value.meta for o in case.graph.outputs
    ]


@pytest.mark.parametrize("name", NAMES)
def test_from_fx_reads_the_same_graph_as_load(name: str, cases: Callable[[str], Case]) -> None:
    case = cases(name)
    assert (
        graph_difference(aten2prims.from_fx(case.program, name=name), case.graph, compare_data=True)
        is None
    )


@pytest.mark.parametrize("name", ["attention", "lstm"])
def test_from_fx_path_end_to_end(name: str, cases: Callable[[str], Case]) -> None:
    case = cases(name)
    lowered = aten2prims.lower(aten2prims.from_fx(case.program, name=name))
    _assert_matches(aten2prims.execute(lowered, list(case.inputs.values()), check=True), case, name)


# -- `aten2prims check FILE`: judged against the model run in float64 too --------------------------


@pytest.mark.parametrize("name", ["cnn", "transformer", "low_precision_bf16", "low_precision_f16"])
def test_check_file_judges_against_float64_too(
    name: str, cases: Callable[[str], Case], capsys: pytest.CaptureFixture[str]
) -> None:
    """The command passes real models, half-precision ones included, and prints for each
    floating output its error against torch and both errors against torch's float64 run."""
    case = cases(name)
    assert main(["check", str(case.path), "--seed", "3"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(("ok", "MISMATCH"))]
    assert len(lines) == len(case.expected), out
    for line, expected in zip(lines, case.expected):
        assert line.startswith("ok       output_"), out
        if np.issubdtype(expected.dtype, np.inexact) or expected.dtype.name == "bfloat16":
            assert re.search(r"against float64 ours errs up to \S+, torch \S+", line), line
    assert out.splitlines()[-1] == "all outputs match"


def _wrong_rule(op: str, scale: float) -> Callable[..., Any]:
    """The default rule of `op` with its result scaled by `scale` at every element; it has the
    real rule's signature, as the rule table requires."""
    real = aten2prims.default_rules().get(op)
    assert real is not None, op

    def wrong(*args: Any) -> Any:
        return prims.mul(real.function(*args), scale)

    wrong.__signature__ = inspect.signature(real.function)  # type: ignore[attr-defined]  # why: the table reads the parameter names from it
    return wrong


@pytest.mark.parametrize("name", ["cnn", "low_precision_bf16"])
def test_a_wrong_model_result_still_fails(name: str, cases: Callable[[str], Case]) -> None:
    """Judged as `check FILE` judges it (torch's result and its float64 run of the graph we
    read), a model lowered with one wrong rule fails, and so does a correct result perturbed at
    one element by a few times torch's own largest error against float64."""
    case = cases(name)
    expected = run_with_torch(case.path, case.graph, case.inputs)
    reference = run_with_torch(case.path, case.graph, case.inputs, float64=True)
    ours = aten2prims.execute(case.lowered, case.inputs)
    verdicts = [
        judge_output(o, e, r, what=f"output {i}")
        for i, (o, e, r) in enumerate(zip(ours, expected, reference))
    ]
    assert all(verdicts), [v.message for v in verdicts]

    op = next(n.op for n in case.graph.nodes if n.op in ("aten.addmm.default", "aten.mm.default"))
    rules = aten2prims.default_rules().with_rule(op, _wrong_rule(op, 1.05))
    wrong = aten2prims.execute(aten2prims.lower(case.graph, rules=rules), case.inputs)
    verdict = judge_output(wrong[0], expected[0], reference[0], what="output 0")
    assert not verdict, verdict.message
    assert "beyond 2x torch's own" in verdict.message

    perturbed = ours[0].copy()
    torch_error = verdicts[0].torch_error
    assert torch_error is not None
    flat = perturbed.reshape(-1)
    flat[0] = flat[0] + perturbed.dtype.type(max(4 * torch_error, 1e-3 * (1 + abs(float(flat[0])))))
    verdict = judge_output(perturbed, expected[0], reference[0], what="output 0")
    assert not verdict, verdict.message


class IntegerPromotions(nn.Module):
    """Ops that make integer operands floating themselves, with no dtype in the graph to widen:
    int / int, sigmoid of an int tensor, irfft of one."""

    def forward(
        self, counts: torch.Tensor, totals: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return counts / totals, torch.sigmoid(counts), torch.fft.irfft(counts, norm="ortho")


def test_the_float64_run_promotes_integer_operands_to_float64(tmp_path: Path) -> None:
    """The float64 run `check FILE` judges models against computes what an op promotes from
    integers in float64 (torch's default dtype is float64 while it runs, and restored after),
    not torch's float32 result again."""
    counts = torch.tensor([[1, 2, 3, 700], [5, 6, 77, 8]], dtype=torch.int32)
    totals = torch.tensor([3, 7, 11, 9], dtype=torch.int64)
    program = torch.export.export(IntegerPromotions(), (counts, totals)).run_decompositions()
    path = tmp_path / "ratios.pt2"
    torch.export.save(program, path)
    graph = aten2prims.load(path)
    inputs = {"counts": to_numpy(counts), "totals": to_numpy(totals)}
    assert [i.name for i in graph.user_inputs] == list(inputs)

    expected = run_with_torch(path, graph, inputs)
    reference = run_with_torch(path, graph, inputs, float64=True)
    assert torch.get_default_dtype() == torch.float32
    assert [e.dtype for e in expected] == [np.float32] * 3
    assert [r.dtype for r in reference] == [np.float64] * 3
    wide = counts.to(torch.float64)
    exact = (
        wide / totals.to(torch.float64),
        torch.sigmoid(wide),
        torch.fft.irfft(wide, norm="ortho"),
    )
    for mine, theirs in zip(reference, exact, strict=True):
        np.testing.assert_array_equal(mine, theirs.numpy())
    ours = aten2prims.execute(aten2prims.lower(graph), inputs)
    for index, (o, e, r) in enumerate(zip(ours, expected, reference, strict=True)):
        verdict = judge_output(o, e, r, what=f"output {index}")
        assert verdict, verdict.message
