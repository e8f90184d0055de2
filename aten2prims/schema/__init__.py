"""aten function schemas: a general schema parser and the registry of known overloads."""

from .core_aten import CORE_ATEN_OPS
from .parser import NO_DEFAULT, Argument, Return, Schema, SchemaType, check_argument, parse_schema
from .registry import EXTRA_ATEN_SCHEMAS, aten_schema, core_aten_family

__all__ = [
    "CORE_ATEN_OPS",
    "EXTRA_ATEN_SCHEMAS",
    "NO_DEFAULT",
    "Argument",
    "Return",
    "Schema",
    "SchemaType",
    "aten_schema",
    "check_argument",
    "core_aten_family",
    "parse_schema",
]
