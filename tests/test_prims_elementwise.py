"""The elementwise prims, `convert_element_type` and `broadcast_in_dim` against torch 2.13's
`torch.ops.prims`.

Every case runs through the real path: a one-node graph built with `prims.Builder`, executed by
`aten2prims.executor.execute(..., check=True)`, compared with `compare()` (dtype and shape exact,
values within torch's tolerance; a float64 reference computed by torch allows the "closer than"
rule for functions whose last bits legitimately differ between libraries). Casts and the prims
that are exactly rounded are also compared bit for bit.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import prims
from aten2prims.errors import DTypeError, ExecutionError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy, to_torch, torch_dtype
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta
from aten2prims.testing.compare import compare, tolerance
from prims import Builder
from prims.elementwise import ELEMENTWISE, ResultKind

TP = torch.ops.prims
ALL_DTYPES = list(DType)
INT_DTYPES = [d for d in DType if d.is_integer]
UNARY = sorted(n for n, s in ELEMENTWISE.items() if s.arity == 1)
BINARY = sorted(n for n, s in ELEMENTWISE.items() if s.arity == 2)

# Prims whose float results are exactly rounded (or exact) in both libraries: compared bit for bit.
# For the others (transcendental and special functions, complex arithmetic) the last bits may
# legitimately differ, and a float64 reference computed by torch is passed to `compare`.
EXACT = frozenset(
    {
        "abs",
        "neg",
        "sign",
        "signbit",
        "isfinite",
        "ceil",
        "floor",
        "round",
        "trunc",
        "conj",
        "conj_physical",
        "real",
        "imag",
        "add",
        "sub",
        "mul",
        "div",
        "reciprocal",
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "fmod",
        "remainder",
        "nextafter",
        "eq",
        "ne",
        "ge",
        "gt",
        "le",
        "lt",
        "where",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_not",
    }
)
# ... except for complex operands, where these use different (equally valid) algorithms.
COMPLEX_INEXACT = frozenset({"abs", "mul", "div", "reciprocal"})
# torch's own sign of a zero result differs between its vectorized and its scalar loop here
# (maximum(0.0, -0.0) is -0.0 in one and 0.0 in the other; complex neg computes 0 - z in one
# and -z in the other), so only values are compared, as compare() does.
ZERO_SIGN_UNSPECIFIED = frozenset({"maximum", "minimum", "fmax", "fmin"})
COMPLEX_ZERO_SIGN_UNSPECIFIED = frozenset({"neg"})


# -- inputs ------------------------------------------------------------------------------------


def rng_for(*key: Any) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def finfo(dtype: DType) -> Any:
    return ml_dtypes.finfo(dtype.numpy) if dtype is DType.bfloat16 else np.finfo(dtype.numpy)


def special_floats(dtype: DType) -> list[float]:
    info = finfo(dtype.real)
    return [
        math.nan,
        math.inf,
        -math.inf,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        3.0,
        -3.0,
        0.1,
        1e-3,
        float(info.tiny),
        -float(info.tiny),
        float(info.smallest_subnormal),
        float(info.max),
        -float(info.max),
        100.0,
        -100.0,
        1e30,
        -1e30,
    ]


def float_values(dtype: DType, n: int, rng: np.random.Generator) -> np.ndarray:
    """A mixture: ordinary values, magnitudes from 1e-45 to 1e45 (overflowing and underflowing the
    narrow types), halves (rounding ties) and special values."""
    sources = np.stack(
        [
            rng.uniform(-4, 4, n),
            rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-45, 45, n),
            rng.integers(-12, 13, n) / 2,
            rng.choice(special_floats(dtype), n),
        ]
    )
    pick = rng.choice(4, n, p=[0.5, 0.15, 0.15, 0.2])
    return sources[pick, np.arange(n)]


def int_values(dtype: DType, n: int, rng: np.random.Generator) -> np.ndarray:
    info = np.iinfo(dtype.numpy)
    limits = [info.min, info.max, info.min + 1, info.max - 1, 0, 1, 2] + (
        [-1, -2] if info.min < 0 else []
    )
    sources = np.stack(
        [
            rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64),
            rng.integers(max(info.min, -9), 10, n),
            rng.choice(np.array(limits, dtype=np.int64), n),
        ]
    )
    pick = rng.choice(3, n, p=[0.4, 0.4, 0.2])
    return sources[pick, np.arange(n)].astype(dtype.numpy)


def values(dtype: DType, n: int, rng: np.random.Generator) -> np.ndarray:
    if dtype is DType.bool:
        return rng.random(n) < 0.5
    if dtype.is_integer:
        return int_values(dtype, n, rng)
    if dtype.is_complex:
        return _complex(float_values(dtype, n, rng), float_values(dtype, n, rng), dtype)
    with np.errstate(over="ignore"):
        return float_values(dtype, n, rng).astype(dtype.numpy)


def _complex(real: np.ndarray, imag: np.ndarray, dtype: DType) -> np.ndarray:
    out = np.empty(real.shape, dtype.numpy)
    with np.errstate(over="ignore"):
        out.real = real.astype(dtype.real.numpy)
        out.imag = imag.astype(dtype.real.numpy)
    return out


def array(
    dtype: DType, shape: tuple[int, ...], rng: np.random.Generator, layout: str = "contiguous"
) -> np.ndarray:
    """An array of `shape`; `layout` "transposed" or "strided" gives a non-contiguous NumPy view."""
    if layout == "transposed":
        return array(dtype, shape[::-1], rng).T
    if layout == "strided" and shape:
        base = array(dtype, tuple(2 * s + 1 for s in shape), rng)
        return base[tuple(slice(1, None, 2) for _ in shape)]
    return values(dtype, math.prod(shape), rng).reshape(shape)


# Operand shapes of each test, with the layout of the arrays.
CASES: list[tuple[str, tuple[int, ...], str]] = [
    ("scalar", (), "contiguous"),
    ("empty", (0, 4), "contiguous"),
    ("odd", (3, 1, 5), "contiguous"),
    ("vector", (97,), "contiguous"),
    ("transposed", (5, 6), "transposed"),
    ("strided", (4, 3), "strided"),
]


def torch_defects(name: str, dtype: DType, operands: Sequence[np.ndarray]) -> np.ndarray | None:
    """Elements where torch's CPU kernel is wrong (each class has its own test below)."""
    if name in ("bessel_j0", "bessel_j1") and dtype is DType.float64:
        (x,) = operands
        return (np.abs(x) > 5) & (np.abs(x) < 6)  # test_bessel_j_just_above_5
    if name in ("igamma", "igammac") and dtype in (DType.float32, DType.bfloat16):
        a, x = (o.astype(np.float64) for o in operands)
        return (a >= 1e36) & (x > 1) & (x < a)  # test_incomplete_gamma_of_huge_a
    if name in ("fmod", "remainder") and not dtype.is_integral:
        a, b = (o.astype(np.float64) for o in operands)
        limit = float(finfo(DType.float32 if dtype.is_low_precision else dtype).max)
        with np.errstate(all="ignore"):
            return np.abs(a / b) > limit  # test_fmod_with_overflowing_quotient
    return None


