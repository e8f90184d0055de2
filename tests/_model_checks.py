"""Judging a module's outputs computed by us against torch eager's, the way tests/test_models.py
and `aten2prims check FILE` do (`model_outputs.judge_output`): the tolerance rule against torch,
or else an error against the module's float64 run within twice torch's own."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.testing.model_outputs import judge_output


def _widened(value: torch.Tensor) -> torch.Tensor:
    return value.double() if value.is_floating_point() else value


def assert_like_torch(ours: list[np.ndarray], model: torch.nn.Module, inputs: tuple) -> None:
    """Each of our outputs judged against the module's eager outputs on `inputs`, with the
    module's float64 run (weights and floating inputs widened) as the reference."""
    with torch.no_grad():
        expected = [to_numpy(t) for t in tree_leaves(model(*inputs))]
        widened = copy.deepcopy(model).double()
        reference = [to_numpy(t) for t in tree_leaves(widened(*map(_widened, inputs)))]
    assert len(ours) == len(expected)
    for index, (mine, theirs, exact) in enumerate(zip(ours, expected, reference, strict=True)):
        verdict = judge_output(mine, theirs, exact, what=f"output {index}")
        assert verdict, verdict.message
