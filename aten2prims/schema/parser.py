"""A parser for native_functions-style function schemas, and argument binding against them.

    add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
    split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]

The grammar is read generally (any base type name, alias annotations, fixed-size and optional
lists, keyword-only markers, defaults of every literal kind), not as a table of special cases.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..errors import SchemaError
from ..ir.dtypes import DType
from ..ir.symbolic import SymBool, SymExpr, SymFloat
from ..ir.values import Device, Layout, MemoryFormat, ScalarMeta, TensorMeta, UndefinedMeta, Value

NO_DEFAULT: Any = type("NoDefault", (), {"__repr__": lambda self: "NO_DEFAULT"})()

# c10's enum numbering, which schema strings use for ScalarType and MemoryFormat defaults
# (e.g. `ScalarType? dtype=4` is torch.long).
_C10_SCALAR_TYPES = {
    0: DType.uint8,
    1: DType.int8,
    2: DType.int16,
    3: DType.int32,
    4: DType.int64,
    5: DType.float16,
    6: DType.float32,
    7: DType.float64,
    9: DType.complex64,
    10: DType.complex128,
    11: DType.bool,
    15: DType.bfloat16,
}
_C10_MEMORY_FORMATS = {
    0: MemoryFormat.contiguous_format,
    1: MemoryFormat.preserve_format,
    2: MemoryFormat.channels_last,
    3: MemoryFormat.channels_last_3d,
}


@attrs.frozen(slots=True)
class SchemaType:
    """`base` with optional alias annotation; `Tensor?[]` is a list of optional elements,
    `int[2]?` an optional list of two."""

    base: str
    optional: bool = False
    is_list: bool = False
    list_size: int | None = None
    element_optional: bool = False
    alias: str | None = None
    # `int[](a)`: the annotation follows the list brackets rather than the element type.
    alias_after_list: bool = False

    @property
    def is_tensor_like(self) -> bool:
        """Tensor, Tensor?, Tensor[] and Tensor?[]: operands rather than attributes."""
        return self.base == "Tensor"

    @property
    def mutable(self) -> bool:
        return self.alias is not None and "!" in self.alias

    def __str__(self) -> str:
        text = self.base
        annotation = f"({self.alias})" if self.alias is not None else ""
        if not self.alias_after_list:
            text += annotation
        if self.element_optional:
            text += "?"
        if self.is_list:
            text += f"[{self.list_size if self.list_size is not None else ''}]"
        if self.alias_after_list:
            text += annotation
        if self.optional:
            text += "?"
        return text


@attrs.frozen(slots=True)
class Argument:
    name: str
    type: SchemaType
    default: Any = NO_DEFAULT
    kwarg_only: bool = False
    # The default as written in the schema (`[0, 0]`, `"mean"`, `Mean`), for printing it back.
    default_text: str | None = attrs.field(default=None, eq=False)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def __str__(self) -> str:
        if self.name == "..." and self.type.base == "...":
            return "..."
        text = f"{self.type} {self.name}"
        return f"{text}={self.default_text}" if self.has_default else text


@attrs.frozen(slots=True)
class Return:
    type: SchemaType
    name: str | None = None

    def __str__(self) -> str:
        return f"{self.type} {self.name}" if self.name is not None else str(self.type)


@attrs.frozen(slots=True)
class Schema:
    name: str
    overload: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    text: str = attrs.field(eq=False)
    _index: dict[str, int] = attrs.field(eq=False, repr=False, factory=dict)
    _positional_count: int = attrs.field(eq=False, repr=False, default=0)

    def __attrs_post_init__(self) -> None:
        self._index.update({arg.name: i for i, arg in enumerate(self.arguments)})
        object.__setattr__(self, "_positional_count", sum(not a.kwarg_only for a in self.arguments))

    @property
    def qualified_name(self) -> str:
        """'add.Tensor', or 'abs.default' for the default overload."""
        return f"{self.name}.{self.overload or 'default'}"

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(arg.name for arg in self.arguments)

    def argument(self, name: str) -> Argument:
        return self.arguments[self._index[name]]

    def bind(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], *, op: str | None = None
    ) -> list[Any]:
        """Every argument's value in schema order, defaults filled in, fixed-size list arguments
        given as one int expanded (`int[2] padding=0` -> (0, 0)), lists as tuples. Raises
        SchemaError naming the op for missing, unknown, repeated or surplus arguments."""
        arguments = self.arguments
        if len(args) > self._positional_count:
            raise SchemaError(
                f"{op or self.qualified_name}: takes {self._positional_count} positional argument(s), "
                f"got {len(args)}"
            )
        bound: list[Any] = list(args) + [NO_DEFAULT] * (len(arguments) - len(args))
        for name, value in kwargs.items():
            index = self._index.get(name)
            if index is None:
                raise SchemaError(f"{op or self.qualified_name}: unknown argument {name!r}")
            if bound[index] is not NO_DEFAULT:
                raise SchemaError(f"{op or self.qualified_name}: argument {name!r} given twice")
            bound[index] = value
        for index, argument in enumerate(arguments):
            value = bound[index]
            if value is NO_DEFAULT:
                if argument.default is NO_DEFAULT:
                    raise SchemaError(
                        f"{op or self.qualified_name}: missing argument {argument.name!r}"
                    )
                value = argument.default
            schema_type = argument.type
            if schema_type.is_list:
                if type(value) is list:
                    value = tuple(value)
                elif (
                    schema_type.list_size is not None
                    and (type(value) is int or type(value) is SymExpr)
                    and schema_type.base != "Tensor"
                ):
                    value = (value,) * schema_type.list_size
            bound[index] = value
        return bound

    def __str__(self) -> str:
        """The schema as torch prints it, without the namespace."""
        parts: list[str] = []
        for argument in self.arguments:
            if argument.kwarg_only and "*" not in parts and argument.name != "...":
                parts.append("*")
            parts.append(str(argument))
        name = f"{self.name}.{self.overload}" if self.overload else self.name
        # torch parenthesizes several returns, none, or one of a tuple type: `-> ((str, t)[])`.
        single = len(self.returns) == 1 and not str(self.returns[0].type).startswith("(")
        returns = str(self.returns[0]) if single else f"({', '.join(map(str, self.returns))})"
        return f"{name}({', '.join(parts)}) -> {returns}"


def check_argument(
    schema_type: SchemaType, value: Any, *, run_time_scalars: bool = False
) -> str | None:
    """None when `value` is acceptable for an argument of this type, else what was expected.
    An undefined tensor value (a masked backward result) is accepted where None is.
    `run_time_scalars`: a scalar value may fill a Tensor slot, as torch.export writes a size
    computed at run time there (`aten.mul.Tensor(x, %sym_size)`; prims never take one)."""
    if (
        run_time_scalars
        and schema_type.base == "Tensor"
        and not schema_type.is_list
        and type(value) is Value
        and type(value.meta) is ScalarMeta
    ):
        return None
    undefined = type(value) is Value and type(value.meta) is UndefinedMeta
    if value is None or undefined:
        return (
            None
            if schema_type.optional or (schema_type.element_optional and not schema_type.is_list)
            else (f"{schema_type} (got {_describe(value) if undefined else None})")
        )
    if schema_type.is_list:
        if type(value) is not tuple:
            return f"{schema_type} (got {_describe(value)})"
        # The N of `int[N]` only says how a single int expands; it does not bound a list's length
        # (`mean.dim(x, [2, 3])` fills an `int[1]?`), so lengths are the op's business.
        element = attrs.evolve(
            schema_type, is_list=False, list_size=None, optional=schema_type.element_optional
        )
        for item in value:
            problem = check_argument(element, item)
            if problem is not None:
                return problem
        return None
    accepted = _ACCEPTS.get(schema_type.base)
    if accepted is None:
        return None  # a type we do not model (Generator, Dimname, …): accept as given
    return None if accepted(value) else f"{schema_type} (got {_describe(value)})"


def _describe(value: Any) -> str:
    if type(value) is Value:
        return f"%{value.name}: {value.meta}"
    return f"{type(value).__name__} {value!r}"


def _is_scalar_value(kinds: tuple[type, ...]):
    # A symbolic size stands for an int, a condition on sizes for a bool, a float expression
    # over sizes for a float.
    symbolic = (
        (SymExpr,) * (int in kinds) + (SymBool,) * (bool in kinds) + (SymFloat,) * (float in kinds)
    )

    def check(value: Any) -> bool:
        if type(value) is Value:
            return type(value.meta) is ScalarMeta and value.meta.kind in kinds
        return type(value) in kinds or type(value) in symbolic

    return check


_NUMBER = (bool, int, float, complex)
_ACCEPTS = {
    # torch.export writes Python numbers into Tensor slots (`aten.add.Tensor(x, 2)`); torch wraps
    # them as "wrapped numbers" that promote like scalars, so a number is a legal Tensor operand.
    "Tensor": lambda v: (
        (type(v) is Value and type(v.meta) is TensorMeta)
        or type(v) in _NUMBER
        or type(v) in (SymExpr, SymBool, SymFloat)
    ),
    "Scalar": _is_scalar_value(_NUMBER),
    "int": _is_scalar_value((int,)),
    "SymInt": _is_scalar_value((int,)),
    "float": _is_scalar_value((int, float)),
    "SymFloat": _is_scalar_value((int, float)),
    "bool": _is_scalar_value((bool,)),
    "SymBool": _is_scalar_value((bool,)),
    "str": lambda v: type(v) is str,
    "ScalarType": lambda v: type(v) is DType,
    "Layout": lambda v: type(v) is Layout,
    "MemoryFormat": lambda v: type(v) is MemoryFormat,
    "Device": lambda v: type(v) is Device,
}

_CONTAINER_TYPES = frozenset(
    {"Dict", "Future", "RRef", "Await", "Union", "Optional", "Tuple", "List"}
)

_TOKEN = re.compile(
    r"\s*(?:(?P<arrow>->)|(?P<string>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
    r"|(?P<number>-?(?:\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+|\.\d+|\d+)|-inf\b)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z0-9_]+)*)|(?P<punct>\.\.\.|[()\[\],=*?!|:]))"
)


class _SchemaParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        self.spans: list[tuple[int, int]] = []  # where each token is in the text
        position = 0
        stripped = text.rstrip()
        self.stripped = stripped
        while position < len(stripped):
            match = _TOKEN.match(stripped, position)
            if match is None or match.end() == position:
                raise SchemaError(f"cannot read schema {text!r} at {stripped[position:]!r}")
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match.group(kind)))
            self.spans.append(match.span(kind))
            position = match.end()
        self.tokens.append(("end", ""))
        self.spans.append((len(stripped), len(stripped)))
        self.position = 0

    def peek(self, offset: int = 0) -> tuple[str, str]:
        return self.tokens[min(self.position + offset, len(self.tokens) - 1)]

    def next(self) -> tuple[str, str]:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def expect(self, text: str) -> None:
        kind, found = self.next()
        if found != text or kind == "string":
            raise SchemaError(f"schema {self.text!r}: expected {text!r}, found {found or 'end'!r}")

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text and self.peek()[0] != "string":
            self.position += 1
            return True
        return False

    def parse(self) -> Schema:
        kind, qualified = self.next()
        if kind != "ident":
            raise SchemaError(f"schema {self.text!r}: expected an op name")
        qualified = qualified.split("::")[-1]
        name, _, overload = qualified.partition(".")
        self.expect("(")
        arguments: list[Argument] = []
        kwarg_only = False
        if not self.accept(")"):
            while True:
                if self.accept("*"):
                    kwarg_only = True
                else:
                    arguments.append(self.parse_argument(kwarg_only))
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("->")
        returns = self.parse_returns()
        if self.peek()[0] != "end":
            raise SchemaError(
                f"schema {self.text!r}: unexpected {self.peek()[1]!r} after the returns"
            )
        names = [a.name for a in arguments]
        if len(set(names)) != len(names):
            raise SchemaError(f"schema {self.text!r}: repeated argument name")
        return Schema(name, overload, tuple(arguments), tuple(returns), self.text.strip())

    def parse_type(self) -> SchemaType:
        base = self.parse_base_type()
        alias = self.parse_alias() if self.peek()[1] == "(" else None
        element_optional = self.accept("?")
        is_list = False
        list_size = None
        optional = False
        alias_after_list = False
        if self.accept("["):
            is_list = True
            if self.peek()[0] == "number":
                list_size = int(self.next()[1])
            self.expect("]")
            if self.peek()[1] == "(":  # `int[](a)`: an alias on the list itself
                alias = self.parse_alias()
                alias_after_list = True
            optional = self.accept("?")
            while self.peek()[1] == "[":  # `Tensor[][]`: a list of lists (kept as text)
                inner = SchemaType(base, optional, True, list_size, element_optional, None)
                base, list_size, element_optional = str(inner), None, False
                self.expect("[")
                if self.peek()[0] == "number":
                    list_size = int(self.next()[1])
                self.expect("]")
                optional = self.accept("?")
        elif element_optional:
            optional, element_optional = True, False
        return SchemaType(
            base, optional, is_list, list_size, element_optional, alias, alias_after_list
        )

    def parse_base_type(self) -> str:
        """A type name, a container with type arguments (`Dict(str, t)`, `Future(t)`), or a
        tuple type `(int, t)`; containers and tuples are kept as text (we do not model them)."""
        if self.accept("("):
            parts = [self.type_text(self.parse_type())]
            while self.accept(","):
                parts.append(self.type_text(self.parse_type()))
            self.expect(")")
            return f"({', '.join(parts)})"
        kind, base = self.next()
        if kind != "ident" and base != "...":
            raise SchemaError(f"schema {self.text!r}: expected a type, found {base!r}")
        if base in _CONTAINER_TYPES and self.peek()[1] == "(":
            self.next()
            parts = [self.type_text(self.parse_type())]
            while self.accept(","):
                parts.append(self.type_text(self.parse_type()))
            self.expect(")")
            return f"{base}({', '.join(parts)})"
        return base

    @staticmethod
    def type_text(schema_type: SchemaType) -> str:
        return str(schema_type)

    def parse_alias(self) -> str:
        """The annotation between the parentheses, as written (`a!`, `a -> *`, `b|a`)."""
        self.expect("(")
        start = self.position
        while not self.accept(")"):
            kind, _ = self.next()
            if kind == "end":
                raise SchemaError(f"schema {self.text!r}: unterminated alias annotation")
        return self.stripped[self.spans[start][0] : self.spans[self.position - 1][0]].strip()

    def parse_argument(self, kwarg_only: bool) -> Argument:
        if self.accept("..."):
            return Argument("...", SchemaType("..."), NO_DEFAULT, kwarg_only)
        schema_type = self.parse_type()
        kind, name = self.next()
        if kind != "ident":
            raise SchemaError(f"schema {self.text!r}: expected an argument name, found {name!r}")
        default = NO_DEFAULT
        default_text = None
        if self.accept("="):
            first = self.position
            default = self.parse_default(schema_type)
            default_text = self.stripped[self.spans[first][0] : self.spans[self.position - 1][1]]
        return Argument(name, schema_type, default, kwarg_only, default_text)

    def parse_default(self, schema_type: SchemaType) -> Any:
        if self.accept("["):
            items = []
            if not self.accept("]"):
                while True:
                    items.append(
                        self.parse_literal(attrs.evolve(schema_type, is_list=False, optional=False))
                    )
                    if self.accept("]"):
                        break
                    self.expect(",")
            return tuple(items)
        value = self.parse_literal(schema_type)
        if schema_type.is_list and value is not None and type(value) is not tuple:
            size = schema_type.list_size or 1
            value = (value,) * size
        return value

    def parse_literal(self, schema_type: SchemaType) -> Any:
        kind, text = self.next()
        if kind == "string":
            return codecs.decode(text[1:-1], "unicode_escape")
        if kind == "number":
            number: int | float = int(text) if re.fullmatch(r"-?\d+", text) else float(text)
            if schema_type.base == "ScalarType" and type(number) is int:
                return _C10_SCALAR_TYPES[number]
            if schema_type.base == "MemoryFormat" and type(number) is int:
                return _C10_MEMORY_FORMATS[number]
            if schema_type.base in ("float", "SymFloat") and type(number) is int:
                return float(number)
            return number
        if kind == "ident":
            if text in ("None", "True", "False"):
                return {"None": None, "True": True, "False": False}[text]
            if text in ("inf", "-inf", "nan"):
                return float(text)
            if text == "Mean":  # at::Reduction::Mean in loss schemas
                return 1
            for enum_type in (MemoryFormat, Layout):
                if text in enum_type.__members__:
                    return enum_type[text]
            try:
                return DType.from_torch_name(text)
            except ValueError:
                return text
        raise SchemaError(f"schema {self.text!r}: cannot read default {text!r}")

    def parse_returns(self) -> list[Return]:
        if self.accept("("):
            returns = []
            if not self.accept(")"):
                while True:
                    returns.append(self.parse_return())
                    if self.accept(")"):
                        break
                    self.expect(",")
            return returns
        return [self.parse_return()]

    def parse_return(self) -> Return:
        if self.accept("..."):
            return Return(SchemaType("..."))
        schema_type = self.parse_type()
        name = None
        if self.peek()[0] == "ident":
            name = self.next()[1]
        return Return(schema_type, name)


def parse_schema(text: str) -> Schema:
    """Parse one function schema string."""
    return _SchemaParser(text).parse()
