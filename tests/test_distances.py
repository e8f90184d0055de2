"""cdist takes torch's algorithm for the same inputs: for p = 2, the matrix-product form
‖a‖² − 2a·b + ‖b‖² (compute_mode 1, or None/0 with more than 25 rows on a side) or the direct
differences (compute_mode 2, fewer rows, other p). Which one torch took is read from its
profiler (the matrix-product form dispatches `aten::_euclidean_dist`); which one we took, from
the lowered graph (only the matrix-product form concatenates its operands). Both forms' results
must then agree with torch's under the tolerance rule."""

from __future__ import annotations

import pytest
import torch

from aten2prims.passes.lower import lower
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import Status, build_graph, run_call, torch_outputs

# (x1 rows, x2 rows, p, compute_mode): around the 25-row threshold, each mode, other p.
CASES = [
    (25, 25, 2.0, None),
    (26, 4, 2.0, None),
    (4, 26, 2.0, 0),
    (25, 3, 2.0, 0),
    (3, 3, 2.0, 1),
    (30, 30, 2.0, 2),
    (30, 30, 1.0, None),
    (30, 2, 3.5, 1),
]


def _torch_uses_product(x1: torch.Tensor, x2: torch.Tensor, p: float, mode: int | None) -> bool:
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities) as profile:
        torch.ops.aten._cdist_forward.default(x1, x2, p, mode)
    return any(event.name == "aten::_euclidean_dist" for event in profile.events())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("rows1", "rows2", "p", "mode"), CASES)
def test_cdist_takes_torchs_branch_and_agrees(
    rows1: int, rows2: int, p: float, mode: int | None, dtype: torch.dtype
) -> None:
    generator = torch.Generator().manual_seed(rows1 * 100 + rows2)
    x1 = torch.randn(2, rows1, 5, generator=generator, dtype=dtype)
    x2 = torch.randn(2, rows2, 5, generator=generator, dtype=dtype)
    call = AtenCall("aten._cdist_forward.default", (x1, x2, p, mode), {})
    graph, _ = build_graph(call, torch_outputs(call))
    ours_product = any(node.op == "prims.cat" for node in lower(graph).nodes)
    assert ours_product == _torch_uses_product(x1, x2, p, mode), (
        f"{call.describe()}: torch takes the "
        f"{'matrix-product' if not ours_product else 'direct'} form, we the other"
    )
    outcome = run_call(call)
    assert outcome.status is Status.PASS, outcome.message
