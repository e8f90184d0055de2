"""Elementwise steps iterated in their operand's memory order (aten2prims/executor/operand_order.py):
a ufunc reading a permuted view into a row-major buffer runs over both seen in the view's order,
with the bits of NumPy's call in the result's order; the zoo transformer's scaled keys take it,
and its results do not move at any thread count."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from _plan_switches import plan_switches

import aten2prims
from aten2prims.executor import plan_for
from aten2prims.executor.operand_order import InOperandOrder
from aten2prims.frontends.torch_interop import to_numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import build as build_zoo


def _key_view(rng: np.random.Generator) -> np.ndarray:
    """An attention key as the zoo transformer's in-projection makes it: (8, 8, 32, 64), its
    innermost dim 24576 bytes apart."""
    packed = rng.standard_normal((64, 8, 768)).astype(np.float32)
    return packed[:, :, 256:512].reshape(64, 8, 8, 32).transpose(1, 2, 3, 0)


def test_a_permuted_operand_is_read_in_its_order_with_the_same_bits() -> None:
    rng = np.random.default_rng(0)
    key = _key_view(rng)
    scale = np.float32(0.4204482)
    out = np.empty(key.shape, np.float32)
    returned = InOperandOrder(np.multiply)(key, scale, out=out)
    assert returned is out and out.flags.c_contiguous
    assert out.tobytes() == np.multiply(key, scale).tobytes()
    # Without out= (execute(check=True) calls each step's kernel so): NumPy's own call.
    assert InOperandOrder(np.multiply)(key, scale).tobytes() == np.multiply(key, scale).tobytes()
    # Read in place (out is the operand): still the same values.
    copy = np.array(key, order="F")
    InOperandOrder(np.multiply)(copy, scale, out=copy)
    assert copy.tobytes() == np.multiply(key, scale).tobytes()


def test_other_calls_run_as_the_ufunc_does() -> None:
    """A row-major operand, two arrays (a broadcast one among them): NumPy's call as it is."""
    rng = np.random.default_rng(1)
    key = _key_view(rng)
    row_major = np.ascontiguousarray(key)
    bias = rng.standard_normal((1, 1, 1, 64)).astype(np.float32)
    for operands in ((row_major, np.float32(2.0)), (key, bias), (row_major, row_major)):
        out = np.empty(key.shape, np.float32)
        InOperandOrder(np.add)(*operands, out=out)
        assert out.tobytes() == np.add(*operands).tobytes()


def test_the_zoo_transformers_scaled_keys_keep_their_bits(tmp_path: Path) -> None:
    model, _ = build_zoo("transformer")
    torch.manual_seed(3)
    sequence = 128  # keys of 128 KiB: large enough to be reordered (MIN_BYTES)
    mask = torch.triu(torch.full((sequence, sequence), float("-inf")), diagonal=1)
    inputs = (torch.randn(8, sequence, 32), mask)
    program = torch.export.export(model.eval(), inputs).run_decompositions()
    path = tmp_path / "transformer.pt2"
    torch.export.save(program, path)
    arrays = [to_numpy(t) for t in inputs]
    ordered = aten2prims.lower(aten2prims.load(path))
    wrapped = [s for s in plan_for(ordered).steps if type(s.kernel) is InOperandOrder]
    assert wrapped and all(s.node.op == "prims.mul" for s in wrapped)
    with plan_switches(ITERATE_IN_OPERAND_ORDER=False):
        plain = aten2prims.lower(aten2prims.load(path))
        assert not [s for s in plan_for(plain).steps if type(s.kernel) is InOperandOrder]
    expected = [o.tobytes() for o in aten2prims.execute(plain, arrays, threads=1)]
    for threads in (1, 2):
        ours = aten2prims.execute(ordered, arrays, threads=threads)
        assert [o.tobytes() for o in ours] == expected, threads
