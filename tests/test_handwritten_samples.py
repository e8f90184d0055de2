"""No hand-written sample is dead: each one reaches the comparison at the full budget.

`check_op` compares every sample `samples()` yields unless torch raises on it (*unsupported by
torch*) or the IR cannot hold it (*unrepresentable*); `samples()` yields a hand-written call when
it is of the overload, runs in the dtype it is registered for, is not a duplicate of an earlier
one (the set of seen calls is shared by the overload's dtypes, in DType order, as in
`check_op`), and falls within the budget. A sample failing any of these never runs the case it
was written for (a Python number in a Tensor slot torch refuses, a dtype the kernel does not
implement, a result dtype outside the 12), so it is an error here, not a silent drop."""

from __future__ import annotations

import pytest

from aten2prims.ir.dtypes import DType
from aten2prims.testing.budgets import FULL_BUDGET
from aten2prims.testing.handwritten import HANDWRITTEN
from aten2prims.testing.runner import Unrepresentable, build_graph, torch_outputs
from aten2prims.testing.samples import run_dtype


def _problems(op: str) -> list[str]:
    problems = []
    seen: set[str] = set()
    for dtype in DType:
        count = 0
        for dtypes, generate in HANDWRITTEN[op]:
            if dtype not in dtypes:
                continue
            for call in generate(dtype):
                where = f"{dtype.short} {call.describe()}"
                if call.op != op:
                    problems.append(f"{where}: a call of {call.op}, registered for {op}")
                    continue
                runs_in = run_dtype(call)
                if runs_in is not dtype:
                    ran = runs_in.short if runs_in is not None else "no dtype (torch rejects it)"
                    problems.append(f"{where}: runs in {ran}, registered for {dtype.short}")
                    continue
                if call.key() in seen:
                    problems.append(f"{where}: a duplicate of an earlier sample")
                    continue
                seen.add(call.key())
                count += 1
                if count > FULL_BUDGET:
                    problems.append(f"{where}: beyond the full budget of {FULL_BUDGET}")
                try:
                    outputs = torch_outputs(call)
                except Exception as error:
                    problems.append(f"{where}: torch rejects it: {type(error).__name__}: {error}")
                    continue
                try:
                    build_graph(call, outputs)
                except Unrepresentable as error:
                    problems.append(f"{where}: unrepresentable: {error}")
    return problems


@pytest.mark.parametrize("op", sorted(HANDWRITTEN))
def test_every_handwritten_sample_is_compared(op: str) -> None:
    problems = _problems(op)
    assert not problems, f"{op}: {len(problems)} dead hand-written sample(s):\n" + "\n".join(
        problems
    )


def test_a_dead_sample_is_reported() -> None:
    """The check itself: a Python number in a Tensor slot torch refuses is one."""
    import torch

    from aten2prims.testing.handwritten.registry import handwritten
    from aten2prims.testing.record import AtenCall

    op = "aten.maximum.default"
    entry = handwritten(op, [DType.float32])

    def dead(dtype: DType):  # a generator, as the registry takes
        yield AtenCall(op, (torch.ones(3), 2.5), {}, origin="handwritten")

    entry(dead)
    try:
        problems = _problems(op)
    finally:
        HANDWRITTEN[op].pop()
    assert any(
        "torch rejects it" in p and "maximum.default(float32[3], 2.5)" in p for p in problems
    )
