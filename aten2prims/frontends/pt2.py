"""Reader of `.pt2` archives written by `torch.export.save` — without torch, and without ever
unpickling anything.

The archive is a zip whose entries sit under one root folder (as observed in
archives torch writes; spec: torch's `_export/serde/schema.py`, `serialize.py` and `export/pt2_archive/_package.py`):

    <root>/archive_format                          "pt2"
    <root>/models/model.json                       graph + signature (JSON, schema version 8)
    <root>/data/weights/model_weights_config.json  fqn -> {path_name, use_pickle, tensor_meta}
    <root>/data/weights/weight_<i>                 raw storage bytes
    <root>/data/constants/...                      the same for lifted constants
    <root>/data/sample_inputs/model.pt             a pickle: never opened

`load_pt2(path)` turns model.json into a Graph of aten nodes and rebuilds every parameter, buffer
and constant from its storage bytes. What it refuses, and how each argument kind maps to the IR,
is listed in docs/frontends.md.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from zlib_ng.zlib_ng import crc32  # zlib-ng's CRC-32: about 17x zlib's on x86-64 (PCLMUL)

from ..errors import LoadError
from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput, GraphOutput, InputKind, Node, OutputKind, Provenance
from ..ir.symbolic import ExprSyntaxError, Symbol, SymExpr, free_symbols, parse_expr, symbol
from ..ir.values import UNDEFINED, Device, Layout, MemoryFormat, ScalarMeta, TensorMeta, Value
from ..limits import MAX_GRAPH_DEPTH, MAX_JSON_BYTES, default_memory_budget, format_bytes
from ..schema.higher_order import HIGHER_ORDER_OPS, higher_order_op
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from ..schema.registry import KEPT_CHECKS
from .common import (
    SYMBOLIC,
    check_known_aten_op,
    check_known_aten_ops,
    example_hint,
    graph_name,
    graph_symbols,
    input_meta,
    is_value_name,
    recorded_meta,
    scalar_op,
    undefined_name,
    user_source,
    verified,
)

SCHEMA_MAJOR = 8  # torch 2.13 writes (8, 20); other versions are read when their layout matches

_ARCHIVE_FORMAT = "archive_format"
_MAX_ADDRESS = 2**62  # byte strides and offsets at or above this address nothing NumPy can hold
_MODELS_DIR = "models/"
_WEIGHTS_DIR = "data/weights/"
_CONSTANTS_DIR = "data/constants/"
_CONFIG_FILE = {_WEIGHTS_DIR: "{}_weights_config.json", _CONSTANTS_DIR: "{}_constants_config.json"}
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    NotImplementedError,
    ValueError,  # UnicodeDecodeError of a flipped entry name, and zipfile's own ValueErrors
)

# A zip local file header (APPNOTE 4.3.7): signature, version, flags, method, time, date, CRC-32,
# sizes, then the name's and the extra field's lengths; only the fields read here are named.
_LOCAL_HEADER = struct.Struct("<4s2xH18xHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_UTF8_NAME = 0x800
_UNREADABLE_FLAGS = 0x1 | 0x20 | 0x40  # encrypted, patched data, strong encryption: zipfile's call
_CHUNK = 1 << 18  # bytes read, then checksummed while still in cache

# The keys this reader walks; a file of another schema version is read if it has all of them.
_LAYOUT = (
    ("graph_module", "graph", "inputs"),
    ("graph_module", "graph", "outputs"),
    ("graph_module", "graph", "nodes"),
    ("graph_module", "graph", "tensor_values"),
    ("graph_module", "signature", "input_specs"),
    ("graph_module", "signature", "output_specs"),
)

# torch.export's own enum numbering (schema.py), not c10's.
_MEMORY_FORMATS = {
    1: MemoryFormat.contiguous_format,
    2: MemoryFormat.channels_last,
    3: MemoryFormat.channels_last_3d,
    4: MemoryFormat.preserve_format,
}
_LAYOUTS = {7: Layout.strided, 1: Layout.sparse_coo, 2: Layout.sparse_csr}
_STRIDED = 7
_GRAPH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_INPUT_ROLES = {
    "parameter": (InputKind.PARAMETER, "parameter_name"),
    "buffer": (InputKind.BUFFER, "buffer_name"),
    "tensor_constant": (InputKind.CONSTANT, "tensor_constant_name"),
}
_OUTPUT_ROLES = {
    "user_output": (OutputKind.USER_OUTPUT, None),
    "loss_output": (OutputKind.LOSS_OUTPUT, None),
    "buffer_mutation": (OutputKind.BUFFER_MUTATION, "buffer_name"),
    "parameter_mutation": (OutputKind.PARAMETER_MUTATION, "parameter_name"),
    "user_input_mutation": (OutputKind.USER_INPUT_MUTATION, "user_input_name"),
    "gradient_to_parameter": (OutputKind.GRADIENT_TO_PARAMETER, "parameter_name"),
    "gradient_to_user_input": (OutputKind.GRADIENT_TO_USER_INPUT, "user_input_name"),
}


def load_pt2(path: str | Path, *, max_memory: int | None = None) -> Graph:
    """The graph of a `.pt2` archive written by `torch.export.save`, its parameters, buffers and
    constants carried as GraphInput.data. Raises LoadError naming the archive entry at fault.
    The tensors' bytes may not exceed `max_memory` (default: `limits.default_memory_budget()`)."""
    path = Path(path)
    with _Archive(path) as archive:
        model_name, relative = archive.model_entry()
        entry = archive.member(relative)
        model = archive.json(relative)
        _check_layout(model, entry)
        payloads = _Payloads(archive, model_name, max_memory)
        payloads.refuse_pickled()
        reader = _ModelReader(model["graph_module"], entry, payloads)
        with _reporting("range_constraints", entry):
            reader.ranges = _ranges(model.get("range_constraints") or {})
        graph = reader.read(graph_name(path.stem))
    return verified(graph, entry=entry)


