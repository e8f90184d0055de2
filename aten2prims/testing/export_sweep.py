"""The export sweep: what `torch.export` makes of every `torch.nn` module class and every
`torch.nn.functional` function, and whether we load, lower and run it like torch.

Each subject is instantiated (modules) or called (functions) with the first of a few simple
argument sets that torch itself accepts (`Subject`), exported with `torch.export.export` and
`run_decompositions()` (modules in evaluation mode, and in training mode too when their forward
reads `self.training`), saved with `torch.export.save` to a temporary `.pt2` file, read back
with `aten2prims.load`, lowered and executed on the same inputs, and its outputs compared with
torch's under the harness's tolerance rule (dtype, shape and the tolerance of `compare.compare`;
subjects whose eager result changes with the seed, such as dropout, are random: dtype and shape
only). The result of each is one `Row`; `render` writes them as docs/export_sweep.md:

    python -m aten2prims.testing.export_sweep --output docs/export_sweep.md

torch is imported inside the functions only, as everywhere in the harness.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np

from decompositions import RULES

from ..errors import Error, UnsupportedOpError
from ..executor import execute
from ..frontends import load
from ..frontends.torch_interop import to_numpy
from ..passes.lower import lower
from .compare import compare

# Results, in the order the summary lists them.
OK = "ok"
OK_RANDOM = "ok (random: dtype and shape)"
NOT_CALLABLE = "not callable with simple arguments"
NOT_EXPORTED = "not exported by torch"
DATA_DEPENDENT = "refused: data-dependent sizes"
MISSING = "missing rule"
OK_EXPORTED = "ok against torch's exported program, which differs from its eager module"
MISMATCH = "mismatch"
ERROR = "error"


@attrs.frozen
class Row:
    """One line of the table: the subject, the mode it ran in, the aten overloads its exported
    graph holds and what happened."""

    subject: str
    mode: str
    ops: tuple[str, ...]
    result: str
    detail: str = ""

    def cells(self) -> tuple[str, str, str, str]:
        ops = ", ".join(f"`{op.removeprefix('aten.')}`" for op in self.ops) or "—"
        result = f"{self.result}: {self.detail}" if self.detail else self.result
        return self.subject, self.mode, ops, result.replace("|", "\\|")


@attrs.frozen
class Subject:
    """Something to export: a name, a factory of (module, inputs) — the module already built
    and run once eagerly on the inputs — or None when no simple argument set works."""

    name: str
    make: Callable[[], tuple[Any, tuple[Any, ...]] | None]
    trains: bool = False  # export in training mode too


# -- simple arguments ----------------------------------------------------------------------------


def _tensor(*shape: int, kind: str = "normal", seed: int = 0) -> Any:
    # torch is imported lazily, as everywhere in the harness.
    import torch

    generator = torch.Generator().manual_seed(seed + 7 * len(shape))
    if kind == "index":
        return torch.randint(0, 4, shape, generator=generator)
    if kind == "unit":
        return torch.rand(shape, generator=generator)
    return torch.randn(shape, generator=generator)


# Argument sets tried in order: the first that torch accepts is used.
def _input_sets() -> list[tuple[Any, ...]]:
    return [
        (_tensor(2, 4),),
        (_tensor(2, 4, 8),),
        (_tensor(2, 4, 8, 8),),
        (_tensor(2, 4, 4, 8, 8),),
        (_tensor(2, 3, 4),),
        (_tensor(2, 4), _tensor(2, 4, seed=1)),
        (_tensor(2, 4), _tensor(2, 4, kind="unit")),
        (_tensor(2, 4, kind="unit"), _tensor(2, 4, kind="unit", seed=1)),
        (_tensor(2, 4), _tensor(2, kind="index")),
        (_tensor(2, 4), _tensor(2, 4, seed=1), _tensor(2, 4, seed=2)),
        (_tensor(2, 4), _tensor(2, 4, seed=1), _tensor(2, kind="index").float() * 2 - 3),
    ]


_CONSTRUCTOR_ARGUMENTS: list[tuple[Any, ...]] = [(), (4,), (4, 4), (4, 4, 3), (4, 2), (2,)]


def _module_overrides() -> dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]]:
    """Modules whose arguments the generic search cannot guess."""
    # torch is imported lazily, as everywhere in the harness.
    import torch
    from torch import nn

    def layer() -> Any:
        return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)

    def decoder_layer() -> Any:
        return nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)

    sequence = _tensor(2, 3, 8)
    return {
        "Embedding": lambda: (nn.Embedding(10, 4), (_tensor(2, 5, kind="index"),)),
        "EmbeddingBag": lambda: (nn.EmbeddingBag(10, 4), (_tensor(2, 5, kind="index"),)),
        "MultiheadAttention": lambda: (
            nn.MultiheadAttention(8, 2),
            (sequence, sequence, sequence),
        ),
        "Transformer": lambda: (
            nn.Transformer(8, 2, 1, 1, 16, dropout=0.0),
            (sequence, _tensor(4, 3, 8, seed=1)),
        ),
        "TransformerEncoderLayer": lambda: (layer(), (sequence,)),
        "TransformerDecoderLayer": lambda: (decoder_layer(), (sequence, _tensor(4, 3, 8))),
        "TransformerEncoder": lambda: (
            nn.TransformerEncoder(layer(), 1, enable_nested_tensor=False),
            (sequence,),
        ),
        "TransformerDecoder": lambda: (
            nn.TransformerDecoder(decoder_layer(), 1),
            (sequence, _tensor(4, 3, 8)),
        ),
        "Fold": lambda: (nn.Fold((4, 4), 2), (_tensor(2, 8, 9),)),
        "Unfold": lambda: (nn.Unfold(2), (_tensor(2, 4, 8, 8),)),
        "Flatten": lambda: (nn.Flatten(), (_tensor(2, 4, 8),)),
        "Unflatten": lambda: (nn.Unflatten(1, (2, 2)), (_tensor(2, 4),)),
        "PixelShuffle": lambda: (nn.PixelShuffle(2), (_tensor(2, 4, 8, 8),)),
        "ChannelShuffle": lambda: (nn.ChannelShuffle(2), (_tensor(2, 4, 8, 8),)),
        "Upsample": lambda: (nn.Upsample(scale_factor=2), (_tensor(2, 4, 8, 8),)),
        "UpsamplingNearest2d": lambda: (
            nn.UpsamplingNearest2d(scale_factor=2),
            (_tensor(2, 4, 8, 8),),
        ),
        "UpsamplingBilinear2d": lambda: (
            nn.UpsamplingBilinear2d(scale_factor=2),
            (_tensor(2, 4, 8, 8),),
        ),
        "GroupNorm": lambda: (nn.GroupNorm(2, 4), (_tensor(2, 4, 8, 8),)),
        "LayerNorm": lambda: (nn.LayerNorm(8), (_tensor(2, 4, 8),)),
        "RMSNorm": lambda: (nn.RMSNorm(8), (_tensor(2, 4, 8),)),
        "LocalResponseNorm": lambda: (nn.LocalResponseNorm(2), (_tensor(2, 4, 8, 8),)),
        "CTCLoss": lambda: (
            nn.CTCLoss(),
            (
                _tensor(6, 2, 5).log_softmax(2),
                torch.tensor([[1, 2, 2], [3, 1, 4]]),
                torch.tensor([6, 5]),
                torch.tensor([3, 2]),
            ),
        ),
        "AdaptiveLogSoftmaxWithLoss": lambda: (
            nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4]),
            (_tensor(3, 8), torch.tensor([1, 5, 9])),
        ),
        "MaxUnpool1d": lambda: (
            nn.MaxUnpool1d(2),
            nn.functional.max_pool1d(_tensor(2, 4, 8), 2, return_indices=True),
        ),
        "MaxUnpool2d": lambda: (
            nn.MaxUnpool2d(2),
            nn.functional.max_pool2d(_tensor(2, 4, 8, 8), 2, return_indices=True),
        ),
        "MaxUnpool3d": lambda: (
            nn.MaxUnpool3d(2),
            nn.functional.max_pool3d(_tensor(2, 4, 4, 8, 8), 2, return_indices=True),
        ),
        "FractionalMaxPool2d": lambda: (nn.FractionalMaxPool2d(2, (4, 4)), (_tensor(2, 4, 8, 8),)),
        "FractionalMaxPool3d": lambda: (
            nn.FractionalMaxPool3d(2, (2, 4, 4)),
            (_tensor(2, 4, 4, 8, 8),),
        ),
        "MultiLabelMarginLoss": lambda: (
            nn.MultiLabelMarginLoss(),
            (_tensor(2, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3]])),
        ),
        "GaussianNLLLoss": lambda: (
            nn.GaussianNLLLoss(),
            (_tensor(2, 4), _tensor(2, 4, seed=1), _tensor(2, 4, kind="unit")),
        ),
        "PairwiseDistance": lambda: (nn.PairwiseDistance(), (_tensor(2, 4), _tensor(2, 4, seed=1))),
        "CosineSimilarity": lambda: (nn.CosineSimilarity(), (_tensor(2, 4), _tensor(2, 4, seed=1))),
    }


# Not models: bases and containers without a forward of their own, and modules needing a
# process group.
_NOT_MODULES = frozenset(
    {
        "Container",
        "Module",
        "ModuleDict",
        "ModuleList",
        "ParameterDict",
        "ParameterList",
        "RNNBase",
        "RNNCellBase",
        "SyncBatchNorm",
    }
)


def _runs(module: Any, inputs: tuple[Any, ...]) -> bool:
    # torch is imported lazily, as everywhere in the harness.
    import torch

    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module(*inputs)
        return True
    except Exception:
        return False


def _generic_module(cls: Any) -> tuple[Any, tuple[Any, ...]] | None:
    for arguments in _CONSTRUCTOR_ARGUMENTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = cls(*arguments)
        except Exception:
            continue
        for inputs in _input_sets():
            module.eval()
            if _runs(module, inputs):
                return module, inputs
    return None


def _reads_training(cls: Any) -> bool:
    """Whether the class's forward reads `self.training` (so training mode exports differently)."""
    try:
        return "self.training" in inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False


