"""Helpers for testing prims against torch 2.13's `torch.ops.prims`.

- inputs of every dtype, with NaN/±inf/−0.0 among floats and the extremes among integers, in
  several NumPy layouts (contiguous, transposed, strided) so kernels meet non-contiguous operands;
- `run_prim`: the real path — a one-node graph built with `prims.Builder`, run by
  `execute(..., check=True)` on read-only inputs — plus a direct kernel call that checks the
  aliasing rule (only `view=True` prims may return memory of their operands) and that no input
  was written;
- `torch_prim` / `torch_meta`: the same call on torch, eagerly or on `device="meta"` tensors;
- `ours_meta`: our meta rule through the builder, for arguments given as `TensorMeta`s.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import prims
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy, to_torch, torch_dtype
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import required_length
from aten2prims.ir.values import Device, MemoryFormat, ScalarMeta, TensorMeta
from aten2prims.testing.compare import compare
from prims import Builder
from prims.registry import PRIMS

DTYPES: tuple[DType, ...] = tuple(DType)
LAYOUTS = ("contiguous", "transposed", "strided")
TP = torch.ops.prims


# -- inputs -------------------------------------------------------------------------------------------


def rng_for(*key: Any) -> np.random.Generator:
    """A generator seeded by the test's own parameters: reproducible, different per case."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def bits_equal(ours: list[Any], expected: list[Any]) -> None:
    """Same dtype, shape and bit patterns (NaN payloads aside: NaN where NaN), signed zeros too."""
    assert len(ours) == len(expected)
    for a, b in zip(ours, expected):
        assert a.dtype == b.dtype and a.shape == b.shape
        nan = np.isnan(b) if b.dtype.kind == "f" else np.zeros(b.shape, bool)
        assert np.array_equal(np.isnan(a) if a.dtype.kind == "f" else nan, nan)
        assert np.array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8))


def _float_values(n: int, rng: np.random.Generator, *, special: bool, scale: float) -> np.ndarray:
    values = rng.uniform(-scale, scale, n)
    if special and n >= 4:
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0])
        picks = rng.random(n) < 0.2
        values[picks] = rng.choice(specials, int(picks.sum()))
    return values


def random_array(
    shape: Sequence[int],
    dtype: DType,
    rng: np.random.Generator,
    *,
    special: bool = True,
    scale: float = 4.0,
) -> np.ndarray:
    """Values of dtype: full-range integers (so sums and products wrap), random bools, floats and
    complex numbers in [-scale, scale] with NaN/±inf/−0.0 sprinkled in when `special`."""
    shape = tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype is DType.bool:
        flat = rng.random(n) < 0.5
    elif dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        flat = rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64).astype(
            dtype.numpy
        )
    elif dtype.is_complex:
        flat = np.empty(n, dtype.numpy)
        flat.real = _float_values(n, rng, special=special, scale=scale)
        flat.imag = _float_values(n, rng, special=special, scale=scale)
    else:
        flat = (
            _float_values(n, rng, special=special, scale=scale)
            .astype(np.float32)
            .astype(dtype.numpy)
        )
    return flat.reshape(shape)


def with_layout(array: np.ndarray, layout: str) -> np.ndarray:
    """The same values (and shape) held in a non-contiguous NumPy layout."""
    if layout == "contiguous" or array.ndim == 0:
        return np.array(array, order="C", copy=True)
    if layout == "transposed":
        return np.array(array.T, order="C", copy=True).T
    if layout == "strided":
        wide = np.zeros((*array.shape[:-1], 2 * array.shape[-1]), array.dtype)
        wide[..., ::2] = array
        return wide[..., ::2]
    raise ValueError(layout)


def read_only(array: np.ndarray) -> np.ndarray:
    array = array.view()
    array.flags.writeable = False
    return array


# -- running our prims ------------------------------------------------------------------------------------


def _symbolic(builder: Builder, arg: Any, inputs: dict[str, Any], counter: list[int]) -> Any:
    """Arrays and TensorMetas become graph inputs; lists and tuples are searched; all else is literal."""
    if isinstance(arg, np.ndarray | TensorMeta):
        name = f"in{counter[0]}"
        counter[0] += 1
        meta = (
            arg
            if isinstance(arg, TensorMeta)
            else TensorMeta(arg.shape, DType.from_numpy(arg.dtype))
        )
        if isinstance(arg, np.ndarray):
            inputs[name] = arg
        return builder.add_input(name, meta)
    if isinstance(arg, list | tuple) and any(isinstance(a, np.ndarray | TensorMeta) for a in arg):
        return [_symbolic(builder, a, inputs, counter) for a in arg]
    return arg


def build(name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any, dict[str, Any]]:
    """A one-node graph calling prims.<name>; returns (graph, result value(s), input arrays)."""
    inputs: dict[str, Any] = {}
    counter = [0]
    with Builder(name) as builder:
        sym_args = [_symbolic(builder, a, inputs, counter) for a in args]
        sym_kwargs = {k: _symbolic(builder, v, inputs, counter) for k, v in kwargs.items()}
        result = getattr(prims, name)(*sym_args, **sym_kwargs)
        outputs = list(result) if isinstance(result, tuple) else [result]
        graph = builder.finish(outputs)
    return graph, result, inputs


def ours_meta(name: str, *args: Any, **kwargs: Any) -> Any:
    """Our meta result(s) for arguments given as TensorMetas (or arrays)."""
    _, result, _ = build(name, *args, **kwargs)
    if isinstance(result, tuple):
        return tuple(r.meta for r in result)
    return result.meta


