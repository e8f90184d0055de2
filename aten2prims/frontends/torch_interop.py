"""Moving values between torch and NumPy (torch imported lazily: only the testing harness, the fx
importer and the tests call this). bfloat16 crosses as its bit pattern, since torch's .numpy()
refuses it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.dtypes import DType, is_bfloat16
from ..ir.values import Device, Layout, MemoryFormat, Value


def torch_dtype(dtype: DType) -> Any:
    import torch

    return getattr(torch, dtype.torch_name)


def from_torch_dtype(dtype: Any) -> DType:
    return DType.from_torch_name(str(dtype))


def to_numpy(tensor: Any) -> np.ndarray:
    """A torch tensor as a NumPy array of the same dtype and shape (a copy, contiguous)."""
    import torch

    tensor = tensor.detach().cpu()
    if tensor.is_conj():
        tensor = tensor.resolve_conj()
    if tensor.is_neg():
        tensor = tensor.resolve_neg()
    if tensor.dtype == torch.bfloat16:
        return tensor.contiguous().view(torch.int16).numpy().view(DType.bfloat16.numpy).copy()
    return tensor.contiguous().numpy().copy()


def to_torch(array: Any) -> Any:
    """A NumPy array (or Python scalar) as a torch tensor of the same dtype (a copy)."""
    import torch

    if not isinstance(array, np.ndarray):
        return array
    # np.array(order="C") copies and keeps 0-dim arrays 0-dim (np.ascontiguousarray would make them 1-dim).
    contiguous = np.array(array, order="C", copy=True)
    if is_bfloat16(array.dtype):
        return torch.from_numpy(contiguous.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(contiguous)


def to_python(value: Any) -> Any:
    """torch scalars (SymInt, 0-dim results of .item()) as plain Python scalars."""
    if isinstance(value, bool | int | float | complex):
        return value
    return value.item() if hasattr(value, "item") else value


def to_torch_operand(operand: Any, value_of: Callable[[Value], Any]) -> Any:
    """An IR operand as a torch op takes it: values through `value_of`, tuples as lists, dtypes,
    devices, layouts and memory formats as torch's objects, other literals as they are."""
    import torch

    kind = type(operand)
    if kind is Value:
        return value_of(operand)
    if kind is tuple:
        return [to_torch_operand(item, value_of) for item in operand]
    if kind is DType:
        return torch_dtype(operand)
    if kind is Device:
        return torch.device(operand.name)
    if kind is Layout or kind is MemoryFormat:
        return getattr(torch, operand.value)
    return operand


def torch_overload(op: str) -> Any:
    """The torch OpOverload of an op name ("aten.add.Tensor"; a missing overload is "default")."""
    import torch

    namespace, name, *overload = op.split(".")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, overload[0] if overload else "default")
