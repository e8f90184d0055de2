"""The function-schema parser against every schema torch registers, argument binding, and the
194 Core ATen schemas against torch's own."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from aten2prims.errors import SchemaError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import Layout, MemoryFormat
from aten2prims.schema import CORE_ATEN_OPS, NO_DEFAULT, Schema, aten_schema, parse_schema
from aten2prims.schema.parser import _C10_MEMORY_FORMATS, _C10_SCALAR_TYPES

ALL_SCHEMAS = [str(schema) for schema in torch._C._jit_get_all_schemas()]
# The one registered schema that repeats an argument name.
REPEATED_NAME = (
    "static_runtime::clamp_nan_to_num(Tensor input, Scalar? min, Scalar? max, float? nan, float? posinf, "
    "float? posinf) -> Tensor"
)


def without_namespace(text: str) -> str:
    head, _, rest = text.partition("(")
    return f"{head.split('::')[-1]}({rest}"


def test_every_torch_schema_parses_and_prints_back() -> None:
    """All ~4400 schemas: str(parse(s)) is torch's text without the namespace, so types, alias
    annotations, kwarg-only markers, defaults and returns were all read."""
    assert REPEATED_NAME in ALL_SCHEMAS
    mismatches = []
    for text in ALL_SCHEMAS:
        if text == REPEATED_NAME:
            continue
        printed = str(parse_schema(text))
        if printed != without_namespace(text):
            mismatches.append((text, printed))
    assert not mismatches, mismatches[:5]


def test_the_schema_with_a_repeated_argument_name_is_rejected() -> None:
    with pytest.raises(SchemaError, match="repeated argument name"):
        parse_schema(REPEATED_NAME)


def _torch_default(value: Any, schema_type: str) -> Any:
    """torch's default value in our representation (enums arrive as their c10 codes)."""
    if isinstance(value, list):
        return tuple(_torch_default(v, schema_type) for v in value)
    if type(value) is int and "ScalarType" in schema_type:
        return _C10_SCALAR_TYPES[value]
    if type(value) is int and "MemoryFormat" in schema_type:
        return _C10_MEMORY_FORMATS[value]
    return value


def test_defaults_match_torch() -> None:
    """Every parsed default equals torch's (ScalarType codes mapped to dtypes, `int[2] x=0`
    expanded, ints of float arguments read as floats)."""
    checked = 0
    for schema in torch._C._jit_get_all_schemas():
        text = str(schema)
        if text == REPEATED_NAME:
            continue
        ours = parse_schema(text)
        arguments = [a for a in ours.arguments if a.name != "..."]  # varargs: torch lists none
        for theirs, argument in zip(schema.arguments, arguments, strict=True):
            assert argument.name == theirs.name
            if not theirs.has_default_value():
                assert argument.default is NO_DEFAULT, (text, argument)
                continue
            expected = _torch_default(theirs.default_value, str(argument.type))
            actual = argument.default
            if isinstance(expected, float) and math.isnan(expected):
                assert math.isnan(actual)
            else:
                assert actual == expected, (text, argument.name, actual, expected)
                if argument.type.base in ("float", "SymFloat") and actual is not None:
                    assert type(actual) is float
            checked += 1
    assert checked > 2500


def test_defaults_of_every_kind() -> None:
    schema = parse_schema(
        "f(ScalarType? a=6, ScalarType b=long, MemoryFormat c=contiguous_format, MemoryFormat d=2, "
        'Layout e=strided, float f=1, float g=-inf, float h=1e-05, str i="a\\"b", str j=\'mean\', '
        "int[2] k=1, int[] l=[1, -2], bool m=True, int? n=None, int o=Mean, Scalar p=0.5, Device? q=None) -> ()"
    )
    assert [a.default for a in schema.arguments] == [
        DType.float32,
        DType.int64,
        MemoryFormat.contiguous_format,
        MemoryFormat.channels_last,
        Layout.strided,
        1.0,
        -math.inf,
        1e-05,
        'a"b',
        "mean",
        (1, 1),
        (1, -2),
        True,
        None,
        1,
        0.5,
        None,
    ]
    assert type(schema.argument("f").default) is float