def module_subjects() -> list[Subject]:
    """Every module class of torch.nn, by name."""
    # torch is imported lazily, as everywhere in the harness.
    from torch import nn

    overrides = _module_overrides()
    subjects = []
    for name in sorted(nn.modules.__all__):
        cls = getattr(nn, name, None)
        if name in _NOT_MODULES or not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
            continue
        override = overrides.get(name)

        def make(cls: Any = cls, override: Any = override) -> Any:
            if override is not None:
                module, inputs = override()
                return (module, inputs) if _runs(module.eval(), inputs) else None
            return _generic_module(cls)

        subjects.append(Subject(f"nn.{name}", make, trains=_reads_training(cls)))
    return subjects


def _function_module(function: Callable[..., Any], **kwargs: Any) -> Any:
    # torch is imported lazily, as everywhere in the harness.
    import torch

    class Call(torch.nn.Module):
        def forward(self, *inputs: Any) -> Any:
            return function(*inputs, **kwargs)

    return Call().eval()


def _function_overrides() -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    """Functions whose arguments the generic search cannot guess: (inputs, constant kwargs)."""
    # torch is imported lazily, as everywhere in the harness.
    import torch

    x4 = _tensor(2, 4, 8, 8)
    return {
        "linear": ((_tensor(2, 4), _tensor(3, 4), _tensor(3)), {}),
        "bilinear": ((_tensor(2, 4), _tensor(2, 5), _tensor(3, 4, 5), _tensor(3)), {}),
        "conv1d": ((_tensor(2, 4, 8), _tensor(3, 4, 3)), {}),
        "conv2d": ((x4, _tensor(3, 4, 3, 3)), {}),
        "conv3d": ((_tensor(2, 4, 4, 8, 8), _tensor(3, 4, 3, 3, 3)), {}),
        "conv_transpose1d": ((_tensor(2, 4, 8), _tensor(4, 3, 3)), {"stride": 2}),
        "conv_transpose2d": ((x4, _tensor(4, 3, 3, 3)), {"stride": 2}),
        "conv_transpose3d": ((_tensor(2, 4, 4, 8, 8), _tensor(4, 3, 3, 3, 3)), {"stride": 2}),
        "conv_tbc": ((_tensor(8, 2, 4), _tensor(3, 4, 5), _tensor(5)), {}),
        "embedding": ((_tensor(2, 5, kind="index"), _tensor(10, 4)), {}),
        "embedding_bag": (
            (_tensor(2, 5, kind="index"), _tensor(10, 4)),
            {"mode": "mean"},
        ),
        "batch_norm": ((x4, _tensor(4), _tensor(4, kind="unit") + 0.5), {}),
        "instance_norm": ((x4,), {}),
        "layer_norm": ((x4, [8]), {}),
        "group_norm": ((x4, 2), {}),
        "rms_norm": ((x4, [8]), {}),
        "local_response_norm": ((x4, 2), {}),
        "grid_sample": ((x4, _tensor(2, 5, 5, 2, kind="unit") * 2 - 1), {"align_corners": False}),
        "affine_grid": ((_tensor(2, 2, 3), [2, 4, 5, 5]), {"align_corners": False}),
        "interpolate": ((x4,), {"scale_factor": 2}),
        "upsample": ((x4,), {"scale_factor": 2}),
        "upsample_nearest": ((x4,), {"scale_factor": 2}),
        "upsample_bilinear": ((x4,), {"scale_factor": 2}),
        "pad": ((x4, [1, 2]), {}),
        "one_hot": ((_tensor(2, 5, kind="index"),), {"num_classes": 4}),
        "prelu": ((x4, _tensor(4)), {}),
        "pixel_shuffle": ((x4, 2), {}),
        "pixel_unshuffle": ((x4, 2), {}),
        "channel_shuffle": ((x4, 2), {}),
        "native_channel_shuffle": ((x4, 2), {}),
        "fold": ((_tensor(2, 8, 9), (4, 4), 2), {}),
        "unfold": ((x4, 2), {}),
        "max_unpool1d": (
            (*torch.nn.functional.max_pool1d(_tensor(2, 4, 8), 2, return_indices=True), 2),
            {},
        ),
        "max_unpool2d": (
            (*torch.nn.functional.max_pool2d(x4, 2, return_indices=True), 2),
            {},
        ),
        "max_unpool3d": (
            (*torch.nn.functional.max_pool3d(_tensor(2, 4, 4, 8, 8), 2, return_indices=True), 2),
            {},
        ),
        "fractional_max_pool2d": ((x4, 2), {"output_size": (4, 4)}),
        "fractional_max_pool2d_with_indices": ((x4, 2), {"output_size": (4, 4)}),
        "fractional_max_pool3d": ((_tensor(2, 4, 4, 8, 8), 2), {"output_size": (2, 4, 4)}),
        "fractional_max_pool3d_with_indices": (
            (_tensor(2, 4, 4, 8, 8), 2),
            {"output_size": (2, 4, 4)},
        ),
        "scaled_dot_product_attention": (
            (_tensor(2, 2, 3, 8), _tensor(2, 2, 3, 8, seed=1), _tensor(2, 2, 3, 8, seed=2)),
            {},
        ),
        "ctc_loss": (
            (
                _tensor(6, 2, 5).log_softmax(2),
                torch.tensor([[1, 2, 2], [3, 1, 4]]),
                torch.tensor([6, 5]),
                torch.tensor([3, 2]),
            ),
            {},
        ),
        "gaussian_nll_loss": (
            (_tensor(2, 4), _tensor(2, 4, seed=1), _tensor(2, 4, kind="unit")),
            {},
        ),
        **{
            f"{kind}_pool{rank}d{suffix}": ((_tensor(2, 4, *[8] * rank), 2), {})
            for kind in ("avg", "max", "adaptive_avg", "adaptive_max")
            for rank in (1, 2, 3)
            for suffix in ("", "_with_indices")
            if not (suffix and kind.endswith("avg"))
        },
        "threshold": ((x4, 0.1, 20.0), {}),
        "linear_cross_entropy": ((_tensor(2, 4), _tensor(5, 4), _tensor(2, kind="index")), {}),
        "multilabel_margin_loss": (
            (_tensor(2, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3]])),
            {},
        ),
        "lp_pool1d": ((_tensor(2, 4, 8), 2.0, 2), {}),
        "lp_pool2d": ((x4, 2.0, 2), {}),
        "lp_pool3d": ((_tensor(2, 4, 4, 8, 8), 2.0, 2), {}),
    }


