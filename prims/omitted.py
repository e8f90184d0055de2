"""torch prims without meaning in a functional CPU graph: registered, so they are known and
listed (docs/prims.md), but not executable."""

from __future__ import annotations

from .registry import omit

omit(
    "copy_to(Tensor(a!) a, Tensor b) -> Tensor(a!)",
    "writes b into a in place; a functional graph has no in-place writes (functionalized graphs "
    "express the copy as a new value, e.g. convert_element_type/broadcast_in_dim/reshape)",
)
omit(
    "resize(Tensor(a!) a, SymInt[] shape) -> Tensor(a!)",
    "resizes a's storage in place; a functional graph creates a new tensor instead (empty/full)",
)
omit(
    "device_put(Tensor a, Device device, bool non_blocking=False) -> Tensor",
    "moves a tensor between devices; the executor runs on the CPU only",
)