def tailor(
    name: str, dtype: DType, operands: list[np.ndarray], rng: np.random.Generator
) -> list[np.ndarray]:
    """Operands in the range where torch's result is defined and right (the special cases and
    torch's defects have their own tests)."""
    defects = torch_defects(name, dtype, operands)
    if defects is not None and defects.any():
        one = np.ones((), dtypes_of(operands)[0])
        operands = [
            np.where(defects if o.shape == defects.shape else defects.any(), one, o)
            for o in operands
        ]
    if len(operands) < 2 or not dtype.is_integer:
        return operands
    a, b = operands
    bits = dtype.itemsize * 8
    if name in ("shift_left", "shift_right_arithmetic"):
        low = -3 if dtype.is_signed else 0
        b = rng.integers(low, bits + 4, b.shape).astype(dtype.numpy)
    elif name == "pow":
        low = -3 if dtype.is_signed else 0
        b = rng.integers(low, 13, b.shape).astype(dtype.numpy)
    elif name in ("div", "remainder", "fmod"):
        b = np.where(b == 0, np.asarray(1, dtype.numpy), b)
        if name == "div" and dtype in (DType.int32, DType.int64):
            # torch's CPU kernel dies with SIGFPE on MIN / -1 (test_int_min_divided_by_minus_one).
            b = np.where(
                (a == np.iinfo(dtype.numpy).min) & (b == -1), np.asarray(1, dtype.numpy), b
            )
    return [a, b]


def dtypes_of(operands: Sequence[Any]) -> list[np.dtype]:
    return [o.dtype for o in operands if isinstance(o, np.ndarray)]