# Names of torch.nn.functional that are not functions of tensors.
_NOT_FUNCTIONS = frozenset(
    {
        "Optional",
        "Tensor",
        "ScalingType",
        "SwizzleType",
        "assert_int_or_pair",
        "boolean_dispatch",
        "handle_torch_function",
        "has_torch_function",
        "has_torch_function_unary",
        "has_torch_function_variadic",
        "multi_head_attention_forward",
    }
)


def function_subjects() -> list[Subject]:
    """Every public function of torch.nn.functional, by name (in-place variants left out)."""
    # torch is imported lazily, as everywhere in the harness.
    import torch.nn.functional as F

    overrides = _function_overrides()
    subjects = []
    for name in sorted(dir(F)):
        function = getattr(F, name)
        if (
            name.startswith("_")
            or name.endswith("_")
            or name in _NOT_FUNCTIONS
            or not callable(function)
            or inspect.isclass(function)
            or inspect.ismodule(function)
        ):
            continue
        override = overrides.get(name)

        def make(function: Any = function, override: Any = override) -> Any:
            candidates = [override] if override is not None else [(i, {}) for i in _input_sets()]
            for arguments, kwargs in candidates:
                tensors = tuple(a for a in arguments if _is_tensor(a))
                constants = [a for a in arguments if not _is_tensor(a)]
                module = _function_module(_bind(function, arguments, constants), **kwargs)
                if _runs(module, tensors):
                    return module, tensors
            return None

        subjects.append(Subject(f"F.{name}", make))
    return subjects