# -- the zip container ---------------------------------------------------------------------------


class _Archive:
    """The archive's entries under its root folder; every read error names the entry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # One open file for the zip's directory and for the stored entries read directly.
            self.file = path.open("rb")
        except FileNotFoundError:
            raise LoadError("no such file", entry=str(path)) from None
        except OSError as error:
            raise LoadError(
                f"not a readable zip archive (truncated or corrupted?): {error}", entry=str(path)
            ) from None
        try:
            self.zip = zipfile.ZipFile(self.file)
        except _ZIP_ERRORS as error:
            self.file.close()
            raise LoadError(
                f"not a readable zip archive (truncated or corrupted?): {error}", entry=str(path)
            ) from None
        try:
            self._check_names()
            self.root = self._find_root()
            self.names = set(self.zip.namelist())
            if self.read(_ARCHIVE_FORMAT) != b"pt2":
                raise LoadError("archive_format is not 'pt2'", entry=self.member(_ARCHIVE_FORMAT))
            if self.has("byteorder") and self.read("byteorder") != b"little":
                raise LoadError(
                    "only little-endian archives are supported", entry=self.member("byteorder")
                )
        except LoadError:
            self.close()
            raise

    def __enter__(self) -> _Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.zip.close()  # a ZipFile given an open file leaves closing it to its owner
        self.file.close()

    def _check_names(self) -> None:
        """Refuse entry names that could mean two things: duplicates (which copy is read depends
        on the tool), and names escaping the archive (absolute, '..', backslashes, drives)."""
        seen: set[str] = set()
        for name in self.zip.namelist():
            if not _inside(name.removesuffix("/")):
                raise LoadError(
                    f"unsafe entry name {name!r} (absolute, '..', backslash or drive)",
                    entry=str(self.path),
                )
            if name in seen:
                raise LoadError(f"the entry {name!r} appears twice", entry=str(self.path))
            seen.add(name)

    def _find_root(self) -> str:
        for name in self.zip.namelist():
            head, _, tail = name.rpartition("/")
            if tail == _ARCHIVE_FORMAT and "/" not in head:
                return f"{head}/" if head else ""
        raise LoadError("not a .pt2 archive: it has no archive_format entry", entry=str(self.path))

    def member(self, relative: str) -> str:
        return self.root + relative

    def has(self, relative: str) -> bool:
        return self.member(relative) in self.names

    def size(self, relative: str) -> int:
        """The entry's declared uncompressed size (reads never return more than this)."""
        return self.zip.getinfo(self.member(relative)).file_size

    def read(self, relative: str, limit: int | None = None) -> bytes:
        """The entry's bytes: all of them (CRC-32 checked), or its first `limit` bytes when the
        entry is larger. Decompression stops there, so a zip bomb costs no more than `limit`."""
        name = self.member(relative)
        if name not in self.names:
            raise LoadError("missing from the archive", entry=name)
        try:
            if limit is None or limit >= self.size(relative):
                return self.zip.read(name)  # checks the entry's CRC-32
            with self.zip.open(name) as stream:
                data = stream.read(limit)
        except _ZIP_ERRORS as error:
            raise LoadError(
                f"cannot read the entry (truncated or corrupted archive): {error}", entry=name
            ) from None
        if len(data) != limit:
            raise LoadError(f"truncated entry: {len(data)} of {limit} bytes", entry=name)
        return data

    def read_into(self, relative: str, out: np.ndarray) -> None:
        """Fill the contiguous array `out` with the entry's first `out.nbytes` bytes (at most
        the entry's size), checking the CRC-32 when that is the whole entry, as `read` does.
        A stored entry (torch stores every entry) is read straight from the file into `out`,
        with no intermediate bytes object; any other entry goes through `read`."""
        name = self.member(relative)
        if name not in self.names:
            raise LoadError("missing from the archive", entry=name)
        info = self.zip.getinfo(name)
        limit = out.nbytes
        if limit > info.file_size:
            raise LoadError(f"truncated entry: {info.file_size} of {limit} bytes", entry=name)
        buffer = out.reshape(-1).view(np.uint8).data  # a memoryview of its bytes
        start = self._stored_data_start(info)
        if start is None:
            data = self.read(relative, limit=limit)
            if len(data) != limit:
                raise LoadError(f"truncated entry: {len(data)} of {limit} bytes", entry=name)
            buffer[:] = data
            return
        whole = limit == info.file_size
        crc = 0
        done = 0
        try:
            self.file.seek(start)
            while done < limit:
                chunk = buffer[done : done + _CHUNK]
                count = self.file.readinto(chunk)
                if not count:
                    break
                if whole:  # while the chunk is in cache
                    crc = crc32(chunk[:count], crc)
                done += count
        except OSError as error:
            raise LoadError(
                f"cannot read the entry (truncated or corrupted archive): {error}", entry=name
            ) from None
        if done != limit:
            raise LoadError(f"truncated entry: {done} of {limit} bytes", entry=name)
        if whole and crc != info.CRC:
            raise LoadError(
                "cannot read the entry (truncated or corrupted archive): "
                f"Bad CRC-32 for file {info.filename!r}",
                entry=name,
            )

    def _stored_data_start(self, info: zipfile.ZipInfo) -> int | None:
        """Where a stored entry's bytes start in the file, after checking its local header as
        `zipfile` does (signature, the same name as the central directory's); None for an entry
        `zipfile` must read (compressed, encrypted, or sizes that disagree), or an unreadable
        local header, which `read` then reports."""
        if (
            info.compress_type != zipfile.ZIP_STORED
            or info.flag_bits & _UNREADABLE_FLAGS
            or info.compress_size != info.file_size
        ):
            return None
        try:
            self.file.seek(info.header_offset)
            header = self.file.read(_LOCAL_HEADER.size)
            if len(header) != _LOCAL_HEADER.size:
                return None
            signature, flags, name_length, extra_length = _LOCAL_HEADER.unpack(header)
            raw_name = self.file.read(name_length)
        except OSError:
            return None
        encoding = "utf-8" if flags & _UTF8_NAME else "cp437"
        try:
            local_name = raw_name.decode(encoding)
        except UnicodeDecodeError:
            return None
        if signature != _LOCAL_SIGNATURE or local_name != info.orig_filename:
            return None
        return info.header_offset + _LOCAL_HEADER.size + name_length + extra_length

    def json(self, relative: str) -> dict[str, Any]:
        name = self.member(relative)
        if self.has(relative) and self.size(relative) > MAX_JSON_BYTES:
            raise LoadError(
                f"{format_bytes(self.size(relative))} of JSON is over the "
                f"{format_bytes(MAX_JSON_BYTES)} limit",
                entry=name,
            )
        try:
            document = json.loads(self.read(relative).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise LoadError(f"malformed JSON: {error}", entry=name) from None
        except RecursionError:
            raise LoadError("malformed JSON: nested too deeply", entry=name) from None
        if type(document) is not dict:
            raise LoadError(
                f"malformed JSON: expected an object, found {type(document).__name__}", entry=name
            )
        return document

    def model_entry(self) -> tuple[str, str]:
        """(model name, path under the root) of the model to read: `model`, or the archive's only model."""
        prefix = self.member(_MODELS_DIR)
        models = sorted(
            name[len(prefix) : -len(".json")]
            for name in self.names
            if name.startswith(prefix) and name.endswith(".json") and "/" not in name[len(prefix) :]
        )
        if "model" in models or not models:
            return "model", f"{_MODELS_DIR}model.json"  # a missing model.json is reported on read
        if len(models) > 1:
            raise LoadError(
                f"the archive holds several models ({', '.join(models)}) and none is named 'model'",
                entry=prefix,
            )
        return models[0], f"{_MODELS_DIR}{models[0]}.json"


def _check_layout(model: dict[str, Any], entry: str) -> None:
    version = model.get("schema_version")
    major = version.get("major") if type(version) is dict else None
    minor = version.get("minor") if type(version) is dict else None
    for keys in _LAYOUT:
        node: Any = model
        for key in keys:
            if type(node) is not dict or key not in node:
                where = ".".join(keys[: keys.index(key) + 1])
                if major == SCHEMA_MAJOR:
                    raise LoadError(f"malformed model: no {where!r}", entry=entry)
                raise LoadError(
                    f"schema version {major}.{minor} is not supported: this reader knows version "
                    f"{SCHEMA_MAJOR}.x, and this file's layout differs (no {where!r})",
                    entry=entry,
                )
            node = node[key]


# -- scalars and unions of the JSON encoding -------------------------------------------------------


_SHORT = reprlib.Repr()  # Python 3.11's Repr takes no constructor arguments
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60


def _short(obj: Any) -> str:
    """A bounded repr for messages, whatever the size or depth of the value."""
    return _SHORT.repr(obj)


def _union(obj: Any) -> tuple[str, Any]:
    """torch.export writes a union as a one-key object {variant: payload}."""
    if type(obj) is not dict or len(obj) != 1:
        raise ValueError(f"expected a one-key union object, found {_short(obj)}")
    return next(iter(obj.items()))


def _int(x: Any) -> int:
    if type(x) is not int:
        raise ValueError(f"expected an int, found {_short(x)}")
    return x


def _float(x: Any) -> float:
    # torch writes inf and nan as the strings "Infinity", "-Infinity", "NaN"
    if type(x) in (int, float) or (type(x) is str and x in ("Infinity", "-Infinity", "NaN")):
        return float(x)
    raise ValueError(f"expected a float, found {_short(x)}")


def _bool(x: Any) -> bool:
    if type(x) is not bool:
        raise ValueError(f"expected a bool, found {_short(x)}")
    return x


def _str(x: Any) -> str:
    if type(x) is not str:
        raise ValueError(f"expected a string, found {_short(x)}")
    return x


def _list(x: Any) -> list[Any]:
    if type(x) is not list:
        raise ValueError(f"expected a list, found {_short(x)}")
    return x


def _dtype(code: Any) -> DType:
    try:
        return DType.from_pt2(_int(code))
    except ValueError as error:
        raise _Unsupported(str(error)) from None


def _enum(table: dict[int, Any], what: str) -> Callable[[Any], Any]:
    def convert(code: Any) -> Any:
        if _int(code) not in table:
            raise _Unsupported(f"{what} {code} is not supported")
        return table[code]

    return convert


def _device(payload: Any) -> Device:
    kind = _str(payload["type"])
    index = payload.get("index")
    return Device(kind if index is None else f"{kind}:{_int(index)}")


def _complex(payload: Any) -> complex:
    return complex(_float(payload["real"]), _float(payload["imag"]))


def _sym(
    plain: str, convert: Callable[[Any], Any], lookup: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    """A SymInt/SymFloat/SymBool argument: a plain number, or the name of a symbolic value
    (`lookup` gives its Value)."""

    def read(payload: Any) -> Any:
        variant, value = _union(payload)
        if variant == plain:
            return convert(value)
        if variant == "as_name":
            return lookup(value)
        raise ValueError(f"unknown symbolic-argument variant {_short(variant)}")

    return read


def _sym_int(payload: Any, what: str, hints: dict[str, int] | None = None) -> Any:
    """A size, stride or offset: {"as_int": n}, or {"as_expr": {"expr_str", "hint"}} for a
    symbolic one (the expression read by the symbolic grammar, never evaluated as code). The
    hint of a bare symbol is its example value, recorded in `hints`."""
    variant, value = _union(payload)
    if variant == "as_int":
        return _int(value)
    if variant == "as_expr":
        if hints is None:
            raise _Symbolic(f"{what} is symbolic ({_short(value)})")
        return _expression(value, what, hints)
    raise ValueError(f"unknown SymInt variant {_short(variant)} in {what}")


def _expression(value: Any, what: str, hints: dict[str, int]) -> Any:
    text = _str(value["expr_str"])
    try:
        expression = parse_expr(text)
    except ExprSyntaxError as error:
        raise ValueError(f"{what}: unreadable expression {_short(text)}: {error}") from None
    if type(expression) is not SymExpr and type(expression) is not int:
        raise ValueError(f"{what}: {_short(text)} is not an integer expression")
    hint = value.get("hint")
    if type(hint) is dict and "as_int" in hint:
        example_hint(expression, _int(hint["as_int"]), hints)
    return expression


def _nested_tensor(payload: Any, what: str) -> Any:
    """The tensor argument of a nested graph's input or output (the only kind such graphs have
    here)."""
    variant, argument = _union(payload)
    if variant != "as_tensor":
        raise _Unsupported(f"{what}: kind {_short(variant)} is not supported (tensors only)")
    return argument


def _each(convert: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    """A list payload converted element by element."""
    return lambda payload: tuple(map(convert, _list(payload)))


def _bound(x: Any, infinite: float) -> int | float:
    """A range end: an int, or torch's encoding of an unbounded side (None, a string such as
    "Infinity", a float infinity, or an int beyond int64)."""
    if x is None:
        return infinite
    if type(x) is int:
        return infinite if abs(x) >= 2**63 - 1 else x
    if (type(x) is float and math.isinf(x)) or x in (
        "Infinity",
        "-Infinity",
        "inf",
        "-inf",
        "oo",
        "-oo",
    ):
        return infinite
    raise ValueError(f"range bound {_short(x)} is not an int")


def _ranges(constraints: Any) -> dict[str, tuple[int | float, int | float]]:
    """`range_constraints`: symbol name -> (min_val, max_val)."""
    if type(constraints) is not dict:
        raise ValueError("range_constraints is not an object")
    ranges = {}
    for name, payload in constraints.items():
        if not is_value_name(name) or not name[:1].isalpha():
            # A derived dimension (`s0 + 1`): its range follows from its symbol's.
            try:
                parse_expr(_str(name))
            except ExprSyntaxError:
                raise ValueError(f"symbol name {_short(name)} is not an identifier") from None
            continue
        lower = _bound(payload["min_val"], -math.inf)
        upper = _bound(payload["max_val"], math.inf)
        if lower > upper:
            raise ValueError(f"symbol {name} has the empty range [{lower}, {upper}]")
        ranges[name] = (lower, upper)
    return ranges


# A node's symbolic scalar result: its kind.
_SCALAR_RESULTS = {"as_sym_int": int, "as_sym_float": float, "as_sym_bool": bool}


class _Symbolic(Exception):
    """A symbolic size or value was met; reported as a LoadError by the caller, with its place."""


class _Unsupported(Exception):
    """A well-formed but unsupported value (dtype, layout, argument kind, …)."""


def _tensor_meta(
    meta: Any, what: str, hints: dict[str, int] | None = None
) -> tuple[TensorMeta, tuple[int, ...], int]:
    """(meta, strides, storage offset) of a serialized TensorMeta; strided layout only."""
    if _int(meta["layout"]) != _STRIDED:
        raise _Unsupported(
            f"{what} has layout {meta['layout']}; only strided tensors are supported"
        )
    try:
        dtype = _dtype(meta["dtype"])
    except _Unsupported as error:
        raise _Unsupported(f"{what}: {error}") from None
    sizes = tuple(_sym_int(s, f"a size of {what}", hints) for s in _list(meta["sizes"]))
    strides = tuple(_sym_int(s, f"a stride of {what}", hints) for s in _list(meta["strides"]))
    offset = _sym_int(meta["storage_offset"], f"the storage offset of {what}", hints)
    if (
        any(type(size) is int and size < 0 for size in sizes)
        or len(strides) != len(sizes)
        or any(type(stride) is int and stride < 0 for stride in strides)
        or (type(offset) is int and offset < 0)
    ):
        raise ValueError(f"{what} has sizes {sizes}, strides {strides} and storage offset {offset}")
    return recorded_meta(sizes, dtype, strides, offset), strides, offset


@contextmanager
def _reporting(where: str, entry: str) -> Iterator[None]:
    """Turn what goes wrong while reading one part of an entry into a LoadError naming both."""
    try:
        yield
    except _Symbolic as error:
        raise LoadError(f"{where}: {error}; {SYMBOLIC}", entry=entry) from None
    except _Unsupported as error:
        raise LoadError(f"{where}: {error}", entry=entry) from None
    except KeyError as error:
        raise LoadError(f"{where}: malformed, missing key {error}", entry=entry) from None
    except (ValueError, TypeError, AttributeError, IndexError) as error:
        raise LoadError(f"{where}: malformed, {error}", entry=entry) from None
    except RecursionError:
        raise LoadError(f"{where}: malformed, nested too deeply", entry=entry) from None


# -- the graph ---------------------------------------------------------------------------------------


class _ModelReader:
    """model.json's `graph_module` -> Graph. Values are named as in the archive."""

    def __init__(
        self, graph_module: dict[str, Any], entry: str, payloads: _Payloads, depth: int = 0
    ) -> None:
        self.graph = graph_module["graph"]
        self.signature = graph_module["signature"]
        self.depth = depth  # how many graphs enclose this one (a cond branch is at depth 1)
        self.entry = entry
        self.payloads = payloads
        self.values: dict[str, Value] = {}
        self.undefined_count = 0  # undefined results named so far
        # Example values of the symbols, from the hints of the sizes that are a bare symbol.
        self.hints: dict[str, int] = {}
        self.ranges: dict[str, tuple[int | float, int | float]] = {}
        self.sources: dict[str, str] = {}  # symbol -> the scalar value it is
        self.arguments: dict[str, Callable[[Any], Any]] = {
            "as_none": lambda payload: None,
            "as_tensor": self.tensor,
            "as_tensors": lambda payload: tuple(self.tensor(t) for t in _list(payload)),
            "as_nested_tensors": lambda payload: tuple(
                tuple(self.tensor(t) for t in _list(inner)) for inner in _list(payload)
            ),
            "as_optional_tensor": self.optional_tensor,
            "as_optional_tensors": lambda payload: tuple(
                self.optional_tensor(t) for t in _list(payload)
            ),
            "as_int": _int,
            "as_float": _float,
            "as_bool": _bool,
            "as_string": _str,
            "as_complex": _complex,
            "as_sym_int": _sym("as_int", _int, self.scalar),
            "as_sym_float": _sym("as_float", _float, self.scalar),
            "as_sym_bool": _sym("as_bool", _bool, self.scalar),
            "as_scalar_type": _dtype,
            "as_memory_format": _enum(_MEMORY_FORMATS, "memory format"),
            "as_layout": _enum(_LAYOUTS, "layout"),
            "as_device": _device,
            "as_graph": self.subgraph,
        }
        for element in ("int", "float", "bool", "string", "sym_int", "sym_float", "sym_bool"):
            convert = self.arguments[f"as_{element}"]
            self.arguments[f"as_{element}s"] = _each(convert)
        self.arguments["as_int_lists"] = lambda payload: tuple(
            tuple(map(_int, _list(p))) for p in _list(payload)
        )
        self.arguments["as_float_lists"] = lambda payload: tuple(
            tuple(map(_float, _list(p))) for p in _list(payload)
        )

    def read(self, name: str) -> Graph:
        with _reporting("graph", self.entry):  # what the parts below do not attribute more closely
            inputs = self.read_inputs()
            check_known_aten_ops(self.op_uses(), entry=self.entry)
            read = (
                self.read_node(index, node) for index, node in enumerate(_list(self.graph["nodes"]))
            )
            nodes = [node for node in read if node is not None]
            outputs = self.read_outputs()
            return Graph(name, inputs, nodes, outputs, self.read_symbols(inputs))

    def subgraph(self, payload: Any) -> Graph:
        """A higher-order op's graph (a cond branch): `{"name", "graph"}`, the graph holding
        its own inputs, nodes, outputs and tensor_values, its values named apart from ours."""
        name = _str(payload["name"])
        if _GRAPH_NAME.fullmatch(name) is None:
            raise ValueError(f"graph name {_short(name)} is not an identifier")
        if self.depth + 1 >= MAX_GRAPH_DEPTH:
            raise _Unsupported(f"graph {name} nests graphs more than {MAX_GRAPH_DEPTH} deep")
        graph = payload["graph"]
        if type(graph) is not dict:
            raise ValueError(f"graph {name} is not an object")
        nested = _ModelReader({"graph": graph, "signature": None}, self.entry, self.payloads)
        nested.depth, nested.hints, nested.ranges = self.depth + 1, self.hints, self.ranges
        inputs = []
        for position, placeholder in enumerate(_list(graph["inputs"])):
            argument = _nested_tensor(placeholder, f"graph {name}, input {position}")
            inputs.append(GraphInput(nested.define(argument["name"])))
        check_known_aten_ops(nested.op_uses(), entry=self.entry)
        read = (nested.read_node(index, node) for index, node in enumerate(_list(graph["nodes"])))
        nodes = [node for node in read if node is not None]
        outputs = []
        for position, result in enumerate(_list(graph["outputs"])):
            argument = _nested_tensor(result, f"graph {name}, output {position}")
            outputs.append(GraphOutput(nested.tensor(argument)))
        return Graph(name, inputs, nodes, outputs)

    def read_symbols(self, inputs: list[GraphInput]) -> dict[str, Symbol]:
        values = [value.meta for value in self.values.values()]
        return graph_symbols(inputs, values, self.ranges, self.hints, self.sources)

    def scalar(self, name: Any) -> Value:
        """The Value of a symbolic scalar (a size computed by an earlier node)."""
        if name not in self.values:
            raise ValueError(f"symbolic value {_short(name)} is used before it is defined")
        return self.values[name]

    def define_scalar(self, name: Any, kind: type, *, user_input: bool = False) -> Value:
        if not is_value_name(name):
            raise ValueError(f"value name {_short(name)} is not an identifier")
        if name in self.values:
            raise ValueError(f"value %{name} is defined twice")
        value = self.values[name] = Value(name, ScalarMeta(kind))
        # A scalar that is exactly a symbol (`u0` of `x.item()`) is where that symbol comes from.
        expression = (self.graph.get("sym_int_values") or {}).get(name)
        if kind is int and type(expression) is dict and "as_expr" in expression:
            # A user input's hint is its symbol's example (the value it was exported with).
            hints = self.hints if user_input else {}
            size = _expression(expression["as_expr"], f"value %{name}", hints)
            if type(size) is SymExpr and len(names := free_symbols(size)) == 1:
                if size.same(symbol(next(iter(names)))):
                    self.sources.setdefault(next(iter(names)), name)
        return value

    # -- values --------------------------------------------------------------------------------
    def define(self, name: Any) -> Value:
        if not is_value_name(name):
            raise ValueError(f"tensor name {_short(name)} is not an identifier")
        if name in self.values:
            raise ValueError(f"tensor %{name} is defined twice")
        tensor_values = self.graph["tensor_values"]
        if name not in tensor_values:
            raise ValueError(f"tensor %{name} has no entry in tensor_values")
        meta, _, _ = _tensor_meta(tensor_values[name], f"tensor %{name}", self.hints)
        value = self.values[name] = Value(name, meta)
        return value

    def define_undefined(self) -> Value:
        """An undefined result (a backward op's masked None). The archive names it nothing: it
        is `undefined_<k>`, the k-th of the graph, as `from_fx` names it."""
        name = undefined_name(self.undefined_count)
        self.undefined_count += 1
        if name in self.values:
            raise ValueError(f"tensor %{name} is defined twice")
        value = self.values[name] = Value(name, UNDEFINED)
        return value

    def tensor(self, payload: Any) -> Value:
        name = payload["name"]
        if name not in self.values:
            raise ValueError(f"tensor {_short(name)} is used before it is defined")
        return self.values[name]

    def optional_tensor(self, payload: Any) -> Value | None:
        variant, value = _union(payload)
        if variant == "as_none":
            return None
        if variant == "as_tensor":
            return self.tensor(value)
        raise ValueError(f"unknown optional-tensor variant {_short(variant)}")

    def argument(self, arg: Any) -> Any:
        variant, payload = _union(arg)
        convert = self.arguments.get(variant)
        if convert is None:
            raise _Unsupported(f"argument kind {_short(variant)} is not supported")
        return convert(payload)

    # -- nodes ---------------------------------------------------------------------------------
    def op_uses(self) -> Iterator[tuple[str, str]]:
        """(aten op, node) for every node naming a torch op and computing something (output-less
        checks are skipped, as read_node skips them; malformed nodes are left to read_node)."""
        for index, node in enumerate(_list(self.graph["nodes"])):
            if type(node) is not dict or not node.get("outputs"):
                continue
            if type(node.get("target")) is str and node["target"].startswith("torch.ops."):
                name = node.get("name")
                yield (
                    node["target"].removeprefix("torch.ops."),
                    f"node {index} ({name})" if is_value_name(name) else f"node {index}",
                )

    def read_node(self, index: int, node: Any) -> Node | None:
        name = node.get("name") if type(node) is dict else None
        where = f"node {index} ({name})" if is_value_name(name) else f"node {index}"
        with _reporting(where, self.entry):
            target = node.get("target")
            if not _list(node["outputs"]) and not (
                type(target) is str and target.removeprefix("torch.ops.") in KEPT_CHECKS
            ):
                return None  # output-less checks such as aten._assert_tensor_metadata
            target = _str(node["target"])
            scalar = _is_scalar_target(target)  # its overload follows from its operands' kinds
            op = "" if scalar else _op_name(target, where, self.entry)
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for named in _list(node["inputs"]):
                name = _str(named["name"])
                value = self.argument_at(named["arg"], f"{where}, argument {name!r}")
                if named.get("kind") == 1:
                    if kwargs:
                        raise ValueError(f"positional argument {name!r} follows a keyword argument")
                    args.append(value)
                elif name in kwargs:
                    raise ValueError(f"argument {name!r} is given twice")
                else:
                    kwargs[name] = value  # kind 2, or no kind (older files): by name
            if scalar:
                op = scalar_op(target, (*args, *kwargs.values()), where, entry=self.entry)
            results = tuple(self.read_results(_list(node["outputs"]), where))
            metadata = node.get("metadata") or {}
            provenance = Provenance(source=user_source(metadata.get("stack_trace")))
        return Node(op, tuple(args), kwargs, results, provenance)

    def argument_at(self, arg: Any, where: str) -> Any:
        with _reporting(where, self.entry):
            return self.argument(arg)

    def read_results(self, outputs: list[Any], where: str) -> Iterator[Value]:
        for position, output in enumerate(outputs):
            variant, payload = _union(output)
            if variant == "as_tensor":
                yield self.define(payload["name"])
            elif variant == "as_tensors":
                for tensor in _list(payload):
                    yield self.define(tensor["name"])
            elif variant in _SCALAR_RESULTS:
                yield self.define_scalar(payload["as_name"], _SCALAR_RESULTS[variant])
            elif variant == "as_none":
                yield self.define_undefined()
            else:
                raise _Unsupported(f"output {position} of kind {_short(variant)} is not supported")

    # -- signature -------------------------------------------------------------------------------
    def read_inputs(self) -> list[GraphInput]:
        placeholders = _list(self.graph["inputs"])
        specs = _list(self.signature["input_specs"])
        with _reporting("graph signature", self.entry):
            if len(placeholders) != len(specs):
                raise ValueError(f"{len(specs)} input specs for {len(placeholders)} graph inputs")
        inputs = []
        for position, (placeholder, spec) in enumerate(zip(placeholders, specs)):
            where = f"input {position}"
            with _reporting(where, self.entry):
                graph_input = self.read_input(placeholder, spec)
            if graph_input is not None:
                inputs.append(graph_input)
        return inputs

    def read_input(self, placeholder: Any, spec: Any) -> GraphInput | None:
        role, payload = _union(spec)
        if role == "constant_input":
            return None  # a Python constant the exporter specialized: its value is inlined in the nodes
        if role == "user_input":
            variant, argument = _union(payload["arg"])
            if variant == "as_sym_int":  # an int input marked dynamic: it binds its symbol
                name = argument["as_name"]
                if _union(placeholder) != ("as_sym_int", {"as_name": name}):
                    raise ValueError(
                        f"the signature names %{name} but the graph input is {_short(placeholder)}"
                    )
                return GraphInput(self.define_scalar(name, int, user_input=True))
            if variant in ("as_sym_float", "as_sym_bool"):
                raise _Symbolic("is a symbolic scalar (only int ones are read)")
            if variant != "as_tensor":
                raise _Unsupported(
                    f"user input of kind {_short(variant)} is not supported (tensors only)"
                )
            name = argument["name"]
        elif role in _INPUT_ROLES:
            name = payload["arg"]["name"]
        else:
            raise _Unsupported(f"input kind {_short(role)} is not supported")
        if _union(placeholder) != ("as_tensor", {"name": name}):
            raise ValueError(
                f"the signature names %{name} but the graph input is {_short(placeholder)}"
            )
        value = self.define(name)
        value.meta = input_meta(value.meta)
        if role == "user_input":
            return GraphInput(value)
        kind, target_key = _INPUT_ROLES[role]
        target = _str(payload[target_key])
        in_constants = role == "tensor_constant" or (
            role == "buffer" and payload.get("persistent") is False
        )
        data = self.payloads.tensor(_CONSTANTS_DIR if in_constants else _WEIGHTS_DIR, target, value)
        return GraphInput(value, kind, target, data)

    def read_outputs(self) -> list[GraphOutput]:
        outputs = []
        for position, spec in enumerate(_list(self.signature["output_specs"])):
            with _reporting(f"output {position}", self.entry):
                role, payload = _union(spec)
                if role not in _OUTPUT_ROLES:
                    raise _Unsupported(f"output kind {_short(role)} is not supported")
                kind, target_key = _OUTPUT_ROLES[role]
                argument = payload["arg"]
                if role == "user_output":
                    variant, argument = _union(argument)
                    if variant in _SCALAR_RESULTS:
                        argument = {"name": argument["as_name"]}
                    elif variant != "as_tensor":
                        raise _Unsupported(
                            f"user output of kind {_short(variant)} is not supported (tensors only)"
                        )
                target = _str(payload[target_key]) if target_key else None
                outputs.append(GraphOutput(self.tensor(argument), kind, target))
        return outputs


def _is_scalar_target(target: str) -> bool:
    """Python's operators, torch.sym_* and math.* (computing on sizes and the floats made from
    them), as opposed to torch ops."""
    return target.startswith(("_operator.", "torch.sym_", "math."))


def _op_name(target: str, where: str, entry: str) -> str:
    """'torch.ops.aten.add.Tensor' -> 'aten.add.Tensor' ('torch.ops.mylib.f.default' ->
    'mylib.f.default'), refusing what we cannot read."""
    op = target.removeprefix("torch.ops.")
    if op.startswith(f"{HIGHER_ORDER}."):
        if higher_order_op(op) is None:
            known = ", ".join(sorted(HIGHER_ORDER_OPS))
            raise LoadError(
                f"{where}: {target} is not supported (the control flow read is: {known})",
                entry=entry,
            )
        return op
    if op == target or op.count(".") != 2:
        raise LoadError(
            f"{where}: {target} is not an op (torch.ops.namespace.name.overload); only Core ATen "
            "graphs, with custom ops, are supported",
            entry=entry,
        )
    check_known_aten_op(op, where, entry=entry)
    return op


# -- weights and constants -----------------------------------------------------------------------------


class _Payloads:
    """Parameters, buffers and constants rebuilt from the raw storages in data/weights/ and
    data/constants/. A storage shared by several tensors is read once."""

    def __init__(self, archive: _Archive, model_name: str, budget: int | None = None) -> None:
        self.archive = archive
        self.model_name = model_name
        self.configs: dict[str, tuple[str, dict[str, Any]]] = {}
        self.storages: dict[str, np.ndarray] = {}
        self.budget = default_memory_budget() if budget is None else budget
        self.spent = 0

    def refuse_pickled(self) -> None:
        """Refuse an archive with any pickled tensor, used or not: nothing reads it here, but
        a tool that loads the archive the ordinary way would unpickle it (and run its code)."""
        for directory, config_file in _CONFIG_FILE.items():
            if not self.archive.has(directory + config_file.format(self.model_name)):
                continue
            entry, config = self.config(directory)
            for fqn, payload in config.items():
                if type(payload) is dict and payload.get("use_pickle") is True:
                    raise LoadError(
                        f"{fqn!r} is stored pickled (use_pickle: true, a tensor "
                        "subclass); aten2prims never unpickles",
                        entry=entry,
                    )

    def config(self, directory: str) -> tuple[str, dict[str, Any]]:
        if directory not in self.configs:
            relative = directory + _CONFIG_FILE[directory].format(self.model_name)
            entry = self.archive.member(relative)
            document = self.archive.json(relative)
            if type(document.get("config")) is not dict:
                raise LoadError("malformed payload config: no 'config' object", entry=entry)
            self.configs[directory] = entry, document["config"]
        return self.configs[directory]

    def tensor(self, directory: str, fqn: str, value: Value) -> np.ndarray:
        """A contiguous array of its own holding the tensor `fqn` (the graph input `value`)."""
        config_entry, config = self.config(directory)
        where = f"{fqn!r}"
        if fqn not in config:
            raise LoadError(
                f"no entry for {fqn!r}, which input %{value.name} needs", entry=config_entry
            )
        with _reporting(where, config_entry):
            payload = config[fqn]
            if _bool(payload["use_pickle"]):
                raise _Unsupported(
                    "is stored pickled (use_pickle: true, a tensor subclass); aten2prims never unpickles"
                )
            path_name = _str(payload["path_name"])
            if not _inside(path_name):
                raise _Unsupported(f"path_name {path_name!r} points outside {directory}")
            meta, strides, offset = _tensor_meta(payload["tensor_meta"], where)
            if (meta.shape, meta.dtype) != (value.shape, value.dtype):
                raise ValueError(
                    f"its stored meta {meta} disagrees with graph input %{value.name}: {value.meta}"
                )
        return self.rebuild(directory + path_name, fqn, meta, strides, offset)

    def rebuild(
        self, relative: str, fqn: str, meta: TensorMeta, strides: tuple[int, ...], offset: int
    ) -> np.ndarray:
        """The tensor as an array of its own: a contiguous copy, or — when its strides repeat
        elements (a stride-0 broadcast) — a read-only view over a copy of just the elements it
        spans, so that a small storage never becomes a huge array."""
        dtype = meta.dtype
        count = math.prod(meta.shape)
        if count == 0:
            return np.zeros(meta.shape, dtype.numpy)
        entry = self.archive.member(relative)
        if not self.archive.has(relative):
            raise LoadError(f"missing from the archive (it holds {fqn!r})", entry=entry)
        if offset < 0 or any(stride < 0 for stride in strides):
            raise LoadError(
                f"{fqn!r} has a negative stride or offset ({strides}, {offset})", entry=entry
            )
        if max((offset, *strides)) * dtype.itemsize >= _MAX_ADDRESS:
            raise LoadError(
                f"{fqn!r} has a stride or offset beyond any address ({strides}, {offset})",
                entry=entry,
            )
        # A size-1 dim's stride is never used to address anything (torch writes any value there).
        strides = tuple(0 if size == 1 else stride for size, stride in zip(meta.shape, strides))
        needed = offset + sum((size - 1) * stride for size, stride in zip(meta.shape, strides)) + 1
        stored = self.archive.size(relative)
        if stored % dtype.itemsize:
            raise LoadError(
                f"{stored} bytes is not a whole number of {dtype} elements "
                f"({dtype.itemsize} bytes each), as {fqn!r} needs",
                entry=entry,
            )
        available = stored // dtype.itemsize
        if needed > available:
            raise LoadError(
                f"holds {available} {dtype} element(s), but {fqn!r} (sizes {list(meta.shape)}, strides "
                f"{list(strides)}, offset {offset}) needs {needed}",
                entry=entry,
            )
        span = needed - offset
        if (
            offset == 0
            and dtype is not DType.bool
            and strides == _row_major(meta.shape)
            and relative not in self.storages
        ):
            # The common case: the tensor is its storage's first `count` elements, row-major;
            # they are read straight into the array (no other copy is ever made of them).
            self.spend(count * dtype.itemsize, fqn, entry)
            array = np.empty(meta.shape, dtype.numpy)
            self.archive.read_into(relative, array)
            return array
        dense = count <= span  # a copy costs no more than the bytes read
        self.spend(
            needed * dtype.itemsize + (count if dense else span) * dtype.itemsize, fqn, entry
        )
        storage = self.storage(relative, needed * dtype.itemsize)
        # bool storages are read as bytes, so that any nonzero byte becomes a proper True
        elements = storage[: needed * dtype.itemsize].view(
            np.uint8 if dtype is DType.bool else dtype.numpy
        )[offset:]
        if dtype is DType.bool:
            elements = elements != 0
        elif not dense:
            elements = elements.copy()  # the view must not keep the whole storage alive
        view = np.lib.stride_tricks.as_strided(
            elements,
            shape=meta.shape,
            strides=tuple(stride * elements.itemsize for stride in strides),
            writeable=False,
        )
        return np.array(view, order="C", copy=True) if dense else view

    def spend(self, nbytes: int, fqn: str, entry: str) -> None:
        """Count bytes the reader is about to allocate against the memory budget."""
        self.spent += nbytes
        if self.spent > self.budget:
            raise LoadError(
                f"reading {fqn!r} takes the archive's tensors to {format_bytes(self.spent)}, over "
                f"the memory budget of {format_bytes(self.budget)}",
                entry=entry,
            )

    def storage(self, relative: str, nbytes: int) -> np.ndarray:
        """The first `nbytes` of a storage entry (read once; again only if more are needed)."""
        cached = self.storages.get(relative)
        if cached is None or cached.size < nbytes:
            cached = np.empty(nbytes, np.uint8)
            self.archive.read_into(relative, cached)
            self.storages[relative] = cached
        return cached


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A row-major tensor's strides in elements, 0 on size-1 dims (as `rebuild` writes them)."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(0 if size == 1 else step)
        step *= size
    return tuple(reversed(strides))


def _inside(path_name: str) -> bool:
    """A plain relative path that stays inside its directory: not absolute, no drive, no '..'."""
    if not path_name or path_name.startswith("/") or "\\" in path_name or ":" in path_name:
        return False
    return all(part not in ("", ".", "..") for part in path_name.split("/"))
