"""OpInfo samples exported with dynamic dims, one or two representative ops per Core ATen
family: each float32 sample of `op_db` is exported with dim 0 and the last dim of its floating
tensors marked `Dim.AUTO`, imported with `from_fx`, lowered once, and run at the example's size
and three larger ones (new random tensors of the new shapes; integer and bool tensors, such as
indices and masks, stay as the sample has them, so they stay valid), matching torch at each.

Samples torch.export refuses, and samples whose dims it specializes (no symbol left), are
counted, not run; everything else must match. Sizes only grow: indices the sample drew for its
sizes stay in range. `pytest -s` prints each family's counts."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.export import Dim
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_unflatten

import aten2prims
from aten2prims.errors import LoadError, ShapeError
from aten2prims.passes.bind import specialize
from aten2prims.testing.compare import compare

# family -> the OpInfo (name, variant) pairs standing for it
FAMILIES: dict[str, list[tuple[str, str]]] = {
    "pointwise_unary": [("sigmoid", ""), ("exp", "")],
    "pointwise_binary": [("add", ""), ("mul", "")],
    "reductions": [("sum", ""), ("amax", "")],
    "views": [("flatten", ""), ("transpose", "")],
    "indexing": [("gather", ""), ("index_select", "")],
    "scatter": [("scatter_add", "")],
    "convolution": [("nn.functional.conv2d", "")],
    "pooling": [("nn.functional.max_pool2d", ""), ("nn.functional.avg_pool2d", "")],
    "normalization": [("nn.functional.layer_norm", "")],
    "matmul_linear": [("matmul", ""), ("nn.functional.linear", "")],
    "softmax": [("softmax", "")],
    "cat_stack_split": [("cat", ""), ("stack", ""), ("split", "")],
    "padding": [("nn.functional.pad", "constant")],
    "upsampling": [
        ("nn.functional.interpolate", "nearest"),
        ("nn.functional.interpolate", "nearest-exact"),
        ("nn.functional.interpolate", "linear"),
        ("nn.functional.interpolate", "bilinear"),
        ("nn.functional.interpolate", "bicubic"),
        ("nn.functional.interpolate", "trilinear"),
    ],
    "scan_sort_topk": [("cumsum", ""), ("sort", ""), ("topk", "")],
    "where_masked": [("where", ""), ("masked_fill", "")],
    "embedding": [("nn.functional.embedding", "")],
}
# Ops some of whose samples our lowering does not yet run dynamic: the error such a sample must
# raise (a check recorded while lowering that fails at another size, or a refusal to load). A
# sample of these ops that fails so counts as a known gap, one that runs as dynamic; an op
# without any gap left fails the test, to be removed from here.
KNOWN_GAPS: dict[str, str] = {
    # not a gap of ours: a grouped convolution's weight holds a multiple of groups output
    # channels (torch checks it too, but its exported program does not say so); the sample with
    # groups=2 grows them to an odd count, which torch refuses as well
    "nn.functional.conv2d": r"lowered assuming \(s\d+%2\) == 0",
}
SAMPLES_PER_OP = 3
GROWTH = (1, 3, 6)  # the other sizes: the example's plus these

OPINFOS = {(o.name, o.variant_test_name): o for o in op_db}


class Call(torch.nn.Module):
    """The sample's call with its tensors as the module's inputs (other operands fixed)."""

    def __init__(self, op: Any, spec: Any, leaves: list[Any], positions: list[int]) -> None:
        super().__init__()
        self.op, self.spec, self.leaves, self.positions = op, spec, leaves, positions

    def forward(self, *tensors: torch.Tensor) -> Any:
        leaves = list(self.leaves)
        for position, tensor in zip(self.positions, tensors):
            leaves[position] = tensor
        args, kwargs = tree_unflatten(leaves, self.spec)
        return self.op(*args, **kwargs)


def _dynamic_dims(tensor: torch.Tensor) -> dict[int, Any]:
    """Dim 0 and the last dim of a floating tensor, when at least 2 (0 and 1 specialize)."""
    if not tensor.is_floating_point() or tensor.ndim == 0:
        return {}
    return {d: Dim.AUTO for d in {0, tensor.ndim - 1} if tensor.shape[d] >= 2}


def _samples(name: str, variant: str) -> Iterator[Any]:
    """The op's first SAMPLES_PER_OP float32 samples with a dim to make dynamic."""
    opinfo = OPINFOS[(name, variant)]
    taken = 0
    for sample in opinfo.sample_inputs("cpu", torch.float32, requires_grad=False):
        if taken == SAMPLES_PER_OP:
            return
        leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
        if any(isinstance(t, torch.Tensor) and _dynamic_dims(t) for t in leaves):
            taken += 1
            yield opinfo, sample


