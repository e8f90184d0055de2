"""The extension prims (`gather_nd`, `scatter_nd`, `sort`, `nonzero`, `complex`, `check`;
docs/prims.md) as torch
library ops `torch.ops.aten2prims.<name>`, so that a prims graph handed back to torch can call
them. Each has a CPU implementation written with torch ops and a fake kernel for tracing.
`register()` defines them once per process; torch is imported only when it is called."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NAMESPACE = "aten2prims"

# Our schemas (prims/indexing.py), written in torch's library syntax.
SCHEMAS: dict[str, str] = {
    "gather_nd": "(Tensor a, Tensor[] indices) -> Tensor",
    "scatter_nd": "(Tensor a, Tensor[] indices, Tensor values, str? reduce=None) -> Tensor",
    "sort": "(Tensor a, int dim, bool descending) -> (Tensor, Tensor)",
    # Without a count, the data decide it (the result's first size is then data-dependent: how
    # to_fx hands back a graph whose count is an unbacked symbol).
    "nonzero": "(Tensor a, SymInt? count=None) -> Tensor",
    "complex": "(Tensor real, Tensor imag) -> Tensor",
    "check": "(Tensor condition, str message) -> ()",
}

_registered = False
# torch.library keeps a definition alive only while its Library object lives.
_library: Any = None


def register() -> None:
    """Define `torch.ops.aten2prims.{gather_nd, scatter_nd, sort, nonzero, complex, check}`
    (idempotent)."""
    global _registered, _library
    if _registered:
        return
    import torch

    if hasattr(torch.ops, NAMESPACE) and all(
        hasattr(getattr(torch.ops, NAMESPACE), name) for name in SCHEMAS
    ):
        _registered = True
        return
    _library = torch.library.Library(NAMESPACE, "DEF")
    implementations: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        "gather_nd": (_gather_nd, _gather_nd_fake),
        "scatter_nd": (_scatter_nd, _scatter_nd_fake),
        "sort": (_sort, _sort_fake),
        "nonzero": (_nonzero, _nonzero_fake),
        "complex": (_complex, _complex_fake),
        "check": (_check, _check_fake),
    }
    for name, schema in SCHEMAS.items():
        _library.define(name + schema)
        kernel, fake = implementations[name]
        _library.impl(name, kernel, "CPU")
        torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_library)
    # A check returns nothing: without this, fx's dead code elimination would drop it.
    torch.fx.node.has_side_effect(getattr(torch.ops, NAMESPACE).check.default)
    _registered = True


def _checked_indices(a: Any, indices: list[Any], op: str) -> tuple[Any, ...]:
    """The index tensors as int64, after checking what our prims require: one per dimension of
    `a`, one shape, every entry in [0, size) (torch's indexing would wrap negative ones)."""
    import torch

    if len(indices) != a.dim():
        raise ValueError(
            f"aten2prims.{op}: expected one index tensor per dimension of a ({a.dim()}), got {len(indices)}"
        )
    checked = []
    for dim, index in enumerate(indices):
        if index.dtype not in (torch.int32, torch.int64):
            raise ValueError(
                f"aten2prims.{op}: indices[{dim}] must be int32 or int64, got {index.dtype}"
            )
        if index.shape != indices[0].shape:
            raise ValueError(
                f"aten2prims.{op}: index tensors must share one shape, got {list(indices[0].shape)} and {list(index.shape)}"
            )
        size = a.shape[dim]
        if index.numel() and (bool((index < 0).any()) or bool((index >= size).any())):
            bad = index[(index < 0) | (index >= size)].flatten()[0]
            raise ValueError(
                f"aten2prims.{op}: index {int(bad)} is out of bounds for dimension {dim} with size {size}"
            )
        checked.append(index.to(torch.int64))
    return tuple(checked)


def _gather_nd(a: Any, indices: list[Any]) -> Any:
    return a[_checked_indices(a, indices, "gather_nd")].clone()


def _gather_nd_fake(a: Any, indices: list[Any]) -> Any:
    return a.new_empty(tuple(indices[0].shape))


def _scatter_nd(a: Any, indices: list[Any], values: Any, reduce: str | None = None) -> Any:
    import torch

    checked = _checked_indices(a, indices, "scatter_nd")
    if values.dtype != a.dtype or values.shape != checked[0].shape:
        raise ValueError(
            f"aten2prims.scatter_nd: values must have a's dtype {a.dtype} and the indices' shape "
            f"{list(checked[0].shape)}, got {values.dtype}{list(values.shape)}"
        )
    # float16/bfloat16 accumulate in float32 and round once, as our kernel does.
    wide = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) and reduce else a.dtype
    result = a.to(wide, copy=True).contiguous()
    values = values.to(wide)
    if reduce is None:
        # The serial CPU kernel applies writes in order: the last write to a position wins.
        result.index_put_(checked, values, accumulate=False)
    else:
        if reduce not in ("sum", "prod", "amax", "amin"):
            raise ValueError(f"aten2prims.scatter_nd: unknown reduce {reduce!r}")
        flat = torch.zeros(checked[0].shape, dtype=torch.int64)
        for dim, index in enumerate(checked):
            flat = flat * a.shape[dim] + index
        result.view(-1).scatter_reduce_(
            0, flat.flatten(), values.flatten(), reduce=reduce, include_self=True
        )
    return result.to(a.dtype)


def _scatter_nd_fake(a: Any, indices: list[Any], values: Any, reduce: str | None = None) -> Any:
    return a.new_empty(tuple(a.shape))


def _sort(a: Any, dim: int, descending: bool) -> tuple[Any, Any]:
    import torch

    values, positions = torch.sort(a, dim=dim, descending=descending, stable=True)
    return values, positions


def _sort_fake(a: Any, dim: int, descending: bool) -> tuple[Any, Any]:
    import torch

    return a.new_empty(tuple(a.shape)), a.new_empty(tuple(a.shape), dtype=torch.int64)


def _nonzero(a: Any, count: int | None = None) -> Any:
    import torch

    coordinates = torch.nonzero(a)
    if count is not None and coordinates.shape[0] != count:
        raise ValueError(
            f"aten2prims.nonzero: the graph declares {count} nonzero elements, the data hold {coordinates.shape[0]}"
        )
    return coordinates


def _nonzero_fake(a: Any, count: Any = None) -> Any:
    import torch

    if count is None:
        count = torch.library.get_ctx().new_dynamic_size()
    return a.new_empty((count, a.dim()), dtype=torch.int64)


def _check_parts(real: Any, imag: Any) -> None:
    import torch

    if real.dtype != imag.dtype or real.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"aten2prims.complex: expected float32 or float64 parts of one dtype, got {real.dtype} and {imag.dtype}"
        )


def _complex(real: Any, imag: Any) -> Any:
    import torch

    _check_parts(real, imag)
    return torch.complex(real, imag)


def _complex_fake(real: Any, imag: Any) -> Any:
    import torch

    _check_parts(real, imag)
    dtype = torch.complex64 if real.dtype == torch.float32 else torch.complex128
    return real.new_empty(tuple(torch.broadcast_shapes(real.shape, imag.shape)), dtype=dtype)


def _check(condition: Any, message: str) -> None:
    import torch

    torch._assert_async(condition, message)


def _check_fake(condition: Any, message: str) -> None:
    return None
