"""OpInfo samples exported with dynamic dims, for every Core ATen family. Each family lists its
Core ATen overloads (`OVERLOADS`; together the 194). Its test runs the OpInfos standing for it
(`FAMILIES`), then, for each of its overloads no sample has yet run with, the OpInfos the
harness's discovery map says reach that overload (`aten2prims.testing.samples.discover`: its
namesake first, then the ones reaching fewest overloads), until one has. The samples (the
harness's seeded ones, with a dim to make dynamic) are in a floating dtype and an integer one
(else bool), those the OpInfo supports.

A sample is exported with dim 0 and the last dim of each data tensor (the tensors of the sample's
dtype) marked `Dim.AUTO`, imported with `from_fx`, lowered once, and run at the example's size
and three others within the symbols' ranges, matching torch at each (the harness's tolerance
rule, with its float64 reference: floating tensors widened, integer ones promoted by the op
to float64 as well). The other sizes shrink as well as grow, except where the
sample keeps an integer tensor as it is (an index may refer to the dim); a size torch itself
refuses (an operand kept as it is no longer fits) is passed over when ours refuses it too. A data
tensor gets new values at a new size, and integer and bool ones at the example's too, drawn from
the sample's own range (a domain the OpInfo chose — positive, a probability, a nonzero divisor —
stays valid), all different except for bools (sorts and top-k order ties as they like); the other
tensors (indices, masks) stay as they are.

Samples torch.export refuses, samples whose dims it specializes (no symbol left) or whose other
sizes torch refuses, and samples whose graph holds an op we do not lower are counted, not run;
samples drawing random numbers run at every size with only shapes and dtypes compared; everything
else must match, or fail as its OpInfo's known gap (`KNOWN_GAPS`) says. An overload counts as run
when it is in the graph of a sample that ran dynamic. Every overload of a family must be run,
unless no OpInfo reaches it (discovery says so), one that does ran into a known gap, or
`UNEXERCISED` says why not; every family must run at least its `MINIMUM` of dynamic samples, so
coverage cannot shrink silently. `pytest -s` prints each family's counts, dtypes and the overloads
not run, with why."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from torch.export import Dim
from torch.utils._pytree import tree_flatten, tree_unflatten

import aten2prims
from aten2prims.errors import Error, LoadError
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import Graph
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import substitute
from aten2prims.schema.core_aten import CORE_ATEN_OPS
from aten2prims.testing.compare import ZERO_SIGN_UNDEFINED, compare
from aten2prims.testing.runner import float64_promotions
from aten2prims.testing.samples import discover, opinfo_samples, opinfos, supported_dtypes
from prims.registry import lookup

# family -> the OpInfo (name, variant) pairs standing for it, run first
FAMILIES: dict[str, list[tuple[str, str]]] = {
    "pointwise_unary": [("sigmoid", ""), ("exp", "")],
    "pointwise_binary": [("add", ""), ("mul", "")],
    "reductions": [("sum", ""), ("amax", "")],
    "views": [("flatten", ""), ("transpose", "")],
    "indexing": [("gather", ""), ("index_select", "")],
    "scatter": [("scatter_add", "")],
    "convolution": [("nn.functional.conv2d", "")],
    "pooling": [("nn.functional.max_pool2d", ""), ("nn.functional.avg_pool2d", "")],
    "normalization": [
        ("nn.functional.layer_norm", ""),
        ("nn.functional.batch_norm", ""),
        ("nn.functional.group_norm", ""),
        ("nn.functional.instance_norm", ""),
    ],
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
    "activations": [("nn.functional.relu", ""), ("nn.functional.gelu", "")],
    "comparison_logical": [("eq", ""), ("logical_and", "")],
    "creation": [("full_like", "")],
    "random": [],
    "conversion": [("clone", ""), ("double", "")],
    "fft": [("fft.rfft", ""), ("fft.irfft", ""), ("fft.fft2", ""), ("fft.ifftn", "")],
}
# family -> its Core ATen overloads (every one of the 194 in exactly one family)
OVERLOADS: dict[str, tuple[str, ...]] = {
    "pointwise_unary": tuple(
        f"aten.{name}.default"
        for name in (
            "abs acos acosh asin asinh atan atanh ceil cos cosh erf exp expm1 floor log log10"
            " log1p log2 neg reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc"
        ).split()
    ),
    "pointwise_binary": (
        "aten.add.Scalar",
        "aten.add.Tensor",
        "aten.sub.Scalar",
        "aten.sub.Tensor",
        "aten.mul.Scalar",
        "aten.mul.Tensor",
        "aten.div.Scalar",
        "aten.div.Scalar_mode",
        "aten.div.Tensor",
        "aten.div.Tensor_mode",
        "aten.atan2.default",
        "aten.atan2.out",
        "aten.fmod.Scalar",
        "aten.fmod.Tensor",
        "aten.remainder.Scalar",
        "aten.remainder.Tensor",
        "aten.pow.Scalar",
        "aten.pow.Tensor_Scalar",
        "aten.pow.Tensor_Tensor",
        "aten.maximum.default",
        "aten.minimum.default",
        "aten.clamp.default",
        "aten.clamp.Tensor",
    ),
    "reductions": (
        "aten.amax.default",
        "aten.amin.default",
        "aten.any.default",
        "aten.any.dim",
        "aten.any.dims",
        "aten.argmax.default",
        "aten.argmin.default",
        "aten.max.dim",
        "aten.min.dim",
        "aten.mean.default",
        "aten.mean.dim",
        "aten.prod.default",
        "aten.prod.dim_int",
        "aten.sum.dim_IntList",
        "aten.var.correction",
        "aten.var.dim",
    ),
    "views": (
        "aten.alias.default",
        "aten.as_strided.default",
        "aten.diagonal.default",
        "aten.expand.default",
        "aten.permute.default",
        "aten.select.int",
        "aten.slice.Tensor",
        "aten.squeeze.dim",
        "aten.squeeze.dims",
        "aten.unsqueeze.default",
        "aten.view.default",
        "aten.sym_size.int",
        "aten.sym_numel.default",
        "aten.sym_stride.int",
        "aten.sym_storage_offset.default",
        "aten.sym_is_contiguous.default",
    ),
    "indexing": (
        "aten.gather.default",
        "aten.index.Tensor",
        "aten.index_select.default",
        "aten.nonzero.default",
    ),
    "scatter": (
        "aten.scatter.src",
        "aten.scatter.value",
        "aten.scatter_add.default",
        "aten.scatter_reduce.two",
        "aten.index_put.default",
        "aten.select_scatter.default",
        "aten.slice_scatter.default",
    ),
    "convolution": (
        "aten.convolution.default",
        "aten.convolution_backward.default",
        "aten.col2im.default",
    ),
    "pooling": (
        "aten._adaptive_avg_pool2d.default",
        "aten._adaptive_avg_pool2d_backward.default",
        "aten._adaptive_avg_pool3d.default",
        "aten.adaptive_avg_pool1d.default",
        "aten.avg_pool1d.default",
        "aten.avg_pool2d.default",
        "aten.avg_pool2d_backward.default",
        "aten.avg_pool3d.default",
        "aten.max_pool2d_with_indices.default",
        "aten.max_pool2d_with_indices_backward.default",
        "aten.max_pool3d_with_indices.default",
    ),
    "normalization": (
        "aten.native_batch_norm.default",
        "aten._native_batch_norm_legit.default",
        "aten._native_batch_norm_legit.no_stats",
        "aten._native_batch_norm_legit_no_training.default",
        "aten.native_group_norm.default",
        "aten.native_group_norm_backward.default",
        "aten.native_layer_norm.default",
        "aten.native_layer_norm_backward.default",
    ),
    "matmul_linear": (
        "aten.mm.default",
        "aten.bmm.default",
        "aten.addmm.default",
        "aten._cdist_forward.default",
        "aten._pdist_forward.default",
    ),
    "softmax": ("aten._softmax.default", "aten._log_softmax.default"),
    "cat_stack_split": (
        "aten.cat.default",
        "aten.split_with_sizes.default",
        "aten.repeat.default",
        "aten.flip.default",
    ),
    "padding": (
        "aten.constant_pad_nd.default",
        "aten.reflection_pad1d.default",
        "aten.reflection_pad2d.default",
        "aten.reflection_pad3d.default",
        "aten.replication_pad2d.default",
        "aten.replication_pad3d.default",
    ),
    "upsampling": (
        "aten.upsample_bilinear2d.vec",
        "aten.upsample_nearest2d.vec",
        "aten.grid_sampler_2d.default",
    ),
    "scan_sort_topk": ("aten.cumsum.default", "aten.sort.default", "aten.topk.default"),
    "where_masked": ("aten.where.self", "aten.masked_scatter.default"),
    "embedding": (
        "aten.embedding.default",
        "aten.embedding_dense_backward.default",
        "aten._embedding_bag.default",
    ),
    "activations": (
        "aten.relu.default",
        "aten.gelu.default",
        "aten.elu.default",
        "aten.hardtanh.default",
        "aten.leaky_relu.default",
    ),
    "comparison_logical": (
        "aten.eq.Scalar",
        "aten.eq.Tensor",
        "aten.ne.Scalar",
        "aten.ne.Tensor",
        "aten.lt.Scalar",
        "aten.lt.Tensor",
        "aten.le.Scalar",
        "aten.le.Tensor",
        "aten.gt.Scalar",
        "aten.gt.Tensor",
        "aten.ge.Scalar",
        "aten.ge.Tensor",
        "aten.logical_and.default",
        "aten.logical_or.default",
        "aten.logical_xor.default",
        "aten.logical_not.default",
        "aten.bitwise_and.Scalar",
        "aten.bitwise_and.Tensor",
        "aten.bitwise_or.Scalar",
        "aten.bitwise_or.Tensor",
        "aten.bitwise_xor.Scalar",
        "aten.bitwise_xor.Tensor",
        "aten.bitwise_not.default",
        "aten.isinf.default",
        "aten.isnan.default",
    ),
    "creation": (
        "aten.arange.start_step",
        "aten.empty.memory_format",
        "aten.empty_strided.default",
        "aten.full.default",
        "aten.full_like.default",
        "aten.scalar_tensor.default",
        "aten.fill.Scalar",
    ),
    "random": (
        "aten.rand.default",
        "aten.randn.default",
        "aten.randperm.default",
        "aten.native_dropout.default",
    ),
    "conversion": (
        "aten._to_copy.default",
        "aten.clone.default",
        "aten.copy.default",
        "aten._local_scalar_dense.default",
        "aten.resize_.default",
    ),
    "fft": ("aten._fft_r2c.default", "aten._fft_c2r.default"),
}
# Overloads some OpInfo reaches that no sample here runs dynamic, and why. (An overload no OpInfo
# reaches at all is reported as such without an entry.) An entry whose overload runs fails the
# test, to be removed from here.
UNEXERCISED: dict[str, str] = {
    "aten.pow.Scalar": "only logspace reaches it, whose samples take no tensor",
    "aten.alias.default": "the exported graphs of the OpInfos tried hold no alias",
    "aten.select_scatter.default": "the samples of select_scatter export specialized",
    "aten.reflection_pad1d.default": (
        "the samples of pad.reflect tried export specialized or with ops we do not lower"
    ),
    "aten.copy.default": "only linspace.tensor_overload reaches it, whose samples take no size",
    "aten.resize_.default": "torch.export refuses resize_ of an input",
    "aten.empty_strided.default": "only empty_strided reaches it, whose samples take no tensor",
    "aten.full.default": (
        "the OpInfos tried export it with static sizes, or with ops we do not lower"
    ),
    "aten.scalar_tensor.default": (
        "the OpInfos tried export it in graphs that specialize, or with ops we do not lower"
    ),
    "aten.randn.default": (
        "randn's samples take no tensor; pca_lowrank's and svd_lowrank's export linalg"
        " decompositions we do not lower"
    ),
    # Overloads torch.export does not write when the OpInfos' dims are dynamic:
    "aten.squeeze.dim": "the OpInfos tried export a squeeze of one dim as aten.squeeze.dims",
    "aten.replication_pad2d.default": (
        "with a dynamic dim torch decomposes replication padding into index arithmetic"
        " (a clamped arange and an index), not this overload"
    ),
    "aten.fill.Scalar": "the OpInfos tried export their fills as aten.full_like",
    "aten.native_batch_norm.default": (
        "the OpInfos tried export batch norm as _native_batch_norm_legit_functional or"
        " _native_batch_norm_legit_no_training (both run dynamic here)"
    ),
    "aten._native_batch_norm_legit.default": (
        "its OpInfo exports it as _native_batch_norm_legit_functional (run dynamic here)"
    ),
}
# Ops some of whose samples our lowering does not yet run dynamic: the error such a sample must
# raise (a check recorded while lowering that fails at another size, or a refusal to load). A
# sample of these ops that fails so counts as a known gap, one that runs as dynamic; an OpInfo
# standing for a family without any gap left fails the test, to be removed from here. An entry
# is an OpInfo's name, or its name and variant.
KNOWN_GAPS: dict[str, str] = {
    # uint8 bilinear upsampling of a symbolic size: its fixed-point weights' precision is
    # computed from every weight while lowering, for the example's sizes under a check
    "nn.functional.interpolate.bilinear": r"lowered assuming s\d+ == \d+",
    # the rule unnormalizes grid coordinates with Python floats of the input's spatial sizes,
    # (n - 1) / 2: a symbolic size needs them computed at run time
    "grid_sampler_2d": r"a decision on the float expression .*/2 is not supported",
    "nn.functional.grid_sample": r"a decision on the float expression .*/2 is not supported",
    # slice_scatter with an end past a shrunk dim: the rule assumes the end within the dim
    # rather than clamping it to the dim
    "slice_scatter": r"lowered assuming \d+ <= s\d+",
}
# family -> the fewest samples that must run dynamic, random ones included (what runs today)
MINIMUM: dict[str, int] = {
    "pointwise_unary": 34,
    "pointwise_binary": 23,
    "reductions": 26,
    "views": 15,
    "indexing": 8,
    "scatter": 7,
    "convolution": 4,
    "pooling": 13,
    "normalization": 10,
    "matmul_linear": 11,
    "softmax": 4,
    "cat_stack_split": 13,
    "padding": 4,
    "upsampling": 20,
    "scan_sort_topk": 12,
    "where_masked": 4,
    "embedding": 3,
    "activations": 10,
    "comparison_logical": 27,
    "creation": 6,
    "random": 4,
    "conversion": 8,
    "fft": 16,
}

# The dtypes an OpInfo runs in: the first it supports of the floating group and of the integer
# one, else of bool.
DTYPE_GROUPS = (
    (DType.float32, DType.float64),
    (DType.int32, DType.int64, DType.int16, DType.int8, DType.uint8),
    (DType.bool,),
)
# Samples (with a dim to make dynamic) an OpInfo standing for a family runs in its first
# dtype (floating, where it has one) and in each other. Exporting a sample and decomposing it
# takes most of a second: these keep the file within minutes.
REPRESENTATIVE_SAMPLES = (3, 1)
CANDIDATE_SAMPLES = 2  # the most an OpInfo tried for an overload runs, one dtype after another
SAMPLES_SEARCHED = 24  # samples looked through for those with a dim to make dynamic
CANDIDATES_PER_OVERLOAD = 3  # OpInfos tried for an overload not yet run
# the offsets from the example size tried, in order, for the three other sizes
SIZE_OFFSETS = (-1, 2, 5, -2, 9, 14)
OTHER_SIZES = 3
# How from_fx refuses a graph holding an op that is neither Core ATen nor one we lower.
OUTSIDE_CORE = "outside the Core ATen overloads aten2prims knows"


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


@attrs.frozen
class Outcome:
    """How a sample ended: 'dynamic' (it matched torch at every size), 'random' (its graph draws
    random numbers: it ran at every size, with torch's shapes and dtypes), 'specialized'
    (torch.export left no symbol), 'size-locked' (torch, and we, refuse every other size the
    symbols' ranges allow), 'refused' (torch.export raised), 'outside core' (its graph holds an
    op we do not lower) or 'known gap'; the overloads of its graph, and whether a size it ran at
    was smaller than the example's."""

    kind: str
    ops: frozenset[str] = frozenset()
    shrunk: bool = False


def _dynamic_dims(tensor: torch.Tensor) -> dict[int, Any]:
    """Dim 0 and the last dim, when at least 2 (0 and 1 specialize)."""
    if tensor.ndim == 0:
        return {}
    return {d: Dim.AUTO for d in {0, tensor.ndim - 1} if tensor.shape[d] >= 2}


def _tensors(sample: Any) -> tuple[list[Any], Any, list[int]]:
    leaves, spec = tree_flatten(((sample.input, *sample.args), dict(sample.kwargs)))
    return leaves, spec, [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]


def _dtypes(opinfo: Any) -> list[DType]:
    """A floating dtype and an integer one (else bool) of those the OpInfo supports."""
    supported = set(supported_dtypes(opinfo))
    floating, integer, boolean = (
        next((d for d in group if d in supported), None) for group in DTYPE_GROUPS
    )
    return [d for d in (floating, integer or boolean) if d is not None]


def _samples(opinfo: Any, dtype: DType) -> Iterator[Any]:
    """The OpInfo's samples in `dtype` (among its first SAMPLES_SEARCHED) with a data tensor
    to make dynamic."""
    torch_dtype = getattr(torch, dtype.torch_name)
    for index, sample in enumerate(opinfo_samples(opinfo, dtype)):
        if index == SAMPLES_SEARCHED:
            return
        leaves, _, positions = _tensors(sample)
        if any(leaves[i].dtype == torch_dtype and _dynamic_dims(leaves[i]) for i in positions):
            yield sample


def _representative_samples(opinfo: Any) -> Iterator[tuple[DType, Any]]:
    """REPRESENTATIVE_SAMPLES of the OpInfo: in its first dtype, then in each other."""
    for position, dtype in enumerate(_dtypes(opinfo)):
        wanted = REPRESENTATIVE_SAMPLES[min(position, 1)]
        for sample in itertools.islice(_samples(opinfo, dtype), wanted):
            yield dtype, sample


def _candidate_samples(opinfo: Any, turn: int) -> Iterator[tuple[DType, Any]]:
    """The OpInfo's samples taking turns between its dtypes, starting with the `turn`-th (the
    OpInfos a family tries start in different dtypes)."""
    dtypes = _dtypes(opinfo)
    dtypes = dtypes[turn % len(dtypes) :] + dtypes[: turn % len(dtypes)] if dtypes else []
    streams = [zip(itertools.repeat(dtype), _samples(opinfo, dtype)) for dtype in dtypes]
    for round_ in itertools.zip_longest(*streams):
        yield from (pair for pair in round_ if pair is not None)


def _fresh(like: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """A tensor of `shape` and `like`'s dtype with values from `like`'s range (without zero
    when `like` has none), all different but for bools (an integer range widened as needed)."""
    count = math.prod(shape)
    order = torch.randperm(count, generator=generator).to(torch.float64)
    if like.dtype == torch.bool:
        seen = like.unique()
        values = order % 2 == 1 if seen.numel() == 2 else torch.full((count,), bool(seen.any()))
    elif like.is_floating_point():
        finite = like[torch.isfinite(like)].to(torch.float64)
        low, high = (finite.min(), finite.max()) if finite.numel() else (-2.0, 2.0)
        values = low + (high - low) * (order + 0.5) / max(count, 1)
    else:
        low, high = (int(like.min()), int(like.max())) if like.numel() else (0, 9)
        zero = not like.numel() or bool((like == 0).any())
        # all different (an unstable sort orders ties as it likes): the range widened when
        # too narrow, negative values staying negative, non-negative ones non-negative
        span = max(high - low + 1, count + 1)
        if high < 0:
            low = high - span + 1
        values = low + torch.floor(order * (span / max(count, 1)))
        if not zero:  # `like` has no zero (a divisor): neither have these
            values[values == 0] = low + span
    return values.to(like.dtype).reshape(shape)


def _outputs(result: Any) -> list[Any]:
    leaves, _ = tree_flatten(result)
    return [
        to_numpy(leaf) if isinstance(leaf, torch.Tensor) else leaf
        for leaf in leaves
        if isinstance(leaf, torch.Tensor | bool | int | float | complex)
    ]


def _widened(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Floating tensors as float64 (complex as complex128), for the tolerance rule's reference
    (computed under `float64_promotions`, so that integer ones promoted by the op are too)."""
    return tuple(
        t.to(torch.complex128)
        if t.is_complex()
        else t.to(torch.float64)
        if t.is_floating_point()
        else t
        for t in tensors
    )


def _bindings(backed: dict[str, Any], shrink: bool) -> list[dict[str, int]]:
    """The example's binding, then the others within the symbols' ranges, in SIZE_OFFSETS'
    order."""
    bindings = [{name: s.example for name, s in backed.items()}]
    for offset in SIZE_OFFSETS:
        if offset < 0 and not shrink:
            continue
        binding = {
            name: min(max(s.example + offset, s.lower), s.upper) for name, s in backed.items()
        }
        if binding not in bindings:
            bindings.append(binding)
    return bindings


def _run_sample(opinfo: Any, sample: Any, dtype: DType, label: str) -> Outcome:
    leaves, spec, positions = _tensors(sample)
    tensors = tuple(leaves[i] for i in positions)
    torch_dtype = getattr(torch, dtype.torch_name)
    data = [t.dtype == torch_dtype for t in tensors]
    module = Call(opinfo.op, spec, leaves, positions)
    # forward's one *tensors argument: the data tensors' dims
    dynamic = (tuple(_dynamic_dims(t) if d else {} for t, d in zip(tensors, data)),)
    try:
        program = torch.export.export(module, tensors, dynamic_shapes=dynamic)
    except Exception:  # torch.export refuses the sample: counted, not ours to run
        return Outcome("refused")
    # A tensor kept as it is that holds integers may index a dim: sizes then only grow.
    shrink = not any(
        not d and not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
        for t, d in zip(tensors, data)
    )
    gap = KNOWN_GAPS.get(_gap_key(opinfo))
    try:
        graph = aten2prims.from_fx(program.run_decompositions())
        return _compare_at_sizes(graph, module, tensors, data, shrink, label)
    except (Error, AssertionError) as error:
        if isinstance(error, LoadError) and OUTSIDE_CORE in str(error):
            return Outcome("outside core")  # an op we do not lower, dynamic or not: counted
        if gap is None:
            raise
        assert re.search(gap, str(error)), f"{label}: {error}"
        return Outcome("known gap")


def _compare_at_sizes(
    graph: Graph,
    module: Call,
    tensors: tuple[torch.Tensor, ...],
    data: list[bool],
    shrink: bool,
    label: str,
) -> Outcome:
    ops = frozenset(node.op for node in graph.nodes)
    backed = {name: s for name, s in graph.symbols.items() if s.backed}
    if not backed:
        return Outcome("specialized", ops)
    lowered = aten2prims.lower(graph)
    random = any(getattr(lookup(node.op), "random", False) for node in lowered.nodes)
    signed_zeros = not ops & ZERO_SIGN_UNDEFINED
    generator = torch.Generator().manual_seed(0)
    ran: list[dict[str, int]] = []
    for binding in _bindings(backed, shrink):
        if len(ran) == 1 + OTHER_SIZES:
            break
        # integers and bools are fresh at the example's size too: ties in the sample's own
        # (sorts, top-k) are ordered as each implementation likes
        inputs = tuple(
            _fresh(tensor, shape, generator)
            if is_data and (shape != tuple(tensor.shape) or not tensor.is_floating_point())
            else tensor
            for tensor, shape, is_data in zip(tensors, _input_shapes(graph, binding), data)
        )
        try:
            ours = aten2prims.execute(lowered, [to_numpy(t) for t in inputs], check=True)
        except Exception:
            if not ran:  # the example's own size
                raise
            try:
                with torch.no_grad():
                    module(*inputs)
            except Exception:  # torch refuses these sizes too (sizes export left free)
                continue
            raise  # ours refuses what torch runs
        ran.append(binding)
        with torch.no_grad():
            expected = _outputs(module(*inputs))
        assert len(ours) == len(expected), label
        if random:  # other draws than torch's: only what does not depend on them must match
            for index, (mine, theirs) in enumerate(zip(ours, expected)):
                assert (mine.dtype, mine.shape) == (theirs.dtype, theirs.shape), (
                    f"{label} output {index} at {binding}: {mine.dtype}{list(mine.shape)}"
                    f" differs from torch's {theirs.dtype}{list(theirs.shape)}"
                )
            continue
        reference: list[Any] | None = None
        for index, (mine, theirs) in enumerate(zip(ours, expected)):
            what = f"{label} output {index} at {binding}"
            verdict = compare(mine, theirs, signed_zeros=signed_zeros, what=what)
            if not verdict and verdict.reason == "value":
                if reference is None:
                    with torch.no_grad(), float64_promotions():
                        reference = _outputs(module(*_widened(inputs)))
                verdict = compare(
                    mine, theirs, reference=reference[index], signed_zeros=signed_zeros, what=what
                )
            assert verdict, verdict.message
    if len(ran) < 3:  # torch runs no other size (nor do we): a static sample after all
        return Outcome("size-locked", ops)
    shrunk = any(b[n] < s.example for b in ran for n, s in backed.items())
    return Outcome("random" if random else "dynamic", ops, shrunk)


def _input_shapes(graph: Graph, binding: dict[str, int]) -> list[tuple[int, ...]]:
    """The user inputs' shapes at these sizes."""
    return [
        tuple(substitute(size, binding.__getitem__) for size in gi.value.meta.shape)
        for gi in graph.user_inputs
    ]


def _reached_by(reach: dict[str, list[str]]) -> Counter[str]:
    """OpInfo label -> how many overloads discovery found it reaching."""
    return Counter(label for labels in reach.values() for label in labels)


def _candidates(op: str, reach: dict[str, list[str]], breadth: Counter[str]) -> list[str]:
    """The OpInfos reaching `op`: its namesake (`aten.var.correction`: `var`, `var.unbiased`)
    first, then those reaching fewest overloads."""
    name = op.split(".")[1].lstrip("_")
    return sorted(
        reach.get(op, []),
        key=lambda label: (label.split(".")[0] != name, breadth[label], label),
    )


def _gap_key(opinfo: Any) -> str:
    """The OpInfo's KNOWN_GAPS entry: its variant's, else its own name's."""
    label = _label(opinfo.name, opinfo.variant_test_name)
    return label if label in KNOWN_GAPS else opinfo.name


def _label(name: str, variant: str) -> str:
    return f"{name}.{variant}" if variant else name


def test_every_core_overload_is_in_one_family() -> None:
    listed = [op for ops in OVERLOADS.values() for op in ops]
    assert sorted(listed) == sorted(CORE_ATEN_OPS), set(listed) ^ set(CORE_ATEN_OPS)
    assert list(OVERLOADS) == list(FAMILIES) == list(MINIMUM)
    assert set(UNEXERCISED) <= set(listed)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_opinfo_samples_with_dynamic_dims_match_torch_at_four_sizes(
    family: str, opinfo_cache_dir: str
) -> None:
    reach = discover(opinfo_cache_dir)
    breadth = _reached_by(reach)
    by_label = opinfos()
    counts: Counter[str] = Counter()
    dtypes: Counter[str] = Counter()
    gaps: Counter[str] = Counter()  # OpInfo name -> known-gap samples
    ran: set[str] = set()  # the OpInfos run
    exercised: set[str] = set()  # the overloads of the samples that ran dynamic
    shapes_only: set[str] = set()  # those of the samples that ran with random numbers
    gapped: set[str] = set()  # the OpInfos a sample of which ended in a known gap

    def run(label: str, samples: Iterator[tuple[DType, Any]], until: str | None = None) -> None:
        """Run the samples (until the overload `until` has run)."""
        ran.add(label)
        opinfo = by_label[label]
        gaps[_gap_key(opinfo)] += 0
        for index, (dtype, sample) in enumerate(samples):
            name = f"{label} {dtype.short} #{index}"
            try:
                outcome = _run_sample(opinfo, sample, dtype, name)
            except Exception as error:
                raise AssertionError(
                    f"{family}: {name}: {type(error).__name__}: {error}"
                ) from error
            counts[outcome.kind] += 1
            counts["shrunk"] += outcome.shrunk
            gaps[_gap_key(opinfo)] += outcome.kind == "known gap"
            if outcome.kind == "known gap":
                gapped.add(label)
            if outcome.kind == "dynamic":
                dtypes[dtype.short] += 1
                exercised.update(outcome.ops)
            elif outcome.kind == "random":
                shapes_only.update(outcome.ops)
            if until in exercised:
                return

    for name, variant in FAMILIES[family]:
        label = _label(name, variant)
        run(label, _representative_samples(by_label[label]))
    turn = 0
    for op in OVERLOADS[family]:
        if op in UNEXERCISED:
            continue
        tried = 0
        for label in _candidates(op, reach, breadth):
            if op in exercised or tried == CANDIDATES_PER_OVERLOAD:
                break
            if label not in ran and label in by_label:
                tried += 1
                turn += 1
                samples = _candidate_samples(by_label[label], turn)
                run(label, itertools.islice(samples, CANDIDATE_SAMPLES), until=op)

    not_run = {
        op: UNEXERCISED.get(
            op,
            "random: ran at every size, only shapes and dtypes compared"
            if op in shapes_only
            else "an OpInfo reaching it ran into a known gap"
            if gapped.intersection(reach.get(op, ()))
            else "no OpInfo reaches it"
            if op not in reach
            else "",
        )
        for op in OVERLOADS[family]
        if op not in exercised
    }
    hit = {key: n for key, n in gaps.items() if n}
    print(
        f"\n{family}: {len(ran)} OpInfos, samples {dict(counts)}, dynamic by dtype"
        f" {dict(dtypes)}, overloads run {len(OVERLOADS[family]) - len(not_run)}"
        f"/{len(OVERLOADS[family])}, known gaps hit {hit}"
    )
    for op, why in not_run.items():
        print(f"  not run: {op}: {why or 'NO SAMPLE RAN DYNAMIC'}")
    assert not [op for op, why in not_run.items() if not why], f"{family}: overloads not run"
    stale = [op for op in OVERLOADS[family] if op in UNEXERCISED and op in exercised]
    assert not stale, f"{family}: {stale} run dynamic now: remove them from UNEXERCISED"
    # Checked for the OpInfos standing for the family, which run the same samples wherever
    # they run (an OpInfo tried for an overload stops once the overload ran).
    standing = {_gap_key(by_label[_label(name, variant)]) for name, variant in FAMILIES[family]}
    cured = [
        key for key, count in gaps.items() if key in KNOWN_GAPS and key in standing and not count
    ]
    assert not cured, f"every sample of {cured} runs dynamic now: remove them from KNOWN_GAPS"
    ran_dynamic = counts["dynamic"] + counts["random"]
    assert ran_dynamic >= MINIMUM[family], f"{family}: fewer dynamic samples ({counts})"


class _OrthoIrfft(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.irfft(x, n=10, dim=1, norm="ortho")


def test_irfft_of_int32_lowered_dynamic_matches_the_float64_result_at_a_new_size() -> None:
    """The fft.irfft int32 sample that once passed here only as a known gap: exported at
    [5, 6, 7] with dims 0 and 2 dynamic, run at [10, 6, 12] with values up to 710. torch's own
    float32 transform of the column [210, 612, 545, 458, 486, 462] gives 1.7839297 at position 1,
    1.3e-5 from the exact 1.7839166 (beyond float32's tolerance); ours is within 5e-9 of it. The
    reference the tolerance rule fell back on kept the int32 input as it was, so it was torch's
    float32 result itself; under `float64_promotions` irfft promotes the input to complex128."""
    example = (torch.arange(5 * 6 * 7, dtype=torch.int32) * 37 % 211 - 9).reshape(5, 6, 7)
    program = torch.export.export(
        _OrthoIrfft(), (example,), dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO},)
    )
    lowered = aten2prims.lower(aten2prims.from_fx(program.run_decompositions()))
    x = (torch.arange(10 * 6 * 12, dtype=torch.int32) * 337 % 720 - 9).reshape(10, 6, 12)
    x[7, :, 3] = torch.tensor([210, 612, 545, 458, 486, 462], dtype=torch.int32)
    (ours,) = aten2prims.execute(lowered, [to_numpy(x)], check=True)
    exact = torch.fft.irfft(x.to(torch.complex128), n=10, dim=1, norm="ortho")
    # torch's float32 tolerances, against the exact result rounded to float32
    torch.testing.assert_close(torch.from_numpy(ours), exact.to(torch.float32))
    with torch.no_grad(), float64_promotions():
        reference = _OrthoIrfft()(x)
    assert reference.dtype == torch.float64
    torch.testing.assert_close(reference, exact, rtol=0.0, atol=0.0)
    with torch.no_grad():
        eager = _OrthoIrfft()(x)
    verdict = compare(ours, to_numpy(eager), reference=to_numpy(reference), what="irfft")
    assert verdict, verdict.message
    assert torch.get_default_dtype() == torch.float32  # restored


@pytest.mark.parametrize(
    "transform",
    [torch.fft.rfft, torch.fft.irfft, torch.fft.fft, torch.fft.ifft],
    ids=["rfft", "irfft", "fft", "ifft"],
)
def test_fft_ortho_over_a_dynamic_dim_runs_every_length_from_one_lowering(transform: Any) -> None:
    """norm="ortho" scales by 1/sqrt(n), n the transform length: over a dynamic dim a symbolic
    size, whose square root the graph computes when it runs (no check on the length). irfft's
    default n = 2 (m - 1) includes m = 2, where n // 2 + 1 = m: the halved dim is not sliced
    then, nor decided on. fft and ifft take a complex signal (the non-core `_fft_c2c`). At every
    length ours equals the static lowering's bits and torch's result within float32
    tolerances."""

    class Transform(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return transform(x, dim=-1, norm="ortho")

    example = torch.linspace(-2.0, 3.0, 4 * 7).reshape(4, 7)
    if transform is not torch.fft.rfft:
        example = torch.complex(example, example.flip(1))
    program = torch.export.export(
        Transform(), (example,), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},)
    )
    lowered = aten2prims.lower(aten2prims.from_fx(program.run_decompositions()))
    assert not lowered.checks
    generator = torch.Generator().manual_seed(0)
    for length in (2, 3, 7, 8, 16, 31):
        x = torch.randn(3, length, generator=generator, dtype=example.dtype)
        (ours,) = aten2prims.execute(lowered, [to_numpy(x)], check=True)
        static = aten2prims.lower(
            aten2prims.from_fx(torch.export.export(Transform(), (x,)).run_decompositions())
        )
        (ours_static,) = aten2prims.execute(static, [to_numpy(x)], check=True)
        np.testing.assert_array_equal(ours, ours_static)
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(ours), Transform()(x))
