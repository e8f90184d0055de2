"""Importing a torch.fx graph of Core ATen ops held in memory: `from_fx(obj) -> Graph` for a
`torch.export.ExportedProgram` or a `torch.fx.GraphModule`. torch is imported when called.

The graph walks the fx nodes directly and comes out exactly as `load` reads the same program
saved with `torch.export.save`: the same value names (a multi-result node's results take the
names of their `getitem` users, or `<node>_unused_<i>`, as the serializer names them), metas,
operands (positional as in `node.args`, keyword in schema order), roles, provenance and data.
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import LoadError
from ..ir.graph import Graph, GraphInput, GraphOutput, InputKind, Node, OutputKind, Provenance
from ..ir.symbolic import ExprSyntaxError, SymExpr, free_symbols, parse_expr, symbol
from ..ir.values import UNDEFINED, Device, Layout, MemoryFormat, ScalarMeta, TensorMeta, Value
from ..limits import MAX_GRAPH_DEPTH
from ..schema.higher_order import HIGHER_ORDER_OPS, higher_order_op
from ..schema.higher_order import NAMESPACE as HIGHER_ORDER
from ..schema.registry import KEPT_CHECKS, SCALAR_TARGETS, aten_schema
from .common import (
    SYMBOLIC,
    check_known_aten_op,
    check_known_aten_ops,
    example_hint,
    graph_symbols,
    input_meta,
    recorded_meta,
    scalar_op,
    undefined_name,
    user_source,
    verified,
)
from .torch_interop import from_torch_dtype, to_numpy

_INPUT_KINDS = {
    "USER_INPUT": InputKind.USER_INPUT,
    "PARAMETER": InputKind.PARAMETER,
    "BUFFER": InputKind.BUFFER,
    "CONSTANT_TENSOR": InputKind.CONSTANT,
}
_OUTPUT_KINDS = {
    "USER_OUTPUT": OutputKind.USER_OUTPUT,
    "LOSS_OUTPUT": OutputKind.LOSS_OUTPUT,
    "BUFFER_MUTATION": OutputKind.BUFFER_MUTATION,
    "PARAMETER_MUTATION": OutputKind.PARAMETER_MUTATION,
    "USER_INPUT_MUTATION": OutputKind.USER_INPUT_MUTATION,
    "GRADIENT_TO_PARAMETER": OutputKind.GRADIENT_TO_PARAMETER,
    "GRADIENT_TO_USER_INPUT": OutputKind.GRADIENT_TO_USER_INPUT,
}


def from_fx(obj: Any, *, name: str = "graph") -> Graph:
    """The Graph of an ExportedProgram (inputs take their roles from its graph signature and
    their data from its state_dict and constants) or of a GraphModule (placeholders are user
    inputs, tensor attributes read by `get_attr` are constants). Raises LoadError for what
    `load` would refuse in the saved program (unknown ops, symbolic shapes, …)."""
    import torch

    ranges: dict[str, tuple[int | float, int | float]] = {}
    if isinstance(obj, torch.export.ExportedProgram):
        importer = _Importer(obj.graph, obj.graph_module)
        inputs = importer.exported_inputs(obj)
        nodes = importer.nodes()
        outputs = importer.exported_outputs(obj.graph_signature)
        # Derived dimensions (`s0 + 1`) are keyed by expressions: their symbols' ranges hold.
        ranges = {
            str(k): _range(v) for k, v in obj.range_constraints.items() if str(k).isidentifier()
        }
    elif isinstance(obj, torch.fx.GraphModule):
        importer = _Importer(obj.graph, obj)
        inputs = importer.module_inputs(obj)
        nodes = importer.nodes()
        outputs = importer.module_outputs()
    else:
        raise LoadError(
            f"from_fx expects a torch.export.ExportedProgram or a torch.fx.GraphModule, "
            f"got {type(obj).__name__}"
        )
    metas = [value.meta for value in importer.values.values()]
    try:
        symbols = graph_symbols(inputs, metas, ranges, importer.hints, importer.sources)
    except ValueError as error:
        raise LoadError(str(error)) from None
    return verified(Graph(name, inputs, nodes, outputs, symbols))


def _range(bounds: Any) -> tuple[int | float, int | float]:
    """A ValueRanges of torch's as (lower, upper), an unbounded side as an infinity (torch's
    serializer writes the same ends: the least int above, the greatest below)."""
    import math

    def end(x: Any, infinite: float, rounding: Any) -> int | float:
        try:
            value = rounding(x)
        except (TypeError, OverflowError, ValueError):
            return infinite
        return infinite if abs(value) >= 2**63 - 1 else int(value)

    return end(bounds.lower, -math.inf, math.ceil), end(bounds.upper, math.inf, math.floor)


class _Importer:
    def __init__(self, graph: Any, module: Any, depth: int = 0) -> None:
        self.graph = graph
        self.module = module  # owns the graphs a higher-order op's get_attr operands name
        self.depth = depth  # how many graphs enclose this one
        self.values: dict[Any, Value] = {}  # fx node -> Value (getitem nodes -> their element)
        self.undefined_count = 0  # undefined results named so far
        self.hints: dict[str, int] = {}  # a bare symbol's example value, from its size's hint
        self.sources: dict[str, str] = {}  # symbol -> the scalar value it is (`x.item()`)
        for node in graph.nodes:  # what is not an aten graph at all is refused before anything else
            if node.op not in ("placeholder", "get_attr", "call_function", "output"):
                raise LoadError(
                    f"node {node.name}: {node.op} nodes are not supported; export or trace to aten ops"
                )
            if node.op == "call_function":
                _check_target(node.target, f"node {node.name}")

    @staticmethod
    def val(node: Any) -> Any:
        """The node's example value (a FakeTensor, or a tuple of them for several results)."""
        if "val" not in node.meta:
            raise LoadError(
                f"%{node.name} has no node.meta['val']; trace with torch.export or make_fx"
            )
        return node.meta["val"]

    # -- metas and operands ------------------------------------------------------------------------
    def meta(self, val: Any, where: str) -> TensorMeta | ScalarMeta:
        import torch

        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return ScalarMeta(_SCALAR_KINDS[type(val).__name__])
        if val is None:
            raise LoadError(f"{where} is None where the op returns a tensor")
        if not isinstance(val, torch.Tensor):
            raise LoadError(
                f"{where} is a {type(val).__name__}, not a tensor; trace with torch.export or make_fx "
                "so that node.meta['val'] holds a tensor"
            )
        if val.layout != torch.strided:
            raise LoadError(f"{where} has layout {val.layout}; only strided tensors are supported")
        shape = tuple(self.size(size, where) for size in val.shape)
        try:
            dtype = from_torch_dtype(val.dtype)
        except ValueError as error:
            raise LoadError(f"{where}: {error}") from None
        strides = tuple(self.size(stride, where) for stride in val.stride())
        offset = self.size(val.storage_offset(), where)
        return recorded_meta(shape, dtype, strides, offset)

    def size(self, size: Any, where: str) -> Any:
        """An int, or a SymInt read as `load` reads it from the saved program: the sympy
        expression's `srepr` (what the serializer writes) parsed by the symbolic grammar."""
        import torch

        if type(size) is int:
            return size
        if not isinstance(size, torch.SymInt):
            raise LoadError(f"{where} has a size of type {type(size).__name__}")
        # Local: sympy comes with torch and is needed only for a symbolic size.
        from sympy.printing.repr import srepr  # type: ignore[import-untyped]  # sympy has no stubs

        expression = size.node.expr
        try:
            parsed = parse_expr(srepr(expression))
        except ExprSyntaxError as error:
            raise LoadError(f"{where}: the size {expression} is not readable: {error}") from None
        example_hint(parsed, size.node.hint, self.hints)
        return parsed

    def define(self, node: Any, val: Any) -> Value:
        import torch

        value = self.values[node] = Value(node.name, self.meta(val, f"%{node.name}"))

        if isinstance(val, torch.SymInt):  # a scalar that is exactly a symbol is its source
            size = self.size(val, f"%{node.name}")
            if type(size) is SymExpr and len(names := free_symbols(size)) == 1:
                if size.same(symbol(next(iter(names)))):
                    self.sources.setdefault(next(iter(names)), node.name)
        return value

    def operand(self, arg: Any, where: str) -> Any:
        import torch

        if isinstance(arg, torch.fx.Node):
            if arg not in self.values:
                raise LoadError(
                    f"{where} uses %{arg.name}, which is not a tensor value of the graph"
                )
            return self.values[arg]
        if isinstance(arg, (list, tuple)):
            return tuple(self.operand(item, where) for item in arg)
        if arg is None or type(arg) in (bool, int, float, complex, str):
            return arg
        if isinstance(arg, torch.dtype):
            try:
                return from_torch_dtype(arg)
            except ValueError as error:
                raise LoadError(f"{where}: {error}") from None
        if isinstance(arg, torch.device):
            return Device(str(arg))
        if isinstance(arg, torch.memory_format):
            return MemoryFormat[str(arg).removeprefix("torch.")]
        if isinstance(arg, torch.layout) and str(arg).removeprefix("torch.") in Layout.__members__:
            return Layout[str(arg).removeprefix("torch.")]
        if isinstance(arg, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise LoadError(f"{where} is symbolic; {SYMBOLIC}")
        raise LoadError(f"{where}: an operand of type {type(arg).__name__} is not supported")

    # -- nodes ---------------------------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        check_known_aten_ops(
            (str(n.target), f"node {n.name}")
            for n in self.graph.nodes
            if n.op == "call_function" and hasattr(n.target, "_schema") and n.target._schema.returns
        )
        nodes = []
        for fx_node in self.graph.nodes:
            if fx_node.op in ("placeholder", "get_attr", "output"):
                continue
            where = f"node {fx_node.name}"
            target = fx_node.target
            if target is operator.getitem:
                continue  # its value is defined with the producer's results
            if _is_higher_order(target):
                nodes.append(self.higher_order_node(fx_node, where))
                continue
            scalar_target = _scalar_target(target)
            if scalar_target is not None:  # Python's arithmetic on sizes: torch's overloads
                args = tuple(
                    self.operand(arg, f"{where}, argument {i}")
                    for i, arg in enumerate(fx_node.args)
                )
                size_op = scalar_op(scalar_target, args, where)
                scalar = self.define(fx_node, self.val(fx_node))
                provenance = Provenance(source=user_source(fx_node.meta.get("stack_trace")))
                nodes.append(Node(size_op, args, {}, (scalar,), provenance))
                continue
            if not target._schema.returns and str(target) not in KEPT_CHECKS:
                continue  # output-less checks such as aten._assert_tensor_metadata
            op = str(target)
            check_known_aten_op(op, where)
            args = tuple(
                self.operand(arg, f"{where}, argument {i}") for i, arg in enumerate(fx_node.args)
            )
            # keyword operands in schema order, as torch.export.save writes them
            kwargs = {
                argument.name: self.operand(
                    fx_node.kwargs[argument.name], f"{where}, argument {argument.name!r}"
                )
                for argument in target._schema.arguments
                if argument.name in fx_node.kwargs
            }
            # a kept check (aten._assert_scalar) returns nothing, whatever its meta holds
            returns = target._schema.returns
            results = self.results(fx_node, _single_result(target), where) if returns else ()
            provenance = Provenance(source=user_source(fx_node.meta.get("stack_trace")))
            nodes.append(Node(op, args, kwargs, results, provenance))
        return nodes

    def higher_order_node(self, fx_node: Any, where: str) -> Node:
        """A control-flow node (`torch.cond`): its graph operands (get_attr of submodules)
        imported as nested graphs, named after the attribute, as the serializer names them."""
        args = tuple(
            self.subgraph(arg, where)
            if getattr(arg, "op", None) == "get_attr"
            else self.operand(arg, f"{where}, argument {i}")
            for i, arg in enumerate(fx_node.args)
        )
        if fx_node.kwargs:
            raise LoadError(f"{where}: named operands of {fx_node.target.name()} are not supported")
        results = self.results(fx_node, False, where)
        provenance = Provenance(source=user_source(fx_node.meta.get("stack_trace")))
        return Node(f"{HIGHER_ORDER}.{fx_node.target.name()}", args, {}, results, provenance)

    def subgraph(self, attribute: Any, where: str) -> Graph:
        import torch

        submodule = self.module
        for part in str(attribute.target).split("."):
            submodule = getattr(submodule, part)
        if not isinstance(submodule, torch.fx.GraphModule):
            raise LoadError(f"{where}: %{attribute.name} is not a graph")
        if self.depth + 1 >= MAX_GRAPH_DEPTH:
            raise LoadError(f"{where}: graphs nest more than {MAX_GRAPH_DEPTH} deep")
        nested = _Importer(submodule.graph, submodule, self.depth + 1)
        nested.hints = self.hints
        inputs = [
            GraphInput(nested.define(node, nested.val(node))) for node in nested.placeholders()
        ]
        nodes = nested.nodes()
        outputs = nested.module_outputs()
        return Graph(str(attribute.target), inputs, nodes, outputs)

    def results(self, fx_node: Any, single: bool, where: str) -> tuple[Value, ...]:
        val = self.val(fx_node)
        if single:
            return (self.define(fx_node, val),)
        if not isinstance(val, (list, tuple)):
            raise LoadError(
                f"{where}: node.meta['val'] should hold one entry per result, found {val!r}"
            )
        # The serializer names result i after the first getitem(node, i) among the node's users,
        # or `<node>_unused_<i>`; later duplicate getitems read the same value. A None result
        # (a masked backward result) is written unnamed, and named `undefined_<k>` by both
        # frontends.
        getitems: dict[int, list[Any]] = {}
        for user in fx_node.users:
            if user.target is not operator.getitem:
                raise LoadError(f"{where}: its results are used by {user.name} without getitem")
            getitems.setdefault(user.args[1], []).append(user)
        results = []
        for index, element in enumerate(val):
            users = getitems.get(index, [])
            if element is None:
                value = Value(undefined_name(self.undefined_count), UNDEFINED)
                self.undefined_count += 1
            else:
                name = users[0].name if users else f"{fx_node.name}_unused_{index}"
                value = Value(name, self.meta(element, f"%{name}"))
            for user in users:
                self.values[user] = value
            results.append(value)
        return tuple(results)

    # -- ExportedProgram --------------------------------------------------------------------------
    def placeholders(self) -> list[Any]:
        return [node for node in self.graph.nodes if node.op == "placeholder"]

    def exported_inputs(self, program: Any) -> list[GraphInput]:
        from torch.export.graph_signature import ConstantArgument, SymIntArgument, TensorArgument

        specs = program.graph_signature.input_specs
        placeholders = self.placeholders()
        if len(specs) != len(placeholders):
            raise LoadError(
                f"the graph signature has {len(specs)} inputs for {len(placeholders)} placeholders"
            )
        inputs = []
        for spec, placeholder in zip(specs, placeholders):
            where = f"input %{placeholder.name}"
            if isinstance(spec.arg, ConstantArgument):
                continue  # a Python constant the exporter specialized: its value is inlined in the nodes
            kind = _INPUT_KINDS.get(spec.kind.name)
            if kind is None:
                raise LoadError(f"{where}: input kind {spec.kind.name.lower()!r} is not supported")
            if isinstance(spec.arg, SymIntArgument) and kind is InputKind.USER_INPUT:
                # an int input marked dynamic: it binds its symbol
                inputs.append(GraphInput(self.define(placeholder, self.val(placeholder))))
                continue
            if not isinstance(spec.arg, TensorArgument):
                if "Sym" in type(spec.arg).__name__:
                    raise LoadError(f"{where} is a symbolic scalar; {SYMBOLIC}")
                raise LoadError(
                    f"{where}: user input of type {type(spec.arg).__name__} is not supported"
                )
            value = self.define(placeholder, self.val(placeholder))
            value.meta = input_meta(value.meta)
            if kind is InputKind.USER_INPUT:
                inputs.append(GraphInput(value))
                continue
            state = program.state_dict if spec.target in program.state_dict else program.constants
            inputs.append(GraphInput(value, kind, spec.target, to_numpy(state[spec.target])))
        return inputs

    def exported_outputs(self, signature: Any) -> list[GraphOutput]:
        from torch.export.graph_signature import SymIntArgument, TensorArgument

        (results,) = self.output_node().args
        outputs = []
        for spec, result in zip(signature.output_specs, results, strict=True):
            where = f"output %{spec.arg.name}" if hasattr(spec.arg, "name") else "an output"
            kind = _OUTPUT_KINDS.get(spec.kind.name)
            if kind is None:
                raise LoadError(f"{where}: output kind {spec.kind.name.lower()!r} is not supported")
            if not isinstance(spec.arg, (TensorArgument, SymIntArgument)):
                raise LoadError(
                    f"{where}: user output of type {type(spec.arg).__name__} is not supported "
                    "(tensors and sizes only)"
                )
            outputs.append(GraphOutput(self.operand(result, where), kind, spec.target))
        return outputs

    def output_node(self) -> Any:
        return next(node for node in self.graph.nodes if node.op == "output")

    # -- GraphModule ------------------------------------------------------------------------------
    def module_inputs(self, module: Any) -> list[GraphInput]:
        import torch

        inputs = []
        for node in self.graph.nodes:
            if node.op == "placeholder":
                value = self.define(node, self.val(node))
                value.meta = input_meta(value.meta)
                inputs.append(GraphInput(value))
            elif node.op == "get_attr":
                attribute = module
                for part in node.target.split("."):
                    attribute = getattr(attribute, part)
                if isinstance(attribute, torch.fx.GraphModule):
                    continue  # a higher-order op's graph: imported with its node
                if not isinstance(attribute, torch.Tensor):
                    raise LoadError(
                        f"get_attr %{node.name} reads a {type(attribute).__name__}, not a tensor"
                    )
                value = self.define(node, attribute)
                value.meta = input_meta(value.meta)
                inputs.append(
                    GraphInput(value, InputKind.CONSTANT, node.target, to_numpy(attribute))
                )
        return inputs

    def module_outputs(self) -> list[GraphOutput]:
        (results,) = self.output_node().args
        return [GraphOutput(value) for value in _flatten(self.operand(results, "the graph output"))]


