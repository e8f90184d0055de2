"""A plan's steps as one straight-line Python function, so a run costs the kernels and little
else: no per-step argument templates, fetch loops or result dispatch.

    def run(v, rng, o):
        v[7] = k0(v[0], c0_1)          # a kernel with a literal argument
        v[8] = asarray(k1(v[7]))       # a 0-dim tensor result: kernels may return NumPy scalars
        v[9] = k2(v[8], c2_1, out=v[8])  # written into an operand that dies here (inplace.py)
        v[10] = k3(v[9], out=o[4])     # written into its arena buffer (arena.py)
        v[7] = v[8] = None             # released after their last use
        ...

`v` is the list of slot values, `rng` the run's random generator (random prims take it as `rng=`),
`o` the arena's buffers.
Kernels and literals are bound by name in the function's globals, never printed into the source.
A kernel that raises is found by the line it failed on and reported as the step's error.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import attrs
import numpy as np

from ..ir.values import TensorMeta
from .steps import SlotRef, Step, slot_refs

_COUNTER = itertools.count()


@attrs.frozen
class CompiledRun:
    """`run(values, rng, arena)`; `step_at_line` maps a source line to the index of the step it
    runs."""

    function: Callable[[list[Any], Any, tuple[Any, ...]], None]
    code: Any
    step_at_line: tuple[int, ...]
    source: str

    def __call__(self, values: list[Any], rng: Any, arena: tuple[Any, ...] = ()) -> None:
        self.function(values, rng, arena)

    def failed_step(self, traceback: TracebackType | None) -> int | None:
        """The index of the step whose line raised, from the exception's traceback."""
        while traceback is not None:
            if traceback.tb_frame.f_code is self.code:
                line = traceback.tb_lineno
                return self.step_at_line[line] if 0 <= line < len(self.step_at_line) else None
            traceback = traceback.tb_next
        return None


def compile_steps(steps: list[Step], origin: Sequence[int] | None = None) -> CompiledRun:
    """The steps as one function; `origin[i]` is the number step i is known by in errors
    (`CompiledRun.step_at_line`; default i: a segment's step stands for several)."""
    namespace: dict[str, Any] = {"asarray": np.asarray}
    lines = ["def run(v, rng, o):"]
    step_at_line = [-1, -1]  # line numbers start at 1; line 1 is the def
    for index, step in enumerate(steps):
        kernel = f"k{index}"
        namespace[kernel] = step.kernel
        arguments = [
            _expression(argument, f"c{index}_{position}", namespace)
            for position, argument in enumerate(step.arguments)
        ]
        if step.random:
            arguments.append("rng=rng")
        if step.takes_arena:
            arguments.append("arena=o")
        if step.out_argument is not None:
            arguments.append(f"out={arguments[step.out_argument]}")
        elif step.out_buffer is not None:
            arguments.append(f"out=o[{step.out_buffer}]")
        call = f"{kernel}({', '.join(arguments)})"
        wraps = [_wraps(meta) for meta in step.out_metas]
        if len(step.out_slots) == 1:
            statements = [
                f"v[{step.out_slots[0]}] = {'asarray(' + call + ')' if wraps[0] else call}"
            ]
        else:
            targets = ", ".join(f"v[{slot}]" for slot in step.out_slots)
            statements = [f"{targets}, = {call}" if step.out_slots else call]
            statements += [
                f"v[{slot}] = asarray(v[{slot}])"
                for slot, wrap in zip(step.out_slots, wraps)
                if wrap
            ]
        if step.free_after:
            statements.append(" = ".join(f"v[{slot}]" for slot in step.free_after) + " = None")
        for statement in statements:
            lines.append("    " + statement)
            step_at_line.append(index if origin is None else origin[index])
    if len(lines) == 1:
        lines.append("    pass")
    source = "\n".join(lines) + "\n"
    code = compile(source, f"<aten2prims plan {next(_COUNTER)}>", "exec")
    exec(code, namespace)
    function = namespace["run"]
    return CompiledRun(function, function.__code__, tuple(step_at_line), source)


def _wraps(meta: Any) -> bool:
    """0-dim tensor results may come back as NumPy scalars: they are wrapped into arrays."""
    return type(meta) is TensorMeta and meta.shape == ()


def _expression(argument: Any, name: str, namespace: dict[str, Any]) -> str:
    """Source for one argument: slots as v[i], tuples holding slots element by element, any
    other literal bound in the namespace under `name`."""
    if type(argument) is SlotRef:
        return f"v[{int(argument)}]"
    if type(argument) is tuple and any(True for _ in slot_refs(argument)):
        items = [_expression(item, f"{name}_{i}", namespace) for i, item in enumerate(argument)]
        return "(" + "".join(item + ", " for item in items) + ")"
    namespace[name] = argument
    return name
