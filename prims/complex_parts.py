"""The extension prim `complex(real, imag)`: a complex tensor from its real and imaginary parts.

torch's prims can take a complex number apart (`real`, `imag`) but cannot build one from two
real tensors: `a + 1j * b` is wrong where a part is infinite (inf * 1j is nan + inf j) and
`view_of_dtype` would need the parts interleaved in memory. `torch.complex`, `torch.polar` and
`torch.view_as_complex` all lower to this prim (docs/prims.md, "Extension prims").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aten2prims.errors import DTypeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta

from .common import F32_F64, check_dtype, check_tensor, elementwise_operands, elementwise_result
from .registry import register


def _complex_meta(real: Any, imag: Any) -> TensorMeta:
    check_tensor(real, "real")
    check_tensor(imag, "imag")
    shape, dtype = elementwise_operands((real, imag))
    if dtype is DType.float16:
        # torch's answer would be complex32, which has no NumPy counterpart (docs/ir.md).
        raise DTypeError("float16 parts make a complex32 tensor, which aten2prims does not support")
    check_dtype(dtype, F32_F64, "real")
    return elementwise_result(shape, dtype.to_complex, (real, imag))


def _complex_kernel(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    # Parts written one by one: `real + 1j * imag` would turn an infinite part into NaNs.
    real, imag = np.broadcast_arrays(real, imag)
    result = np.empty(real.shape, DType.from_numpy(real.dtype).to_complex.numpy)
    result.real = real
    result.imag = imag
    return result


register(
    "complex(Tensor real, Tensor imag) -> Tensor",
    meta=_complex_meta,
    kernel=_complex_kernel,
    extension=True,
    doc="elementwise real + imag·i, each part copied as it is (infinities and NaN included): "
    "float32 or float64 parts of one dtype and shape (a 0-dim part joins any shape) give "
    "complex64 or complex128",
)