def _single_result(target: Any) -> bool:
    """Whether the overload returns one tensor (not a tuple or a list): from our schema for aten
    ops, from the schema torch.library declared for a user's op."""
    import torch

    schema = aten_schema(str(target))
    if schema is not None:
        return len(schema.returns) == 1 and not schema.returns[0].type.is_list
    returns = target._schema.returns
    return len(returns) == 1 and not isinstance(returns[0].type, torch.ListType)


def _check_target(target: Any, where: str) -> None:
    """call_function nodes of an aten graph call OpOverloads (and getitem on their results)."""
    import torch

    if target is operator.getitem or isinstance(target, torch._ops.OpOverload):
        return
    if _is_higher_order(target):
        if higher_order_op(f"{HIGHER_ORDER}.{target.name()}") is None:
            known = ", ".join(sorted(HIGHER_ORDER_OPS))
            raise LoadError(
                f"{where}: torch.ops.higher_order.{target.name()} is not supported (the control "
                f"flow read is: {known})"
            )
        return
    name = _scalar_target(target)
    if name in SCALAR_TARGETS:
        return
    if name is not None:
        raise LoadError(f"{where}: {name} computes on symbolic sizes; {SYMBOLIC}")
    name = getattr(target, "__name__", str(target))
    raise LoadError(
        f"{where}: {name} is not an aten op nor a torch.library op; only Core ATen graphs, with "
        "custom ops, are supported"
    )


def _is_higher_order(target: Any) -> bool:
    import torch

    return isinstance(target, torch._ops.HigherOrderOperator)


def _scalar_target(target: Any) -> str | None:
    """The name torch.export.save gives a target computing on sizes or on the floats made from
    them (`_operator.mul`, `torch.sym_float`, `math.trunc`), or None for other targets."""
    import math

    import torch

    name = str(getattr(target, "__name__", ""))
    for module, prefix in ((operator, "_operator"), (torch, "torch"), (math, "math")):
        if getattr(module, name, None) is target and (
            module is not torch or name.startswith("sym_")
        ):
            return f"{prefix}.{name}"
    return None


_SCALAR_KINDS = {"SymInt": int, "SymFloat": float, "SymBool": bool}


def _flatten(operand: Any) -> list[Any]:
    if type(operand) is tuple:
        return [value for item in operand for value in _flatten(item)]
    if type(operand) is not Value:
        raise LoadError(f"the graph output {operand!r} is not a tensor")
    return [operand]
