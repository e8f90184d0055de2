"""`aten2prims.to_fx`: lowered graphs handed back to torch run in torch (`torch.ops.prims` and our
four extension ops) and match torch eager within the tolerance rule — the bundled example models,
OpInfo samples of a spread of Core ATen overloads (a few per dtype), and one harness sample per
dtype of every overload with a rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import aten2prims
from aten2prims.backends import extension_ops
from aten2prims.backends.to_fx import ToFxError, to_fx
from aten2prims.frontends.torch_interop import to_numpy, to_torch
from aten2prims.ir.graph import InputKind
from aten2prims.testing import runner
from aten2prims.testing.budgets import FAST_BUDGET
from aten2prims.testing.compare import compare
from aten2prims.testing.samples import sample_dtypes, samples
from aten2prims.testing.statistics import STATISTICAL_CHECKS
from decompositions import RULES

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(module: Any, graph: aten2prims.Graph, arrays: dict[str, Any]) -> list[Any]:
    placeholders = [to_torch(arrays[i.name]) for i in graph.inputs if i.data is None]
    with torch.no_grad():
        results = module(*placeholders)
    return [to_numpy(r) if isinstance(r, torch.Tensor) else r for r in results]


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.pt2")))
def test_example_model_runs_in_torch(name: str) -> None:
    graph = aten2prims.load(EXAMPLES / f"{name}.pt2")
    lowered = aten2prims.lower(graph)
    module = aten2prims.to_fx(lowered)
    assert isinstance(module, torch.fx.GraphModule)
    targets = {n.target for n in module.graph.nodes if n.op == "call_function"}
    assert all(str(t).startswith(("prims.", "aten2prims.")) for t in targets), targets
    inputs = dict(np.load(EXAMPLES / f"{name}.inputs.npz"))
    expected = np.load(EXAMPLES / f"{name}.expected.npz")
    results = _run(module, lowered, inputs)
    assert len(results) == len(lowered.user_outputs)
    for index, result in enumerate(results):
        verdict = compare(result, expected[f"output_{index}"], what=f"{name} output {index}")
        assert verdict, verdict.message


def test_weights_become_buffers_and_user_inputs_placeholders() -> None:
    lowered = aten2prims.lower(aten2prims.load(EXAMPLES / "mlp.pt2"))
    module = aten2prims.to_fx(lowered)
    placeholders = [n.name for n in module.graph.nodes if n.op == "placeholder"]
    assert placeholders == [i.name for i in lowered.user_inputs]
    buffers = dict(module.named_buffers())
    parameters = [i for i in lowered.inputs if i.kind is InputKind.PARAMETER]
    assert len(buffers) == len(parameters) > 0
    for graph_input in parameters:
        np.testing.assert_array_equal(to_numpy(buffers[graph_input.name]), graph_input.data)


def test_aten_nodes_are_refused_by_name() -> None:
    graph = aten2prims.load(EXAMPLES / "mlp.pt2")
    with pytest.raises(ToFxError, match=r"aten\.addmm\.default.*lower it first"):
        aten2prims.to_fx(graph)


# -- OpInfo samples ---------------------------------------------------------------------------------

# Overloads across the families: pointwise (with promotion), reductions, views, indexing (our
# extension prims), linear algebra, normalization, pooling, creation.
OPS = [
    "aten.abs.default",
    "aten.add.Tensor",
    "aten.mul.Scalar",
    "aten.div.Tensor_mode",
    "aten.pow.Tensor_Scalar",
    "aten.where.self",
    "aten.clamp.default",
    "aten.exp.default",
    "aten.sigmoid.default",
    "aten.bitwise_xor.Tensor",
    "aten.remainder.Tensor",
    "aten.sum.dim_IntList",
    "aten.prod.dim_int",
    "aten.amax.default",
    "aten.mean.dim",
    "aten.var.correction",
    "aten.any.dim",
    "aten.argmax.default",
    "aten.cumsum.default",
    "aten.permute.default",
    "aten.view.default",
    "aten.expand.default",
    "aten.cat.default",
    "aten.slice.Tensor",
    "aten.slice_scatter.default",
    "aten.as_strided.default",
    "aten.constant_pad_nd.default",
    "aten.flip.default",
    "aten.gather.default",
    "aten.index.Tensor",
    "aten.index_put.default",
    "aten.scatter_add.default",
    "aten.scatter_reduce.two",
    "aten.sort.default",
    "aten.topk.default",
    "aten.nonzero.default",
    "aten.mm.default",
    "aten.addmm.default",
    "aten.bmm.default",
    "aten.convolution.default",
    "aten.native_layer_norm.default",
    "aten._softmax.default",
    "aten.max_pool2d_with_indices.default",
    "aten.avg_pool2d.default",
    "aten.full.default",
    "aten.arange.start_step",
]
BUDGET = 3
# Every overload with a rule, every dtype the harness samples it in, this many samples each.
WIDE_BUDGET = 1

# Samples where torch's prims disagree with ours (and torch eager) and no adapter of to_fx applies;
# each names the torch behaviour (checked with strict xfail so a fixed torch shows up).
TORCH_PRIMS_DIFFER: dict[tuple[str, str], str] = {
    ("aten.pow.Scalar", "c128"): (
        "torch's prims.pow with the complex scalar base 1+0j returns 1 for every exponent; "
        "torch's aten.pow.Scalar (and ours) give nan+nanj where the exponent has a nan or "
        "infinite part (the hand-written sample's exponents)"
    ),
}


# The slow sweep's further samples meet the same difference in complex64 too.
SLOW_TORCH_PRIMS_DIFFER = {
    **TORCH_PRIMS_DIFFER,
    ("aten.pow.Scalar", "c64"): TORCH_PRIMS_DIFFER[("aten.pow.Scalar", "c128")],
}


def _cases(ops: list[str], differ: dict[tuple[str, str], str] = TORCH_PRIMS_DIFFER) -> list[Any]:
    cases = []
    for op in ops:
        for dtype in sample_dtypes(op):
            marks = []
            reason = differ.get((op, dtype.short))
            if reason is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            cases.append(pytest.param(op, dtype, id=f"{op}-{dtype.short}", marks=marks))
    return cases


def _check_samples(op: str, dtype: aten2prims.DType, budget: int) -> None:
    """Each sample our harness passes, lowered, handed to torch with to_fx and run there,
    matches torch eager under the tolerance rule (the harness's statistical checks for the ops
    that have one; dtype and shape where torch leaves values undefined)."""
    checked = 0
    for call in samples(op, dtype, budget=budget):
        outcome = runner.run_call(call)
        if not outcome.passed:
            continue  # ours fails or torch refuses: the harness reports those, not this test
        expected = runner.torch_outputs(call)
        _graph, arrays = runner.build_graph(call, expected)
        lowered = outcome.lowered
        assert lowered is not None
        results = _run(aten2prims.to_fx(lowered), lowered, arrays)
        theirs = [to_numpy(e) if isinstance(e, torch.Tensor) else e for e in expected]
        assert len(results) == len(theirs)
        statistical = STATISTICAL_CHECKS.get(op)
        if statistical is not None:
            # topk's ties, random ops: the harness's own check (order of ties is unspecified).
            verdict = statistical(call, results, theirs)
            assert verdict, verdict.message
            checked += 1
            continue
        reference = None
        for index, (result, their) in enumerate(zip(results, theirs)):
            if op in runner.UNDEFINED_VALUES:
                assert (result.dtype, result.shape) == (their.dtype, their.shape)
                continue
            verdict = compare(result, their, what=f"{call.origin} output {index}")
            if not verdict and verdict.reason == "value":
                reference = reference or runner.float64_reference(call) or []
                if index < len(reference):
                    verdict = compare(
                        result,
                        their,
                        reference=reference[index],
                        what=f"{call.origin} output {index}",
                    )
            assert verdict, verdict.message
        checked += 1
    if checked == 0:
        pytest.skip(f"no sample of {op} for {dtype.short} passes our own harness")


@pytest.mark.parametrize(("op", "dtype"), _cases(OPS))
def test_opinfo_samples_run_in_torch(op: str, dtype: aten2prims.DType) -> None:
    _check_samples(op, dtype, BUDGET)


@pytest.mark.parametrize(("op", "dtype"), _cases(sorted(set(RULES) - set(OPS))))
def test_every_rule_runs_in_torch(op: str, dtype: aten2prims.DType) -> None:
    """With test_opinfo_samples_run_in_torch, every overload with a rule (OPS take more samples)."""
    _check_samples(op, dtype, WIDE_BUDGET)


@pytest.mark.slow
@pytest.mark.parametrize(("op", "dtype"), _cases(sorted(RULES), SLOW_TORCH_PRIMS_DIFFER))
def test_every_rule_runs_in_torch_at_the_harness_budget(op: str, dtype: aten2prims.DType) -> None:
    """The same sweep at the conformance harness's fast budget (about 3 minutes of CPU; run with
    --full-budget)."""
    _check_samples(op, dtype, FAST_BUDGET)


# -- the extension ops in torch -------------------------------------------------------------------


def test_extension_ops_are_registered_once_with_fake_kernels() -> None:
    extension_ops.register()
    extension_ops.register()
    a = torch.arange(12.0).reshape(3, 4)
    rows, cols = torch.tensor([2, 0]), torch.tensor([1, 3])
    assert torch.ops.aten2prims.gather_nd(a, [rows, cols]).tolist() == [9.0, 3.0]
    scattered = torch.ops.aten2prims.scatter_nd(
        torch.zeros(3, 4), [rows, rows * 0], torch.tensor([1.0, 2.0]), "sum"
    )
    assert scattered[2, 0] == 1.0 and scattered[0, 0] == 2.0
    with torch._subclasses.FakeTensorMode():
        fake = torch.empty(3, 4)
        assert torch.ops.aten2prims.gather_nd(
            fake, [torch.empty(5, dtype=torch.int64)] * 2
        ).shape == (5,)
        assert torch.ops.aten2prims.nonzero(fake, 7).shape == (7, 2)
        values, positions = torch.ops.aten2prims.sort(fake, 1, True)
        assert positions.dtype == torch.int64 and values.shape == (3, 4)


def test_extension_complex_is_torch_complex() -> None:
    extension_ops.register()
    real = torch.tensor([1.0, float("inf"), float("nan")])
    imag = torch.tensor([float("inf"), -0.0, 2.0])
    ours = torch.ops.aten2prims.complex(real, imag)
    assert ours.dtype == torch.complex64
    parts = torch.view_as_real(ours)
    assert torch.equal(parts[:, 0].nan_to_num(7.0), real.nan_to_num(7.0))
    assert torch.equal(parts[:, 1].nan_to_num(7.0), imag.nan_to_num(7.0))
    with pytest.raises(ValueError, match="one dtype"):
        torch.ops.aten2prims.complex(real, imag.double())
    with torch._subclasses.FakeTensorMode():
        fake = torch.ops.aten2prims.complex(torch.empty(3, 1).double(), torch.empty(4).double())
        assert fake.shape == (3, 4) and fake.dtype == torch.complex128


def test_extension_ops_refuse_out_of_range_indices_as_ours_do() -> None:
    extension_ops.register()
    with pytest.raises(ValueError, match="index 4 is out of bounds for dimension 1 with size 4"):
        torch.ops.aten2prims.gather_nd(torch.zeros(3, 4), [torch.tensor([0]), torch.tensor([4])])
    with pytest.raises(ValueError, match="declares 2 nonzero elements, the data hold 1"):
        torch.ops.aten2prims.nonzero(torch.tensor([0.0, 1.0]), 2)


# -- where torch's prims differ from ours ---------------------------------------------------------

# Each graph states a prim as our opset defines it. With the adapters (the default) to_fx computes
# what our executor computes; calling torch's prim exactly as stated does not (strict xfail, the
# reason naming torch's behaviour), so a torch that changes shows up here.
DIFFERENCES = {
    "collapse_view of a transposed tensor": (
        """graph g(%x: f32[3, 4]) -> (f32[12]):
  %t: f32[4, 3]{1, 4} = prims.transpose(%x, permutation=[1, 0])
  %c: f32[12] = prims.collapse_view(%t, start=0, end=1)
  return (%c)""",
        "torch's collapse_view raises 'Attempting to view a collapsed tensor, but no such view "
        "exists!' when strides do not nest; ours copies (its result has contiguous strides)",
    ),
    "view_of_dtype of a transposed tensor": (
        """graph g(%x: f32[3, 4]) -> (f16[4, 6]):
  %t: f32[4, 3]{1, 4} = prims.transpose(%x, permutation=[1, 0])
  %v: f16[4, 6] = prims.view_of_dtype(%t, dtype=f16)
  return (%v)""",
        "torch's view_of_dtype to a dtype of another size refuses an operand whose last dim is "
        "not contiguous; ours copies it first",
    ),
    "sum over no dims": (
        """graph g(%x: f32[3, 4]) -> (f32[3, 4]):
  %s: f32[3, 4] = prims.sum(%x, dims=[], output_dtype=None)
  return (%s)""",
        "torch's eager prims.sum with dims=[] reduces every dim (its meta reduces none, as ours)",
    ),
    "sum over every dim as dims=None": (
        """graph g(%x: f32[3, 4]) -> (f32[]):
  %s: f32[] = prims.sum(%x, dims=None, output_dtype=None)
  return (%s)""",
        "torch's prims.sum meta crashes on dims=None (iterating None); ours reduces every dim",
    ),
    "int8 sum keeps int8": (
        """graph g(%x: i8[3, 4]) -> (i8[3]):
  %s: i8[3] = prims.sum(%x, dims=[1], output_dtype=None)
  return (%s)""",
        "torch's eager prims.sum of an integer tensor returns int64 (its meta says int8, as ours)",
    ),
    "sum with output_dtype": (
        """graph g(%x: f16[3, 4]) -> (f32[3]):
  %s: f32[3] = prims.sum(%x, dims=[1], output_dtype=f32)
  return (%s)""",
        "torch's eager prims.sum fails when given output_dtype; ours converts, then reduces",
    ),
    "xor_sum": (
        """graph g(%x: i32[3, 4]) -> (i32[3]):
  %s: i32[3] = prims.xor_sum(%x, dims=[1], output_dtype=None)
  return (%s)""",
        "torch's prims.xor_sum has no eager kernel (inductor only)",
    ),
    "reshape to a 0-dim tensor": (
        """graph g(%x: f32[1, 1]) -> (f32[]):
  %r: f32[] = prims.reshape(%x, shape=[])
  return (%r)""",
        "torch's prims.reshape meta crashes on the shape [] (reduce() of an empty sequence); ours "
        "makes the one-element tensor 0-dim",
    ),
    "as_strided to a 0-dim tensor": (
        """graph g(%x: f32[5]) -> (f32[]+3):
  %s: f32[]+3 = prims.as_strided(%x, size=[], stride=[], storage_offset=3)
  return (%s)""",
        "torch's prims.as_strided meta crashes on the size [] (reduce() of an empty sequence); "
        "ours reads the one element at the offset",
    ),
    "scalar_tensor without dtype": (
        """graph g(%x: f32[]) -> (f32[]):
  %s: f32[] = prims.scalar_tensor(s=2.5, dtype=None, device=None)
  %r: f32[] = prims.add(%x, %s)
  return (%r)""",
        "torch's prims.scalar_tensor meta requires a device argument and its kernel a dtype; ours "
        "takes the dtype torch's meta gives a Python float",
    ),
}


def _difference_inputs(graph: aten2prims.Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        i.name: (rng.standard_normal(i.value.shape) * 50).astype(i.value.dtype.numpy)
        for i in graph.user_inputs
    }


def _differs(case: str, adapt: bool) -> None:
    graph = aten2prims.parse(DIFFERENCES[case][0])
    inputs = _difference_inputs(graph)
    ours = aten2prims.execute(graph, inputs)
    theirs = _run(to_fx(graph, adapt=adapt), graph, inputs)
    for our, their in zip(ours, theirs):
        verdict = compare(their, np.asarray(our), what=case, against="our executor")
        assert verdict, verdict.message


@pytest.mark.parametrize("case", list(DIFFERENCES))
def test_adapters_make_torch_compute_our_prims(case: str) -> None:
    _differs(case, adapt=True)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=reason))
        for case, (_, reason) in DIFFERENCES.items()
    ],
)
def test_torch_prims_called_as_stated(case: str) -> None:
    _differs(case, adapt=False)


def test_as_strided_of_a_transposed_tensor_is_torchs_when_called_as_stated() -> None:
    """Both read storage through the operand's layout (the transpose's strides {1, 4})."""
    graph = aten2prims.parse(
        """graph g(%x: f32[3, 4]) -> (f32[2, 2]{1, 3}+1):
  %t: f32[4, 3]{1, 4} = prims.transpose(%x, permutation=[1, 0])
  %s: f32[2, 2]{1, 3}+1 = prims.as_strided(%t, size=[2, 2], stride=[1, 3], storage_offset=1)
  return (%s)"""
    )
    inputs = {"x": np.arange(12.0, dtype=np.float32).reshape(3, 4)}
    (ours,) = aten2prims.execute(graph, inputs)
    np.testing.assert_array_equal(ours, [[1.0, 4.0], [2.0, 5.0]])
    for adapt in (False, True):
        (theirs,) = _run(to_fx(graph, adapt=adapt), graph, inputs)
        np.testing.assert_array_equal(theirs, ours)
