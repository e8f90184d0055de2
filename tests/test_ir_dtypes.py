"""The twelve dtypes against torch: names, NumPy mapping, torch.export codes, categories."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from torch._export.serde.schema import ScalarType
from torch._prims_common import (
    corresponding_real_dtype,
    dtype_to_type,
    is_boolean_dtype,
    is_integer_dtype,
    is_low_precision_dtype,
    type_to_dtype,
)

from aten2prims.frontends.torch_interop import to_numpy, torch_dtype
from aten2prims.ir import dtypes
from aten2prims.ir.dtypes import ALL_DTYPES, Category, DType

SHORT_NAMES = {
    "bool": "b8",
    "uint8": "u8",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
}
EXPORT_NAMES = {
    "bool": "BOOL",
    "uint8": "BYTE",
    "int8": "CHAR",
    "int16": "SHORT",
    "int32": "INT",
    "int64": "LONG",
    "float16": "HALF",
    "bfloat16": "BFLOAT16",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "complex64": "COMPLEXFLOAT",
    "complex128": "COMPLEXDOUBLE",
}


def test_the_twelve_dtypes_in_order() -> None:
    assert [d.torch_name for d in DType] == list(SHORT_NAMES)
    assert ALL_DTYPES == tuple(DType)


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_names_and_aliases(dtype: DType) -> None:
    assert dtype.short == SHORT_NAMES[dtype.torch_name] == str(dtype)
    assert DType.from_short(dtype.short) is dtype
    assert getattr(dtypes, dtype.short) is dtype  # `from aten2prims.ir.dtypes import f32`
    assert repr(dtype) == f"DType.{dtype.name}"
    assert DType.from_torch_name(str(torch_dtype(dtype))) is dtype  # 'torch.float32'
    assert DType.from_torch_name(dtype.torch_name) is dtype


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_numpy_mapping(dtype: DType) -> None:
    expected = (
        ml_dtypes.bfloat16
        if dtype is DType.bfloat16
        else getattr(np, dtype.torch_name if dtype.torch_name != "bool" else "bool_")
    )
    assert dtype.numpy == np.dtype(expected)
    assert to_numpy(torch.zeros(2, dtype=torch_dtype(dtype))).dtype == dtype.numpy
    assert DType.from_numpy(dtype.numpy) is dtype
    assert DType.from_numpy(dtype.numpy.type) is dtype  # scalar types are accepted too
    assert dtype.itemsize == torch_dtype(dtype).itemsize


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_torch_export_scalar_type_codes(dtype: DType) -> None:
    code = ScalarType[EXPORT_NAMES[dtype.torch_name]]
    assert dtype.pt2_code == code.value
    assert DType.from_pt2(code.value) is dtype


def test_unsupported_export_codes_and_numpy_dtypes_are_rejected() -> None:
    supported = {d.pt2_code for d in DType}
    for code in ScalarType:
        if code.value not in supported:
            with pytest.raises(ValueError, match=f"ScalarType {code.value} is not supported"):
                DType.from_pt2(code.value)
    for numpy_dtype in (
        np.uint16,
        np.uint32,
        np.uint64,
        np.float128 if hasattr(np, "float128") else np.str_,
        np.dtype(">f4"),
        "U3",
        ml_dtypes.float8_e4m3fn,  # ml_dtypes' other types: not bfloat16
    ):
        with pytest.raises(ValueError, match="has no torch counterpart"):
            DType.from_numpy(numpy_dtype)
    with pytest.raises(ValueError, match="unknown dtype 'f8'"):
        DType.from_short("f8")


TORCH_DTYPE_NAMES = sorted(
    name for name in dir(torch) if isinstance(getattr(torch, name), torch.dtype)
)


@pytest.mark.parametrize("name", TORCH_DTYPE_NAMES)
def test_from_torch_name_for_every_torch_dtype(name: str) -> None:
    """Every torch dtype name (aliases such as 'float', 'long', 'cdouble' included) maps to its
    dtype, or is rejected when the dtype is not one of the twelve (complex32, float8, uint16, …)."""
    torch_type = getattr(torch, name)
    ours = {torch_dtype(d): d for d in DType}
    for spelling in (name, f"torch.{name}", str(torch_type)):
        if torch_type in ours:
            assert DType.from_torch_name(spelling) is ours[torch_type]
        else:
            with pytest.raises(ValueError, match="is not supported"):
                DType.from_torch_name(spelling)


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_category_predicates_match_torch(dtype: DType) -> None:
    t = torch_dtype(dtype)
    tensor = torch.zeros(1, dtype=t)
    assert dtype.is_floating == torch.is_floating_point(tensor) == t.is_floating_point
    assert dtype.is_complex == torch.is_complex(tensor) == t.is_complex
    assert dtype.is_integer == is_integer_dtype(t)
    assert dtype.is_bool == is_boolean_dtype(t)
    assert dtype.is_integral == (is_integer_dtype(t) or is_boolean_dtype(t))
    assert dtype.is_signed == t.is_signed
    assert dtype.is_low_precision == is_low_precision_dtype(t)
    assert dtype.python_type is dtype_to_type(t)
    expected_category = {
        bool: Category.BOOL,
        int: Category.INTEGER,
        float: Category.FLOATING,
        complex: Category.COMPLEX,
    }
    assert dtype.category is expected_category[dtype_to_type(t)]


def test_categories_are_ordered() -> None:
    assert Category.BOOL < Category.INTEGER < Category.FLOATING < Category.COMPLEX


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_real_and_complex_counterparts_match_torch(dtype: DType) -> None:
    t = torch_dtype(dtype)
    if dtype.is_complex:
        assert torch_dtype(dtype.real) == corresponding_real_dtype(t)
    else:
        assert dtype.real is dtype
    if dtype.is_floating or dtype.is_complex:
        # The complex counterpart is what promotion with a complex number gives (float16 would
        # give complex32, which is out of scope).
        promoted = torch.result_type(torch.zeros(1, dtype=t), 1j)
        if promoted == torch.complex32:
            with pytest.raises(ValueError, match="no complex counterpart"):
                dtype.to_complex  # noqa: B018 - the access itself raises
        else:
            assert torch_dtype(dtype.to_complex) == promoted
    else:
        with pytest.raises(ValueError, match="no complex counterpart"):
            dtype.to_complex  # noqa: B018 - the access itself raises


@pytest.mark.parametrize("kind", [bool, int, float, complex])
def test_from_python_type_matches_torch(kind: type) -> None:
    assert torch_dtype(DType.from_python_type(kind)) == type_to_dtype(kind)
    assert torch_dtype(DType.from_python_type(kind)) == torch.tensor(kind(1)).dtype


def test_ml_dtypes_is_imported_only_for_bfloat16() -> None:
    """Importing ml_dtypes takes about half a second from its 0.7 on: a process that loads,
    lowers and runs float32 graphs never imports it; the first bfloat16 value does."""
    root = Path(__file__).resolve().parents[1]
    code = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        import aten2prims, aten2prims.frontends, aten2prims.passes, decompositions
        from aten2prims.ir.dtypes import DType

        graph = aten2prims.lower(aten2prims.load({str(root / "examples" / "cnn.pt2")!r}))
        x = np.load({str(root / "examples" / "cnn.inputs.npz")!r})["x"]
        aten2prims.execute(graph, [x])
        assert "ml_dtypes" not in sys.modules, "loaded for a float32 graph"
        # a name NumPy knows only once ml_dtypes is loaded
        assert DType.from_numpy("bfloat16") is DType.bfloat16
        assert "ml_dtypes" not in sys.modules, "loaded to look up a dtype"

        text = (
            "graph g(%x: bf16[2, 3]) -> (bf16[2, 3]):\\n"
            "  %y: bf16[2, 3] = aten.add.Tensor(%x, %x)\\n  return (%y)\\n"
        )
        bf16 = aten2prims.lower(aten2prims.parse(text))
        import ml_dtypes
        (y,) = aten2prims.execute(bf16, [np.arange(6, dtype=ml_dtypes.bfloat16).reshape(2, 3)])
        assert y.dtype == ml_dtypes.bfloat16 and y.tolist() == [[0, 2, 4], [6, 8, 10]], y
        assert DType.from_numpy("bfloat16") is DType.bfloat16
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
