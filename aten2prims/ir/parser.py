"""Parser of the text form (grammar in docs/ir.md): `parse(text) -> Graph`.

A hand-written recursive-descent parser over a small tokenizer. Values must be defined before
use; names are unique. Own-line `#` comments are free text; a `#` comment after a node on the
same line is that node's provenance.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

import attrs

from ..errors import ParseError
from ..limits import MAX_GRAPH_DEPTH
from .dtypes import DType
from .graph import Graph, GraphInput, GraphOutput, InputKind, Node, OutputKind, Provenance
from .symbolic import ExprSyntaxError, Symbol, SymBool, SymExpr, SymFloat, parse_expr
from .values import (
    SCALAR_KINDS,
    UNDEFINED,
    Device,
    Layout,
    MemoryFormat,
    Meta,
    ScalarMeta,
    TensorMeta,
    Value,
)

_TOKEN = re.compile(
    r"""
    (?P<newline>\n)
  | (?P<space>[ \t\r]+)
  | (?P<comment>\#[^\n]*)
  | (?P<arrow>->)
  | (?P<value>%[A-Za-z0-9_]+)
  | (?P<graphref>@[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?|\d+)|-inf\b)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[()\[\],:={}])
  | (?P<symop>//|<=|>=|!=|[-+*%<>!/])
    """,
    re.VERBOSE | re.ASCII,  # `\d` is 0-9 only: '٣2' is not the size 32
)
# Python refuses int() of more than 4300 digits; sizes must fit int64 (what NumPy can index).
_MAX_INT_DIGITS = 4000
_MAX_SIZE = 2**63 - 1
# Lists nest no deeper than this (the parser recurses per level).
MAX_LIST_DEPTH = 64

_KEYWORD_LITERALS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "inf": math.inf,
    "nan": math.nan,
}
_ENUM_LITERALS: dict[str, Any] = {
    **{layout.value: layout for layout in Layout},
    **{fmt.value: fmt for fmt in MemoryFormat},
    **{dtype.short: dtype for dtype in DType},
}
# Words that cannot name a symbol: the text form's keywords and literals.
_RESERVED = frozenset({"in", "example", "unbacked", "from", "sym", *_KEYWORD_LITERALS})
_INPUT_KINDS = {kind.value: kind for kind in InputKind}
_OUTPUT_KINDS = {kind.value: kind for kind in OutputKind}


@attrs.frozen(slots=True)
class _GraphRef:
    """`@name` in a node's operands: the nested graph of that name printed beneath the node."""

    name: str
    token: Any


@attrs.define(slots=True)
class _Token:
    kind: str
    text: str
    line: int
    column: int
    offset: int = 0  # in the text: symbolic expressions are read from their source text


def _tokenize(text: str, source_name: str) -> list[_Token]:
    tokens: list[_Token] = []
    line, line_start, position = 1, 0, 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            problem = (
                "unterminated string"
                if text[position] == '"'
                else f"unexpected character {text[position]!r}"
            )
            raise ParseError(
                problem,
                line=line,
                column=position - line_start + 1,
                source_name=source_name,
            )
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            tokens.append(_Token(kind, match.group(), line, position - line_start + 1, position))
        if kind == "newline":
            line += 1
            line_start = match.end()
        position = match.end()
    tokens.append(_Token("end", "", line, position - line_start + 1))
    return tokens


class _Parser:
    def __init__(self, text: str, source_name: str) -> None:
        self.text = text
        self.source_name = source_name
        self.tokens = _tokenize(text, source_name)
        self.position = 0
        self.values: dict[str, Value] = {}
        self.depth = 0  # how many graphs enclose the one being read

    # -- token helpers -----------------------------------------------------------------------
    def peek(self) -> _Token:
        return self.tokens[self.position]

    def next(self) -> _Token:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def fail(self, message: str, token: _Token | None = None) -> NoReturn:
        token = token or self.peek()
        shown = repr(token.text) if token.kind != "end" else "end of input"
        raise ParseError(
            f"{message}, found {shown}",
            line=token.line,
            column=token.column,
            source_name=self.source_name,
        )

    def expect(self, kind: str, text: str | None = None) -> _Token:
        token = self.peek()
        if token.kind != kind or (text is not None and token.text != text):
            self.fail(f"expected {text or kind}")
        return self.next()

    def accept(self, kind: str, text: str | None = None) -> _Token | None:
        token = self.peek()
        if token.kind == kind and (text is None or token.text == text):
            return self.next()
        return None

    def skip_blank_lines(self) -> None:
        while self.peek().kind in ("newline", "comment"):
            self.next()

    def skip_newlines(self) -> None:
        while self.peek().kind == "newline":
            self.next()

    # -- grammar -----------------------------------------------------------------------------
    def parse_graph(self) -> Graph:
        self.skip_blank_lines()
        symbols: dict[str, Symbol] = {}
        checks: list[SymBool] = []
        while self.peek().kind == "ident" and self.peek().text in ("symbol", "check"):
            if self.next().text == "symbol":
                symbol_ = self.parse_symbol()
                if symbol_.name in symbols:
                    self.fail(f"symbol {symbol_.name} is declared twice")
                symbols[symbol_.name] = symbol_
            else:
                start = self.peek()
                condition = self.parse_expression(self.until_end_of_line(), start)
                if type(condition) is not SymBool:
                    self.fail("expected a condition on symbols such as 's0 != 1'", start)
                checks.append(condition)
            self.end_of_line(allow_comment=False)
            self.skip_blank_lines()
        graph = self.parse_body(symbols, checks)
        self.skip_blank_lines()
        if self.peek().kind != "end":
            self.fail("expected end of input after 'return'")
        return graph

    def parse_body(self, symbols: dict[str, Symbol], checks: list[SymBool]) -> Graph:
        """`graph NAME(...) -> (...):`, its nodes (each followed by its nested graphs) and its
        `return`."""
        self.expect("ident", "graph")
        name = self.expect("ident").text
        self.expect("punct", "(")
        inputs: list[GraphInput] = []
        self.skip_newlines()
        while not self.accept("punct", ")"):
            inputs.append(self.parse_input())
            self.skip_newlines()
            if not self.accept("punct", ","):
                self.skip_newlines()
                self.expect("punct", ")")
                break
            self.skip_newlines()
        self.expect("arrow")
        declared = self.parse_meta_list()
        self.expect("punct", ":")
        self.end_of_line(allow_comment=True)
        graph = Graph(name=name, inputs=inputs, symbols=symbols, checks=checks)
        while True:
            self.skip_blank_lines()
            token = self.peek()
            if token.kind == "ident" and token.text == "return":
                self.next()
                graph.outputs = self.parse_outputs()
                self.end_of_line(allow_comment=True)
                break
            if token.kind == "end":
                self.fail("expected 'return'")
            graph.nodes.append(self.parse_node())
        actual = [o.value.meta for o in graph.outputs]
        if actual != declared:
            raise ParseError(
                f"graph {name} declares results ({', '.join(map(str, declared))}) but returns "
                f"({', '.join(map(str, actual))})",
                line=token.line,
                column=token.column,
                source_name=self.source_name,
            )
        return graph

    def end_of_line(self, *, allow_comment: bool) -> str | None:
        comment = None
        if allow_comment and self.peek().kind == "comment":
            comment = self.next().text
        token = self.peek()
        if token.kind == "end":
            return comment
        self.expect("newline")
        return comment

    def define(self, token: _Token, meta: Meta) -> Value:
        name = token.text[1:]
        if name in self.values:
            self.fail(f"%{name} is defined twice", token)
        value = Value(name, meta)
        self.values[name] = value
        return value

    def parse_input(self) -> GraphInput:
        token = self.expect("value")
        self.expect("punct", ":")
        value = self.define(token, self.parse_meta())
        kind = InputKind.USER_INPUT
        target = None
        role = self.peek()
        if role.kind == "ident" and role.text in _INPUT_KINDS:
            self.next()
            kind = _INPUT_KINDS[role.text]
            if self.peek().kind == "string":
                target = self.string(self.next())
        return GraphInput(value, kind, target)

    def parse_outputs(self) -> list[GraphOutput]:
        self.expect("punct", "(")
        outputs: list[GraphOutput] = []
        if self.accept("punct", ")"):
            return outputs
        while True:
            value = self.use(self.expect("value"))
            kind = OutputKind.USER_OUTPUT
            target = None
            role = self.peek()
            if role.kind == "ident" and role.text in _OUTPUT_KINDS:
                self.next()
                kind = _OUTPUT_KINDS[role.text]
                if self.peek().kind == "string":
                    target = self.string(self.next())
            outputs.append(GraphOutput(value, kind, target))
            if self.accept("punct", ")"):
                return outputs
            self.expect("punct", ",")

    def parse_meta_list(self) -> list[Meta]:
        self.expect("punct", "(")
        metas: list[Meta] = []
        if self.accept("punct", ")"):
            return metas
        while True:
            metas.append(self.parse_meta())
            if self.accept("punct", ")"):
                return metas
            self.expect("punct", ",")

    def parse_symbol(self) -> Symbol:
        """After `symbol`: `NAME in [LOW, HIGH] [example INT] [unbacked] [from VALUE]`."""
        name = self.expect("ident")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.text) or name.text in _RESERVED:
            self.fail("expected a symbol name", name)
        self.expect("ident", "in")
        self.expect("punct", "[")
        lower = self.parse_bound()
        self.expect("punct", ",")
        upper = self.parse_bound()
        self.expect("punct", "]")
        if lower > upper:
            self.fail(f"symbol {name.text} has an empty range [{lower}, {upper}]", name)
        example = None
        if self.accept("ident", "example"):
            token = self.expect("number")
            if not re.fullmatch(r"-?[0-9]+", token.text):
                self.fail("expected an integer example value", token)
            example = self.integer(token)
            if not lower <= example <= upper:
                self.fail(f"example {example} of {name.text} is outside [{lower}, {upper}]", token)
        backed = self.accept("ident", "unbacked") is None
        value = None
        if self.accept("ident", "from"):
            value = self.expect("value").text[1:]
        return Symbol(name.text, lower, upper, example, backed, value)

    def parse_bound(self) -> int | float:
        token = self.next()
        if token.kind == "number" and re.fullmatch(r"-?[0-9]+", token.text):
            return self.integer(token)
        if token.text in ("inf", "-inf"):
            return math.inf if token.text == "inf" else -math.inf
        self.fail("expected an integer bound or inf", token)

    def until_end_of_line(self) -> list[_Token]:
        tokens = []
        while self.peek().kind not in ("newline", "end", "comment"):
            tokens.append(self.next())
        return tokens

    def until_closing(self, closing: str) -> list[list[_Token]]:
        """The tokens up to the `closing` bracket that ends the current list (consumed), split at
        its top-level commas."""
        pieces: list[list[_Token]] = [[]]
        depth = 0
        while True:
            token = self.next()
            if token.kind in ("end", "newline"):
                self.fail(f"expected {closing!r}", token)
            if token.kind == "punct" and token.text in "([{":
                depth += 1
            elif token.kind == "punct" and token.text in ")]}":
                if depth == 0:
                    if token.text != closing:
                        self.fail(f"expected {closing!r}", token)
                    return pieces
                depth -= 1
            elif token.kind == "punct" and token.text == "," and depth == 0:
                pieces.append([])
                continue
            pieces[-1].append(token)

    def parse_expression(self, tokens: list[_Token], near: _Token) -> Any:
        if not tokens:
            self.fail("expected an expression", near)
        first, last = tokens[0], tokens[-1]
        source = self.text[first.offset : last.offset + len(last.text)]
        try:
            return parse_expr(source)
        except ExprSyntaxError as error:
            raise ParseError(
                f"malformed symbolic expression {source!r}: {error}",
                line=first.line,
                column=first.column,
                source_name=self.source_name,
            ) from None
        except RecursionError:
            self.fail("symbolic expression nested too deeply", first)

    def parse_size(self, tokens: list[_Token], near: _Token) -> Any:
        if len(tokens) == 1 and tokens[0].kind == "number":
            size = tokens[0]
            if not re.fullmatch(r"[0-9]+", size.text):
                self.fail("expected a non-negative integer size", size)
            if self.integer(size) > _MAX_SIZE:
                self.fail("a size must be below 2**63", size)
            return self.integer(size)
        size = self.parse_expression(tokens, near)
        if type(size) is not SymExpr:
            self.fail("expected a non-negative integer size or a symbolic size", tokens[0])
        return size

    def parse_meta(self) -> Meta:
        token = self.expect("ident")
        if token.text in SCALAR_KINDS:
            return ScalarMeta(SCALAR_KINDS[token.text])
        if token.text == "undefined":
            return UNDEFINED
        try:
            dtype = DType.from_short(token.text)
        except ValueError:
            self.fail("expected a type such as f32[2, 3], int or undefined", token)
        opening = self.expect("punct", "[")
        shape: list[Any] = []
        if not self.accept("punct", "]"):
            shape = [self.parse_size(piece, opening) for piece in self.until_closing("]")]
        strides: list[Any] | None = None
        brace = self.peek()
        if self.accept("punct", "{"):
            strides = [self.parse_size(piece, brace) for piece in self.until_closing("}")]
            if len(strides) != len(shape):
                self.fail(f"{len(strides)} strides for {len(shape)} dimension(s)", brace)
        offset: Any = 0
        if self.accept("symop", "+"):
            if self.peek().kind == "number":
                offset = self.parse_count("storage offset")
            else:
                paren = self.expect("punct", "(")
                pieces = self.until_closing(")")
                if len(pieces) != 1:
                    self.fail("expected one symbolic storage offset", paren)
                offset = self.parse_size(pieces[0], paren)
        if strides is None:
            return TensorMeta(tuple(shape), dtype, storage_offset=offset)
        return TensorMeta(tuple(shape), dtype, tuple(strides), offset)

    def parse_count(self, what: str) -> int:
        token = self.expect("number")
        if not re.fullmatch(r"[0-9]+", token.text):
            self.fail(f"expected a non-negative integer {what}", token)
        if self.integer(token) > _MAX_SIZE:
            self.fail(f"a {what} must be below 2**63", token)
        return self.integer(token)

    def parse_node(self) -> Node:
        results: list[Value] = []
        if self.peek().kind == "value":
            pending: list[tuple[_Token, Meta]] = []
            while True:
                token = self.expect("value")
                self.expect("punct", ":")
                pending.append((token, self.parse_meta()))
                if self.accept("punct", "="):
                    break
                self.expect("punct", ",")
        else:
            pending = []
        op_token = self.expect("ident")
        if "." not in op_token.text:
            self.fail("expected a qualified op name such as prims.add", op_token)
        self.expect("punct", "(")
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        if not self.accept("punct", ")"):
            while True:
                token = self.peek()
                if token.kind == "ident" and self.tokens[self.position + 1].text == "=":
                    self.next()
                    self.next()
                    if token.text in kwargs:
                        self.fail(f"argument {token.text} given twice", token)
                    kwargs[token.text] = self.parse_operand()
                else:
                    if kwargs:
                        self.fail("positional operand after a named one")
                    args.append(self.parse_operand())
                if self.accept("punct", ")"):
                    break
                self.expect("punct", ",")
        # Results are defined after the operands are read: a node cannot use its own results.
        results = [self.define(token, meta) for token, meta in pending]
        comment = self.end_of_line(allow_comment=True)
        provenance = self.parse_provenance(comment, op_token) if comment else Provenance()
        refs = [a for a in (*args, *kwargs.values()) if type(a) is _GraphRef]
        if refs:
            graphs = self.parse_subgraphs(refs)
            args = [graphs[a.name] if type(a) is _GraphRef else a for a in args]
            kwargs = {k: graphs[a.name] if type(a) is _GraphRef else a for k, a in kwargs.items()}
        return Node(op_token.text, tuple(args), kwargs, tuple(results), provenance)

    def parse_subgraphs(self, refs: list[_GraphRef]) -> dict[str, Graph]:
        """The nested graphs a node names (`@name`), printed beneath it in the order named. Each
        has values of its own (names may repeat the enclosing graph's) and no declarations:
        its sizes use the enclosing graph's symbols."""
        graphs: dict[str, Graph] = {}
        if self.depth + 1 >= MAX_GRAPH_DEPTH:
            self.fail(f"graphs nest at most {MAX_GRAPH_DEPTH} deep", refs[0].token)
        for ref in refs:
            if ref.name in graphs:
                self.fail(f"the node names the nested graph @{ref.name} twice", ref.token)
            self.skip_blank_lines()
            start = self.peek()
            outer, self.values = self.values, {}
            self.depth += 1
            try:
                graph = self.parse_body({}, [])
            finally:
                self.values = outer
                self.depth -= 1
            if graph.name != ref.name:
                self.fail(f"expected the nested graph @{ref.name} here", start)
            graphs[ref.name] = graph
        return graphs

    def use(self, token: _Token) -> Value:
        name = token.text[1:]
        try:
            return self.values[name]
        except KeyError:
            self.fail(f"%{name} is used before it is defined", token)

    def string(self, token: _Token) -> str:
        """A string literal's value (JSON escapes)."""
        try:
            return json.loads(token.text)
        except (json.JSONDecodeError, RecursionError) as error:
            message = getattr(error, "msg", "malformed string")
            self.fail(f"malformed string literal ({message})", token)

    def integer(self, token: _Token) -> int:
        if len(token.text) > _MAX_INT_DIGITS:
            self.fail(f"an integer literal has at most {_MAX_INT_DIGITS} digits", token)
        return int(token.text)

    def parse_operand(self, depth: int = 0) -> Any:
        token = self.next()
        kind, text = token.kind, token.text
        if kind == "value":
            self.position -= 1
            return self.use(self.next())
        if kind == "number":
            if re.fullmatch(r"-?[0-9]+", text):
                return self.integer(token)
            return float(text)
        if kind == "string":
            return self.string(token)
        if kind == "graphref":
            if depth:
                self.fail("a nested graph is an operand of its own, not a list item", token)
            return _GraphRef(text[1:], token)
        if kind == "punct" and text == "[":
            if depth >= MAX_LIST_DEPTH:
                self.fail(f"lists nest at most {MAX_LIST_DEPTH} deep", token)
            items: list[Any] = []
            if self.accept("punct", "]"):
                return ()
            while True:
                items.append(self.parse_operand(depth + 1))
                if self.accept("punct", "]"):
                    return tuple(items)
                self.expect("punct", ",")
        if kind == "ident":
            if text in _KEYWORD_LITERALS:
                return _KEYWORD_LITERALS[text]
            if text in _ENUM_LITERALS:
                return _ENUM_LITERALS[text]
            if text == "complex":
                self.expect("punct", "(")
                real = self.parse_float()
                self.expect("punct", ",")
                imag = self.parse_float()
                self.expect("punct", ")")
                return complex(real, imag)
            if text == "sym" and self.peek().text == "(":
                opening = self.next()
                pieces = self.until_closing(")")
                if len(pieces) != 1:
                    self.fail("sym(...) holds one expression", opening)
                value = self.parse_expression(pieces[0], opening)
                if type(value) not in (SymExpr, SymBool, SymFloat):
                    self.fail("sym(...) holds an expression over symbols", opening)
                return value
            if text == "device":
                self.expect("punct", "(")
                name = self.string(self.expect("string"))
                self.expect("punct", ")")
                return Device(name)
        self.fail("expected an operand", token)

    def parse_float(self) -> float:
        """A float inside complex(...): a number, `inf` or `nan` (ints read as floats)."""
        token = self.next()
        if token.kind == "number" or (token.kind == "ident" and token.text in ("inf", "nan")):
            return float(token.text)
        self.fail("expected a float", token)

    def parse_provenance(self, comment: str, near: _Token) -> Provenance:
        body = comment[1:]
        tokens = _tokenize(body, self.source_name)
        origin_op = origin = source = None
        index = 0

        def bad() -> NoReturn:
            raise ParseError(
                f"expected provenance '# OP %NAME at \"SOURCE\"' after the node, found {comment!r}",
                line=near.line,
                column=near.column,
                source_name=self.source_name,
            )

        # `at` followed by a string introduces the source; any other leading word is the op.
        if tokens[index].kind == "ident" and not (
            tokens[index].text == "at" and tokens[index + 1].kind == "string"
        ):
            origin_op = tokens[index].text
            index += 1
        if tokens[index].kind == "value":
            origin = tokens[index].text[1:]
            index += 1
        if tokens[index].kind == "ident" and tokens[index].text == "at":
            if tokens[index + 1].kind != "string":
                bad()
            try:
                source = json.loads(tokens[index + 1].text)
            except json.JSONDecodeError:
                bad()
            index += 2
        if tokens[index].kind != "end":
            bad()
        return Provenance(origin_op, origin, source)


def parse(text: str, *, source_name: str = "<text>") -> Graph:
    """Parse the text form of a graph."""
    return _Parser(text, source_name).parse_graph()