def _is_tensor(value: Any) -> bool:
    # torch is imported lazily, as everywhere in the harness.
    import torch

    return isinstance(value, torch.Tensor)


def _bind(
    function: Callable[..., Any], arguments: tuple[Any, ...], constants: list[Any]
) -> Callable[..., Any]:
    """function taking the tensors of `arguments` positionally, its constants in place."""
    positions = [i for i, a in enumerate(arguments) if _is_tensor(a)]

    def bound(*tensors: Any, **kwargs: Any) -> Any:
        values = list(arguments)
        for position, tensor in zip(positions, tensors):
            values[position] = tensor
        return function(*values, **kwargs)

    return bound


# -- one subject ---------------------------------------------------------------------------------


def _flat(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [item for part in value for item in _flat(part)]
    return [value] if _is_tensor(value) else []


def _eager(module: Any, inputs: tuple[Any, ...], seed: int) -> list[Any]:
    # torch is imported lazily, as everywhere in the harness.
    import torch

    torch.manual_seed(seed)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [to_numpy(t) for t in _flat(module(*inputs))]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")
        for x, y in zip(a, b)
    )


def _exported_ops(program: Any) -> tuple[str, ...]:
    """The aten overloads of the graph that compute something (output-less checks left out)."""
    # torch is imported lazily, as everywhere in the harness.
    import torch

    ops = set()
    for node in program.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload):
            if target._schema.returns:
                ops.add(
                    f"{target.namespace}.{target._schema.name.split('::')[1]}.{target._overloadname}"
                )
    return tuple(sorted(ops))


