"""Recording the Core ATen calls a piece of torch code makes (torch imported lazily).

`record_core_calls(fn)` runs `fn` under a dispatch mode and returns every call of a Core ATen
overload (or of one of the extra overloads we lower, `EXTRA_COMPUTING_OPS`) it dispatched, with
copies of its arguments. Non-core overloads that torch's core decomposition table knows are
decomposed on the way (so a sample of `torch.sum(x)` also yields the `aten.sum.dim_IntList` call
export would produce); others run as they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import attrs

from ..schema.core_aten import CORE_ATEN_OPS
from ..schema.registry import EXTRA_COMPUTING_OPS

# The overloads a recording keeps.
RECORDED_OPS: frozenset[str] = frozenset(CORE_ATEN_OPS) | EXTRA_COMPUTING_OPS


@attrs.frozen(eq=False)
class AtenCall:
    """One call of an aten overload with concrete torch arguments."""

    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    origin: str = ""  # where the sample came from, e.g. "opinfo:add float32 #3" or "handwritten"
    # A recorded call's fingerprint, taken while recording (see `_Lineage`); "" for the others.
    fingerprint: str = ""

    def key(self) -> str:
        """A fingerprint of the call: op, literal arguments, tensor dtypes and shapes, and tensor
        contents — or, for a recorded call, the fingerprint its recording took, in which a
        tensor torch computed on the way stands for the computation, not for its bits."""
        if self.fingerprint:
            return self.fingerprint
        digest = hashlib.sha1(self.op.encode())
        _feed(digest, self.args)
        _feed(digest, self.kwargs)
        return digest.hexdigest()

    def describe(self) -> str:
        parts = [_short(a) for a in self.args] + [
            f"{k}={_short(v)}" for k, v in self.kwargs.items()
        ]
        return f"{self.op}({', '.join(parts)})"


def _feed(digest: Any, value: Any, tensor_key: Callable[[Any], str] | None = None) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        # the layout too: the same values transposed, sliced or channels-last are another sample
        digest.update(f"L{tuple(value.stride())}+{value.storage_offset()}".encode())
        tensor = value.detach().cpu().contiguous()
        digest.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        if tensor_key is not None:
            digest.update(tensor_key(value).encode())
        elif tensor.numel() and tensor.dtype != torch.bfloat16:
            digest.update(tensor.numpy().tobytes())
        elif tensor.numel():
            digest.update(tensor.view(torch.int16).numpy().tobytes())
    elif isinstance(value, list | tuple):
        digest.update(b"[")
        for item in value:
            _feed(digest, item, tensor_key)
        digest.update(b"]")
    elif isinstance(value, dict):
        for name, item in value.items():
            digest.update(name.encode())
            _feed(digest, item, tensor_key)
    else:
        digest.update(f"{type(value).__name__}:{value!r}".encode())


def _short(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return repr(value)


def overload_name(func: Any) -> str:
    """'aten.add.Tensor' for torch.ops.aten.add.Tensor."""
    return f"{func.namespace}.{func._opname}.{func._overloadname}"


def clone_arguments(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return _clone_with_layout(value.detach())
    if isinstance(value, list):
        return [clone_arguments(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone_arguments(v) for v in value)
    if isinstance(value, dict):
        return {k: clone_arguments(v) for k, v in value.items()}
    return value


def _clone_with_layout(tensor: Any) -> Any:
    """A copy with the tensor's own strides and storage offset (`clone` would make an expanded
    or sliced tensor contiguous): its storage cloned and viewed again the same way."""
    import torch

    if tensor.layout != torch.strided or tensor.is_contiguous():
        return tensor.clone()
    copy = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    copy.set_(
        tensor.untyped_storage().clone(),
        tensor.storage_offset(),
        tensor.shape,
        tensor.stride(),
    )
    return copy


# Ops returning uninitialized memory.
_UNINITIALIZED = frozenset(
    {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
)


def _initialized(name: str, result: Any) -> Any:
    """`result`, zero-filled when `name` returns uninitialized memory: a later call reading it
    (e.g. `copy` into it) then records the same arguments in every run, not whatever the memory
    held. The contents of such a tensor are unspecified, so zeros are as valid as any."""
    if name.split(".")[1] in _UNINITIALIZED:
        result.zero_()
    return result


class _Lineage:
    """Fingerprints of the tensors a recording meets that do not depend on the CPU. A tensor an
    op returned stands for that op and its arguments' fingerprints; any other (the sample's own
    inputs) for its contents. Contents computed by torch do depend on the CPU (a BLAS product's
    summation order, a vectorized exp): two recorded calls equal bit for bit on one CPU can
    differ by an ulp on another, and deduplicating them by contents counted a sample there and
    not here. By lineage, two calls are duplicates where they compute the same thing from the
    same inputs, on every CPU."""

    def __init__(self) -> None:
        self.keys: dict[int, str] = {}
        self.alive: list[Any] = []  # every tensor keyed, so that no id is reused meanwhile

    def of(self, tensor: Any) -> str:
        key = self.keys.get(id(tensor))
        if key is None:
            digest = hashlib.sha1(b"contents")
            _feed(digest, tensor)
            key = self._remember(tensor, digest.hexdigest())
        return key

    def call(self, name: str, args: Any, kwargs: Any) -> str:
        digest = hashlib.sha1(name.encode())
        _feed(digest, args, self.of)
        _feed(digest, kwargs, self.of)
        return digest.hexdigest()

    def produced(self, key: str, result: Any) -> Any:
        """Key the tensors `result` holds as the outputs of the call keyed `key`."""
        # torch lazily, here: importing this module must not need it
        import torch

        outputs = result if isinstance(result, list | tuple) else [result]
        for index, output in enumerate(outputs):
            if isinstance(output, torch.Tensor):
                self._remember(output, f"{key}:{index}")
        return result

    def _remember(self, tensor: Any, key: str) -> str:
        self.keys[id(tensor)] = key
        self.alive.append(tensor)
        return key


def record_core_calls(
    fn: Callable[[], Any], *, origin: str = "", decompose: bool = True
) -> list[AtenCall]:
    """Run fn() and return the Core ATen calls it dispatched (arguments copied before the call)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    table = _core_decompositions() if decompose else {}
    calls: list[AtenCall] = []
    lineage = _Lineage()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
        ) -> Any:
            kwargs = kwargs or {}
            name = overload_name(func)
            key = lineage.call(name, args, kwargs)
            if name in RECORDED_OPS:
                copied = (clone_arguments(args), clone_arguments(kwargs))
                calls.append(AtenCall(name, *copied, origin, key))
                return lineage.produced(key, _initialized(name, func(*args, **kwargs)))
            decomposition = table.get(func)
            if decomposition is not None:
                mark = len(calls)
                try:
                    with self:
                        return lineage.produced(key, decomposition(*args, **kwargs))
                except Exception:
                    del calls[mark:]  # the decomposition does not run eagerly: use the kernel
            return lineage.produced(key, _initialized(name, func(*args, **kwargs)))

    with torch.no_grad(), Recorder():
        fn()
    return calls


_TABLE: dict[Any, Any] | None = None


def _core_decompositions() -> dict[Any, Any]:
    global _TABLE
    if _TABLE is None:
        from torch._decomp import core_aten_decompositions

        _TABLE = dict(core_aten_decompositions())
    return _TABLE
