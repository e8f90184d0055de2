"""The executor's promise on threads: every thread count gives one thread's bits."""

from __future__ import annotations

from typing import Any

import numpy as np

import aten2prims
from aten2prims.ir.graph import Graph


def assert_one_threads_bits(
    graph: Graph,
    inputs: Any,
    one: list[np.ndarray],
    *,
    counts: tuple[int, ...] = (2, 3, 4),
    repeats: int = 1,
) -> None:
    """`graph` run on `inputs` at each thread count of `counts` (`repeats` times each) gives the
    bits of `one`, its one-thread result."""
    for threads in counts:
        for _ in range(repeats):
            many = aten2prims.execute(graph, inputs, threads=threads)
            assert [o.tobytes() for o in many] == [o.tobytes() for o in one], threads
