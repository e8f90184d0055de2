"""A native library kernels may call when it is present: loaded once, on first use, and
switched off within a block (`disabled()`) so tests and benchmarks can compare kernels with and
without it. `prims/mkl.py` and `prims/openblas.py` each keep one."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

Library = TypeVar("Library")


class OptionalLibrary(Generic[Library]):
    """`get()` is the loader's result (None: not usable), asked for at most once, or None
    inside `disabled()`. Kernels call `get()` at every use, never keeping the result in a
    plan, so `disabled()` switches them at their next call."""

    def __init__(self, load: Callable[[], Library | None]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._loaded: list[Library | None] = []  # empty until the first get()
        self._disabled_depth = 0

    def get(self) -> Library | None:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    self._loaded.append(self._load())
        return None if self._disabled_depth else self._loaded[0]

    @contextlib.contextmanager
    def disabled(self) -> Iterator[None]:
        self._disabled_depth += 1
        try:
            yield
        finally:
            self._disabled_depth -= 1
