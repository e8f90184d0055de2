"""Hand-written samples for the overloads of decompositions/pointwise.py.

They cover what OpInfo reaches thinly or not at all: the `.Scalar` overloads and `atan2.out`;
special values (NaN, ±inf, -0.0; the integer extremes, whose arithmetic wraps around);
float16/bfloat16, computed in float32; Python scalars of each kind (bool, int, float, complex)
meeting tensors of each category; 0-dim tensors of another dtype meeting n-dim ones; the
exponents pow special-cases; copies, conversions and scalars.

Every generator is deterministic (its own seeded torch.Generator). Each dtype's first samples
are the most telling ones: the fast budget runs only the first few (then OpInfo's, if any
remain); a variant left out for one dtype is picked by another (`_rotated`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...ir.dtypes import DType
from ..record import AtenCall
from .common import ALL, COMPLEX, FLOATS, INTS, torch_dtype
from .registry import handwritten

REAL = tuple(d for d in DType if not d.is_complex)

Sample = Callable[[DType], Iterator[AtenCall]]


def _call(op: str, *args: Any, **kwargs: Any) -> AtenCall:
    return AtenCall(op, args, kwargs, origin="handwritten")


def _specials(dtype: DType) -> list[Any]:
    if dtype.is_bool:
        return [True, False]
    if dtype.is_integer:
        import torch

        info = torch.iinfo(torch_dtype(dtype))
        return [info.max, info.min, 0]
    nan, inf = math.nan, math.inf
    if dtype.is_complex:
        return [
            complex(nan, 0.0),
            complex(inf, 1.0),
            complex(-0.0, -inf),
            complex(-0.0, 0.0),
            complex(2.5, nan),
        ]
    return [nan, inf, -inf, -0.0, 0.0]


def values(
    dtype: DType,
    shape: Sequence[int],
    seed: int,
    *,
    low: float = -9.0,
    high: float = 9.0,
    specials: bool = True,
    divisor: bool = False,
) -> Any:
    """A tensor of ordinary values in [low, high) with, if `specials`, the dtype's special values
    at random positions. A `divisor` of an integer dtype avoids 0 and -1 (integer division by
    zero raises, and MIN / -1 traps in torch's kernel)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    target = torch_dtype(dtype)
    if dtype.is_bool:
        tensor = torch.randint(0, 2, tuple(shape), generator=generator).to(torch.bool)
        if divisor:  # a bool divisor is True throughout: False divides by zero
            tensor = torch.ones_like(tensor)
    elif dtype.is_integer:
        info = torch.iinfo(target)
        lowest = max(int(low), info.min)
        highest = max(min(int(high), info.max), lowest + 2)
        tensor = torch.randint(lowest, highest, tuple(shape), generator=generator)
        if divisor:
            tensor = torch.where((tensor == 0) | (tensor == -1), torch.full_like(tensor, 3), tensor)
        tensor = tensor.to(target)
    else:
        width = high - low
        real = torch.rand(tuple(shape), generator=generator, dtype=torch.float64) * width + low
        if dtype.is_complex:
            imag = torch.rand(tuple(shape), generator=generator, dtype=torch.float64) * width + low
            real = torch.complex(real, imag)
        tensor = real.to(target)
    if specials and tensor.numel() and not (divisor and dtype.is_integral):
        flat = tensor.reshape(-1)
        chosen = _specials(dtype)[: flat.numel()]
        positions = torch.randperm(flat.numel(), generator=generator)[: len(chosen)]
        for position, value in zip(positions.tolist(), chosen):
            flat[position] = value
    return tensor


def _rotated(dtype: DType, variants: Sequence[Any]) -> list[Any]:
    """The variants starting at one chosen by the dtype, so that across dtypes each variant comes
    first for some of them (the fast budget runs only the first few samples)."""
    start = list(DType).index(dtype) % len(variants)
    return list(variants[start:]) + list(variants[:start])


# A 0-dim tensor of another dtype meeting an n-dim tensor: each pairing exercises a promotion
# rule (a 0-dim tensor of a higher category decides the category, not the dtype inside it, …).
_PARTNER = {
    DType.bool: DType.int64,
    DType.uint8: DType.int8,
    DType.int8: DType.float64,
    DType.int16: DType.uint8,
    DType.int32: DType.float64,
    DType.int64: DType.bool,
    DType.float16: DType.float64,
    DType.bfloat16: DType.float16,
    DType.float32: DType.complex128,
    DType.float64: DType.complex64,
    DType.complex64: DType.float64,
    DType.complex128: DType.int8,
}
# Python scalars of each kind; the ones that move a tensor of the dtype to another category first.
_NUMBERS = (True, 3, -2.5, 1.5j)


def _numbers_for(dtype: DType) -> list[Any]:
    return sorted(
        _NUMBERS, key=lambda n: DType.from_python_type(type(n)).category <= dtype.category
    )


_NO_BOOL = tuple(d for d in ALL if not d.is_bool)
_INTEGRAL = (DType.bool, *INTS)
_INTS_FLOATS = (*INTS, *FLOATS)
# What torch's CPU kernels take, where it is less than every dtype: (the dtypes of the operands,
# a Python number's being the one torch gives it; the dtypes the operands may promote to). A call
# outside them is one torch rejects ("not implemented for 'Bool'"): it is not generated.
_KERNEL_DTYPES: dict[str, tuple[tuple[DType, ...], tuple[DType, ...]]] = {
    **dict.fromkeys(
        ["aten.abs.default", "aten.neg.default", "aten.sub.Tensor", "aten.sub.Scalar"],
        (_NO_BOOL, _NO_BOOL),
    ),
    **dict.fromkeys(
        ["aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar", "aten.pow.Scalar"], (ALL, _NO_BOOL)
    ),
    **dict.fromkeys(
        ["aten.bitwise_not.default"]
        + [f"aten.bitwise_{n}.{o}" for n in ("and", "or", "xor") for o in ("Tensor", "Scalar")],
        (_INTEGRAL, _INTEGRAL),
    ),
    **dict.fromkeys(
        [f"aten.{n}.default" for n in ("ceil", "floor", "round", "trunc", "relu", "hardtanh")]
        + ["aten.clamp.Tensor"],
        (_INTS_FLOATS, _INTS_FLOATS),
    ),
    **dict.fromkeys(
        [f"aten.{n}.{o}" for n in ("fmod", "remainder") for o in ("Tensor", "Scalar")]
        + ["aten.div.Tensor_mode", "aten.div.Scalar_mode"],
        (REAL, _INTS_FLOATS),
    ),
    **dict.fromkeys(
        [f"aten.{n}.{o}" for n in ("ge", "gt", "le", "lt") for o in ("Tensor", "Scalar")]
        + [f"aten.{n}.default" for n in ("sign", "erf", "maximum", "minimum", "atan2")]
        + ["aten.atan2.out"],
        (REAL, REAL),
    ),
}


def _operand_dtypes(op: str) -> tuple[DType, ...]:
    return _KERNEL_DTYPES.get(op, (ALL, ALL))[0]


def _defined(op: str, *operands: Any) -> bool:
    """Whether torch's kernel of `op` takes these operands (tensors or Python numbers): each one's
    dtype and the dtype they promote to are among the kernel's (`_KERNEL_DTYPES`), and the
    promoted dtype is one of ours (float16 with a complex number promotes to complex32)."""
    # torch lazily, here: importing this module must not need it
    import torch

    operand_dtypes, computed_dtypes = _KERNEL_DTYPES.get(op, (ALL, ALL))
    kinds = [
        DType.from_torch_name(str(x.dtype))
        if isinstance(x, torch.Tensor)
        else DType.from_python_type(type(x))
        for x in operands
    ]
    try:
        promoted = (
            kinds[0]
            if len(operands) == 1
            else DType.from_torch_name(str(torch.result_type(operands[0], operands[1])))
        )
    except ValueError:
        return False
    return all(k in operand_dtypes for k in kinds) and promoted in computed_dtypes


@functools.cache
def _takes_numbers(op: str) -> bool:
    """Whether torch's `op` takes a Python number in a Tensor slot (add, sub, mul and div do, as
    torch.export writes them; most others refuse it)."""
    # torch lazily, here: importing this module must not need it
    import torch

    overload = getattr(getattr(torch.ops.aten, op.split(".")[1]), op.split(".")[2])
    try:
        overload(torch.ones(2), 1)
    except RuntimeError as error:
        return "Expected a value of type 'Tensor'" not in str(error)
    return True


def _number_operand(op: str, number: Any) -> Any:
    """`number` in a Tensor slot of `op`: as it is where torch takes it, else as the 0-dim tensor
    of the dtype torch gives it (a 0-dim operand of another category all the same)."""
    # torch lazily, here: importing this module must not need it
    import torch

    return number if _takes_numbers(op) else torch.tensor(number)


def _register_all(
    ops: Iterable[str], dtypes: Iterable[DType], make: Callable[[str], Sample]
) -> None:
    """Register `make(op)` for the `dtypes` torch's kernel of each op takes; the calls it yields
    that the kernel does not take (`_defined`) are dropped."""
    dtypes = tuple(dtypes)
    for op in ops:
        _kernel_samples(op, dtypes)(make(op))


def _kernel_samples(op: str, dtypes: Iterable[DType]) -> Callable[[Sample], Sample]:
    """`handwritten(op, dtypes)` for the dtypes torch's kernel of `op` takes, keeping only the
    calls it takes (`_defined`)."""

    def register(generate: Sample) -> Sample:
        def kept(dtype: DType) -> Iterator[AtenCall]:
            for call in generate(dtype):
                if _defined(op, *_operands(call)):
                    yield call

        handwritten(op, [d for d in dtypes if d in _operand_dtypes(op)])(kept)
        return generate

    return register


def _operands(call: AtenCall) -> list[Any]:
    """The operands whose dtypes decide an elementwise call's computation: the first two tensors
    or numbers (where's after its condition; not alpha, not clamp's bounds past the first)."""
    # torch lazily, here: importing this module must not need it
    import torch

    args = call.args[1:] if call.op == "aten.where.self" else call.args
    return [a for a in args[:2] if isinstance(a, torch.Tensor | bool | int | float | complex)]


def _partner(op: str, dtype: DType) -> DType:
    """The dtype of the 0-dim operand of another dtype meeting a `dtype` tensor in `op`:
    `_PARTNER`'s, or where the kernel does not take that, the next dtype it takes."""
    # torch lazily, here: importing this module must not need it
    import torch

    def taken(other: DType) -> bool:
        zero = torch.zeros((), dtype=torch_dtype(dtype))
        return other is not dtype and _defined(op, zero, torch.zeros((), dtype=torch_dtype(other)))

    order = _rotated(_PARTNER[dtype], list(DType))
    return next((d for d in order if taken(d)), _PARTNER[dtype])


# -- unary ---------------------------------------------------------------------------------------------

UNARY = [
    f"aten.{name}.default"
    for name in (
        "abs",
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atanh",
        "bitwise_not",
        "ceil",
        "cos",
        "cosh",
        "erf",
        "exp",
        "expm1",
        "floor",
        "isinf",
        "isnan",
        "log",
        "log10",
        "log1p",
        "log2",
        "logical_not",
        "neg",
        "reciprocal",
        "relu",
        "round",
        "rsqrt",
        "sigmoid",
        "sign",
        "sin",
        "sinh",
        "sqrt",
        "tan",
        "tanh",
        "trunc",
        "clone",
        "alias",
    )
]


def _unary(op: str) -> Sample:
    def generate(dtype: DType) -> Iterator[AtenCall]:
        yield _call(
            op, values(dtype, (3, 4), seed=11)
        )  # special values; integer extremes wrap (neg, abs)
        yield _call(op, values(dtype, (), seed=12, specials=False))

    return generate


_register_all(UNARY, ALL, _unary)


@handwritten("aten.round.default", FLOATS)
def _round_halves(dtype: DType) -> Iterator[AtenCall]:
    import torch

    halves = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.0], dtype=torch_dtype(dtype))
    yield _call("aten.round.default", halves)  # to even


