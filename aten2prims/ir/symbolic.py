"""Symbolic sizes: integer expressions over named symbols, the float expressions sizes are
computed through, and the conditions on sizes.

- `SymExpr`: an integer-valued expression, kept as a normalized polynomial (a sum of integer
  multiples of products of atoms; an atom is a symbol or `floordiv`/`mod`/`min`/`max` of
  expressions). Equal polynomials are equal objects (`s0 + s0` is `2*s0`), and an expression
  whose terms cancel is a plain `int`: every operation returns `int | SymExpr`. Python's
  arithmetic operators (`+ - * // %`, unary minus) build expressions, so size arithmetic written
  for ints works unchanged.
- `SymFloat`: a float expression (what torch computes through floats: `trunc(float(n) * 2.3)`
  is an upsampling output size), a tree of Python's float operations evaluated exactly as
  Python evaluates them; `floor`/`ceil`/`trunc`/`round` of one is an atom of a `SymExpr`.
- `SymBool`: a comparison `p == 0`, `p != 0` or `p <= 0` of a polynomial `p`. `bool()` of it asks
  the active `ShapeEnv`: settled by the symbols' ranges, it is answered; otherwise the env
  answers with the example values' branch and records the condition as a run-time check.
- `Symbol`: a named symbol's range, example value and whether it is backed (bound from an input
  shape) or unbacked (bound when a data-dependent node runs).
- `parse_expr(text)`: a recursive-descent parser of both the text form's infix syntax
  (`2*s0 + 1`, `(s0 - 1)//2`, `min(s0, 4)`, `s0 != 1`, `trunc(2.3*float(s0))`, `s0/s1`) and
  the sympy `srepr` strings the `.pt2` writer stores (`Mul(Integer(2), Symbol('s77',
  positive=True, integer=True))`). Nothing is ever evaluated as Python code.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeAlias

import attrs

from ..errors import ShapeError

INF = math.inf
Bound: TypeAlias = int | float  # an int, or +-inf for an unbounded side


@attrs.frozen(slots=True)
class Symbol:
    """A symbol's declaration: its inclusive range, its example value (None when unknown),
    whether an input shape binds it (`backed`) or a data-dependent node does, and for one a
    scalar value computes (`x.item()`), that value's name."""

    name: str
    lower: Bound = 0
    upper: Bound = INF
    example: int | None = None
    backed: bool = True
    value: str | None = None


# -- atoms -------------------------------------------------------------------------------------
# An atom is ("sym", name) or (kind, args) with kind in floordiv, mod, min, max and args a tuple
# of int | SymExpr. Atoms are plain tuples so that they hash and compare structurally.
Atom: TypeAlias = tuple
Monomial: TypeAlias = tuple  # sorted tuple of atoms (repeats for powers); () is the constant


def _atom_key(atom: Atom) -> tuple:
    if atom[0] == "sym":
        return (0, atom[1])
    if atom[0] in ROUNDINGS:  # an int-valued function of a float expression
        return (2, atom[0], _node_key(atom[1][0]))
    return (1, atom[0], tuple(_raw_key(a) for a in atom[1]))


def _raw_key(raw: Any) -> tuple:
    if type(raw) is int:
        return (0, raw)
    return (1, tuple((tuple(_atom_key(a) for a in m), c) for m, c in raw))


def _operand_key(x: int | SymExpr) -> tuple:
    return _raw_key(x.terms if type(x) is SymExpr else x)


def _raw(x: int | SymExpr) -> Any:
    """How a function atom holds an argument: an int, or an expression's terms (plain tuples,
    so atoms compare and hash structurally without building conditions)."""
    return x.terms if type(x) is SymExpr else int(x)


def _cooked(raw: Any) -> int | SymExpr:
    return raw if type(raw) is int else SymExpr(raw)


@functools.lru_cache(maxsize=65536)
def _monomial_key(monomial: Monomial) -> tuple:
    return (len(monomial), tuple(_atom_key(a) for a in monomial))