def _arrays_in(args: Any) -> list[np.ndarray]:
    found: list[np.ndarray] = []
    for a in args:
        if isinstance(a, np.ndarray):
            found.append(a)
        elif isinstance(a, list | tuple):
            found.extend(_arrays_in(a))
    return found


def _read_only_args(args: Any) -> Any:
    if isinstance(args, np.ndarray):
        return read_only(args)
    if isinstance(args, list | tuple):
        return type(args)(_read_only_args(a) for a in args)
    return args


def run_prim(name: str, *args: Any, seed: int = 0, **kwargs: Any) -> list[Any]:
    """Run prims.<name> on NumPy arrays through Builder + execute(check=True); returns its results.

    Inputs are handed over read-only (a kernel that writes into an operand fails) and are checked
    unchanged afterwards. The kernel is also called directly, to check that only view prims return
    memory shared with their operands.
    """
    args = _read_only_args(args)
    kwargs = {k: _read_only_args(v) for k, v in kwargs.items()}
    arrays = _arrays_in([*args, *kwargs.values()])
    before = [a.copy() for a in arrays]
    graph, _, inputs = build(name, *args, **kwargs)
    results = execute(graph, inputs, check=True, seed=seed)
    _check_aliasing(name, args, kwargs, arrays)
    for original, after in zip(before, arrays):
        assert original.tobytes() == np.ascontiguousarray(after).tobytes(), (
            f"prims.{name} wrote into an input"
        )
    return results


def kernel_call(name: str, *args: Any, **kwargs: Any) -> Any:
    """The kernel's own result, bound through the schema as the executor binds it."""
    definition = PRIMS[name]
    bound = definition.schema.bind(args, kwargs, op=definition.qualified_name)
    bound = [tuple(b) if isinstance(b, list) else b for b in bound]
    if definition.random:
        return definition.kernel(*bound, rng=np.random.default_rng(0))
    return definition.kernel(*bound)


def _check_aliasing(name: str, args: Any, kwargs: dict[str, Any], arrays: list[np.ndarray]) -> None:
    result = kernel_call(name, *args, **kwargs)
    results = result if isinstance(result, tuple) else (result,)
    if PRIMS[name].view:
        return
    for r in results:
        if isinstance(r, np.ndarray):
            for a in arrays:
                assert not np.shares_memory(r, a), (
                    f"prims.{name} (not a view prim) returned memory of an operand"
                )


# -- torch --------------------------------------------------------------------------------------------


def _to_torch_arg(arg: Any, device: str) -> Any:
    if isinstance(arg, np.ndarray):
        return to_torch(arg)
    if isinstance(arg, TensorMeta):
        length = required_length(arg.shape, arg.strides, arg.storage_offset)
        storage = torch.empty(length, dtype=torch_dtype(arg.dtype), device="meta")
        return storage.as_strided(arg.shape, arg.strides, arg.storage_offset)
    if isinstance(arg, DType):
        return torch_dtype(arg)
    if isinstance(arg, Device):
        return torch.device(device or arg.name)
    if isinstance(arg, MemoryFormat):
        return getattr(torch, arg.value)
    if isinstance(arg, list | tuple):
        return [_to_torch_arg(a, device) for a in arg]
    return arg


def _from_torch(result: Any) -> Any:
    if isinstance(result, torch.Tensor):
        return to_numpy(result)
    if isinstance(result, tuple | list):
        return [_from_torch(r) for r in result]
    return result


def torch_prim(name: str, *args: Any, **kwargs: Any) -> Any:
    """torch.ops.prims.<name> run eagerly on CPU; tensors come back as NumPy arrays."""
    t_args = [_to_torch_arg(a, "") for a in args]
    t_kwargs = {k: _to_torch_arg(v, "") for k, v in kwargs.items()}
    return _from_torch(getattr(TP, name)(*t_args, **t_kwargs))


def torch_meta(name: str, *args: Any, **kwargs: Any) -> Any:
    """torch's meta result for arguments given as TensorMetas: TensorMeta(s) or the scalar's type."""
    t_args = [_to_torch_arg(a, "meta") for a in args]
    t_kwargs = {k: _to_torch_arg(v, "meta") for k, v in kwargs.items()}
    result = getattr(TP, name)(*t_args, **t_kwargs)
    return _meta_of(result)


def _meta_of(result: Any) -> Any:
    """The full meta of torch's result: shape, dtype, strides and storage offset."""
    if isinstance(result, torch.Tensor):
        return TensorMeta(
            tuple(result.shape),
            DType.from_torch_name(str(result.dtype)),
            tuple(result.stride()),
            result.storage_offset(),
        )
    if isinstance(result, tuple | list):
        return tuple(_meta_of(r) for r in result)
    return ScalarMeta(type(result))


# -- comparing -----------------------------------------------------------------------------------------


def assert_close(
    actual: Any, expected: Any, *, reference: Any = None, what: str = "result"
) -> None:
    outcome = compare(actual, expected, reference=reference, what=what)
    assert outcome, outcome.message


def assert_bitwise(actual: np.ndarray, expected: np.ndarray, what: str = "result") -> None:
    """Same dtype, shape and bytes: for prims that only move data."""
    assert_close(actual, expected, what=what)
    assert np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes(), (
        f"{what}: the bytes differ from torch's"
    )


def symbolic(shape: Sequence[int], dtype: DType) -> TensorMeta:
    return TensorMeta(tuple(shape), dtype)


__all__ = [
    "DTYPES",
    "LAYOUTS",
    "TP",
    "assert_bitwise",
    "assert_close",
    "build",
    "kernel_call",
    "ours_meta",
    "random_array",
    "read_only",
    "rng_for",
    "run_prim",
    "symbolic",
    "torch_meta",
    "torch_prim",
    "with_layout",
]
