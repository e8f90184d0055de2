"""The threads of a call: `execute(..., threads=N)` runs the parts of large steps on a pool of
N threads (the caller and N - 1 workers).

NumPy releases the GIL inside its kernels, so the parts of one step run at once. What a step
splits into is decided when the plan is made and never depends on N (`chunks`, and the
contraction engine's chunks and product parts): a step makes the same kernel calls on the same
slices whatever the thread count, which only decides who runs which part (and, for erf's
passes, how long a block each of their NumPy calls covers: `Parted.long_calls`). Parts are
slices along dimensions nothing is reduced over, so every result element is computed exactly
as one thread computes it; the results are bit for bit those of one thread.

BLAS is held at one thread during a call (through threadpoolctl; restored afterwards): its
products are split into parts by the plan instead, so a product is always computed by the same
one-thread code, and no BLAS thread pool spins beside ours (measured: BLAS at two threads beside
our parts took half again as much CPU time on the transformer).

A region first restricts the workers to CPUs other than the one the caller runs on (when that
changed since the last region; `_Workers.place`): left to itself, Linux woke a worker on the
caller's CPU while the other one idled, and the parts of a region ran one after another.
"""

from __future__ import annotations

import _thread
import ctypes
import functools
import itertools
import math
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import threadpoolctl

from prims import vector_math
from prims.registry import lookup

from ..ir.values import TensorMeta
from .direct_kernels import makes_short_calls
from .steps import SlotRef

# The environment variable giving execute()'s default thread count.
THREADS_VARIABLE = "ATEN2PRIMS_NUM_THREADS"
# A part holds at least this many bytes (of the result; of the operand, for a reduction):
# handing a part to another thread costs 25-130 microseconds (docs/executor.md#threads; with
# 1 MiB, the zoo's CNN ran 1.2x slower at two threads on an AMD EPYC).
PART_BYTES = 2 << 20
# At most this many parts per step (each part costs a few microseconds of Python).
MAX_PARTS = 4
# A step whose kernel makes many short NumPy calls (`makes_short_calls`: GELU's erf passes) is
# split only with a result of at least this many bytes; its parts, on several threads, then make
# longer calls (`vector_math.long_calls`). GELU, one thread whole against two threads in parts
# over erf blocks of 256K elements (ms, both plans in one process, calls alternating, medians
# of 15): 4.8M elements 8.70 → 6.54, 2.4M 4.89 → 3.90, 1.2M 2.88 → 2.09, but 0.6M 1.24 → 1.39
# (1.22 in parts over 64K-element blocks, 8.03 for 4.8M).
SHORT_CALLS_PART_BYTES = 4 << 20


def default_threads() -> int:
    """ATEN2PRIMS_NUM_THREADS when set, else the cores this process may run on."""
    value = os.environ.get(THREADS_VARIABLE)
    if value:
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"{THREADS_VARIABLE} must be a positive integer, got {value!r}")
        return count
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Region:
    """One `run_parts` call, shared by the caller and the workers it wakes: each thread claims
    the next unclaimed part until none is left, so a worker that wakes late (waking a sleeping
    thread costs tens of microseconds) takes fewer parts instead of delaying the call. The
    thread finishing the last part releases `done`."""

    __slots__ = ("claims", "done", "errors", "finished", "parts", "state")

    def __init__(self, parts: Sequence[Callable[[], None]], state: Any) -> None:
        self.parts = parts
        self.state = state  # NumPy's error state is per thread: the workers take the caller's
        # next() of a count is one C call: atomic under the GIL, so a part is claimed once.
        self.claims = itertools.count()
        self.finished = itertools.count(1)
        self.errors: list[tuple[int, BaseException]] = []
        self.done = _thread.allocate_lock()
        self.done.acquire()

    def work(self) -> None:
        parts, total = self.parts, len(self.parts)
        while True:
            index = next(self.claims)
            if index >= total:
                return
            try:
                parts[index]()
            except BaseException as raised:  # kept: re-raised by the caller after every part
                self.errors.append((index, raised))
            if next(self.finished) == total:
                self.done.release()