def test_types_are_read() -> None:
    schema = parse_schema(
        "g.overload(Tensor(a!) self, Tensor?[] indices, int[2]? size, Tensor(a -> *)[] views, SymInt[] s, "
        "*, Tensor(b!) out) -> (Tensor(a!) result, Tensor)"
    )
    assert (schema.name, schema.overload, schema.qualified_name) == ("g", "overload", "g.overload")
    self_, indices, size, views, s, out = schema.arguments
    assert self_.type.mutable and self_.type.alias == "a!" and self_.type.is_tensor_like
    assert indices.type.is_list and indices.type.element_optional and not indices.type.optional
    assert size.type.optional and size.type.list_size == 2 and not size.type.is_tensor_like
    assert views.type.alias == "a -> *" and not views.type.mutable
    assert out.kwarg_only and not s.kwarg_only
    assert [(r.name, str(r.type)) for r in schema.returns] == [
        ("result", "Tensor(a!)"),
        (None, "Tensor"),
    ]
    assert parse_schema("h(Tensor x) -> Tensor").qualified_name == "h.default"


@pytest.mark.parametrize(
    "text",
    [
        "f(Tensor x -> Tensor",
        "f(Tensor) -> Tensor",
        "f(Tensor x) Tensor",
        "f(Tensor x) -> Tensor extra words",
        "f(Tensor(a x) -> Tensor",
        "f(int x=[1, ) -> Tensor",
        "f(Tensor x) -> Tensor $",
        "(Tensor x) -> Tensor",
    ],
)
def test_malformed_schemas_are_rejected(text: str) -> None:
    with pytest.raises(SchemaError, match="schema"):
        parse_schema(text)


# -- binding -------------------------------------------------------------------------------------------

POOL = aten_schema("aten.max_pool2d_with_indices.default")


def test_bind_fills_defaults_in_schema_order_and_expands_fixed_size_lists() -> None:
    assert POOL is not None
    bound = POOL.bind(["x", [3, 3]], {}, op="aten.max_pool2d_with_indices.default")
    assert bound == ["x", (3, 3), (), (0, 0), (1, 1), False]
    bound = POOL.bind(["x", 2], {"padding": 1, "ceil_mode": True, "stride": [2, 1]})
    assert bound == ["x", (2, 2), (2, 1), (1, 1), (1, 1), True]


def test_bind_keyword_only_arguments() -> None:
    schema = aten_schema("aten.add.Tensor")
    assert schema is not None
    assert schema.bind(["a", "b"], {}) == ["a", "b", 1]
    assert schema.bind([], {"other": "b", "self": "a", "alpha": 2.5}) == ["a", "b", 2.5]
    with pytest.raises(
        SchemaError, match=r"aten\.add\.Tensor: takes 2 positional argument\(s\), got 3"
    ):
        schema.bind(["a", "b", 2], {}, op="aten.add.Tensor")


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (["x"], {}, "missing argument 'kernel_size'"),
        (["x", 2], {"padding_mode": 1}, "unknown argument 'padding_mode'"),
        (["x", 2], {"kernel_size": 3}, "argument 'kernel_size' given twice"),
        (["x", 2, 1, 0, 1, False, "surplus"], {}, r"takes 6 positional argument\(s\), got 7"),
    ],
)
def test_bind_errors_name_the_op(args: list[Any], kwargs: dict[str, Any], message: str) -> None:
    assert POOL is not None
    with pytest.raises(SchemaError, match=rf"^aten\.max_pool2d_with_indices\.default: {message}"):
        POOL.bind(args, kwargs, op="aten.max_pool2d_with_indices.default")
    with pytest.raises(SchemaError, match=rf"^max_pool2d_with_indices\.default: {message}"):
        POOL.bind(args, kwargs)  # without `op`, the schema's own name


# -- Core ATen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(CORE_ATEN_OPS))
def test_core_aten_schema_equals_torchs(op: str) -> None:
    _, name, overload = op.split(".")
    theirs = getattr(getattr(torch.ops.aten, name), overload)._schema
    ours = aten_schema(op)
    assert isinstance(ours, Schema)
    assert str(ours) == without_namespace(str(theirs))
    assert [a.name for a in ours.arguments] == [a.name for a in theirs.arguments]
    assert [a.kwarg_only for a in ours.arguments] == [a.kwarg_only for a in theirs.arguments]
    assert len(ours.returns) == len(theirs.returns)


def test_there_are_194_core_aten_overloads() -> None:
    assert len(CORE_ATEN_OPS) == 194
    core = {
        f"aten.{packet}.{overload}"
        for packet in dir(torch.ops.aten)
        if isinstance(getattr(torch.ops.aten, packet, None), torch._ops.OpOverloadPacket)
        for overload in getattr(torch.ops.aten, packet).overloads()
        if torch.Tag.core in getattr(getattr(torch.ops.aten, packet), overload).tags
    }
    assert set(CORE_ATEN_OPS) == core | {"aten.native_batch_norm.default"}
