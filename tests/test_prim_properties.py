"""Each property a prim definition carries (reshape, element_view, meta_only_operands, view,
out) holds for its kernel; the definitions are the only place they are set; `bind` and `lookup` are the one
way from a node to its kernel's arguments and its definition."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from aten2prims.errors import SchemaError
from aten2prims.ir import CPU, DType, Node, TensorMeta, Value
from prims.registry import PRIMS, PrimDef, lookup, register

ROOT = Path(__file__).resolve().parents[1]

# One kernel call per tagged prim: (tensor operand, attributes by name).
OPERAND = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
SAMPLES: dict[str, tuple[np.ndarray, dict[str, Any]]] = {
    "collapse": (OPERAND, {"start": 0, "end": 1}),
    "collapse_view": (OPERAND, {"start": 1, "end": 2}),
    "split_dim": (OPERAND, {"dim": 2, "outer_length": 2}),
    "squeeze": (OPERAND.reshape(2, 1, 3, 4), {"dimensions": [1]}),
    "reshape": (OPERAND, {"shape": [4, 6]}),
    "transpose": (OPERAND, {"permutation": [2, 0, 1]}),
    "view_of": (OPERAND, {}),
    "broadcast_in_dim": (OPERAND, {"shape": [5, 2, 3, 4], "broadcast_dimensions": [1, 2, 3]}),
    "full_like": (
        OPERAND,
        {"fill_value": 7.0, "dtype": DType.float32, "device": CPU, "requires_grad": False},
    ),
    "fill": (OPERAND, {"value": 7.0}),
}


def tagged(prop: str) -> list[str]:
    return sorted(name for name, definition in PRIMS.items() if getattr(definition, prop))


def call(name: str, operand: np.ndarray) -> np.ndarray:
    definition = PRIMS[name]
    _, attributes = SAMPLES[name]
    assert definition.kernel is not None
    return np.asarray(definition.kernel(*definition.bind([operand], attributes)))


def test_every_tagged_prim_has_a_sample() -> None:
    tags = {*tagged("reshape"), *tagged("element_view"), *tagged("meta_only_operands")}
    assert tags == set(SAMPLES)


@pytest.mark.parametrize("name", tagged("reshape"))
def test_reshapes_keep_row_major_order(name: str) -> None:
    operand, _ = SAMPLES[name]
    result = call(name, operand)
    assert result.shape != operand.shape
    assert result.ravel().tobytes() == operand.ravel().tobytes()


@pytest.mark.parametrize("name", tagged("element_view"))
def test_element_views_hold_every_element_whole(name: str) -> None:
    assert PRIMS[name].view
    operand, _ = SAMPLES[name]
    result = call(name, operand)
    assert np.shares_memory(result, operand)
    assert result.dtype == operand.dtype
    assert set(result.ravel().tolist()) == set(operand.ravel().tolist())


def test_reshaping_views_are_element_views() -> None:
    for name, definition in PRIMS.items():
        if definition.reshape and definition.view:
            assert definition.element_view, name


@pytest.mark.parametrize("name", tagged("meta_only_operands"))
def test_meta_only_operands_are_never_read(name: str) -> None:
    operand, _ = SAMPLES[name]
    first = call(name, operand)
    second = call(name, np.full_like(operand, np.nan))
    assert first.tobytes() == second.tobytes()


def test_contradicting_properties_are_rejected() -> None:
    with pytest.raises(ValueError, match="element view must be registered as a view"):
        register("test_ev(Tensor a) -> Tensor", meta=None, kernel=None, element_view=True)
    with pytest.raises(ValueError, match="reshaping view"):
        register(
            "test_rv(Tensor(a) a) -> Tensor(a)", meta=None, kernel=None, view=True, reshape=True
        )
    assert "test_ev" not in PRIMS and "test_rv" not in PRIMS


def test_properties_are_set_only_by_the_definition() -> None:
    definition = PRIMS["squeeze"]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        definition.reshape = False  # type: ignore[misc]  # frozen on purpose


def _prim_name_sets(path: Path) -> list[str]:
    """Set literals (and frozenset/set calls) of "prims.*" strings: properties kept outside the
    prims' definitions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        elements: list[ast.expr] = []
        if isinstance(node, ast.Set):
            elements = list(node.elts)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("set", "frozenset"):
            for argument in node.args:
                if isinstance(argument, ast.List | ast.Tuple):  # a set literal is found itself
                    elements += argument.elts
        if any(
            isinstance(e, ast.Constant)
            and isinstance(e.value, str)
            and e.value.startswith("prims.")
            for e in elements
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_sets_of_prim_names_outside_the_definitions() -> None:
    files = [*ROOT.glob("aten2prims/**/*.py"), *ROOT.glob("decompositions/**/*.py")]
    assert [where for path in files for where in _prim_name_sets(path)] == []


def test_bind_orders_operands_and_attributes_as_the_schema() -> None:
    definition = PRIMS["broadcast_in_dim"]
    operand = Value("x", TensorMeta((3,), DType.float32))
    bound = definition.bind((operand,), {"shape": (2, 3), "broadcast_dimensions": (1,)})
    assert bound == [operand, (2, 3), (1,)]
    where = PRIMS["where"]
    assert where.bind(("p", "a", "b"), {}) == ["p", "a", "b"]


@pytest.mark.parametrize(
    ("operands", "attributes", "message"),
    [
        ((), {"shape": (2,), "broadcast_dimensions": ()}, r"takes 1 tensor operand\(s\), got 0"),
        (("x",), {"shape": (2,)}, r"attributes must be \['shape', 'broadcast_dimensions'\]"),
        (("x",), {"broadcast_dimensions": (), "shape": (2,)}, "attributes must be"),
    ],
)
def test_bind_rejects_what_does_not_fit(operands: tuple, attributes: dict, message: str) -> None:
    with pytest.raises(SchemaError, match=rf"^prims\.broadcast_in_dim: {message}"):
        PRIMS["broadcast_in_dim"].bind(operands, attributes)


def test_lookup_names_prims_only() -> None:
    assert lookup("prims.add") is PRIMS["add"]
    assert isinstance(lookup("prims.sort"), PrimDef)
    assert lookup("add") is None
    assert lookup("aten.add.Tensor") is None
    assert lookup("prims.no_such_prim") is None


def test_the_ir_is_data_only() -> None:
    """Importing the IR imports no schema and no prim, and still prints graphs."""
    code = (
        "import sys\n"
        "from aten2prims.ir import Graph, GraphInput, GraphOutput, Node, TensorMeta, Value, DType\n"
        "x = Value('x', TensorMeta((2,), DType.float32))\n"
        "y = Value('y', TensorMeta((2,), DType.float32))\n"
        "graph = Graph('g', [GraphInput(x)], [Node('prims.neg', (x,), {}, (y,))], [GraphOutput(y)])\n"
        "assert 'prims.neg(%x)' in str(graph) and 'prims.neg' in repr(graph.nodes[0])\n"
        "loaded = {m for m in sys.modules if m.startswith(('prims', 'aten2prims.schema'))}\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_node_repr_uses_the_text_form() -> None:
    x = Value("x", TensorMeta((2,), DType.float32))
    node = Node("prims.neg", (x,), {}, (Value("y", TensorMeta((2,), DType.float32)),))
    assert repr(node) == "%y: f32[2] = prims.neg(%x)"


# One call per prim whose kernel takes out=: (operands, attributes by name).
OUT_SAMPLES: dict[str, tuple[list[np.ndarray], dict[str, Any]]] = {
    "full": (
        [],
        {
            "shape": [2, 3, 4],
            "fill_value": -1.5,
            "dtype": DType.float32,
            "device": CPU,
            "requires_grad": False,
        },
    ),
    "full_like": ([OPERAND], SAMPLES["full_like"][1]),
    "cat": (
        [(OPERAND, -OPERAND[:, :1])],
        {"dim": 1},
    ),
    "as_strided_scatter": (
        [OPERAND, -np.arange(6, dtype=np.float32).reshape(2, 3)],
        {"size": [2, 3], "stride": [4, 1], "storage_offset": 5},
    ),
}


def test_every_prim_taking_out_has_a_sample() -> None:
    assert set(tagged("out")) == set(OUT_SAMPLES)


@pytest.mark.parametrize("name", tagged("out"))
def test_kernels_write_into_out_what_they_would_return(name: str) -> None:
    definition = PRIMS[name]
    operands, attributes = OUT_SAMPLES[name]
    assert definition.kernel is not None
    arguments = definition.bind(operands, attributes)
    fresh = np.asarray(definition.kernel(*arguments))
    out = np.full_like(fresh, 99)
    written = definition.kernel(*arguments, out=out)
    assert written is out and out.tobytes() == fresh.tobytes()
    arrays = [
        a for operand in operands for a in (operand if type(operand) is tuple else (operand,))
    ]
    assert not any(np.shares_memory(out, array) for array in arrays)


def test_a_kernel_taking_out_must_say_so_in_its_signature() -> None:
    def kernel(a: np.ndarray) -> np.ndarray:
        return a

    with pytest.raises(ValueError, match="out"):
        register("test_out(Tensor a) -> Tensor", meta=None, kernel=kernel, out=True)
    assert "test_out" not in PRIMS


@pytest.mark.parametrize("name", tagged("reduces"))
def test_reductions_read_each_kept_position_alone(name: str) -> None:
    """kernel(inp, dims, output_dtype): a slice along a kept dim reduces to that slice of the
    result (integer values: every order of summation is exact)."""
    definition = PRIMS[name]
    assert definition.kernel is not None
    operand = np.arange(2 * 6 * 4, dtype=np.int64).reshape(2, 6, 4) % 7
    for dims in ([0], [2], [0, 2]):
        whole = np.asarray(definition.kernel(operand, dims, None))
        kept = [axis for axis in range(3) if axis not in dims]
        result_axis = kept.index(1)  # slice the operand's dim 1, always kept here
        index: list[Any] = [slice(None)] * whole.ndim
        index[result_axis] = slice(2, 5)
        part = np.asarray(definition.kernel(operand[:, 2:5], dims, None))
        assert part.tobytes() == whole[tuple(index)].tobytes()