class _Workers:
    """`count` threads waiting for regions to help with (one queue each; a region is put into
    the queues of as many workers as it has parts beyond the caller's first)."""

    def __init__(self, count: int) -> None:
        self.queues: list[queue.SimpleQueue[_Region]] = [queue.SimpleQueue() for _ in range(count)]
        self.native_ids: list[int] = []
        # The caller's CPU the workers were last placed away from (`place`; -1: not yet).
        self.away_from = -1
        for number, inbox in enumerate(self.queues):
            thread = threading.Thread(
                target=_serve, args=(inbox,), name=f"aten2prims-{number}", daemon=True
            )
            thread.start()
            self.native_ids.append(thread.native_id or 0)

    def place(self, cpu: int) -> None:
        """The workers restricted to the process's CPUs (`CPUS`) other than `cpu` (the one the
        caller runs on); among those the scheduler still chooses, so a worker can leave a busy
        CPU. Left to Linux, a woken worker was put on the caller's CPU while the other one
        idled, and the two took turns there: a region's parts ran one after another
        (docs/executor.md#threads)."""
        self.away_from = cpu
        others = CPUS - {cpu}
        if not others:  # one CPU: nowhere else to go
            return
        try:
            for native_id in self.native_ids:
                os.sched_setaffinity(native_id, others)
        except OSError:  # a CPU gone meanwhile: the workers stay where they may run
            pass


def _serve(inbox: queue.SimpleQueue[_Region]) -> None:
    state: Any = np.geterr()
    while True:
        region = inbox.get()
        if region.state != state:
            state = region.state
            np.seterr(**state)
        region.work()


class _Call(threading.local):
    """The workers of the call running on this thread (None: one thread)."""

    workers: _Workers | None = None
    threads: int = 1


_CALL = _Call()
_POOLS: dict[int, _Workers] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools() -> None:
    """A forked child has none of its parent's threads: it makes pools of its own."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def _pool(threads: int) -> _Workers:
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = _Workers(threads - 1)
        return pool


class _Blas:
    """BLAS's thread count, through threadpoolctl (its libraries found at first use)."""

    def __init__(self) -> None:
        self._libraries: list[Any] | None = None
        self._lock = threading.Lock()

    def libraries(self) -> list[Any]:
        with self._lock:
            if self._libraries is None:
                controller = threadpoolctl.ThreadpoolController()
                self._libraries = list(controller.select(user_api="blas").lib_controllers)
            return self._libraries

    @contextmanager
    def limited(self, threads: int) -> Iterator[None]:
        changed = []
        for library in self.libraries():
            before = library.num_threads
            if before != threads:
                library.set_num_threads(threads)
                changed.append((library, before))
        try:
            yield
        finally:
            for library, before in changed:
                library.set_num_threads(before)


BLAS = _Blas()


def _cpu_query() -> Callable[[], int] | None:
    """libc's sched_getcpu (the CPU the calling thread runs on), or None without it."""
    if not hasattr(os, "sched_setaffinity"):  # not on Linux
        return None
    try:
        function = ctypes.CDLL(None).sched_getcpu
    except (AttributeError, OSError):  # a C library without it
        return None
    function.argtypes = []
    function.restype = ctypes.c_int
    return function


# The CPU the calling thread runs on (None: unknown here, and the workers are never placed).
CURRENT_CPU = _cpu_query()
# The CPUs the process may run on when this module is loaded (a worker inherits the mask of
# the thread creating it, perhaps a caller held to one CPU).
CPUS: frozenset[int] = frozenset(os.sched_getaffinity(0) if CURRENT_CPU is not None else ())