# -- binary ----------------------------------------------------------------------------------------------

_DIVIDING = {"div", "fmod", "remainder"}


def _binary_tensor(op: str) -> Sample:
    """Tensor overloads: special values against each other, then (rotated) a 0-dim tensor of
    another dtype and Python scalars in the Tensor slot, as torch.export writes them (as 0-dim
    tensors of their kind for the ops torch refuses them in: `_number_operand`)."""
    divides = op.split(".")[1] in _DIVIDING

    def generate(dtype: DType) -> Iterator[AtenCall]:
        # torch lazily, here: importing this module must not need it
        import torch

        yield _call(
            op, values(dtype, (3, 4), seed=21), values(dtype, (3, 4), seed=22, divisor=divides)
        )
        zero = torch.zeros((), dtype=torch_dtype(dtype))
        numbers = [_number_operand(op, n) for n in _numbers_for(dtype) if _defined(op, zero, n)]
        numbers = (numbers * 2)[:2] if numbers else [_number_operand(op, True)] * 2
        partner = _partner(op, dtype)
        variants = [
            lambda: _call(
                op,
                values(dtype, (2, 1, 3), 23),
                values(partner, (), 24, specials=False, divisor=divides),
            ),
            lambda: _call(op, values(dtype, (4,), seed=25), numbers[0]),
            lambda: _call(
                op,
                values(dtype, (), seed=26, specials=False),
                values(partner, (2, 3), 27, divisor=divides),
            ),
            lambda: _call(op, values(dtype, (4,), seed=28), numbers[1]),
        ]
        for variant in _rotated(dtype, variants)[:2]:
            yield variant()

    return generate