class SymExpr:
    """An integer expression over symbols (see the module docstring). Immutable."""

    __slots__ = ("_hash", "_with_ints", "terms")
    terms: tuple[tuple[Monomial, int], ...]
    _hash: int
    # Results of this expression's operations with an int (`n == 1`, `n * 4`, ...), by
    # (operator, int): sizes meet the same few ints again and again (made at first use).
    _with_ints: dict[tuple[str, int], Any] | None

    def __init__(self, terms: tuple[tuple[Monomial, int], ...]) -> None:
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "_hash", hash(terms))
        object.__setattr__(self, "_with_ints", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SymExpr is immutable")

    def __hash__(self) -> int:
        return self._hash

    def same(self, other: Any) -> bool:
        """Structural equality (`==` builds a condition instead)."""
        return type(other) is SymExpr and self.terms == other.terms

    def _with_int(self, operator: str, other: int, function: Callable[[], Any]) -> Any:
        """`function()`, the result of `self operator other`, remembered (it is pure)."""
        results = self._with_ints
        if results is None:
            results = {}
            object.__setattr__(self, "_with_ints", results)
        key = (operator, other)
        try:
            return results[key]
        except KeyError:
            result = results[key] = function()
            return result

    # -- arithmetic ---------------------------------------------------------------------------
    def __add__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int("+", other, lambda: add(self, other))
        return add(self, other) if _is_int(other) else _with_float("add", self, other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int("+", -other, lambda: add(self, -other))
        return add(self, mul(other, -1)) if _is_int(other) else _with_float("sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return add(other, mul(self, -1)) if _is_int(other) else _with_float("sub", other, self)

    def __mul__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int("*", other, lambda: mul(self, other))
        return mul(self, other) if _is_int(other) else _with_float("mul", self, other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return true_div(self, other) if _is_real(other) else NotImplemented

    def __rtruediv__(self, other: Any) -> Any:
        return true_div(other, self) if _is_real(other) else NotImplemented

    def __pow__(self, other: Any) -> Any:
        return _with_float("pow", self, other)

    def __rpow__(self, other: Any) -> Any:
        return _with_float("pow", other, self)

    def __neg__(self) -> int | SymExpr:
        return mul(self, -1)

    def __pos__(self) -> SymExpr:
        return self

    def __floordiv__(self, other: Any) -> int | SymExpr:
        if type(other) is int and other:
            return self._with_int("//", other, lambda: floordiv(self, other))
        return floordiv(self, other) if _is_int(other) else NotImplemented

    def __rfloordiv__(self, other: Any) -> int | SymExpr:
        return floordiv(other, self) if _is_int(other) else NotImplemented

    def __mod__(self, other: Any) -> int | SymExpr:
        if type(other) is int and other:
            return self._with_int("%", other, lambda: mod(self, other))
        return mod(self, other) if _is_int(other) else NotImplemented

    def __rmod__(self, other: Any) -> int | SymExpr:
        return mod(other, self) if _is_int(other) else NotImplemented

    # -- comparisons build conditions ---------------------------------------------------------
    def __eq__(self, other: Any) -> Any:  # a condition, not a bool
        if type(other) is int:
            return self._with_int("==", other, lambda: compare("==", self, other))
        return compare("==", self, other) if _is_int(other) else NotImplemented

    def __ne__(self, other: Any) -> Any:  # a condition, not a bool
        if type(other) is int:
            return self._with_int("!=", other, lambda: compare("!=", self, other))
        return compare("!=", self, other) if _is_int(other) else NotImplemented

    def __lt__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int("<", other, lambda: compare("<", self, other))
        return compare("<", self, other) if _is_int(other) else NotImplemented

    def __le__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int("<=", other, lambda: compare("<=", self, other))
        return compare("<=", self, other) if _is_int(other) else NotImplemented

    def __gt__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int(">", other, lambda: compare(">", self, other))
        return compare(">", self, other) if _is_int(other) else NotImplemented

    def __ge__(self, other: Any) -> Any:
        if type(other) is int:
            return self._with_int(">=", other, lambda: compare(">=", self, other))
        return compare(">=", self, other) if _is_int(other) else NotImplemented

    def __bool__(self) -> bool:
        return bool(compare("!=", self, 0))

    def __index__(self) -> int:
        """A concrete int is needed (a Python `range`, a NumPy shape): the active env
        specializes to the example value under a recorded run-time check."""
        return current_env().concretize(self)

    __int__ = __index__

    def __repr__(self) -> str:
        return format_expr(self)

    __str__ = __repr__


def _is_int(x: Any) -> bool:
    return type(x) is int or type(x) is SymExpr or type(x) is bool


def symbol(name: str) -> SymExpr:
    return SymExpr(((((("sym", name),)), 1),))


def bare_symbol(size: Any) -> str | None:
    """The name of the symbol `size` is exactly (`u0`, not `u0 + 1`), else None."""
    if type(size) is not SymExpr or len(size.terms) != 1:
        return None
    monomial, coefficient = size.terms[0]
    if coefficient == 1 and len(monomial) == 1 and monomial[0][0] == "sym":
        return str(monomial[0][1])
    return None


def _terms(x: int | SymExpr) -> dict[Monomial, int]:
    if type(x) is SymExpr:
        return dict(x.terms)
    return {(): int(x)} if x else {}


def _make(terms: dict[Monomial, int]) -> int | SymExpr:
    items = [(m, c) for m, c in terms.items() if c]
    if not items:
        return 0
    if len(items) == 1 and items[0][0] == ():
        return items[0][1]
    items.sort(key=lambda item: _monomial_key(item[0]))
    return SymExpr(tuple(items))


def add(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    if type(a) is not SymExpr and type(b) is not SymExpr:
        return int(a) + int(b)
    if type(b) is not SymExpr and not b:
        return a
    if type(a) is not SymExpr and not a:
        return b
    return _sum(_raw(a), _raw(b))


@functools.lru_cache(maxsize=65536)
def _sum(a: Any, b: Any) -> int | SymExpr:
    """The sum of two raw operands (terms compare structurally: a safe cache key)."""
    terms = _terms(_cooked(a))
    for monomial, coefficient in _terms(_cooked(b)).items():
        terms[monomial] = terms.get(monomial, 0) + coefficient
    return _make(terms)


def mul(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    if type(a) is not SymExpr and type(b) is not SymExpr:
        return int(a) * int(b)
    expr, other = (a, b) if type(a) is SymExpr else (b, a)
    if type(other) is not SymExpr and type(expr) is SymExpr:  # a multiple: the order is kept
        factor = int(other)
        if factor == 1:
            return expr
        if factor == 0:
            return 0
        return SymExpr(tuple((m, c * factor) for m, c in expr.terms))
    return _product(_raw(a), _raw(b))


@functools.lru_cache(maxsize=65536)
def _product(a: Any, b: Any) -> int | SymExpr:
    """The product of two raw operands (terms compare structurally: a safe cache key)."""
    terms: dict[Monomial, int] = {}
    for m1, c1 in _terms(_cooked(a)).items():
        for m2, c2 in _terms(_cooked(b)).items():
            monomial = tuple(sorted(m1 + m2, key=_atom_key))
            terms[monomial] = terms.get(monomial, 0) + c1 * c2
    return _make(terms)


def _func(kind: str, *args: int | SymExpr) -> SymExpr:
    return SymExpr(((((kind, tuple(_raw(a) for a in args)),), 1),))


def _split_divisible(a: int | SymExpr, b: int) -> tuple[int | SymExpr, int | SymExpr]:
    """(q, r) with a == b*q + r, q holding every term whose coefficient b divides."""
    quotient: dict[Monomial, int] = {}
    rest: dict[Monomial, int] = {}
    for monomial, coefficient in _terms(a).items():
        if coefficient % b == 0:
            quotient[monomial] = coefficient // b
        else:
            rest[monomial] = coefficient
    return _make(quotient), _make(rest)


def floordiv(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    if type(a) is not SymExpr and type(b) is not SymExpr:
        return int(a) // int(b)
    if type(b) is int:
        if b == 0:
            raise ZeroDivisionError("symbolic floor division by zero")
        if b < 0:
            return floordiv(mul(a, -1), -b)
        quotient, rest = _split_divisible(a, b)
        if type(rest) is int:
            return add(quotient, rest // b)
        return add(quotient, _func("floordiv", rest, b))
    cancelled = _cancel(a, b) if type(b) is SymExpr else None
    if cancelled is not None:  # (m*a') // (c*m) == a' // c for any non-zero monomial m
        return floordiv(*cancelled)
    return _func("floordiv", a, b)


def _cancel(a: int | SymExpr, b: SymExpr) -> tuple[int | SymExpr, int] | None:
    """(a', c) when b is c*m for one monomial m that divides every term of a as m*a'."""
    if len(b.terms) != 1:
        return None
    divisor, coefficient = b.terms[0]
    quotient: dict[Monomial, int] = {}
    for monomial, c in _terms(a).items():
        rest = list(monomial)
        for atom in divisor:
            if atom not in rest:
                return None
            rest.remove(atom)
        quotient[tuple(rest)] = c
    return _make(quotient), coefficient


def ceildiv(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    return mul(floordiv(mul(a, -1), b), -1)


def mod(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    if type(a) is not SymExpr and type(b) is not SymExpr:
        return int(a) % int(b)
    if type(b) is int:
        if b == 0:
            raise ZeroDivisionError("symbolic modulo by zero")
        if b > 0:
            _, rest = _split_divisible(a, b)
            if type(rest) is int:
                return rest % b
            return _func("mod", rest, b)
    elif type(b) is SymExpr:
        cancelled = _cancel(a, b)
        if cancelled is not None and mod(*cancelled) == 0:  # a is a multiple of b
            return 0
    return _func("mod", a, b)


def sym_min(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    return _min_max("min", a, b)


def sym_max(a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    return _min_max("max", a, b)


def _min_max(kind: str, a: int | SymExpr, b: int | SymExpr) -> int | SymExpr:
    if type(a) is not SymExpr and type(b) is not SymExpr:
        return min(int(a), int(b)) if kind == "min" else max(int(a), int(b))
    difference = add(a, mul(b, -1))
    if type(difference) is int:  # a and b differ by a constant
        return a if (difference <= 0) == (kind == "min") else b
    env = _ENV.get()
    if env is not None:  # the ranges may settle it without a check
        low, high = interval(difference, env.symbols)
        if high <= 0 or low >= 0:
            return a if (high <= 0) == (kind == "min") else b
    first, second = sorted((a, b), key=_operand_key)
    return _func(kind, first, second)


# -- conditions --------------------------------------------------------------------------------
class SymBool:
    """`poly == 0`, `poly != 0` or `poly <= 0` (`<`, `>`, `>=` normalize to `<=` over ints)."""

    __slots__ = ("_hash", "poly", "relation")
    relation: str
    poly: SymExpr
    _hash: int

    def __init__(self, relation: str, poly: SymExpr) -> None:
        object.__setattr__(self, "relation", relation)
        object.__setattr__(self, "poly", poly)
        object.__setattr__(self, "_hash", hash((relation, poly._hash)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SymBool is immutable")

    def key(self) -> tuple:
        return (self.relation, self.poly.terms)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return type(other) is SymBool and self.key() == other.key()

    def negated(self) -> SymBool:
        if self.relation == "<=":  # not p <= 0  <=>  -p + 1 <= 0
            return SymBool("<=", _as_expr(add(mul(self.poly, -1), 1)))
        return SymBool("!=" if self.relation == "==" else "==", self.poly)

    def __bool__(self) -> bool:
        env = _ENV.get()
        return (env if env is not None else current_env()).decide(self)

    def __repr__(self) -> str:
        return format_expr(self)

    __str__ = __repr__


def _as_expr(x: int | SymExpr) -> SymExpr:
    assert type(x) is SymExpr
    return x


def compare(relation: str, a: int | SymExpr, b: int | SymExpr) -> bool | SymBool:
    """`a relation b` as a bool when the expressions settle it structurally, else a SymBool."""
    if type(a) is SymExpr or type(b) is SymExpr:
        return _compare_raw(relation, _raw(a), _raw(b))
    return _compare(relation, a, b)


@functools.lru_cache(maxsize=65536)
def _compare_raw(relation: str, a: Any, b: Any) -> bool | SymBool:
    """`compare` of two raw operands (terms compare structurally: a safe cache key; the same
    condition is then the same object, which the shape environment looks up by identity)."""
    return _compare(relation, _cooked(a), _cooked(b))


def _compare(relation: str, a: int | SymExpr, b: int | SymExpr) -> bool | SymBool:
    if type(a) is SymExpr and a.same(b):
        return relation in ("==", "<=", ">=")
    if relation in ("<", "<="):
        poly = add(a, mul(b, -1))
        if relation == "<":
            poly = add(poly, 1)
        relation = "<="
    elif relation in (">", ">="):
        poly = add(b, mul(a, -1))
        if relation == ">":
            poly = add(poly, 1)
        relation = "<="
    elif relation in ("==", "!="):
        poly = add(a, mul(b, -1))
        if type(poly) is SymExpr and next(c for m, c in poly.terms if m) < 0:
            poly = mul(poly, -1)  # sign normalized: s0 - s1 == 0 and s1 - s0 == 0 are one
    else:
        raise ValueError(f"unknown relation {relation!r}")
    if type(poly) is not SymExpr:
        return {"==": poly == 0, "!=": poly != 0, "<=": poly <= 0}[relation]
    return SymBool(relation, poly)


# -- float expressions -------------------------------------------------------------------------
# Sizes torch computes through floats are float expressions (`SymFloat`): an upsampling output
# size is trunc(float(n) * scale), a resampling ratio n / m. A float expression is a tree of
# Python's float operations, evaluated as Python (and C++'s double) evaluates them: IEEE double,
# each operation rounded, in the tree's order. It is never rearranged beyond what is exact:
# constants fold, the operands of + and * are ordered (IEEE + and * commute), x*1.0 and x/1.0 are
# x, x*-1.0 is -x. floor/ceil/trunc/round of one (`ROUNDINGS`) is an int-valued atom of a
# SymExpr, so sizes and conditions may use it; comparing floats is never decided.
#
# Nodes are plain tuples, compared and hashed structurally: ("c", hex) a constant (`float.hex`,
# so -0.0 and 0.0 differ and every NaN is one), ("float", e) the int expression e converted,
# ("idiv", a, b) Python's int / int (the correctly rounded quotient), (op, x, y) for op in add,
# sub, mul, div, pow, min, max, and ("neg", x).
FloatNode: TypeAlias = tuple

ROUNDINGS: dict[str, Callable[[float], int]] = {
    "floor": math.floor,
    "ceil": math.ceil,
    "trunc": math.trunc,
    "round": round,  # half to even, as Python's round and torch's RoundToInt
}
_FLOAT_OPERATIONS: dict[str, Callable[[float, float], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "min": min,
    "max": max,
}
_COMMUTATIVE = frozenset({"add", "mul"})
# sympy's and torch's function names (as the `.pt2` writer prints them) and ours.
_FLOAT_FUNCTIONS = {
    "ToFloat": "float",
    "float": "float",
    "IntTrueDiv": "truediv",
    "FloatTrueDiv": "floattruediv",
    "FloatPow": "pow",
    "TruncToFloat": "truncfloat",
    "Float": "constant",
    "FloorToInt": "floor",
    "CeilToInt": "ceil",
    "TruncToInt": "trunc",
    "RoundToInt": "round",
    **{name: name for name in ROUNDINGS},
}


def _constant(value: float) -> FloatNode:
    return ("c", "nan") if value != value else ("c", value.hex())


_ONE, _MINUS_ONE = _constant(1.0), _constant(-1.0)


class SymFloat:
    """A float expression over symbols (see the section comment). Immutable; an operation whose
    operands are all constants gives a Python float."""

    __slots__ = ("_hash", "node")
    node: FloatNode
    _hash: int

    def __init__(self, node: FloatNode) -> None:
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "_hash", hash(node))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SymFloat is immutable")

    def __hash__(self) -> int:
        return self._hash

    def same(self, other: Any) -> bool:
        """Structural equality."""
        return type(other) is SymFloat and self.node == other.node

    def __add__(self, other: Any) -> Any:
        return _with_float("add", self, other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        return _with_float("sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return _with_float("sub", other, self)

    def __mul__(self, other: Any) -> Any:
        return _with_float("mul", self, other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return true_div(self, other) if _is_real(other) else NotImplemented

    def __rtruediv__(self, other: Any) -> Any:
        return true_div(other, self) if _is_real(other) else NotImplemented

    def __pow__(self, other: Any) -> Any:
        return _with_float("pow", self, other)

    def __rpow__(self, other: Any) -> Any:
        return _with_float("pow", other, self)

    def __neg__(self) -> Any:
        return float_neg(self)

    def __pos__(self) -> SymFloat:
        return self

    def _undecided(self, *_: Any) -> Any:
        raise ShapeError(
            f"a decision on the float expression {self} is not supported (only integer sizes "
            "and conditions on them are decided)"
        )

    # Floats are never compared, nor made concrete.
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _undecided
    __bool__ = __float__ = __index__ = __int__ = _undecided

    def __repr__(self) -> str:
        return format_expr(self)

    __str__ = __repr__


def _is_real(x: Any) -> bool:
    return _is_int(x) or type(x) is float or type(x) is SymFloat


def _with_float(op: str, a: Any, b: Any) -> Any:
    """`a op b` where one side is a float (or NotImplemented for operands that are no numbers)."""
    if not (_is_real(a) and _is_real(b)):
        return NotImplemented
    if _is_int(a) and _is_int(b):  # int arithmetic is the polynomial algebra's
        return NotImplemented
    return float_op(op, a, b)


def _fnode(x: Any) -> FloatNode:
    """A number as a float node: ints are converted as Python converts them."""
    kind = type(x)
    if kind is SymFloat:
        return x.node
    if kind is SymExpr:
        return ("float", x.terms)
    return _constant(float(x))


def _wrap(node: FloatNode) -> float | SymFloat:
    return float.fromhex(node[1]) if node[0] == "c" else SymFloat(node)


def _apply(op: str, a: float, b: float) -> float:
    """Python's float operation, an error for what has no float result."""
    try:
        result = _FLOAT_OPERATIONS[op](a, b)
    except (ArithmeticError, ValueError) as error:
        raise ShapeError(f"{op}({a!r}, {b!r}): {error}") from None
    if type(result) is not float:  # (-8.0) ** (1/3) is complex
        raise ShapeError(f"{op}({a!r}, {b!r}) is not a real number")
    return result


def float_op(op: str, a: Any, b: Any) -> float | SymFloat:
    """`a op b` over floats (op in add sub mul div pow min max); ints are converted first."""
    x, y = _fnode(a), _fnode(b)
    if x[0] == "c" and y[0] == "c":
        return _apply(op, float.fromhex(x[1]), float.fromhex(y[1]))
    if op == "div" and y[0] == "c" and float.fromhex(y[1]) == 0.0:
        raise ShapeError(f"{_wrap(x)} / 0.0: float division by zero")
    if op == "mul":
        for one, other in ((x, y), (y, x)):
            if one == _ONE:
                return _wrap(other)
            if one == _MINUS_ONE:
                return float_neg(_wrap(other))
    if op == "div" and y == _ONE:
        return _wrap(x)
    if op in _COMMUTATIVE and _node_key(y) < _node_key(x):
        x, y = y, x
    return SymFloat((op, x, y))


def float_neg(a: Any) -> float | SymFloat:
    node = _fnode(a)
    if node[0] == "c":
        return -float.fromhex(node[1])
    if node[0] == "neg":
        return _wrap(node[1])
    return SymFloat(("neg", node))


def to_float(x: Any) -> float | SymFloat:
    """float(x): an int expression converted (as Python's float() of an int rounds it)."""
    if type(x) is SymExpr:
        return SymFloat(("float", x.terms))
    return x if type(x) is SymFloat else float(x)


def true_div(a: Any, b: Any) -> float | SymFloat:
    """a / b as Python divides: two ints give their correctly rounded quotient."""
    if not (_is_int(a) and _is_int(b)):
        return float_op("div", a, b)
    if type(b) is not SymExpr and not b:
        raise ZeroDivisionError("symbolic true division by zero")
    if type(a) is not SymExpr and type(b) is not SymExpr:
        return int(a) / int(b)
    return SymFloat(("idiv", _raw(a), _raw(b)))


def rounded(kind: str, x: Any) -> int | SymExpr:
    """floor/ceil/trunc/round (`kind`) of a float expression, an int-valued size expression."""
    if type(x) is SymFloat:
        return SymExpr(((((kind, (x.node,)),), 1),))
    if _is_int(x):  # already an integer (Python's math.floor of an int is itself)
        return x if type(x) is SymExpr else int(x)
    try:
        return ROUNDINGS[kind](x)
    except (ArithmeticError, ValueError) as error:
        raise ShapeError(f"{kind}({x!r}): {error}") from None


def _node_key(node: FloatNode) -> tuple:
    kind = node[0]
    if kind == "c":
        return (0, node[1])
    if kind == "float":
        return (1, _raw_key(node[1]))
    if kind == "idiv":
        return (2, _raw_key(node[1]), _raw_key(node[2]))
    if kind == "neg":
        return (3, _node_key(node[1]))
    return (4, kind, _node_key(node[1]), _node_key(node[2]))


def _collect_float(node: FloatNode, found: set[str]) -> None:
    kind = node[0]
    if kind in ("float", "idiv"):
        for raw in node[1:]:
            _collect(_cooked(raw), found)
    elif kind != "c":
        for child in node[1:]:
            _collect_float(child, found)


def _substitute_float(node: FloatNode, lookup: Callable[[str], Any]) -> float | SymFloat:
    kind = node[0]
    if kind == "c":
        return float.fromhex(node[1])
    if kind == "float":
        return to_float(substitute(_cooked(node[1]), lookup))
    if kind == "idiv":
        return true_div(*(substitute(_cooked(raw), lookup) for raw in node[1:]))
    if kind == "neg":
        return float_neg(_substitute_float(node[1], lookup))
    return float_op(kind, *(_substitute_float(child, lookup) for child in node[1:]))


# -- float bounds: every IEEE operation is monotone where its exact counterpart is, so bounds
# computed with the same operations on the ends bound every result.
def _float_interval(node: FloatNode, symbols: Mapping[str, Symbol]) -> tuple[float, float]:
    low, high = _float_bounds(node, symbols)
    if low != low or high != high:  # a NaN end bounds nothing
        return -INF, INF
    return low, high


def _float_bounds(node: FloatNode, symbols: Mapping[str, Symbol]) -> tuple[float, float]:
    kind = node[0]
    if kind == "c":
        value = float.fromhex(node[1])
        return value, value
    if kind == "float":
        low, high = interval(_cooked(node[1]), symbols)
        return _as_float_bound(low, -INF), _as_float_bound(high, INF)
    if kind == "idiv":
        a, b = (interval(_cooked(raw), symbols) for raw in node[1:])
        return _divide_bounds(a, b)
    if kind == "neg":
        low, high = _float_interval(node[1], symbols)
        return -high, -low
    a, b = _float_interval(node[1], symbols), _float_interval(node[2], symbols)
    if kind == "add":
        return a[0] + b[0], a[1] + b[1]
    if kind == "sub":
        return a[0] - b[1], a[1] - b[0]
    if kind == "mul":
        return _interval_mul(a, b)
    if kind == "div":
        return _divide_bounds(a, b)
    if kind in ("min", "max"):
        pick = min if kind == "min" else max
        return pick(a[0], b[0]), pick(a[1], b[1])
    if kind == "pow" and a[0] >= 1 and b[0] >= 0:  # increasing in both
        try:
            return a[0] ** b[0], a[1] ** b[1]
        except OverflowError:
            return a[0] ** b[0] if b[0] < 64 else 1.0, INF
    return -INF, INF


def _as_float_bound(x: Bound, infinite: float) -> float:
    try:
        return float(x)
    except OverflowError:
        return infinite


def _divide_bounds(a: tuple[Bound, Bound], b: tuple[Bound, Bound]) -> tuple[float, float]:
    """Bounds of x / y: the quotients of the ends, when y keeps one sign."""
    if not (b[0] > 0 or b[1] < 0):
        return -INF, INF
    ends = []
    for x in a:
        for y in b:
            try:
                ends.append(x / y)
            except OverflowError:  # a huge int over a small one
                ends.append(INF if (x > 0) == (y > 0) else -INF)
    ends = [e for e in ends if e == e]  # inf / inf: the other ends bound it
    return (min(ends), max(ends)) if ends else (-INF, INF)


def _rounded_interval(kind: str, bounds: tuple[float, float]) -> tuple[Bound, Bound]:
    low, high = bounds
    return (
        low if math.isinf(low) else ROUNDINGS[kind](low),
        high if math.isinf(high) else ROUNDINGS[kind](high),
    )


# -- printing floats: Python's infix syntax with its precedences (a constant is its repr).
_FLOAT_PRECEDENCE = {"add": 1, "sub": 1, "mul": 2, "div": 2, "idiv": 2, "neg": 3, "pow": 4}
_FLOAT_SYMBOLS = {"add": " + ", "sub": " - ", "mul": "*", "div": "/", "pow": "**"}
_ATOMIC = 5


def _precedence(node: FloatNode) -> int:
    if node[0] == "c":
        return 3 if node[1].startswith("-") else _ATOMIC  # -1.5 reads as a negation
    return _FLOAT_PRECEDENCE.get(node[0], _ATOMIC)


def _format_float(node: FloatNode) -> str:
    kind = node[0]
    if kind == "c":
        return repr(float.fromhex(node[1]))
    if kind == "float":
        return f"float({format_expr(_cooked(node[1]))})"
    if kind == "idiv":
        return f"{_format_factor(_cooked(node[1]))}/{_format_factor(_cooked(node[2]))}"
    if kind in ("min", "max"):
        return f"{kind}({_format_float(node[1])}, {_format_float(node[2])})"
    if kind == "neg":
        operand = _format_float(node[1])
        return f"-{operand}" if _precedence(node[1]) >= 4 else f"-({operand})"
    own = _FLOAT_PRECEDENCE[kind]
    left, right = node[1], node[2]
    if kind == "pow":  # both sides parenthesized unless atomic
        wrap_left, wrap_right = _precedence(left) < _ATOMIC, _precedence(right) < _ATOMIC
    else:
        wrap_left, wrap_right = _precedence(left) < own, _precedence(right) <= own
    left_text = f"({_format_float(left)})" if wrap_left else _format_float(left)
    right_text = f"({_format_float(right)})" if wrap_right else _format_float(right)
    return f"{left_text}{_FLOAT_SYMBOLS[kind]}{right_text}"


# -- evaluation and ranges ---------------------------------------------------------------------
def free_symbols(x: Any) -> set[str]:
    """Names of the symbols in an expression, a condition, or a (nested) tuple of them."""
    found: set[str] = set()
    _collect(x, found)
    return found


def _collect(x: Any, found: set[str]) -> None:
    kind = type(x)
    if kind is SymExpr:
        for monomial, _ in x.terms:
            for atom in monomial:
                if atom[0] == "sym":
                    found.add(atom[1])
                elif atom[0] in ROUNDINGS:
                    _collect_float(atom[1][0], found)
                else:
                    for arg in atom[1]:
                        _collect(_cooked(arg), found)
    elif kind is SymBool:
        _collect(x.poly, found)
    elif kind is SymFloat:
        _collect_float(x.node, found)
    elif kind is tuple or kind is list:
        for item in x:
            _collect(item, found)


_FUNCS: dict[str, Callable[[Any, Any], Any]] = {
    "floordiv": floordiv,
    "mod": mod,
    "min": sym_min,
    "max": sym_max,
}


def substitute(x: Any, lookup: Callable[[str], int | SymExpr]) -> Any:
    """`x` with each symbol replaced by lookup(name) (ints give an int or a bool)."""
    kind = type(x)
    if kind is SymExpr:
        total: int | SymExpr = 0
        for monomial, coefficient in x.terms:
            product: int | SymExpr = coefficient
            for atom in monomial:
                if atom[0] == "sym":
                    factor = lookup(atom[1])
                elif atom[0] in ROUNDINGS:
                    factor = rounded(atom[0], _substitute_float(atom[1][0], lookup))
                else:
                    factor = _FUNCS[atom[0]](*(substitute(_cooked(a), lookup) for a in atom[1]))
                product = mul(product, factor)
            total = add(total, product)
        return total
    if kind is SymBool:
        return compare(x.relation, substitute(x.poly, lookup), 0)
    if kind is SymFloat:
        return _substitute_float(x.node, lookup)
    if kind is tuple:
        return tuple(substitute(item, lookup) for item in x)
    return x


def evaluate(x: Any, binding: Mapping[str, int]) -> Any:
    """The value of an expression or condition (or tuple of them) under a binding of every
    symbol it uses (KeyError names a missing one)."""
    return substitute(x, binding.__getitem__)


def linear_unknown(size: Any, known: Mapping[str, int]) -> str | None:
    """The one symbol of `size` not in `known` when `size` is a·s + b in it (a bare symbol times a
    number, plus terms of known symbols): torch.export's derived dims, `2 * Dim("h")`."""
    if type(size) is not SymExpr:
        return None
    unknown = free_symbols(size) - known.keys()
    if len(unknown) != 1:
        return None
    (name,) = unknown
    bare = ("sym", name)
    for monomial, _ in size.terms:
        others = tuple(atom for atom in monomial if atom != bare)
        if len(monomial) - len(others) > 1 or name in free_symbols(SymExpr(((others, 1),))):
            return None
    return name


def solve_linear(size: SymExpr, name: str, value: int, known: Mapping[str, int]) -> int | None:
    """The whole s with `size` = value, `size` being a·s + b in `name` (`linear_unknown`); None
    when no whole s gives it."""
    offset = evaluate(size, {**known, name: 0})
    slope = evaluate(size, {**known, name: 1}) - offset
    if slope == 0 or (value - offset) % slope:
        return None
    return (value - offset) // slope


def _interval_mul(a: tuple[Bound, Bound], b: tuple[Bound, Bound]) -> tuple[Bound, Bound]:
    products = [_safe_mul(x, y) for x in a for y in b]
    return min(products), max(products)


def _safe_mul(x: Bound, y: Bound) -> Bound:
    if x == 0 or y == 0:
        return 0
    return x * y


def interval(x: int | SymExpr, symbols: Mapping[str, Symbol]) -> tuple[Bound, Bound]:
    """Inclusive bounds of an expression's value over the symbols' ranges (unknown symbols:
    unbounded)."""
    if type(x) is not SymExpr:
        return int(x), int(x)
    low, high = _term_interval(x, symbols)
    if not (low > 0 or high < 0 or low == high):  # no sign settled: try the rewritten form
        rewritten = _without_exact_floordivs(x)
        if rewritten is not x:  # both forms bound the same value: keep the tighter ends
            other = interval(rewritten, symbols)
            low, high = max(low, other[0]), min(high, other[1])
    return low, high


def _term_interval(x: SymExpr, symbols: Mapping[str, Symbol]) -> tuple[Bound, Bound]:
    low: Bound = 0
    high: Bound = 0
    for monomial, coefficient in x.terms:
        bounds: tuple[Bound, Bound] = (coefficient, coefficient)
        for atom in monomial:
            bounds = _interval_mul(bounds, _atom_interval(atom, symbols))
        low, high = low + bounds[0], high + bounds[1]
    return low, high


def _without_exact_floordivs(x: SymExpr) -> int | SymExpr:
    """x with each term k*(a//c)*rest whose k is a multiple of c rewritten as
    (k/c)*(a - a%c)*rest: the same value, in a form where `a` can cancel against other terms
    (2*(s0//2) <= s0 is then -(s0%2) <= 0, which the ranges settle)."""
    total: int | SymExpr = 0
    changed = False
    for monomial, coefficient in x.terms:
        term: int | SymExpr = SymExpr(((monomial, coefficient),))
        for index, atom in enumerate(monomial):
            divisor = atom[1][1] if atom[0] == "floordiv" else None
            if type(divisor) is int and divisor > 0 and coefficient % divisor == 0:
                dividend = _cooked(atom[1][0])
                rest = _make({monomial[:index] + monomial[index + 1 :]: coefficient // divisor})
                term = mul(rest, add(dividend, mul(mod(dividend, divisor), -1)))
                changed = True
                break
        total = add(total, term)
    return total if changed else x


def _atom_interval(atom: Atom, symbols: Mapping[str, Symbol]) -> tuple[Bound, Bound]:
    kind = atom[0]
    if kind == "sym":
        declared = symbols.get(atom[1])
        return (declared.lower, declared.upper) if declared else (-INF, INF)
    if kind in ROUNDINGS:
        return _rounded_interval(kind, _float_interval(atom[1][0], symbols))
    a, b = (interval(_cooked(arg), symbols) for arg in atom[1])
    if kind == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if kind == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if kind == "mod" and b[0] > 0:
        if a[0] >= 0 and a[1] < b[0]:
            return a
        return 0, b[1] - 1
    if kind == "floordiv" and b[0] > 0:
        ends = [_floor_div_bound(x, y) for x in a for y in b]
        return min(ends), max(ends)
    return -INF, INF


def _floor_div_bound(x: Bound, y: Bound) -> Bound:
    if isinstance(x, float) or isinstance(y, float):  # an infinite end
        if isinstance(y, float):
            return 0 if not isinstance(x, float) else x
        return x
    return x // y


def decided(condition: SymBool, symbols: Mapping[str, Symbol]) -> bool | None:
    """True or False when the symbols' ranges settle the condition, else None."""
    answer = _decided_by_bounds(condition, symbols)
    if answer is None:  # max(1, t) == t: settle the min/max atoms first, then ask again
        poly = _with_extrema_settled(condition.poly, symbols)
        if poly is not condition.poly:
            simpler = compare(condition.relation, poly, 0)
            return simpler if type(simpler) is bool else _decided_by_bounds(simpler, symbols)
    return answer


def _with_extrema_settled(x: SymExpr, symbols: Mapping[str, Symbol]) -> int | SymExpr:
    """x with each min/max atom whose operands the ranges order replaced by the operand it
    picks (max(1, t) is t when t >= 1 for every size): the same value, in a form whose terms
    can cancel (interval bounds alone do not see that max(1, t) - t is 0)."""
    if not any(atom[0] in ("min", "max") for monomial, _ in x.terms for atom in monomial):
        return x
    total: int | SymExpr = 0
    changed = False
    for monomial, coefficient in x.terms:
        term: int | SymExpr = coefficient
        for atom in monomial:
            factor: int | SymExpr = SymExpr((((atom,), 1),))
            if atom[0] in ("min", "max"):
                a, b = (_cooked(arg) for arg in atom[1])
                low, high = interval(add(a, mul(b, -1)), symbols)
                if high <= 0 or low >= 0:
                    factor = a if (high <= 0) == (atom[0] == "min") else b
                    changed = True
            term = mul(term, factor)
        total = add(total, term)
    return total if changed else x


def _decided_by_bounds(condition: SymBool, symbols: Mapping[str, Symbol]) -> bool | None:
    low, high = interval(condition.poly, symbols)
    if condition.relation == "<=":
        return True if high <= 0 else False if low > 0 else None
    is_zero = True if low == high == 0 else False if (low > 0 or high < 0) else None
    if is_zero is None:
        return None
    return is_zero if condition.relation == "==" else not is_zero


# -- the shape environment ---------------------------------------------------------------------
@attrs.define(slots=True, eq=False)
class ShapeEnv:
    """The symbols a computation may assume, and the run-time checks it has taken on.

    `decide(cond)` answers from the ranges when they settle the condition; otherwise from the
    example values, recording the condition that holds there in `checks` (the executor checks
    every one before running). `recording=False` (the verifier) answers from the checks already
    recorded and the examples without adding any."""

    symbols: dict[str, Symbol] = attrs.Factory(dict)
    checks: list[SymBool] = attrs.Factory(list)
    recording: bool = True
    _known: dict[SymBool, bool] = attrs.Factory(dict)
    # Inside `lenient_decisions()`: an unsettled condition takes the examples' answer, neither
    # remembered nor recorded.
    _lenient: int = 0
    # Per condition: the ranges' answer (None: they do not settle it), and for one they do not
    # settle, the examples' answer. Both never change, and layouts ask the same conditions of
    # every op: taken again, a decision costs a lookup.
    _ranged: dict[SymBool, bool | None] = attrs.Factory(dict)
    _by_examples: dict[SymBool, bool] = attrs.Factory(dict)
    # The symbols' declarations as a cache key (lowering the same graph again asks the same
    # conditions of the same declarations); made at first use: the symbols never change.
    _declarations: tuple | None = None
    # Results of `remembered` functions (layouts), by function and structure of arguments.
    # Their decisions are lenient: the examples' answers, which only an assumption can
    # overrule, so an assumption taken forgets them.
    _remembered: dict[tuple, Any] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        for check in self.checks:
            self._known[check] = True
            self._known[check.negated()] = False

    def example(self, name: str) -> int:
        declared = self.symbols.get(name)
        if declared is not None and declared.example is None and not declared.backed:
            # A data-dependent size has no example: decide as for a size of 2 (as torch's
            # size-oblivious reasoning assumes, not 0 or 1), within its range, under a check.
            low = declared.lower if isinstance(declared.lower, int) else 0
            high = declared.upper if isinstance(declared.upper, int) else max(low, 2)
            return min(max(2, low), high)
        if declared is None or declared.example is None:
            raise ShapeError(
                f"symbol {name} has no example value: a size decision that depends on it cannot "
                "be taken"
            )
        return declared.example

    def settled_by_ranges(self, condition: SymBool) -> bool | None:
        """`decided(condition, self.symbols)`, remembered."""
        try:
            return self._ranged[condition]
        except KeyError:
            answer = _decided_within(condition, self._declared())
            self._ranged[condition] = answer
            return answer

    def _declared(self) -> tuple:
        if self._declarations is None:
            self._declarations = tuple(
                (s.name, s.lower, s.upper, s.example, s.backed) for s in self.symbols.values()
            )
        return self._declarations

    def decide(self, condition: SymBool) -> bool:
        known = self._known.get(condition)
        if known is not None:
            return known
        answer = self._by_examples.get(condition)
        if answer is None:
            ranged = self.settled_by_ranges(condition)
            if ranged is not None:
                self._known[condition] = ranged  # the ranges never change: remember it
                return ranged
            answer = self._by_examples[condition] = _examples_answer(condition, self._declared())
        if self._lenient:
            return answer
        holds = condition if answer else condition.negated()
        self._known[condition] = answer
        self._known[condition.negated()] = not answer
        if self.recording:
            self.checks.append(holds)
        return answer

    def assume(self, condition: SymBool, what: str) -> None:
        """Take `condition` as true from now on (a run-time check unless the ranges settle it)."""
        answer = self.settled_by_ranges(condition)
        if answer is False:
            raise ShapeError(f"{what}: {condition} is false for every size in range")
        if answer is None and condition not in self._known:
            self._known[condition] = True
            self._known[condition.negated()] = False
            self._remembered.clear()
            if self.recording:
                self.checks.append(condition)

    def concretize(self, expr: SymExpr) -> int:
        value = evaluate(expr, _Examples(self))
        self.decide(_as_bool(compare("==", expr, value)))
        return value


def _symbols_of(declarations: tuple) -> dict[str, Symbol]:
    return {d[0]: Symbol(*d) for d in declarations}


@functools.lru_cache(maxsize=65536)
def _decided_within(condition: SymBool, declarations: tuple) -> bool | None:
    """`decided` under symbols given as (name, lower, upper, example, backed) tuples (a
    condition compares structurally: a safe cache key)."""
    return decided(condition, _symbols_of(declarations))


@functools.lru_cache(maxsize=65536)
def _examples_answer(condition: SymBool, declarations: tuple) -> bool:
    """The condition at the symbols' example values (see `ShapeEnv.example`)."""
    env = ShapeEnv(_symbols_of(declarations), recording=False)
    return bool(evaluate(condition, _Examples(env)))


class _Examples(Mapping[str, int]):
    def __init__(self, env: ShapeEnv) -> None:
        self.env = env

    def __getitem__(self, name: str) -> int:
        return self.env.example(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.env.symbols)

    def __len__(self) -> int:
        return len(self.env.symbols)


def _as_bool(x: bool | SymBool) -> SymBool:
    assert type(x) is SymBool
    return x


_ENV: contextvars.ContextVar[ShapeEnv | None] = contextvars.ContextVar("shape_env", default=None)


def assume(condition: Any, what: str) -> None:
    """`torch._check(condition)` on sizes, in the active env (see ShapeEnv.assume)."""
    if type(condition) is SymBool:
        current_env().assume(condition, what)
    elif not condition:
        raise ShapeError(f"{what}: the condition is false")


def current_env() -> ShapeEnv:
    env = _ENV.get()
    if env is None:
        raise ShapeError(
            "a decision on a symbolic size was taken outside a shape environment "
            "(lowering and verification provide one)"
        )
    return env


@contextlib.contextmanager
def shape_env(env: ShapeEnv) -> Iterator[ShapeEnv]:
    """Make `env` the one symbolic decisions consult while the block runs."""
    token = _ENV.set(env)
    try:
        yield env
    finally:
        _ENV.reset(token)


@contextlib.contextmanager
def lenient_decisions() -> Iterator[None]:
    """Decisions that only shape metadata (a tensor's strides: which layout torch would pick)
    take, where the ranges do not settle them, the example sizes' answer without a run-time
    check: metadata never restricts the sizes a graph runs at. Values never depend on such an
    answer (the kernels reading a layout check their bounds at run time)."""
    env = _ENV.get()
    if env is None:
        yield
        return
    env._lenient += 1
    try:
        yield
    finally:
        env._lenient -= 1


def lenient(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` run under `lenient_decisions()`."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with lenient_decisions():
            return function(*args, **kwargs)

    return wrapper


def remembered(function: Callable[..., Any]) -> Callable[..., Any]:
    """A lenient `function` of sizes (ints and expressions, in tuples and lists) whose result
    the active env remembers per structure of its arguments when any is symbolic (deciding on
    expressions costs; on ints it does not). On ints alone it is just called: nothing is
    decided, and the key and the lenient scope would cost more than the call (a static graph's
    lowering and plan make thousands)."""
    lenient_function = lenient(function)

    @functools.wraps(function)
    def wrapper(*args: Any) -> Any:
        if _only_ints(args):
            return function(*args)
        env = _ENV.get()
        key = (function, *map(_structure, args))
        if env is None or not _any_symbolic(key):
            return lenient_function(*args)
        try:
            return env._remembered[key]
        except KeyError:
            result = env._remembered[key] = lenient_function(*args)
            return result

    return wrapper


def _only_ints(items: tuple | list) -> bool:
    """Whether `items` holds ints only, in tuples and lists (the sizes of a static graph)."""
    for x in items:
        kind = type(x)
        if kind is not int and not ((kind is tuple or kind is list) and _only_ints(x)):
            return False
    return True


def _structure(x: Any) -> Any:
    kind = type(x)
    if kind is SymExpr:
        return _Structural(x.terms)
    if kind is tuple or kind is list:
        return tuple(map(_structure, x))
    return x


class _Structural(tuple):
    """An expression's terms in a structural key (told apart from a tuple of sizes)."""

    __slots__ = ()


def _any_symbolic(key: Any) -> bool:
    return any(type(x) is _Structural or (type(x) is tuple and _any_symbolic(x)) for x in key)


def is_symbolic(x: Any) -> bool:
    return type(x) is SymExpr or type(x) is SymBool or type(x) is SymFloat


# -- printing ----------------------------------------------------------------------------------
def format_expr(x: int | SymExpr | SymBool | float | SymFloat) -> str:
    """The infix form `parse_expr` reads back to an equal expression."""
    if type(x) is SymBool:
        return _format_condition(x)
    if type(x) is SymFloat or type(x) is float:
        return _format_float(_fnode(x))
    if type(x) is SymExpr:
        return _format_sum(list(x.terms))
    return str(int(x))  # type: ignore[arg-type]  # an int (a bool prints as 0 or 1)


def _format_sum(terms: list[tuple[Monomial, int]]) -> str:
    ordered = [t for t in terms if t[0]] + [t for t in terms if not t[0]]
    text = ""
    for index, (monomial, coefficient) in enumerate(ordered):
        magnitude = abs(coefficient)
        body = "*".join(_format_atom(a) for a in monomial)
        if not body:
            piece = str(magnitude)
        elif magnitude == 1:
            piece = body
        else:
            piece = f"{magnitude}*{body}"
        if index == 0:
            text = f"-{piece}" if coefficient < 0 else piece
        else:
            text += f" - {piece}" if coefficient < 0 else f" + {piece}"
    return text or "0"


def _format_atom(atom: Atom) -> str:
    if atom[0] == "sym":
        return atom[1]
    if atom[0] in ROUNDINGS:
        return f"{atom[0]}({_format_float(atom[1][0])})"
    kind, (a, b) = atom[0], map(_cooked, atom[1])
    if kind in ("min", "max"):
        return f"{kind}({format_expr(a)}, {format_expr(b)})"
    symbol_ = "//" if kind == "floordiv" else "%"
    return f"({_format_factor(a)}{symbol_}{_format_factor(b)})"


def _format_factor(x: int | SymExpr) -> str:
    text = format_expr(x)
    simple = type(x) is int and x >= 0
    if type(x) is SymExpr and len(x.terms) == 1 and x.terms[0][1] == 1 and len(x.terms[0][0]) == 1:
        simple = True
    return text if simple else f"({text})"


def _format_condition(condition: SymBool) -> str:
    left: dict[Monomial, int] = {}
    right: dict[Monomial, int] = {}
    for monomial, coefficient in condition.poly.terms:
        if coefficient > 0:
            left[monomial] = coefficient
        else:
            right[monomial] = -coefficient
    lhs = _format_sum(list(left.items())) if left else "0"
    rhs = _format_sum(list(right.items())) if right else "0"
    return f"{lhs} {condition.relation} {rhs}"


# -- parsing -----------------------------------------------------------------------------------
_EXPR_TOKEN = re.compile(
    r"\s*(?:(?P<float>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)|(?P<int>[0-9]+)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<string>'[A-Za-z0-9_.+-]*')"
    r"|(?P<op>//|==|!=|<=|>=|\*\*|[-+*%<>(),=/]))",
    re.ASCII,
)
_MAX_DEPTH = 64
_MAX_DIGITS = 4000


class ExprSyntaxError(ValueError):
    """A malformed expression; `position` is the offset of the offending text."""

    def __init__(self, message: str, position: int) -> None:
        self.position = position
        super().__init__(f"{message} at offset {position}")


def parse_expr(text: str) -> int | SymExpr | bool | SymBool:
    """Read an expression or condition (infix or sympy srepr; see the module docstring)."""
    parser = _ExprParser(text)
    result = parser.condition(0)
    parser.finish()
    return result


_RELATIONS = {"==", "!=", "<=", ">=", "<", ">"}
# sympy's and torch's function names (as the `.pt2` writer prints them) and ours.
_SREPR_RELATIONS = {
    "Eq": "==",
    "Ne": "!=",
    "Equality": "==",
    "Unequality": "!=",
    "StrictLessThan": "<",
    "LessThan": "<=",
    "StrictGreaterThan": ">",
    "GreaterThan": ">=",
    "Lt": "<",
    "Le": "<=",
    "Gt": ">",
    "Ge": ">=",
}


class _ExprParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(text):
            match = _EXPR_TOKEN.match(text, position)
            if match is None or match.end() == position:
                if text[position:].strip() == "":
                    break
                raise ExprSyntaxError(f"unexpected character {text[position]!r}", position)
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.tokens.append(("end", "", len(text)))
        self.index = 0

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.index]

    def next(self) -> tuple[str, str, int]:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def fail(self, message: str) -> Any:
        kind, text, position = self.peek()
        raise ExprSyntaxError(f"{message}, found {text!r}" if kind != "end" else message, position)

    def expect(self, text: str) -> None:
        if self.peek()[1] != text or self.peek()[0] not in ("op",):
            self.fail(f"expected {text!r}")
        self.next()

    def finish(self) -> None:
        if self.peek()[0] != "end":
            self.fail("expected the end of the expression")

    def condition(self, depth: int) -> Any:
        left = self.sum(depth)
        kind, text, _ = self.peek()
        if kind == "op" and text in _RELATIONS:
            self.next()
            return compare(text, self.integer(left), self.integer(self.sum(depth)))
        return left

    def integer(self, x: Any) -> int | SymExpr:
        if type(x) is int or type(x) is SymExpr:
            return x
        return self.fail("expected an integer expression")

    def number(self, x: Any) -> Any:
        """An int or float operand (a condition or a string is none)."""
        if _is_real(x) and type(x) is not bool:
            return x
        return self.fail("expected a number")

    def sum(self, depth: int) -> Any:
        value = self.product(depth)
        while self.peek()[0] == "op" and self.peek()[1] in ("+", "-"):
            sign = self.next()[1]
            right = self.number(self.product(depth))
            left = self.number(value)
            if _is_int(left) and _is_int(right):
                value = add(left, right if sign == "+" else mul(right, -1))
            else:
                value = self.floats("add" if sign == "+" else "sub", left, right)
        return value

    def product(self, depth: int) -> Any:
        value = self.unary(depth)
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "//", "%", "/"):
            operator = self.next()[1]
            right = self.number(self.unary(depth))
            left = self.number(value)
            if operator == "/":
                if not is_symbolic(right) and right == 0:
                    self.fail("division by zero")
                value = self.floats("truediv", left, right)
            elif operator == "*" and not (_is_int(left) and _is_int(right)):
                value = self.floats("mul", left, right)
            elif operator == "*":
                value = mul(left, right)
            elif not (_is_int(left) and _is_int(right)):
                self.fail(f"{operator} takes integer expressions")
            elif operator == "//":
                value = self.divide(floordiv, left, right)
            else:
                value = self.divide(mod, left, right)
        return value

    def floats(self, op: str, a: Any, b: Any) -> Any:
        """A float operation; one whose constants fail (1.0/0.0, an overflow) is malformed."""
        try:
            return true_div(a, b) if op == "truediv" else float_op(op, a, b)
        except (ShapeError, ArithmeticError) as error:
            return self.fail(str(error))

    def divide(self, function: Callable, a: Any, b: Any) -> Any:
        if type(b) is int and b == 0:
            self.fail("division by zero")
        return function(a, b)

    def unary(self, depth: int) -> Any:
        if self.peek()[0] == "op" and self.peek()[1] == "-":
            self.next()
            operand = self.number(self.unary(depth))
            return mul(operand, -1) if _is_int(operand) else float_neg(operand)
        base = self.atom(depth)
        if self.peek()[0] == "op" and self.peek()[1] == "**":  # binds tighter than unary minus
            self.next()
            return self.power(base, self.number(self.unary(depth)))
        return base

    def power(self, base: Any, exponent: Any) -> Any:
        """`base ** exponent`: a float power, or an int raised to a small constant."""
        base = self.number(base)
        if not (_is_int(base) and _is_int(exponent)):
            return self.floats("pow", base, exponent)
        if type(exponent) is not int or not 0 <= exponent <= 64:
            return self.fail("an integer power takes a constant exponent in [0, 64]")
        result: int | SymExpr = 1
        for _ in range(exponent):
            result = mul(result, base)
        return result

    def atom(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            self.fail(f"expressions nest at most {_MAX_DEPTH} deep")
        kind, text, position = self.next()
        if kind == "int":
            if len(text) > _MAX_DIGITS:
                raise ExprSyntaxError("integer literal too long", position)
            return int(text)
        if kind == "float":
            if len(text) > _MAX_DIGITS:
                raise ExprSyntaxError("float literal too long", position)
            return float(text)
        if kind == "op" and text == "(":
            value = self.condition(depth + 1)
            self.expect(")")
            return value
        if kind == "name":
            if self.peek()[1] == "(" and self.peek()[0] == "op":
                self.next()
                return self.call(text, position, depth + 1)
            if text in ("True", "False"):
                return text == "True"
            if text in ("inf", "nan"):  # float constants, as the printer writes them
                return float(text)
            return symbol(text)
        self.index -= 1
        return self.fail("expected a number, a symbol or '('")

    def arguments(self, depth: int) -> list[Any]:
        items: list[Any] = []
        if self.peek()[1] == ")":
            self.next()
            return items
        while True:
            if self.peek()[0] == "name" and self.tokens[self.index + 1][1] == "=":
                self.next()
                self.next()
                self.atom(depth)  # a keyword such as positive=True: an assumption, not a value
            elif self.peek()[0] == "string":
                items.append(self.next()[1][1:-1])
            else:
                items.append(self.condition(depth))
            if self.peek()[1] == ")":
                self.next()
                return items
            self.expect(",")

    def call(self, name: str, position: int, depth: int) -> Any:
        args = self.arguments(depth)

        def ints() -> list[int | SymExpr]:
            return [
                self.integer(a) if type(a) is not str else self.fail("unexpected string")
                for a in args
            ]

        def numbers() -> list[Any]:
            return [
                self.number(a) if type(a) is not str else self.fail("unexpected string")
                for a in args
            ]

        def arity(n: int) -> None:
            if len(args) != n:
                raise ExprSyntaxError(f"{name} takes {n} argument(s), got {len(args)}", position)

        if name == "Symbol":
            if not args or type(args[0]) is not str or not args[0]:
                raise ExprSyntaxError("Symbol takes a name", position)
            return symbol(args[0])
        if name == "Integer":
            arity(1)
            value = ints()[0]
            if type(value) is not int:
                raise ExprSyntaxError("Integer takes an integer literal", position)
            return value
        if name in ("Add", "Mul"):
            values = numbers()
            if not all(map(_is_int, values)):  # over floats: folded in order, from the first
                if len(values) < 2:
                    raise ExprSyntaxError(f"{name} takes at least two arguments", position)
                folded = values[0]
                for value in values[1:]:
                    folded = self.floats("add" if name == "Add" else "mul", folded, value)
                return folded
            total: int | SymExpr = 0 if name == "Add" else 1
            for value in values:
                total = add(total, value) if name == "Add" else mul(total, value)
            return total
        if name in ("Pow", "PowByNatural"):
            arity(2)
            base, exponent = ints()
            if type(exponent) is not int or not 0 <= exponent <= 64:
                raise ExprSyntaxError("Pow takes a small non-negative integer exponent", position)
            result: int | SymExpr = 1
            for _ in range(exponent):
                result = mul(result, base)
            return result
        if name in (
            "FloorDiv",
            "floordiv",
            "Mod",
            "PythonMod",
            "mod",
            "CleanDiv",
            "CeilDiv",
            "ceildiv",
        ):
            arity(2)
            a, b = ints()
            if type(b) is int and b == 0:
                raise ExprSyntaxError("division by zero", position)
            if name in ("Mod", "PythonMod", "mod"):
                return mod(a, b)
            if name in ("CeilDiv", "ceildiv"):
                return ceildiv(a, b)
            return floordiv(a, b)
        if name in ("Max", "Min", "max", "min"):
            values = numbers()
            if not values:
                raise ExprSyntaxError(f"{name} takes at least one argument", position)
            result = values[0]
            for value in values[1:]:
                if _is_int(result) and _is_int(value):
                    result = (sym_max if name.lower() == "max" else sym_min)(result, value)
                else:
                    result = self.floats(name.lower(), result, value)
            return result
        if name in _FLOAT_FUNCTIONS:
            return self.float_function(_FLOAT_FUNCTIONS[name], args, position)
        if name in _SREPR_RELATIONS:
            arity(2)
            a, b = ints()
            return compare(_SREPR_RELATIONS[name], a, b)
        raise ExprSyntaxError(f"unknown function {name!r}", position)

    def float_function(self, function: str, args: list[Any], position: int) -> Any:
        """The functions over floats: ours (`float`, `floor`, ...) and sympy's/torch's
        (`ToFloat`, `IntTrueDiv`, `TruncToInt`, `Float('1.5', precision=53)`, ...)."""
        arity = 2 if function in ("truediv", "floattruediv", "pow") else 1
        if len(args) != arity:
            raise ExprSyntaxError(
                f"{function} takes {arity} argument(s), got {len(args)}", position
            )
        if function == "constant":
            if type(args[0]) is not str or len(args[0]) > _MAX_DIGITS:
                raise ExprSyntaxError("Float takes a number as a string", position)
            try:
                return float(args[0])
            except ValueError:
                raise ExprSyntaxError(f"Float of {args[0]!r}", position) from None
        values = [
            self.number(a) if type(a) is not str else self.fail("unexpected string") for a in args
        ]
        try:
            if function == "float":
                return to_float(values[0])
            if function == "truncfloat":  # a float truncated: exactly float(trunc(x))
                return to_float(rounded("trunc", values[0]))
            if function in ROUNDINGS:
                return rounded(function, values[0])
        except (ShapeError, ArithmeticError, ValueError) as error:
            raise ExprSyntaxError(f"{function}: {error}", position) from None
        if function == "truediv":  # Python's / (on two ints: the correctly rounded quotient)
            return self.floats("truediv", *values)
        return self.floats(
            "truediv" if function == "floattruediv" else function, *map(to_float, values)
        )


def is_size(x: Any) -> bool:
    """A non-negative int, or a symbolic size (whose range says it is non-negative)."""
    return (type(x) is int and x >= 0) or type(x) is SymExpr


def number_kind(x: Any) -> type:
    """The Python type a number operand stands for: int for a symbolic size, bool for a
    condition on sizes, float for a float expression over sizes."""
    kind = type(x)
    if kind is SymFloat:
        return float
    return int if kind is SymExpr else bool if kind is SymBool else kind


def same_size(a: Any, b: Any) -> bool:
    """a and b are the same size for every binding: equal ints, or structurally equal
    expressions (never records a check)."""
    if type(a) is SymExpr or type(b) is SymExpr:
        return type(a) is type(b) and a.same(b)
    return bool(a == b)


def is_literal_one(x: Any) -> bool:
    """x is the int 1 (a symbolic size is never taken for 1 without a check)."""
    return type(x) is int and x == 1


def data_dependent(x: Any) -> bool:
    """x (an expression, a condition or a tuple of them) uses a symbol the active env declares
    unbacked: a value read from data, which no example size stands for."""
    env = _ENV.get()
    if env is None:
        return False
    symbols = env.symbols
    return any(name in symbols and not symbols[name].backed for name in free_symbols(x))


def settled(condition: Any) -> bool | None:
    """A condition's answer when it is a bool, when the active env's ranges settle it or when it
    already holds as a check; None otherwise (nothing is recorded)."""
    if type(condition) is not SymBool:
        return bool(condition)
    env = _ENV.get()
    if env is None:
        return None
    answer = env.settled_by_ranges(condition)
    return answer if answer is not None else env._known.get(condition)