@contextmanager
def running_with(threads: int) -> Iterator[None]:
    """The calling thread's steps run their parts on `threads` threads, BLAS on one."""
    if threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads}")
    outer = _CALL.workers, _CALL.threads
    _CALL.workers, _CALL.threads = (_pool(threads) if threads > 1 else None), threads
    try:
        with BLAS.limited(1):
            yield
    finally:
        _CALL.workers, _CALL.threads = outer


def sharing() -> bool:
    """Whether the calling thread's step shares its parts with workers (False at one thread,
    and inside a part)."""
    return _CALL.workers is not None


def run_parts(parts: Sequence[Callable[[], None]]) -> None:
    """Runs every part, on the call's threads when it has several: the caller and the workers
    claim the parts in order, one at a time (who runs which part varies; what each part
    computes does not). A part calling run_parts runs those parts itself, in order. Parts must
    write disjoint memory. Exceptions are re-raised (the
    lowest-numbered failing part's) after every part has ended."""
    workers = _CALL.workers
    if workers is None or len(parts) < 2:
        for part in parts:
            part()
        return
    query = CURRENT_CPU
    if query is not None:
        cpu = query()
        if cpu != workers.away_from:
            workers.place(cpu)
    region = _Region(parts, np.geterr())
    for inbox in workers.queues[: len(parts) - 1]:
        inbox.put(region)
    # A part opens no region of its own (a segment's product on its rows): the regions it
    # would open run here, part after part, as they do on the workers (which have no pool).
    _CALL.workers = None
    try:
        region.work()
    finally:
        _CALL.workers = workers
    region.done.acquire()
    if region.errors:
        raise min(region.errors, key=lambda error: error[0])[1]


# -- splitting a result into parts ------------------------------------------------------------------


def even_parts(count: int) -> int:
    """A part count rounded down to an even one (two threads then get equal shares)."""
    return count - count % 2 if count > 2 else count