def _data_dependent(program: Any) -> bool:
    """Whether a node's result has a size torch only knows at run time (an unbacked symbol)."""
    # torch is imported lazily, as everywhere in the harness.
    import torch

    for node in program.graph.nodes:
        for value in _flat(node.meta.get("val")):
            if any(isinstance(size, torch.SymInt) for size in value.shape):
                return True
    return False


def run_subject(subject: Subject, mode: str, directory: str) -> Row:
    """Export, save, load, lower and run one subject in `mode` ("eval" or "train")."""
    # torch is imported lazily, as everywhere in the harness.
    import torch

    made = subject.make()
    if made is None:
        return Row(subject.name, mode, (), NOT_CALLABLE)
    module, inputs = made
    module.train(mode == "train")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, inputs).run_decompositions()
    except Exception as error:
        return Row(subject.name, mode, (), NOT_EXPORTED, type(error).__name__)
    ops = _exported_ops(program)
    if _data_dependent(program):
        return Row(subject.name, mode, ops, DATA_DEPENDENT)
    missing = [op for op in ops if op not in RULES]
    if missing:
        return Row(subject.name, mode, ops, MISSING, ", ".join(f"`{op}`" for op in missing))
    expected = _eager(module, inputs, seed=0)
    random = not _same(expected, _eager(module, inputs, seed=1))
    stem = re.sub(r"\W", "_", subject.name)
    path = os.path.join(directory, f"{stem}_{mode}.pt2")
    try:
        torch.export.save(program, path)
        graph = lower(load(path))
        ours = execute(graph, [to_numpy(t) for t in inputs])
    except UnsupportedOpError as error:
        return Row(subject.name, mode, ops, MISSING, ", ".join(f"`{op}`" for op in error.counts))
    except Error as error:
        return Row(subject.name, mode, ops, ERROR, f"{type(error).__name__}: {_first_line(error)}")
    failure = _judge(ours, expected, random)
    if failure is None:
        return Row(subject.name, mode, ops, OK_RANDOM if random else OK)
    if not random:
        # torch's own exported program may compute something else than its eager module.
        exported = _eager(program.module(), inputs, seed=0)
        if _judge(ours, exported, False) is None and _judge(exported, expected, False):
            return Row(subject.name, mode, ops, OK_EXPORTED, _first_line(failure))
    return Row(subject.name, mode, ops, MISMATCH, _first_line(failure))