def _binary_scalar(op: str) -> Sample:
    """Scalar overloads: a Python scalar of each kind (those moving the category first)."""

    def generate(dtype: DType) -> Iterator[AtenCall]:
        for index, number in enumerate(_numbers_for(dtype)):
            yield _call(op, values(dtype, (3, 4), seed=31 + index), number)
        yield _call(op, values(dtype, (), seed=35), 7)

    return generate


BINARY = [
    "add",
    "sub",
    "mul",
    "div",
    "fmod",
    "remainder",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "eq",
    "ne",
    "ge",
    "gt",
    "le",
    "lt",
]
_register_all(
    [f"aten.{name}.Tensor" for name in BINARY] + ["aten.pow.Tensor_Tensor"], ALL, _binary_tensor
)
_register_all(
    [
        f"aten.{n}.default"
        for n in ("atan2", "maximum", "minimum", "logical_and", "logical_or", "logical_xor")
    ],
    ALL,
    _binary_tensor,
)
_register_all([f"aten.{name}.Scalar" for name in BINARY], ALL, _binary_scalar)


def _scaled(op: str) -> Sample:
    """add/sub with alpha: alpha of each kind torch accepts for the result dtype (float16's alpha
    is rounded to float16; bool alpha only for bool)."""
    scalar_overload = op.endswith(".Scalar")

    def generate(dtype: DType) -> Iterator[AtenCall]:
        x = values(dtype, (3, 4), seed=41)
        # bool alpha only with a bool result: a bool tensor's other is bool too
        other = (True if dtype.is_bool else 2) if scalar_overload else values(dtype, (4,), seed=42)
        alphas = [True, 2] if dtype.is_bool else ([3, -1] if dtype.is_integer else [0.1, -2])
        for alpha in alphas:
            yield (
                _call(op, x, other, alpha=alpha)
                if not scalar_overload
                else _call(op, x, other, alpha)
            )
        if dtype.is_complex:
            yield (
                _call(op, x, other, alpha=0.5 - 1j)
                if not scalar_overload
                else _call(op, x, other, 0.5 - 1j)
            )

    return generate