def chunks(shape: tuple[int, ...], itemsize: int) -> tuple[tuple[Any, ...], ...]:
    """Indices of the parts of an array of `shape` (a plan-time decision: never depends on the
    thread count): slices along its outer dims of about PART_BYTES each, at most MAX_PARTS;
    () when the array is too small to split."""
    size = math.prod(shape) * itemsize
    wanted = even_parts(min(MAX_PARTS, size // PART_BYTES))
    if wanted < 2 or not shape:
        return ()
    # Split the outermost dims: whole index positions over the dims before `axis`, slices along it.
    outer = 1
    for axis, length in enumerate(shape):
        if outer * length >= wanted or axis == len(shape) - 1:
            break
        outer *= length
    per = max(1, -(-wanted // outer))
    per = min(per, shape[axis])
    bounds = [(i * shape[axis] // per, (i + 1) * shape[axis] // per) for i in range(per)]
    indices: list[tuple[Any, ...]] = []
    for position in np.ndindex(*shape[:axis]):
        for start, stop in bounds:
            indices.append((*position, slice(start, stop)))
    return tuple(indices) if len(indices) > 1 else ()


def operand_part(operand: Any, index: tuple[Any, ...], ndim: int) -> Any:
    """The part of an elementwise operand (broadcast against a result of `ndim` dims) that
    result part `index` reads."""
    if type(operand) is not np.ndarray or operand.ndim == 0:
        return operand
    lead = ndim - operand.ndim
    own: list[Any] = []
    for axis, item in enumerate(index):
        if axis < lead:
            continue
        if operand.shape[axis - lead] == 1:
            own.append(0 if type(item) is int else slice(None))
        else:
            own.append(item)
    return operand[tuple(own)]


class Parted:
    """An elementwise kernel taking `out=`, run part by part: each part of the result (`parts`,
    from `chunks`, of a result of `shape` and `dtype`) is the kernel of the operands' matching
    parts. A kernel making many short NumPy calls (`long_calls`) makes longer ones in its parts
    when several threads share them (`vector_math.long_calls`)."""

    __slots__ = ("dtype", "kernel", "long_calls", "parts", "shape")

    def __init__(
        self,
        kernel: Callable[..., Any],
        parts: tuple[tuple[Any, ...], ...],
        shape: tuple[int, ...],
        dtype: np.dtype,
        long_calls: bool = False,
    ) -> None:
        self.kernel = kernel
        self.parts = parts
        self.shape = shape
        self.dtype = dtype
        self.long_calls = long_calls

    def __call__(self, *operands: Any, out: np.ndarray | None = None) -> Any:
        if out is None:
            out = np.empty(self.shape, self.dtype)
        kernel, ndim, shape = self.kernel, out.ndim, out.shape
        if any(_overlaps(o, out) for o in operands):
            # An operand sharing out's memory other than element for element (a result written
            # into a dying operand, read also through a transpose of it): one call, in which
            # NumPy copies that operand first; parts would read elements others wrote.
            return kernel(*operands, out=out)
        # Operands of the result's shape are sliced as the result is (the common case, fast).
        whole = [type(o) is np.ndarray and o.shape == shape for o in operands]
        shared = self.long_calls and sharing()
        run_parts(
            [
                functools.partial(
                    _call_long if shared else _call,
                    kernel,
                    [
                        o[index] if w else operand_part(o, index, ndim)
                        for o, w in zip(operands, whole)
                    ],
                    out[index],
                )
                for index in self.parts
            ]
        )
        return out


def _overlaps(operand: Any, out: np.ndarray) -> bool:
    """`operand` may share memory with `out` other than as the same elements in one layout."""
    if type(operand) is not np.ndarray or operand.ndim == 0:
        return False
    if operand.shape == out.shape and operand.strides == out.strides:
        if operand.ctypes.data == out.ctypes.data:
            return False
    return bool(np.may_share_memory(operand, out))


def _call(kernel: Callable[..., Any], operands: list[Any], out: np.ndarray) -> None:
    kernel(*operands, out=out)


def _call_long(kernel: Callable[..., Any], operands: list[Any], out: np.ndarray) -> None:
    with vector_math.long_calls():
        kernel(*operands, out=out)


def elementwise_in_parts(kernel: Callable[..., Any], *operands: Any, out: np.ndarray) -> None:
    """kernel(*operands, out=out) for an elementwise kernel (a ufunc), part by part (`chunks`
    of out's shape); a kernel making many short NumPy calls as an elementwise step's (parts
    only from SHORT_CALLS_PART_BYTES on, in long calls when shared)."""
    short_calls = makes_short_calls(kernel)
    if short_calls and out.nbytes < SHORT_CALLS_PART_BYTES:
        parts: tuple[tuple[Any, ...], ...] = ()
    else:
        parts = chunks(out.shape, out.itemsize)
    if parts:
        Parted(kernel, parts, out.shape, out.dtype, long_calls=short_calls)(*operands, out=out)
    else:
        kernel(*operands, out=out)


def copy_in_parts(destination: np.ndarray, source: np.ndarray) -> None:
    """np.copyto(destination, source) of two arrays of one shape, part by part."""
    parts = chunks(destination.shape, destination.itemsize)
    if not parts:
        np.copyto(destination, source)
        return

    def part(index: tuple[Any, ...]) -> Callable[[], None]:
        return lambda: np.copyto(destination[index], source[index])

    run_parts([part(index) for index in parts])


class ReducedParted:
    """A reduction prim's kernel (`PrimDef.reduces`) run part by part: the result split along
    one kept dim (`bounds` along result dim `axis`, operand dim `operand_axis`), each part the
    reduction of the operand's matching slice; takes `out=`."""

    __slots__ = ("axis", "bounds", "dtype", "kernel", "operand_axis", "shape")

    def __init__(
        self,
        kernel: Callable[..., Any],
        axis: int,
        operand_axis: int,
        bounds: tuple[tuple[int, int], ...],
        shape: tuple[int, ...],
        dtype: np.dtype,
    ) -> None:
        self.kernel = kernel
        self.axis = axis
        self.operand_axis = operand_axis
        self.bounds = bounds
        self.shape = shape
        self.dtype = dtype

    def __call__(
        self, inp: np.ndarray, dims: Any, output_dtype: Any, out: np.ndarray | None = None
    ) -> np.ndarray:
        if out is None:
            out = np.empty(self.shape, self.dtype)
        kernel = self.kernel

        def part(start: int, stop: int) -> Callable[[], None]:
            index: list[Any] = [slice(None)] * inp.ndim
            index[self.operand_axis] = slice(start, stop)
            target: list[Any] = [slice(None)] * out.ndim
            target[self.axis] = slice(start, stop)
            return lambda: np.copyto(
                out[tuple(target)], kernel(inp[tuple(index)], dims, output_dtype)
            )

        run_parts([part(start, stop) for start, stop in self.bounds])
        return out


def _reduction_parts(step: Any, meta: TensorMeta, operand: Any) -> ReducedParted | None:
    """A reduction step whose operand is large enough to split: along the outermost result dim
    of length >= 2, by the operand bytes each result element reads."""
    definition = lookup(step.node.op)
    if definition is None or definition.kernel is None or type(operand) is not TensorMeta:
        return None
    dims = step.arguments[1]
    reduced = set(range(operand.ndim)) if dims is None else {d for d in dims if d < operand.ndim}
    kept = [axis for axis in range(operand.ndim) if axis not in reduced]
    if len(kept) != len(meta.shape) or not kept:
        return None
    axis = next((j for j, n in enumerate(meta.shape) if n >= 2), None)
    if axis is None:
        return None
    size = math.prod(operand.shape) * operand.dtype.itemsize
    count = even_parts(min(MAX_PARTS, size // PART_BYTES, meta.shape[axis]))
    if count < 2:
        return None
    length = meta.shape[axis]
    bounds = tuple((i * length // count, (i + 1) * length // count) for i in range(count))
    return ReducedParted(
        step.kernel, axis, kept[axis], bounds, meta.shape, np.dtype(meta.dtype.numpy)
    )


def split_steps(steps: Sequence[Any], meta_of: dict[int, Any]) -> None:
    """Elementwise steps taking `out=` whose result is large enough to split run part by part
    (`Parted`; a kernel making many short NumPy calls, `makes_short_calls`, from
    SHORT_CALLS_PART_BYTES on); a step without a buffer then allocates its result whole first.
    Reductions of a large operand run part by part along a kept dim (`ReducedParted`) and then
    take `out=`."""
    for step in steps:
        if len(step.nodes) == 1 and len(step.out_slots) == 1 and not step.random:
            definition = lookup(step.node.op)
            meta = meta_of[step.out_slots[0]]
            argument = step.arguments[0] if step.arguments else None
            if (
                definition is not None
                and definition.reduces
                and type(meta) is TensorMeta
                and meta.shape
                and type(argument) is SlotRef
                and step.relaxed_shape is None
            ):
                parted = _reduction_parts(step, meta, meta_of.get(int(argument)))
                if parted is not None:
                    step.kernel = parted
                    step.takes_out = True
                continue
        if not (step.elementwise and step.takes_out and len(step.out_slots) == 1):
            continue
        meta = meta_of[step.out_slots[0]]
        if type(meta) is not TensorMeta or not meta.shape:
            continue
        short_calls = makes_short_calls(step.kernel)  # GIL-bound parts (direct_kernels.py)
        if short_calls and math.prod(meta.shape) * meta.dtype.itemsize < SHORT_CALLS_PART_BYTES:
            continue
        parts = chunks(meta.shape, meta.dtype.itemsize)
        if parts:
            dtype = np.dtype(meta.dtype.numpy)
            step.kernel = Parted(step.kernel, parts, meta.shape, dtype, long_calls=short_calls)