def _judge(ours: list[Any], expected: list[Any], random: bool) -> str | None:
    """Why ours differ from the expected outputs (dtype and shape only when random), or None."""
    if len(ours) != len(expected):
        return f"{len(ours)} outputs, torch {len(expected)}"
    for index, (mine, theirs) in enumerate(zip(ours, expected)):
        if random:
            if mine.dtype != theirs.dtype or mine.shape != theirs.shape:
                return f"output {index}: dtype or shape"
            continue
        comparison = compare(mine, theirs, what=f"output {index}")
        if not comparison:
            return comparison.message
    return None


def _first_line(message: Any) -> str:
    line = str(message).splitlines()[0] if str(message) else ""
    return line if len(line) <= 160 else line[:159] + "…"


def sweep(names: Sequence[str] | None = None) -> Iterator[Row]:
    """The rows of every subject (or of those named), modules first."""
    # torch is imported lazily, as everywhere in the harness.
    import torch

    wanted = set(names) if names is not None else None
    subjects = [*module_subjects(), *function_subjects()]
    with tempfile.TemporaryDirectory() as directory:
        for subject in subjects:
            if wanted is not None and subject.name not in wanted:
                continue
            modes = ("eval", "train") if subject.trains else ("eval",)
            for mode in modes:
                torch.manual_seed(0)
                try:
                    yield run_subject(subject, mode, directory)
                except Exception as error:  # the sweep reports, it does not stop
                    yield Row(
                        subject.name,
                        mode,
                        (),
                        ERROR,
                        f"{type(error).__name__}: {_first_line(error)}",
                    )