def specials_product(dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values (for binary float prims)."""
    specials = np.array(special_floats(dtype))
    a, b = np.meshgrid(specials, specials)
    if dtype.is_complex:
        return _complex(a.ravel(), b.ravel()[::-1], dtype), _complex(b.ravel(), a.ravel(), dtype)
    with np.errstate(over="ignore"):
        return a.ravel().astype(dtype.numpy), b.ravel().astype(dtype.numpy)


# -- running -------------------------------------------------------------------------------------


def run_ours(name: str, operands: Sequence[Any], **attributes: Any) -> Any:
    """Build a one-node graph (arrays become inputs, Python numbers stay literals) and execute it."""
    with Builder(name) as b:
        args = [
            b.add_input(f"x{i}", TensorMeta(a.shape, DType.from_numpy(a.dtype)))
            if isinstance(a, np.ndarray)
            else a
            for i, a in enumerate(operands)
        ]
        graph = b.finish([getattr(prims, name)(*args, **attributes)])
    inputs = {f"x{i}": a for i, a in enumerate(operands) if isinstance(a, np.ndarray)}
    copies = {k: v.copy() for k, v in inputs.items()}
    (result,) = execute(graph, inputs, check=True)
    for key, original in copies.items():  # kernels never write into their operands
        assert np.array_equal(inputs[key], original, equal_nan=True), (
            f"{name} modified its operand {key}"
        )
    return result


def run_torch(name: str, operands: Sequence[Any], *attributes: Any) -> np.ndarray:
    return to_numpy(getattr(TP, name)(*(to_torch(a) for a in operands), *attributes))


def reference(name: str, operands: Sequence[Any]) -> np.ndarray | None:
    """torch's result on the operands widened to float64/complex128 (None for integer operands)."""
    arrays = [a for a in operands if isinstance(a, np.ndarray) and a.dtype != np.bool_]
    if not arrays:
        return None
    dtype = DType.from_numpy(arrays[0].dtype)
    if not (dtype.is_floating or dtype.is_complex) or name in ("nextafter",):
        return None
    wide = DType.complex128 if dtype.is_complex else DType.float64
    widened = [
        a.astype(wide.numpy) if isinstance(a, np.ndarray) and a.dtype != np.bool_ else a
        for a in operands
    ]
    return run_torch_with_numbers(name, widened)


def bitwise_equal(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Equal bit patterns (so -0.0 differs from 0.0), any NaN equal to any NaN."""
    if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        return False
    if ours.dtype.kind == "c":
        return bitwise_equal(ours.real.copy(), theirs.real.copy()) and bitwise_equal(
            ours.imag.copy(), theirs.imag.copy()
        )
    if ours.dtype.kind not in "fV" and ours.dtype != ml_dtypes.bfloat16:
        return bool(np.array_equal(ours, theirs))
    unsigned = np.dtype(f"u{ours.dtype.itemsize}")
    wide_ours, wide_theirs = ours.astype(np.float64), theirs.astype(np.float64)
    both_nan = np.isnan(wide_ours) & np.isnan(wide_theirs)
    same = np.ascontiguousarray(ours).view(unsigned) == np.ascontiguousarray(theirs).view(unsigned)
    return bool(np.all(same | both_nan))


NUMBER_DTYPES = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
}


def number_as_tensor(number: Any, dtype: DType) -> np.ndarray:
    """What a Python number becomes as a 0-dim tensor of `dtype` (torch's cast: integers wrap)."""
    return to_numpy(torch.tensor(number, dtype=NUMBER_DTYPES[type(number)]).to(torch_dtype(dtype)))


def run_torch_with_numbers(name: str, operands: Sequence[Any]) -> np.ndarray:
    """torch's prim on the operands. A Python number means what the prim's meta says it means:
    a scalar operand of the tensors' dtype. Where torch's eager implementation cannot run the
    number as such, it joins as a 0-dim tensor of that dtype instead:
    - the aten function behind the prim has no Scalar overload (atan2, comparisons, ...): TypeError;
    - the Scalar overload rejects a number outside the dtype's range (maximum, minimum, pow), while
      add/sub/mul/div wrap it as a cast does;
    - prims.div's eager implementation truncates when its dividend is a Python int, even with a
      floating or complex divisor (an artifact of choosing the rounding by Python type)."""
    dtype = DType.from_numpy(
        next(a for a in operands[1 if name == "where" else 0 :] if isinstance(a, np.ndarray)).dtype
    )
    as_tensors = [number_as_tensor(a, dtype) if type(a) in NUMBER_DTYPES else a for a in operands]
    if name == "div" and type(operands[0]) in (bool, int) and not dtype.is_integral:
        return run_torch(name, as_tensors)
    try:
        return run_torch(name, operands)
    except TypeError:
        return run_torch(name, as_tensors)
    except RuntimeError as error:
        if "cannot be converted to type" not in str(error):
            raise
        return run_torch(name, as_tensors)


def check_against_torch(name: str, operands: Sequence[Any], context: str) -> None:
    ours = run_ours(name, operands)
    theirs = run_torch_with_numbers(name, operands)
    data = operands[1:] if name == "where" else operands
    complex_operands = any(isinstance(a, np.ndarray) and a.dtype.kind == "c" for a in data)
    exact = name in EXACT and not (complex_operands and name in COMPLEX_INEXACT)
    zero_sign_unspecified = name in ZERO_SIGN_UNSPECIFIED or (
        complex_operands and name in COMPLEX_ZERO_SIGN_UNSPECIFIED
    )
    if (
        exact
        and not zero_sign_unspecified
        and theirs.dtype != np.bool_
        and theirs.dtype.kind in "fcV"
    ):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, compare(
            ours, theirs
        ).message
        assert bitwise_equal(ours, theirs), (
            f"{name} {context}: not bit-identical: {_first_difference(ours, theirs, operands)}"
        )
        return
    result = compare(
        ours,
        theirs,
        reference=None if exact else reference(name, operands),
        signed_zeros=not zero_sign_unspecified,
        what=f"{name} {context}",
    )
    assert result, result.message + "\n" + _first_difference(ours, theirs, operands)


def _first_difference(ours: np.ndarray, theirs: np.ndarray, operands: Sequence[Any]) -> str:
    """The inputs of the first few elements that differ (beyond tolerance first, then in bits)."""
    if ours.shape != theirs.shape or ours.dtype != theirs.dtype:
        return ""
    parts = (
        [(ours.real, theirs.real), (ours.imag, theirs.imag)]
        if ours.dtype.kind == "c"
        else [(ours, theirs)]
    )
    far = np.zeros(ours.shape, bool)
    bits = np.zeros(ours.shape, bool)
    rtol, atol = tolerance(DType.from_numpy(ours.dtype))
    for x, y in parts:
        x, y = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            nan = np.isnan(x) & np.isnan(y)
            far |= ~nan & ~(x == y) & ~(np.abs(x - y) <= atol + rtol * np.abs(y))
            bits |= ~nan & ((x != y) | (np.signbit(x) != np.signbit(y)))
    indices = np.argwhere(far if far.any() else bits)[:5]
    lines = []
    for index in map(tuple, indices):
        shown = [a[index] if isinstance(a, np.ndarray) and a.ndim else a for a in operands]
        lines.append(
            f"  at {index}: inputs {shown!r}: ours {ours[index]!r}, torch {theirs[index]!r}"
        )
    return "\n".join(lines)


def domain(name: str) -> list[DType]:
    return [d for d in DType if d in ELEMENTWISE[name].domain]


def outside(name: str) -> list[DType]:
    return [d for d in DType if d not in ELEMENTWISE[name].domain]


def pairs(names: Sequence[str], which: Callable[[str], list[DType]]) -> list[Any]:
    return [pytest.param(n, d, id=f"{n}-{d.short}") for n in names for d in which(n)]


# -- values against torch --------------------------------------------------------------------


@pytest.mark.parametrize(("name", "dtype"), pairs(UNARY, domain))
def test_unary(name: str, dtype: DType, kernels: str) -> None:
    """Every unary prim against torch, with MKL's vector math and with NumPy's kernels."""
    rng = rng_for(name, dtype)
    for label, shape, layout in CASES:
        x = array(dtype, shape, rng, layout)
        if label == "vector" and not dtype.is_integral:
            x = np.concatenate([specials_product(dtype)[0], x])
        check_against_torch(name, tailor(name, dtype, [x], rng), f"{dtype.short} {label}")


@pytest.mark.parametrize(("name", "dtype"), pairs(BINARY, domain))
def test_binary(name: str, dtype: DType) -> None:
    rng = rng_for(name, dtype)
    for label, shape, layout in CASES:
        operands = tailor(
            name, dtype, [array(dtype, shape, rng, layout), array(dtype, shape, rng, layout)], rng
        )
        check_against_torch(name, operands, f"{dtype.short} {label}")
    if not dtype.is_integral:
        check_against_torch(
            name,
            tailor(name, dtype, list(specials_product(dtype)), rng),
            f"{dtype.short} special values",
        )


@pytest.mark.parametrize(("name", "dtype"), pairs(BINARY, domain))
def test_binary_zero_dim_with_n_dim(name: str, dtype: DType) -> None:
    """torch's elementwise prim meta lets CPU scalar tensors join tensors of any shape."""
    rng = rng_for(name, dtype, "0-dim")
    for shape in [(3, 4), (0,), ()]:
        a, b = tailor(name, dtype, [array(dtype, (), rng), array(dtype, shape, rng)], rng)
        check_against_torch(name, [a, b], f"{dtype.short} 0-dim with {shape}")
        b, a = tailor(name, dtype, [array(dtype, shape, rng), array(dtype, (), rng)], rng)
        check_against_torch(name, [b, a], f"{dtype.short} {shape} with 0-dim")


def python_numbers(name: str, dtype: DType) -> list[bool | int | float | complex]:
    """Python numbers whose kind is not above the dtype's category."""
    numbers: list[Any] = [True, False]
    if dtype.is_bool:
        return numbers
    numbers += (
        [3, -2, 1, 300, -129]
        if name not in ("shift_left", "shift_right_arithmetic")
        else [1, 3, -1, 70]
    )
    if dtype.is_integer:
        if name in ("div", "remainder", "fmod"):
            numbers = [n for n in numbers if n not in (0, False)]
        return numbers
    numbers += [2.5, -0.0, 0.1, 1e-4, 70000.0, -1e39, math.inf, math.nan]
    if dtype.is_complex:
        numbers += [1.5 - 2j, complex(math.inf, 0.0), -0.5j]
    return numbers


@pytest.mark.parametrize(("name", "dtype"), pairs(BINARY, domain))
def test_binary_python_number(name: str, dtype: DType) -> None:
    """`prims.add(x, 2)`: a number joins a tensor of its own or a higher category, either side."""
    rng = rng_for(name, dtype, "number")
    tensor = tailor(name, dtype, [array(dtype, (2, 3), rng)] * 2, rng)[-1]  # zero-free for division
    for number in python_numbers(name, dtype):
        for operands in ([tensor, number], [number, tensor]):
            context = " with ".join(
                f"{o!r}" if type(o) is not np.ndarray else dtype.short for o in operands
            )
            if name == "sub" and type(number) is bool:
                # torch.sub refuses bool operands; the prim's meta must too.
                with pytest.raises(RuntimeError, match="Subtraction.*bool"):
                    run_torch(name, operands)
                with pytest.raises(DTypeError, match=r"prims\.sub: .*bool"):
                    run_ours(name, operands)
            elif name == "pow" and dtype.is_integral and operands[1] is number and number < 0:
                with pytest.raises(
                    RuntimeError, match="Integers to negative integer powers are not allowed"
                ):
                    run_torch(name, operands)
                with pytest.raises(
                    ExecutionError, match=r"prims\.pow computing %0 failed.*negative integer powers"
                ):
                    run_ours(name, operands)
            else:
                check_against_torch(name, operands, context)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_where(dtype: DType) -> None:
    rng = rng_for("where", dtype)
    for label, shape, layout in CASES:
        pred = array(DType.bool, shape, rng, layout)
        check_against_torch(
            "where",
            [pred, array(dtype, shape, rng, layout), array(dtype, shape, rng, layout)],
            label,
        )
    scalar = array(dtype, (), rng)
    full = array(dtype, (3, 4), rng)
    mask = array(DType.bool, (3, 4), rng)
    check_against_torch("where", [array(DType.bool, (), rng), full, full[::-1]], "0-dim pred")
    check_against_torch("where", [mask, scalar, full], "0-dim a")
    check_against_torch("where", [mask, full, scalar], "0-dim b")
    check_against_torch("where", [mask, scalar, scalar], "0-dim a and b")
    number = dtype.python_type(1)
    check_against_torch("where", [mask, full, number], f"number {number!r} as b")
    check_against_torch("where", [mask, number, full], f"number {number!r} as a")


# -- special semantics ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_overflow_wraps_around(dtype: DType) -> None:
    info = np.iinfo(dtype.numpy)
    a = np.array(
        [info.min, info.max, info.max, info.min, info.max, info.min, 0, info.max // 2 + 1],
        dtype.numpy,
    )
    b = np.array([info.min, info.max, 1, info.max, info.min, 2, info.min, 2], dtype.numpy)
    if dtype.is_signed:
        b[2:4] = [1, -1]
    for name in ("add", "sub", "mul"):
        check_against_torch(name, [a, b], f"{dtype.short} at the limits")
        check_against_torch(name, [a, 2], f"{dtype.short} at the limits with a number")
    for name in ("neg", "abs"):
        check_against_torch(name, [a], f"{dtype.short} at the limits")


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("name", ["div", "remainder", "fmod"])
def test_integer_division_by_zero_raises(name: str, dtype: DType) -> None:
    a = np.array([5, 1, 0], dtype.numpy)
    b = np.array([1, 0, 2], dtype.numpy)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        run_torch(name, [a, b])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        run_torch(name, [a, 0])
    for divisor in (b, 0, np.zeros((), dtype.numpy)):
        with pytest.raises(
            ExecutionError, match=rf"prims\.{name} computing %0 failed.*division by zero"
        ):
            run_ours(name, [a, divisor])


@pytest.mark.parametrize("dtype", [DType.int32, DType.int64], ids=str)
def test_int_min_divided_by_minus_one(dtype: DType) -> None:
    """torch's div kernel dies with SIGFPE here (x86 idiv traps), so it cannot be asked; we wrap
    around as its other integer overflows do, and as torch does for int8/int16 (test_binary).
    Its remainder and fmod handle the case: 0."""
    info = np.iinfo(dtype.numpy)
    a = np.array([info.min, info.min], dtype.numpy)
    b = np.array([-1, 1], dtype.numpy)
    assert run_ours("div", [a, b]).tolist() == [info.min, info.min]
    for name in ("remainder", "fmod"):
        check_against_torch(name, [a, b], f"{dtype.short} MIN by -1")
        assert run_ours(name, [a, b]).tolist() == [0, 0]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_shifts_beyond_the_bit_width(dtype: DType) -> None:
    bits = dtype.itemsize * 8
    info = np.iinfo(dtype.numpy)
    amounts = (
        list(range(bits + 3))
        + [bits * 2, int(info.max)]
        + ([-1, -bits, int(info.min)] if dtype.is_signed else [])
    )
    b = np.array(amounts, dtype.numpy)
    for base in (info.min, info.max, 1, -3 if dtype.is_signed else 3):
        a = np.full(b.shape, base, dtype.numpy)
        for name in ("shift_left", "shift_right_arithmetic"):
            check_against_torch(name, [a, b], f"{dtype.short} {base} by {amounts}")


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_pow(dtype: DType) -> None:
    bases = [0, 1, 2, 3, 7] + (
        [-1, -2, -3] if dtype.is_signed else [255 % (np.iinfo(dtype.numpy).max + 1)]
    )
    exponents = [0, 1, 2, 3, 5, 8, 31, 63, 64, 100] + ([-1, -2, -3, -64] if dtype.is_signed else [])
    a, b = np.meshgrid(np.array(bases, np.int64), np.array(exponents, np.int64))
    a, b = a.ravel().astype(dtype.numpy), b.ravel().astype(dtype.numpy)
    check_against_torch("pow", [a, b], f"{dtype.short} bases {bases} exponents {exponents}")
    for number in (0, 1, 2, 3, 7, True, False):
        check_against_torch("pow", [a, number], f"{dtype.short} number exponent {number!r}")


def test_bool_arithmetic() -> None:
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    for name in (
        "add",
        "mul",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "eq",
        "ne",
        "lt",
        "maximum",
        "fmin",
    ):
        check_against_torch(name, [a, b], "bool")
    for name in ("bitwise_not", "sign", "signbit", "isfinite"):
        check_against_torch(name, [a], "bool")


# -- meta rules against torch's ---------------------------------------------------------------------


def meta_of_ours(name: str, metas: Sequence[Any]) -> TensorMeta:
    with Builder() as b:
        args = [
            b.add_input(f"x{i}", m) if isinstance(m, TensorMeta) else m for i, m in enumerate(metas)
        ]
        return getattr(prims, name)(*args).meta


def meta_of_torch(
    name: str, metas: Sequence[Any], device: str = "meta"
) -> tuple[tuple[int, ...], torch.dtype]:
    args = [
        torch.empty(m.shape, dtype=torch_dtype(m.dtype), device=device)
        if isinstance(m, TensorMeta)
        else m
        for m in metas
    ]
    result = getattr(TP, name)(*args)
    return tuple(result.shape), result.dtype


def operand_metas(name: str, dtype: DType, shapes: Sequence[tuple[int, ...]]) -> list[TensorMeta]:
    metas = [TensorMeta(s, dtype) for s in shapes]
    if name == "where":
        metas[0] = TensorMeta(shapes[0], DType.bool)
    return metas


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_meta_matches_torch(name: str) -> None:
    arity = ELEMENTWISE[name].arity
    for dtype in domain(name):
        for shape in [(), (0, 3), (2, 1, 3)]:
            metas = operand_metas(name, dtype, [shape] * arity)
            ours = meta_of_ours(name, metas)
            shape_t, dtype_t = meta_of_torch(name, metas)
            if name == "signbit" and dtype is not DType.bool:
                # torch's meta keeps the operand dtype but its kernel returns bool; we follow the kernel.
                assert dtype_t == torch_dtype(dtype)
                eager = meta_of_torch(name, metas, device="cpu")[1]
                assert eager == torch.bool and ours.dtype is DType.bool
                continue
            assert (ours.shape, torch_dtype(ours.dtype)) == (shape_t, dtype_t), f"{name} {metas}"
        if arity > 1:
            # CPU scalar tensors join any shape (torch's meta checks this for CPU tensors only).
            for position in range(arity):
                shapes = [(2, 3)] * arity
                shapes[position] = ()
                metas = operand_metas(name, dtype, shapes)
                with FakeTensorMode():
                    shape_t, dtype_t = meta_of_torch(name, metas, device="cpu")
                ours = meta_of_ours(name, metas)
                assert ours.shape == shape_t and (
                    name == "signbit" or torch_dtype(ours.dtype) == dtype_t
                )


def _torch_rejects(name: str, metas: Sequence[TensorMeta]) -> str | None:
    """Why torch cannot have this dtype in the prim's domain (None if it can)."""
    try:
        _, meta_dtype = meta_of_torch(name, metas)
    except Exception as error:
        return f"meta rejects: {error}"
    rng = rng_for(name, "reject")
    operands = [array(m.dtype, m.shape, rng) for m in metas]
    if name in ("div", "remainder", "fmod") and metas[0].dtype.is_integral:
        operands[1] = np.ones(metas[1].shape, metas[1].dtype.numpy)
    try:
        eager = getattr(TP, name)(*(to_torch(a) for a in operands))
    except Exception as error:
        return f"eager fails: {error}"
    if eager.dtype != meta_dtype:
        return f"eager gives {eager.dtype}, meta {meta_dtype}"
    return None


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_dtypes_outside_the_domain_are_rejected(name: str) -> None:
    """Our builder rejects exactly the dtypes torch cannot run consistently, so the domain tables
    stay honest in both directions (test_meta_matches_torch covers the inside)."""
    arity = ELEMENTWISE[name].arity
    for dtype in outside(name):
        metas = operand_metas(name, dtype, [(3,)] * arity)
        with pytest.raises(DTypeError, match=rf"prims\.{name}: .*{dtype.short}"):
            meta_of_ours(name, metas)
        assert _torch_rejects(name, metas) is not None, (
            f"torch runs prims.{name} on {dtype.short} consistently"
        )
    for dtype in domain(name):
        if name != "signbit" or dtype is DType.bool:
            assert _torch_rejects(name, operand_metas(name, dtype, [(3,)] * arity)) is None


@pytest.mark.parametrize("name", BINARY + ["where"])
def test_mismatched_operands_are_rejected(name: str) -> None:
    dtype = sorted(ELEMENTWISE[name].domain, key=list(DType).index)[-1]
    other = next(d for d in reversed(list(DType)) if d is not dtype)
    lead = [TensorMeta((3,), DType.bool)] if name == "where" else []
    cases = [
        (DTypeError, [TensorMeta((3,), dtype), TensorMeta((3,), other)]),
        (ShapeError, [TensorMeta((3,), dtype), TensorMeta((4,), dtype)]),
        (ShapeError, [TensorMeta((3, 1), dtype), TensorMeta((1, 3), dtype)]),
    ]
    for error, metas in cases:
        with pytest.raises(error, match=rf"prims\.{name}"):
            meta_of_ours(name, lead + metas)
        with pytest.raises(RuntimeError):
            meta_of_torch(name, lead + metas)
    # A number of a higher kind than the tensor's category must be converted first.
    if dtype.category < DType.complex64.category:
        higher = {0: 1, 1: 2.5, 2: 1j}[dtype.category.value]
        with pytest.raises(DTypeError, match=rf"prims\.{name}: a Python"):
            meta_of_ours(name, [*lead, TensorMeta((3,), dtype), higher])
    if name == "where":
        with pytest.raises(DTypeError, match="pred"):
            meta_of_ours(
                name,
                [TensorMeta((3,), DType.int64), TensorMeta((3,), dtype), TensorMeta((3,), dtype)],
            )
        with pytest.raises(ShapeError):
            meta_of_ours(
                name,
                [TensorMeta((4,), DType.bool), TensorMeta((3,), dtype), TensorMeta((3,), dtype)],
            )


# -- convert_element_type ----------------------------------------------------------------------------


def conversion_sources(dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """Values of `dtype` covering every interesting target: specials, ties, out-of-range values."""
    base = values(dtype, 200, rng)
    if dtype.is_integral:
        return base
    edges = [
        127.5,
        128.0,
        255.0,
        255.9,
        256.0,
        300.7,
        -1.5,
        -128.7,
        -129.0,
        32767.6,
        32768.0,
        65535.0,
        65536.0,
        -32769.0,
        2.0**31,
        -(2.0**31) - 1,
        2.0**31 + 0.5,
        2.0**32,
        2.0**53 + 1,
        2.0**63,
        -(2.0**63),
        2.0**64,
        1e20,
        -1e20,
        65504.0,
        65519.99,
        65520.0,
        3.3895e38,
        1.00048828125,
        1.0009765625,
        0.0001,
        6e-8,
        1e-40,
        1.00390625,
        1.01171875,
        16777217.0,
    ]
    extra = np.array(edges + special_floats(dtype))
    if dtype.is_complex:
        extra = _complex(extra, extra[::-1], dtype)
    else:
        with np.errstate(over="ignore"):
            extra = extra.astype(dtype.numpy)
    return np.concatenate([extra, base])


@pytest.mark.filterwarnings("ignore:Casting complex values to real discards the imaginary part")
@pytest.mark.parametrize("source", ALL_DTYPES, ids=str)
def test_convert_element_type_every_pair(source: DType) -> None:
    rng = rng_for("convert", source)
    x = conversion_sources(source, rng)
    for target in DType:
        for label, operand in [
            ("vector", x),
            ("transposed", x[:196].reshape(14, 14).T),
            ("scalar", np.array(x[3])),
        ]:
            ours = run_ours("convert_element_type", [operand], dtype=target)
            theirs = run_torch("convert_element_type", [operand], torch_dtype(target))
            what = f"convert {source.short} -> {target.short} {label}"
            assert compare(ours, theirs, what=what), compare(ours, theirs, what=what).message
            assert bitwise_equal(ours, theirs), f"{what}: not bit-identical\n" + _first_difference(
                ours, theirs, [operand]
            )


def test_convert_element_type_meta() -> None:
    for source in DType:
        for target in DType:
            for shape in [(), (0, 2), (3, 1, 2)]:
                ours = meta_of_ours("convert_element_type", [TensorMeta(shape, source), target])
                theirs = meta_of_torch(
                    "convert_element_type", [TensorMeta(shape, source), torch_dtype(target)]
                )
                assert (ours.shape, torch_dtype(ours.dtype)) == theirs
    with pytest.raises(DTypeError, match="convert_element_type"):
        meta_of_ours("convert_element_type", [TensorMeta((2,), DType.float32), "float64"])
    with pytest.raises(DTypeError, match="convert_element_type"):
        meta_of_ours("convert_element_type", [2.0, DType.float64])


# -- broadcast_in_dim -------------------------------------------------------------------------------

BROADCASTS = [
    ((), (), []),
    ((), (4,), []),
    ((), (2, 3, 4), []),
    ((3,), (3,), [0]),
    ((3,), (2, 3), [1]),
    ((3,), (3, 2), [0]),
    ((1,), (5,), [0]),
    ((1, 3), (4, 3), [0, 1]),
    ((3, 1), (2, 3, 4), [1, 2]),
    ((2, 1, 4), (2, 5, 3, 4), [0, 1, 3]),
    ((1, 1), (0, 6), [0, 1]),
    ((0,), (2, 0), [1]),
    ((2, 3), (2, 3), [0, 1]),
]


@pytest.mark.parametrize(("shape", "target", "dims"), BROADCASTS, ids=str)
def test_broadcast_in_dim(shape: tuple[int, ...], target: tuple[int, ...], dims: list[int]) -> None:
    rng = rng_for("broadcast", shape, target)
    for dtype in (DType.float32, DType.bfloat16, DType.int8, DType.bool, DType.complex128):
        for layout in ("contiguous", "transposed", "strided"):
            x = array(dtype, shape, rng, layout)
            ours = run_ours("broadcast_in_dim", [x], shape=list(target), broadcast_dimensions=dims)
            theirs = run_torch("broadcast_in_dim", [x], list(target), dims)
            assert compare(ours, theirs) and bitwise_equal(ours, theirs)
            ours_meta = meta_of_ours(
                "broadcast_in_dim", [TensorMeta(shape, dtype), list(target), dims]
            )
            assert (ours_meta.shape, torch_dtype(ours_meta.dtype)) == meta_of_torch(
                "broadcast_in_dim", [TensorMeta(shape, dtype), list(target), dims]
            )


@pytest.mark.parametrize(
    ("shape", "target", "dims"),
    [
        ((3,), (2, 4), [1]),  # size mismatch
        ((3,), (3, 3), []),  # one dim per input dim
        ((2, 3), (2, 3, 4), [1, 0]),  # not ascending
        ((3, 3), (3, 3), [1, 0]),  # not ascending, each size equal to its target's
        ((1, 3), (3, 3), [1, 0]),  # not ascending, after a dim of size 1
        ((3, 3, 3), (3, 3, 3), [0, 2, 1]),  # not ascending at the end
        ((2, 3), (2, 3), [0, 0]),  # repeated
        ((3,), (3,), [1]),  # out of range
        ((2, 3), (6,), [0]),  # lower rank
    ],
    ids=str,
)
def test_broadcast_in_dim_rejects(
    shape: tuple[int, ...], target: tuple[int, ...], dims: list[int]
) -> None:
    with pytest.raises(ShapeError, match="broadcast_in_dim"):
        meta_of_ours("broadcast_in_dim", [TensorMeta(shape, DType.float32), list(target), dims])
    with pytest.raises(Exception):  # noqa: B017 - torch raises RuntimeError or AssertionError
        meta_of_torch("broadcast_in_dim", [TensorMeta(shape, DType.float32), list(target), dims])


def test_result_kinds_follow_the_table() -> None:
    """The table's result kinds: bool for predicates, the real counterpart for abs/real/imag."""
    for name, spec in ELEMENTWISE.items():
        for dtype in domain(name):
            metas = operand_metas(name, dtype, [(2,)] * spec.arity)
            result = meta_of_ours(name, metas).dtype
            expected = {
                ResultKind.SAME: dtype,
                ResultKind.BOOL: DType.bool,
                ResultKind.REAL: dtype.real,
            }[spec.kind]
            assert result is expected, name


# -- torch's defects: what we compute instead, and the strict record of the difference ----------


def torch_elementwise_scalar_loop(name: str, operands: Sequence[np.ndarray]) -> np.ndarray:
    """torch's result computed one element at a time (one-element tensors run its scalar loop)."""
    flat = [o.ravel() for o in np.broadcast_arrays(*operands)]
    return np.concatenate(
        [run_torch(name, [f[i : i + 1] for f in flat]) for i in range(flat[0].size)]
    )


OVERFLOWING_QUOTIENTS = [(1.0, 0.5), (1.0, 0.49), (0.25, 0.2499), (-1.0, 0.1), (1.0, -1e-7)]


@pytest.mark.parametrize("dtype", [DType.float32, DType.float64, DType.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_fmod_with_overflowing_quotient(name: str, dtype: DType) -> None:
    """Where a / b overflows, torch's vectorized loop (Sleef's fmod) returns NaN while its scalar
    loop returns the exact fmod; we compute the exact fmod, compared here with the scalar loop."""
    big = float(finfo(dtype).max)
    pairs_ = [(big * x, y) for x, y in OVERFLOWING_QUOTIENTS] + [
        (3.0, float(finfo(dtype).tiny) / 64),
        (2.0**60, float(finfo(dtype).tiny)),
    ]
    a = np.array([p[0] for p in pairs_]).astype(dtype.numpy)
    b = np.array([p[1] for p in pairs_]).astype(dtype.numpy)
    ours = run_ours(name, [a, b])
    assert np.isfinite(ours.astype(np.float64)).all()
    assert bitwise_equal(ours, torch_elementwise_scalar_loop(name, [a, b]))
    # The same elements in a long tensor go through torch's vectorized loop, which gives NaN.
    theirs = run_torch(name, [np.repeat(a, 64), np.repeat(b, 64)])
    assert np.isnan(theirs.astype(np.float64)).any()


BESSEL_BAND = np.linspace(5.0001, 5.99, 25)


@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1"])
def test_bessel_j_just_above_5(name: str) -> None:
    """torch's float64 bessel_j0/j1 switch to an asymptotic expansion at |x| = 5 that is only
    accurate to ~4e-7 there (beyond float64's tolerance); scipy's agree with mpmath."""
    mpmath = pytest.importorskip("mpmath")
    x = np.concatenate([BESSEL_BAND, -BESSEL_BAND])
    ours = run_ours(name, [x])
    order = 0 if name == "bessel_j0" else 1
    exact = np.array([float(mpmath.besselj(order, v)) for v in x])
    assert np.allclose(ours, exact, rtol=1e-14, atol=1e-15)


@pytest.mark.xfail(
    strict=True, reason="torch's float64 bessel_j0/j1 are off by up to 4.7e-7 for 5 < |x| < 5.72"
)
@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1"])
def test_bessel_j_just_above_5_against_torch(name: str) -> None:
    x = np.concatenate([BESSEL_BAND, -BESSEL_BAND])
    result = compare(run_ours(name, [x]), run_torch(name, [x]))
    assert result, result.message


HUGE_A = [(1e37, 3.0), (3e38, 3.0), (3e38, 100.0), (1e38, 1e30)]


@pytest.mark.parametrize("dtype", [DType.float32, DType.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_of_huge_a(name: str, dtype: DType) -> None:
    """For a near float32's maximum, torch's float32 evaluation overflows (a log x - lgamma(a)
    is inf - inf) and gives NaN; the values are 0 (igamma) and 1 (igammac), as torch's float64
    kernel (the reference) and ours agree."""
    a = np.array([p[0] for p in HUGE_A]).astype(dtype.numpy)
    x = np.array([p[1] for p in HUGE_A]).astype(dtype.numpy)
    ours = run_ours(name, [a, x])
    expected = run_torch(name, [a.astype(np.float64), x.astype(np.float64)])
    assert expected.tolist() == [0.0 if name == "igamma" else 1.0] * len(HUGE_A)
    assert ours.astype(np.float64).tolist() == expected.tolist()


@pytest.mark.xfail(
    strict=True, reason="torch's float32 igamma/igammac give NaN for a near float32's maximum"
)
@pytest.mark.parametrize("dtype", [DType.float32, DType.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_of_huge_a_against_torch(name: str, dtype: DType) -> None:
    a = np.array([p[0] for p in HUGE_A]).astype(dtype.numpy)
    x = np.array([p[1] for p in HUGE_A]).astype(dtype.numpy)
    result = compare(run_ours(name, [a, x]), run_torch(name, [a, x]))
    assert result, result.message


# Float to integer casts of NaN, ±inf and out-of-range values are undefined behaviour in C and in
# NumPy's casts; ours are defined as x86-64's truncating conversions (the "integer indefinite" is
# the intermediate width's minimum, narrowed by keeping the low bits), pinned here bit for bit so
# that every CPU and NumPy build gives the same results.
_EDGE_FLOATS = [np.nan, np.inf, -np.inf, 3e9, -3e9, 300.0, -1.5, 2.5, 70000.0, 1e19, -9.3e18]
_I32_MIN, _I64_MIN = -(2**31), -(2**63)
_PINNED_FLOAT_TO_INT = {
    DType.uint8: [0, 0, 0, 0, 0, 44, 255, 2, 112, 0, 0],
    DType.int8: [0, 0, 0, 0, 0, 44, -1, 2, 112, 0, 0],
    DType.int16: [0, 0, 0, 0, 0, 300, -1, 2, 4464, 0, 0],
    DType.int32: [_I32_MIN] * 5 + [300, -1, 2, 70000, _I32_MIN, _I32_MIN],
    DType.int64: [_I64_MIN] * 3
    + [3_000_000_000, -3_000_000_000, 300, -1, 2, 70000]
    + [_I64_MIN] * 2,
}


@pytest.mark.parametrize("source", [DType.float64, DType.float32], ids=lambda d: d.short)
@pytest.mark.parametrize("target", list(_PINNED_FLOAT_TO_INT), ids=lambda d: d.short)
def test_float_to_integer_edge_values_are_pinned(source: DType, target: DType) -> None:
    operand = np.array(_EDGE_FLOATS, source.numpy)
    for layout in (operand, operand[::-1].copy()[::-1]):  # contiguous and negatively strided
        ours = run_ours("convert_element_type", [layout], dtype=target)
        assert ours.dtype == target.numpy
        assert ours.tolist() == _PINNED_FLOAT_TO_INT[target]


@pytest.mark.parametrize("source", [DType.float64, DType.float32], ids=lambda d: d.short)
@pytest.mark.parametrize("target", [DType.int32, DType.int64], ids=lambda d: d.short)
def test_float_to_integer_of_values_all_in_range_truncates(source: DType, target: DType) -> None:
    """Every value in range (NumPy's own cast then makes them): truncated toward zero, up to
    the largest and down to the smallest value of the width, -0.0 and fractions included."""
    bits = 8 * target.numpy.itemsize
    below = np.nextafter(source.numpy.type(2.0 ** (bits - 1)), source.numpy.type(0))
    values = [-(2.0 ** (bits - 1)), float(below), -0.0, 0.5, -0.5, 2.75, -2.75, 1e6 + 0.5]
    operand = np.array(values, source.numpy)
    for layout in (operand, operand[::-1].copy()[::-1]):
        ours = run_ours("convert_element_type", [layout], dtype=target)
        assert ours.dtype == target.numpy
        assert ours.tolist() == [int(v) for v in operand.tolist()]


@pytest.mark.parametrize("source", [DType.float16, DType.bfloat16], ids=lambda d: d.short)
def test_low_precision_nan_and_inf_to_integer_are_pinned(source: DType) -> None:
    operand = np.array([np.nan, np.inf, -np.inf, -np.nan], np.float32).astype(source.numpy)
    for target, indefinite in [(DType.int32, _I32_MIN), (DType.int64, _I64_MIN), (DType.uint8, 0)]:
        ours = run_ours("convert_element_type", [operand], dtype=target)
        assert ours.tolist() == [indefinite] * 4, f"{source.short} -> {target.short}"