_register_all(
    ["aten.add.Tensor", "aten.sub.Tensor", "aten.add.Scalar", "aten.sub.Scalar"], ALL, _scaled
)


# -- division with rounding modes -------------------------------------------------------------------------


@_kernel_samples("aten.div.Tensor_mode", ALL)
def _div_tensor_mode(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.div.Tensor_mode"
    x = values(dtype, (4, 5), seed=51, low=-30, high=30)
    y = values(dtype, (4, 5), seed=52, low=-7, high=7, divisor=True)
    yield _call(op, x, y, rounding_mode="floor")
    yield _call(op, x, y, rounding_mode="trunc")
    divisor = values(
        _partner("aten.div.Tensor_mode", dtype), (), seed=54, specials=False, divisor=True
    )
    yield _call(op, values(dtype, (3,), seed=53, low=-30, high=30), divisor, rounding_mode="floor")


@_kernel_samples("aten.div.Scalar_mode", ALL)
def _div_scalar_mode(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.div.Scalar_mode"
    x = values(dtype, (4, 5), seed=55, low=-30, high=30)
    cases = [
        (-3, "floor"),
        (2.5, "trunc"),
        (-0.7, "floor"),
        (4, "trunc"),
        (0.0, "floor"),
        (True, "floor"),
        (-0.0, "trunc"),
    ]
    for divisor, mode in cases:
        yield _call(op, x, divisor, rounding_mode=mode)


# -- pow -------------------------------------------------------------------------------------------------

# The exponents torch's pow(tensor, number) special-cases, then ordinary ones.
_EXPONENTS = (0.5, -0.5, 2, 3, -2, -1, 0, 1, True, 2.5, -3, 1j)


@_kernel_samples("aten.pow.Tensor_Scalar", ALL)
def _pow_tensor_scalar(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (3, 4), seed=61, low=-3, high=3)
    for exponent in _rotated(dtype, _EXPONENTS):
        if dtype.is_integral and type(exponent) is int and exponent < 0:
            continue  # torch refuses integers to negative integer powers
        yield _call("aten.pow.Tensor_Scalar", x, exponent)


@_kernel_samples("aten.pow.Scalar", ALL)
def _pow_scalar(dtype: DType) -> Iterator[AtenCall]:
    exponent = values(dtype, (3, 4), seed=62, low=-4, high=4)
    for base in _rotated(dtype, (2, 1, -1.5, True, 0.5, 1j, 0, 1.0)):
        yield _call("aten.pow.Scalar", base, exponent)


# -- where, clamp and activations -------------------------------------------------------------------------


@_kernel_samples("aten.where.self", ALL)
def _where(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.where.self"
    condition = values(DType.bool, (3, 4), seed=71)
    yield _call(op, condition, values(dtype, (3, 4), seed=72), values(dtype, (3, 4), seed=73))
    scalar_condition = values(DType.bool, (), seed=74, specials=False)
    zero_dim = values(dtype, (), seed=78, specials=False)
    partner = values(_PARTNER[dtype], (), seed=81, specials=False)
    variants = [
        lambda: _call(
            op, scalar_condition, values(dtype, (2, 3), seed=75), values(dtype, (3,), seed=76)
        ),
        lambda: _call(
            op,
            values(DType.bool, (3, 1), seed=77),
            zero_dim,
            _number_operand(op, _numbers_for(dtype)[0]),
        ),
        lambda: _call(op, values(DType.bool, (4,), seed=79), values(dtype, (4,), seed=80), partner),
    ]
    for variant in _rotated(dtype, variants):
        yield variant()


@handwritten("aten.clamp.default", REAL)
def _clamp(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.clamp.default"
    x = values(dtype, (3, 4), seed=91)
    bounds = [
        (-2, 5),
        (None, 3),
        (-2.5, None),
        (4, -4),
        (-1.5, 2.5),
        (math.nan, 1.0),
        (None, math.nan),
    ]
    for low, high in _rotated(dtype, bounds):
        yield _call(op, x, low, high)


@_kernel_samples("aten.clamp.Tensor", REAL)
def _clamp_tensor(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.clamp.Tensor"
    x = values(dtype, (3, 4), seed=92)
    yield _call(op, x, values(dtype, (3, 1), seed=93), values(dtype, (4,), seed=94, low=5, high=9))
    yield _call(op, x, values(_partner(op, dtype), (), seed=95, specials=False), None)


@_kernel_samples("aten.hardtanh.default", REAL)
def _hardtanh(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (3, 4), seed=96)
    bounds = [(-1, 1), (-2.5, 3.7), (0, 6), (2, -2)]
    if dtype is DType.uint8:  # torch refuses negative bounds for unsigned tensors
        bounds = [(1, 1), (0.5, 3.7), (0, 6), (4, 2)]
    for low, high in bounds:
        yield _call("aten.hardtanh.default", x, low, high)


@handwritten("aten.gelu.default", FLOATS)
def _gelu(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (3, 4), seed=101, low=-6, high=6)
    yield _call("aten.gelu.default", x, approximate="tanh")
    yield _call("aten.gelu.default", x)


@handwritten("aten.elu.default", FLOATS)
def _elu(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (3, 4), seed=102, low=-6, high=6)
    yield _call("aten.elu.default", x, 0.7, 1.5, 0.5)
    yield _call("aten.elu.default", x)


@handwritten("aten.leaky_relu.default", FLOATS)
def _leaky_relu(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (3, 4), seed=103)
    yield _call("aten.leaky_relu.default", x, 0.1)
    yield _call("aten.leaky_relu.default", x, -2)


# -- atan2 into `out` ---------------------------------------------------------------------------------------


@_kernel_samples("aten.atan2.out", ALL)
def _atan2_out(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.atan2.out"
    x, y = values(dtype, (3, 4), seed=111), values(dtype, (4,), seed=112)
    natural = dtype if dtype.is_floating else DType.float32
    # result dtypes the computed one casts to (never an integer: torch refuses that), each once
    outs = list(
        dict.fromkeys(
            [natural, DType.float64, DType.float16, DType.complex64, DType.bfloat16, DType.float32]
        )
    )
    for index, out_dtype in enumerate(_rotated(dtype, outs)):
        shape = (3, 4) if index % 2 == 0 else (0,)  # an empty `out` is resized
        yield _call(op, x, y, out=torch.zeros(shape, dtype=torch_dtype(out_dtype)))


# -- copies, conversions, fills and scalars ------------------------------------------------------------------


@handwritten("aten.copy.default", ALL)
def _copy(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.copy.default"
    destination = torch.zeros((3, 4), dtype=torch_dtype(dtype))
    yield _call(op, destination, values(_PARTNER[dtype], (4,), seed=121))  # converted and broadcast
    yield _call(op, destination, values(dtype, (3, 4), seed=122))
    yield _call(op, destination, values(DType.complex128, (), seed=123, specials=False))


@handwritten("aten._to_copy.default", ALL)
def _to_copy(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (3, 4), seed=131, low=-300, high=300)
    targets = [
        DType.float16,
        DType.int8,
        DType.bool,
        DType.complex64,
        DType.uint8,
        DType.bfloat16,
        DType.float64,
    ]
    for target in _rotated(dtype, targets)[:3]:
        yield _call("aten._to_copy.default", x, dtype=torch_dtype(target))


@_kernel_samples("aten.fill.Scalar", ALL)
def _fill(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (2, 3), seed=141)
    for value in _rotated(dtype, (True, -3, 2.5, math.nan, 1 - 2j, 300, math.inf)):
        if _fits(value, dtype):
            yield _call("aten.fill.Scalar", x, value)


def _fits(value: Any, dtype: DType) -> bool:
    """Whether torch converts the number to `dtype` (it refuses a complex number for a real dtype,
    and a non-integer or out-of-range one for an integer dtype)."""
    # torch lazily, here: importing this module must not need it
    import torch

    if dtype.is_complex or dtype.is_bool:
        return True
    if isinstance(value, complex):
        return False
    if not dtype.is_integer:
        return True
    info = torch.iinfo(torch_dtype(dtype))
    return isinstance(value, int) and info.min <= value <= info.max


@_kernel_samples("aten.scalar_tensor.default", ALL)
def _scalar_tensor(dtype: DType) -> Iterator[AtenCall]:
    target = torch_dtype(dtype)
    for value in _rotated(dtype, (True, -3, 2.5, 1 - 2j, 0.1)):
        if not isinstance(value, complex) or dtype.is_complex or dtype.is_bool:
            yield _call("aten.scalar_tensor.default", value, dtype=target)
    if dtype is DType.float32:  # no dtype: the default dtype, whatever the scalar's kind
        for value in (True, 7, -0.5):
            yield _call("aten.scalar_tensor.default", value)


@handwritten("aten._local_scalar_dense.default", ALL)
def _local_scalar_dense(dtype: DType) -> Iterator[AtenCall]:
    op = "aten._local_scalar_dense.default"
    yield _call(op, values(dtype, (), seed=151))
    yield _call(op, values(dtype, (1, 1), seed=152, specials=False))
    yield _call(op, values(dtype, (1,), seed=153))


# -- non-core overloads torch.export keeps (aten2prims.schema.EXTRA_ATEN_SCHEMAS) ---------------------

_SHIFTED = tuple(d for d in DType if d.is_integral)


def _shifts(op: str) -> Sample:
    """x << n, x >> n: amounts in range, negative, at and beyond the bit width; the integer
    extremes; a Python int, a 0-dim tensor and a broadcast tensor of another integer dtype."""

    def generate(dtype: DType) -> Iterator[AtenCall]:
        import torch

        x = values(dtype, (4, 5), seed=91, low=-100, high=100)
        width = 8 * torch_dtype(dtype).itemsize
        amounts = torch.tensor([0, 1, 3, width - 1, width, width + 5, -1], dtype=torch.int64)
        if op.endswith(".Scalar"):
            for amount in (1, 3, width - 1, width, -2):
                yield _call(op, x, amount)
            return
        yield _call(
            op,
            x[:, :1].expand(4, 7).contiguous(),
            amounts.to(torch_dtype(dtype)) if not dtype.is_bool else amounts,
        )
        yield _call(op, x, torch.tensor(2, dtype=torch.int8))
        yield _call(op, x, values(DType.int32, (5,), seed=92, low=0, high=width + 2))

    return generate


for _op in (
    "aten.__lshift__.Scalar",
    "aten.__lshift__.Tensor",
    "aten.__rshift__.Scalar",
    "aten.__rshift__.Tensor",
):
    handwritten(_op, _SHIFTED)(_shifts(_op))


@handwritten("aten._conj.default", COMPLEX)
def _conj(dtype: DType) -> Iterator[AtenCall]:
    """OpInfo's FFT samples reach it on complex results of real signals only (ifft, hfft)."""
    yield _call("aten._conj.default", values(dtype, (4, 5), seed=97))
    yield _call("aten._conj.default", values(dtype, (), seed=98))


@handwritten("aten._conj_physical.default", ALL)
def _conj_physical(dtype: DType) -> Iterator[AtenCall]:
    """Every dtype: of a tensor that is not complex, a copy."""
    yield _call("aten._conj_physical.default", values(dtype, (4, 5), seed=99))
    yield _call("aten._conj_physical.default", values(dtype, (3, 2), seed=100).t())


@handwritten("aten.angle.default", ALL)
def _angle(dtype: DType) -> Iterator[AtenCall]:
    """Signed zeros, infinities and NaN (on either part of a complex number), negative integers,
    bool."""
    import torch

    if dtype.is_floating:
        edges = [-0.0, 0.0, -2.5, 3.0, -math.inf, math.inf, math.nan]
        yield _call("aten.angle.default", torch.tensor(edges, dtype=torch_dtype(dtype)))
    elif dtype.is_complex:
        parts = [-0.0, 0.0, -1.5, 2.0, -math.inf, math.inf, math.nan]
        grid = torch.tensor([complex(re, im) for re in parts for im in parts])
        yield _call("aten.angle.default", grid.to(torch_dtype(dtype)))
    yield _call("aten.angle.default", values(dtype, (4, 5), seed=101))


_PARTS = (DType.float32, DType.float64)  # torch.complex/polar: no promotion, no bfloat16


@handwritten("aten.complex.default", _PARTS)
def _complex(dtype: DType) -> Iterator[AtenCall]:
    """Non-core. Every pair of special parts (each part kept as it is: inf + nan·i stays so),
    broadcast parts, a 0-dim part and a transposed one."""
    import torch

    op = "aten.complex.default"
    parts = [-0.0, 0.0, -1.5, 2.0, -math.inf, math.inf, math.nan]
    column = torch.tensor(parts, dtype=torch_dtype(dtype))
    yield _call(op, column[:, None], column[None, :])
    yield _call(op, values(dtype, (3, 4), seed=102), values(dtype, (3, 4), seed=103))
    yield _call(op, values(dtype, (3, 4), seed=104), torch.tensor(0.5, dtype=torch_dtype(dtype)))
    yield _call(op, values(dtype, (4, 3), seed=105).t(), values(dtype, (1, 4), seed=106))


@handwritten("aten.polar.default", _PARTS)
def _polar(dtype: DType) -> Iterator[AtenCall]:
    """Non-core. Magnitudes (zero, negative, infinite and NaN ones too) and angles of several
    turns, broadcast against each other."""
    import torch

    op = "aten.polar.default"
    magnitudes = torch.tensor([0.0, 1.0, 2.5, -1.0, math.inf, math.nan], dtype=torch_dtype(dtype))
    angles = torch.tensor([0.0, -0.0, 0.5, -2.0, math.pi, 7.0, math.nan], dtype=torch_dtype(dtype))
    yield _call(op, magnitudes[:, None], angles[None, :])
    yield _call(
        op,
        values(dtype, (3, 4), seed=107, low=0.0, high=5.0, specials=False),
        values(dtype, (3, 4), seed=108, low=-20.0, high=20.0, specials=False),
    )


@handwritten("aten.round.decimals", FLOATS)
def _round_decimals(dtype: DType) -> Iterator[AtenCall]:
    x = values(dtype, (6, 7), seed=93, low=-2000.0, high=2000.0)
    for decimals in (2, -2, 0, 1, -1, 3):
        yield _call("aten.round.decimals", x, decimals=decimals)


@handwritten("aten.copysign.Scalar", REAL)
def _copysign_scalar(dtype: DType) -> Iterator[AtenCall]:
    """The sign of a number: negative and positive ints and floats, -0.0, NaN (its sign bit)."""
    x = values(dtype, (3, 5), seed=94)
    for other in (-2, 3, -0.0, 0.0, math.nan, -1.5, True):
        yield _call("aten.copysign.Scalar", x, other)


@handwritten("aten.copysign.Tensor", REAL)
def _copysign_signed_zeros(dtype: DType) -> Iterator[AtenCall]:
    import torch

    signs = torch.tensor([-0.0, 0.0, math.nan, -math.nan, -math.inf, 2.0], dtype=torch.float64)
    yield _call("aten.copysign.Tensor", values(dtype, (4, 6), seed=95), signs)


@handwritten("aten.erfinv.default", REAL)
def _erfinv_edges(dtype: DType) -> Iterator[AtenCall]:
    import torch

    if dtype.is_floating:
        edges = [-1.0, 1.0, -0.999, 0.999, 1.5, -0.0, 0.0, 0.5, math.nan, math.inf]
        yield _call("aten.erfinv.default", torch.tensor(edges, dtype=torch_dtype(dtype)))
    else:
        yield _call("aten.erfinv.default", values(dtype, (6,), seed=96, low=-1, high=2))


def _gamma_poles(op: str) -> Sample:
    """Poles and their neighbourhood: ±0.0, negative integers and halves, tiny and huge values."""

    def generate(dtype: DType) -> Iterator[AtenCall]:
        import torch

        points = [
            0.0,
            -0.0,
            -1.0,
            -2.0,
            -2.5,
            -0.5,
            0.5,
            1.0,
            2.0,
            1e-3,
            30.0,
            1e4,
            -1e4 - 0.5,
            math.inf,
            -math.inf,
            math.nan,
        ]
        yield _call(op, torch.tensor(points, dtype=torch_dtype(dtype)))

    return generate


for _op in ("aten.lgamma.default", "aten.digamma.default"):
    handwritten(_op, FLOATS)(_gamma_poles(_op))