# -- the document ---------------------------------------------------------------------------------

_HEADER = """# Export sweep

What `torch.export` (with `run_decompositions()`) makes of every `torch.nn` module class and every
`torch.nn.functional` function, and whether aten2prims runs the result like torch. Generated by
`python -m aten2prims.testing.export_sweep --output docs/export_sweep.md`
(`aten2prims/testing/export_sweep.py`); do not edit by hand.

Each subject is built or called with the first of a few simple argument sets torch accepts,
exported (modules in evaluation mode, and in training mode too when their forward reads
`self.training`), saved with `torch.export.save`, loaded with `aten2prims.load`, lowered and run
on the same inputs; outputs are compared with torch's eager ones by the harness's tolerance
rule, or by dtype and shape alone where torch's own result changes with the seed (random).
Results: **ok**; **ok against torch's exported program** where that program's own result
differs from the eager module's (a torch decomposition bug: ours agrees with the program, the
detail shows the eager difference); **not callable with simple arguments** (no argument set of
the sweep fits); **not exported by torch** (export raised); **refused: data-dependent sizes** (a
result size only known at run time, such as `nonzero`'s or `masked_select`'s); **missing rule**
(the overloads without a rule); **mismatch**; **error** (loading, lowering or running failed).
"""


def render(rows: Sequence[Row]) -> str:
    lines = [_HEADER]
    counts = Counter(row.result for row in rows)
    lines.append("## Summary\n")
    lines.append("| result | rows |\n|---|---|")
    for result in (
        OK,
        OK_RANDOM,
        OK_EXPORTED,
        NOT_CALLABLE,
        NOT_EXPORTED,
        DATA_DEPENDENT,
        MISSING,
        MISMATCH,
        ERROR,
    ):
        lines.append(f"| {result} | {counts.get(result, 0)} |")
    missing = Counter(
        op for row in rows if row.result == MISSING for op in re.findall(r"`([^`]+)`", row.detail)
    )
    lines.append("\n## Missing rules, most common first\n")
    if missing:
        lines.append("| overload | rows |\n|---|---|")
        for op, count in sorted(missing.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"| `{op}` | {count} |")
    else:
        lines.append("None.")
    lines.append("\n## Every subject\n")
    lines.append("| subject | mode | exported aten overloads | result |\n|---|---|---|---|")
    for row in rows:
        lines.append("| " + " | ".join(row.cells()) + " |")
    return "\n".join(lines) + "\n"


_ROW = re.compile(
    r"^\| (?P<subject>(?:nn|F)\.\S+) \| (?P<mode>eval|train) \| (?P<ops>.*?) \| (?P<result>.*) \|$"
)


def parse_rows(text: str) -> dict[tuple[str, str], tuple[tuple[str, ...], str]]:
    """(subject, mode) -> (overloads, result cell) of a rendered table."""
    rows = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            ops = tuple(
                op if op.count(".") == 2 else f"aten.{op}"  # aten's are written without "aten."
                for op in re.findall(r"`([^`]+)`", match["ops"])
            )
            rows[match["subject"], match["mode"]] = (ops, match["result"])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="write the table here (default: standard output)")
    parser.add_argument("--only", nargs="*", help="subjects to run, e.g. nn.Linear F.relu")
    arguments = parser.parse_args(argv)
    rows = []
    for row in sweep(arguments.only):
        rows.append(row)
        print(f"{row.subject} [{row.mode}] {row.result} {row.detail}", file=sys.stderr, flush=True)
    text = render(rows)
    if arguments.output:
        with open(arguments.output, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