def _distinct(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Random float32 values in [-2, 2), all different: sorts, top-k and pooling indices have
    no ties to break."""
    count = math.prod(shape)
    order = torch.randperm(count, generator=generator).to(torch.float32)
    return ((order - count / 2) * (4 / max(count, 1))).reshape(shape)


def _flat_outputs(result: Any) -> list[np.ndarray]:
    leaves, _ = tree_flatten(result)
    return [leaf.numpy() for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _run_sample(opinfo: Any, sample: Any, label: str) -> str:
    """'dynamic' when the sample ran at four sizes, else why not ('refused', 'specialized')."""
    leaves, spec = tree_flatten(((sample.input, *sample.args), dict(sample.kwargs)))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = tuple(leaves[i] for i in positions)
    module = Call(opinfo.op, spec, leaves, positions)
    dynamic = (tuple(_dynamic_dims(t) for t in tensors),)  # forward's one *tensors argument
    try:
        program = torch.export.export(module, tensors, dynamic_shapes=dynamic)
    except Exception:  # torch.export refuses the sample: counted, not ours to run
        return "refused"
    gap = KNOWN_GAPS.get(opinfo.name)
    if gap is None:
        return _compare_at_sizes(program, module, tensors, label)
    try:
        return _compare_at_sizes(program, module, tensors, label)
    except (ShapeError, LoadError) as error:
        assert re.search(gap, str(error)), f"{label}: {error}"
        return "known gap"


def _compare_at_sizes(program: Any, module: Call, tensors: tuple[Any, ...], label: str) -> str:
    graph = aten2prims.from_fx(program.run_decompositions())
    backed = {name: s for name, s in graph.symbols.items() if s.backed}
    if not backed:
        return "specialized"
    lowered = aten2prims.lower(graph)
    generator = torch.Generator().manual_seed(0)
    for growth in (0, *GROWTH):
        binding = {name: s.example + growth for name, s in backed.items()}
        if any(not s.lower <= binding[name] <= s.upper for name, s in backed.items()):
            continue
        metas = [gi.value.meta for gi in specialize(graph, binding).user_inputs]
        inputs = tuple(
            tensor
            if tuple(tensor.shape) == tuple(meta.shape)
            else _distinct(tuple(meta.shape), generator)
            for tensor, meta in zip(tensors, metas, strict=True)
        )
        ours = aten2prims.execute(lowered, [t.numpy() for t in inputs], check=True)
        with torch.no_grad():
            expected = _flat_outputs(module(*inputs))
        assert len(ours) == len(expected), label
        for index, (mine, theirs) in enumerate(zip(ours, expected)):
            verdict = compare(mine, theirs, what=f"{label} output {index} at {binding}")
            assert verdict, verdict.message
    return "dynamic"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_opinfo_samples_with_dynamic_dims_match_torch_at_four_sizes(family: str) -> None:
    counts = {"dynamic": 0, "specialized": 0, "refused": 0, "known gap": 0}
    for name, variant in FAMILIES[family]:
        gaps = 0
        for index, (opinfo, sample) in enumerate(_samples(name, variant)):
            label = f"{name}{'.' + variant if variant else ''} sample {index}"
            outcome = _run_sample(opinfo, sample, label)
            counts[outcome] += 1
            gaps += outcome == "known gap"
        if name in KNOWN_GAPS:
            assert gaps, f"every sample of {name} runs dynamic now: remove it from KNOWN_GAPS"
    print(f"\n{family}: {counts}")
    assert counts["dynamic"] + counts["known gap"] > 0, f"{family}: nothing ran ({counts})"
