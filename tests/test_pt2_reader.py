"""The torch-free `.pt2` reader against torch.export.load, on archives written at test time, and
every refusal of a bad archive; `load` of text IR files."""

from __future__ import annotations

import json
import math
import operator
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _pt2_modules import (
    EXAMPLE_INPUTS,
    entry_data_offset,
    export_dynamic,
    export_everything,
    rewrite_archive,
    save,
)

import aten2prims
from aten2prims import LoadError, ParseError, load
from aten2prims.frontends.torch_interop import from_torch_dtype, to_numpy
from aten2prims.ir import (
    Device,
    DType,
    InputKind,
    MemoryFormat,
    OutputKind,
    format_graph,
    graph_difference,
    parse,
)
from aten2prims.ir.layout import same_significant_strides
from aten2prims.testing.compare import compare

ROOT = "everything"
MODEL = f"{ROOT}/models/model.json"
WEIGHTS_CONFIG = f"{ROOT}/data/weights/model_weights_config.json"
CONSTANTS_CONFIG = f"{ROOT}/data/constants/model_constants_config.json"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(export_everything(), tmp_path_factory.mktemp("pt2") / f"{ROOT}.pt2")


@pytest.fixture(scope="module")
def graph(archive: Path):
    return load(archive)


@pytest.fixture(scope="module")
def reloaded(archive: Path) -> torch.export.ExportedProgram:
    return torch.export.load(archive)


def _config(archive: Path, entry: str) -> dict[str, Any]:
    with zipfile.ZipFile(archive) as z:
        return json.loads(z.read(entry))["config"]


# -- weights ------------------------------------------------------------------------------------------


def test_weights_are_bit_identical_to_torch_load(graph, reloaded) -> None:
    stored = {**reloaded.state_dict, **reloaded.constants}
    with_data = [i for i in graph.inputs if i.kind is not InputKind.USER_INPUT]
    assert {i.target for i in with_data} == set(stored)
    for graph_input in with_data:
        expected = to_numpy(stored[graph_input.target])
        data = graph_input.data
        assert data is not None, graph_input.name
        assert (data.dtype, data.shape) == (expected.dtype, expected.shape), graph_input.name
        assert data.tobytes() == expected.tobytes(), graph_input.name
        meta = graph_input.value.meta
        assert (meta.shape, meta.dtype) == (expected.shape, DType.from_numpy(expected.dtype))


def test_each_input_owns_a_contiguous_array(graph) -> None:
    arrays = [i.data for i in graph.inputs if i.data is not None]
    for array in arrays:
        assert array.flags.c_contiguous and array.flags.writeable
    for i, a in enumerate(arrays):
        for b in arrays[i + 1 :]:
            assert not np.shares_memory(a, b)


def test_archive_exercises_shared_strided_and_transposed_storages(archive: Path, graph) -> None:
    weights = _config(archive, WEIGHTS_CONFIG)
    strided, offset, transposed = weights["strided"], weights["offset"], weights["w_t"]
    assert strided["path_name"] == offset["path_name"]  # one storage, two buffers
    assert [s["as_int"] for s in strided["tensor_meta"]["strides"]] == [6, 2]
    assert offset["tensor_meta"]["storage_offset"] == {"as_int": 6}
    assert [s["as_int"] for s in transposed["tensor_meta"]["strides"]] == [1, 4]
    big = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(graph.input("b_strided").data, big[:, ::2])
    np.testing.assert_array_equal(graph.input("b_offset").data, big[1:3])


def test_low_precision_int_bool_and_empty_buffers(graph) -> None:
    import ml_dtypes

    assert graph.input("b_bf16").data.dtype == np.dtype(ml_dtypes.bfloat16)
    assert graph.input("b_bf16").data.view(np.uint16).tolist() == [
        0x3FC0,
        0xC000,
        0x4050,
    ]  # 2-byte raw
    np.testing.assert_array_equal(
        graph.input("b_f16").data, np.array([0.5, -1.25, 65504.0], np.float16)
    )
    np.testing.assert_array_equal(graph.input("b_counts").data, np.array([[1, -2, 3]], np.int64))
    np.testing.assert_array_equal(graph.input("b_mask").data, np.array([True, False, True]))
    assert graph.input("b_empty").data.shape == (0, 3)
    assert graph.input("b_bn_num_batches_tracked").data.shape == ()


def test_roles_and_targets_follow_the_signature(graph, reloaded) -> None:
    from torch.export.graph_signature import ConstantArgument

    kinds = {
        "USER_INPUT": InputKind.USER_INPUT,
        "PARAMETER": InputKind.PARAMETER,
        "BUFFER": InputKind.BUFFER,
        "CONSTANT_TENSOR": InputKind.CONSTANT,
    }
    expected = [
        (spec.arg.name, kinds[spec.kind.name], spec.target)
        for spec in reloaded.graph_signature.input_specs
        if not isinstance(spec.arg, ConstantArgument)  # `times`, inlined as the literal 3
    ]
    assert [(i.name, i.kind, i.target) for i in graph.inputs] == expected
    assert graph.input("b_scratch").kind is InputKind.BUFFER  # non-persistent: from data/constants
    assert graph.input("c_const").kind is InputKind.CONSTANT
    outputs = [(o.value.name, o.kind.name, o.target) for o in graph.outputs]
    assert outputs == [
        (s.arg.name, s.kind.name, s.target) for s in reloaded.graph_signature.output_specs
    ]
    assert [o.target for o in graph.outputs if o.kind is OutputKind.BUFFER_MUTATION] == [
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
    ]


# -- graph --------------------------------------------------------------------------------------------


def _fx_op_nodes(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    return [
        n
        for n in program.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem and n.target._schema.returns
    ]


def test_op_sequence_and_result_metas_match_torch_load(graph, reloaded) -> None:
    fx_nodes = _fx_op_nodes(reloaded)
    assert [node.op for node in graph.nodes] == [str(n.target) for n in fx_nodes]
    for node, fx_node in zip(graph.nodes, fx_nodes):
        val = fx_node.meta["val"]
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        assert len(node.results) == len(vals), node
        for result, v in zip(node.results, vals):
            meta = result.meta
            assert (meta.shape, meta.dtype) == (tuple(v.shape), from_torch_dtype(v.dtype)), node
            # torch's layout, up to the strides of length-1 dims (which address nothing); torch's
            # loader drops storage offsets (next test)
            assert same_significant_strides(meta.shape, meta.strides, v.stride()), node


def test_storage_offsets_are_the_exported_programs(graph) -> None:
    """The archive records each result's storage offset (torch.export.load's fake tensors lose
    them: a split's second piece comes back at offset 0)."""
    fx_nodes = _fx_op_nodes(export_everything())
    assert [node.op for node in graph.nodes] == [str(n.target) for n in fx_nodes]
    offsets = []
    for node, fx_node in zip(graph.nodes, fx_nodes):
        val = fx_node.meta["val"]
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        for result, v in zip(node.results, vals, strict=True):
            assert result.meta.storage_offset == v.storage_offset(), node
            offsets.append(v.storage_offset())
    assert any(offsets)


def test_multi_result_and_list_result_nodes(graph) -> None:
    by_op = {node.op: node for node in graph.nodes}
    assert [r.name for r in by_op["aten.max.dim"].results] == ["getitem_8", "getitem_9"]
    assert [r.name for r in by_op["aten.native_layer_norm.default"].results] == [
        "getitem_5",
        "native_layer_norm_unused_1",
        "native_layer_norm_unused_2",
    ]
    split = by_op["aten.split_with_sizes.default"]
    assert [(r.name, r.shape) for r in split.results] == [
        ("getitem_10", (5, 1)),
        ("split_with_sizes_unused_1", (5, 2)),
    ]
    assert len(by_op["aten._native_batch_norm_legit_functional.default"].results) == 5


def test_python_scalars_stay_scalars(graph) -> None:
    by_result = {node.results[0].name: node for node in graph.nodes}
    literals = {name: by_result[name].args[1] for name in ("add", "mul", "mul_1")}
    # `+ 2`, `* times` (the specialized int argument, inlined) and `* 2.5`: numbers, not tensors
    assert [(type(v), v) for v in literals.values()] == [(int, 2), (int, 3), (float, 2.5)]
    batch_norm = by_result["getitem"]
    assert batch_norm.op == "aten._native_batch_norm_legit_functional.default"
    assert [type(a) for a in batch_norm.args[5:]] == [bool, float, float]


def test_argument_kinds(graph) -> None:
    by_op = {node.op: node for node in graph.nodes}
    index = by_op["aten.index.Tensor"]
    assert index.args[1][0] is None and index.args[1][1] is graph.input("idx").value
    full = by_op["aten.full.default"]
    assert full.args == ((3,), 0.5) and full.kwargs == {
        "device": Device("cpu"),
        "pin_memory": False,
    }
    assert by_op["aten.clone.default"].kwargs == {"memory_format": MemoryFormat.contiguous_format}
    conversions = [n.kwargs["dtype"] for n in graph.nodes if n.op == "aten._to_copy.default"]
    assert conversions == [DType.float32, DType.float32, DType.float16]
    assert by_op["aten.permute.default"].args[1] == (1, 0)


def test_output_less_checks_are_skipped(archive: Path, graph) -> None:
    with zipfile.ZipFile(archive) as z:
        targets = [n["target"] for n in json.loads(z.read(MODEL))["graph_module"]["graph"]["nodes"]]
    assert targets.count("torch.ops.aten._assert_tensor_metadata.default") == 3
    assert len(graph.nodes) == len(targets) - 3
    assert all(node.op != "aten._assert_tensor_metadata.default" for node in graph.nodes)


def test_provenance_points_at_the_users_line(graph) -> None:
    source = Path(__file__).with_name("_pt2_modules.py").read_text().splitlines()
    for node in graph.nodes:
        match = re.fullmatch(r"_pt2_modules\.py:(\d+) in forward", node.provenance.source or "")
        assert match, node
    line_of = {n.op: int(n.provenance.source.split(":")[1].split()[0]) for n in graph.nodes}
    assert "self.lin(x)" in source[line_of["aten.addmm.default"] - 1]  # not torch's linear.py
    assert "self.bn(y)" in source[line_of["aten._native_batch_norm_legit_functional.default"] - 1]
    assert "split" in source[line_of["aten.split_with_sizes.default"] - 1]


def test_text_form_round_trips(graph) -> None:
    assert graph_difference(parse(format_graph(graph)), graph) is None


def test_graph_name_is_the_sanitized_file_stem(archive: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "2nd-model.v1.pt2"
    renamed.write_bytes(archive.read_bytes())
    assert load(renamed).name == "_2nd_model_v1"


def test_sample_inputs_are_never_read(archive: Path, graph, tmp_path: Path) -> None:
    def poison(entries: dict[str, bytes]) -> None:
        entries[f"{ROOT}/data/sample_inputs/model.pt"] = b"\x80\x04 not a pickle at all"

    rewritten = rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", poison)
    assert graph_difference(load(rewritten), graph, compare_data=True) is None


_FINGERPRINT = """
import hashlib
from aten2prims.ir import format_graph

def fingerprint(graph):
    data = b"".join(i.data.tobytes() for i in graph.inputs if i.data is not None)
    return format_graph(graph) + hashlib.sha256(data).hexdigest()
"""


def test_loads_with_torch_unavailable(archive: Path, graph) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import aten2prims\n"
        f"{_FINGERPRINT}\n"
        f"print(fingerprint(aten2prims.load({str(archive)!r})), end='')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    namespace: dict[str, Any] = {}
    exec(_FINGERPRINT, namespace)
    assert result.stdout == namespace["fingerprint"](graph)


def test_a_newer_schema_version_with_the_same_layout_is_read(
    archive: Path, graph, tmp_path: Path
) -> None:
    def bump(entries: dict[str, bytes]) -> None:
        model = json.loads(entries[MODEL])
        model["schema_version"] = {"major": 9, "minor": 0}
        entries[MODEL] = json.dumps(model).encode()

    rewritten = rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", bump)
    assert graph_difference(load(rewritten), graph, compare_data=True) is None


def test_infinite_and_nan_float_arguments(archive: Path, tmp_path: Path) -> None:
    """torch writes inf and nan as the JSON strings "Infinity" and "NaN"."""

    def edit(entries: dict[str, bytes]) -> None:
        model = json.loads(entries[MODEL])
        nodes = model["graph_module"]["graph"]["nodes"]
        mul = next(n for n in nodes if n["name"] == "mul_1")
        mul["inputs"][1]["arg"] = {"as_float": "-Infinity"}
        full = next(n for n in nodes if n["name"] == "full")
        full["inputs"][1]["arg"] = {"as_float": "NaN"}
        entries[MODEL] = json.dumps(model).encode()

    graph = load(rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", edit))
    by_name = {n.results[0].name: n for n in graph.nodes}
    assert by_name["mul_1"].args[1] == float("-inf")
    assert np.isnan(by_name["full"].args[1])


def test_every_pt2_argument_kind_maps_to_the_ir(archive: Path, tmp_path: Path) -> None:
    """Argument kinds the test module does not produce, written into a node's inputs."""
    cases: list[tuple[dict[str, Any], Callable[[Any], bool]]] = [
        (
            {"as_complex": {"real": 1.5, "imag": -2.0}},
            lambda v: v == complex(1.5, -2.0) and type(v) is complex,
        ),
        ({"as_sym_int": {"as_int": 7}}, lambda v: v == 7 and type(v) is int),
        ({"as_sym_float": {"as_float": 0.25}}, lambda v: v == 0.25 and type(v) is float),
        ({"as_bool": True}, lambda v: v is True),
    ]
    for index, (argument, check) in enumerate(cases):

        def edit(entries: dict[str, bytes], argument: dict[str, Any] = argument) -> None:
            model = json.loads(entries[MODEL])
            node = next(n for n in model["graph_module"]["graph"]["nodes"] if n["name"] == "mul_1")
            node["inputs"][1]["arg"] = argument
            entries[MODEL] = json.dumps(model).encode()

        directory = tmp_path / str(index)
        directory.mkdir()
        graph = load(rewrite_archive(archive, directory / f"{ROOT}.pt2", edit))
        mul = next(n for n in graph.nodes if n.results[0].name == "mul_1")
        assert check(mul.args[1]), (argument, mul.args[1])


def test_arguments_without_a_kind_are_passed_by_name(archive: Path, tmp_path: Path) -> None:
    """Files older than ArgumentKind carry no `kind`; every argument then binds by name."""

    def edit(entries: dict[str, bytes]) -> None:
        model = json.loads(entries[MODEL])
        for named in next(
            n for n in model["graph_module"]["graph"]["nodes"] if n["name"] == "full"
        )["inputs"]:
            del named["kind"]
        entries[MODEL] = json.dumps(model).encode()

    graph = load(rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", edit))
    full = next(n for n in graph.nodes if n.results[0].name == "full")
    assert full.args == ()
    assert full.kwargs == {
        "size": (3,),
        "fill_value": 0.5,
        "device": Device("cpu"),
        "pin_memory": False,
    }


# -- refusals -------------------------------------------------------------------------------------------


def _edit_json(entry: str, change: Callable[[Any], None]) -> Callable[[dict[str, bytes]], None]:
    def edit(entries: dict[str, bytes]) -> None:
        document = json.loads(entries[entry])
        change(document)
        entries[entry] = json.dumps(document).encode()

    return edit


def _nodes(model: dict[str, Any]) -> list[dict[str, Any]]:
    return model["graph_module"]["graph"]["nodes"]


def _node(model: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in _nodes(model) if n["name"] == name)


def _set(mapping: dict[str, Any], key: str, value: Any) -> None:
    mapping[key] = value


def _weight_entry(archive: Path, fqn: str) -> str:
    return f"{ROOT}/data/weights/{_config(archive, WEIGHTS_CONFIG)[fqn]['path_name']}"


Edit = Callable[[dict[str, bytes]], None]
REFUSALS: dict[str, tuple[Callable[[Path], Edit], str | Callable[[Path], str], str]] = {
    # case: (edit of the archive's entries, entry named, words of the reason)
    "pickled weight": (
        lambda a: _edit_json(
            WEIGHTS_CONFIG, lambda c: _set(c["config"]["lin.weight"], "use_pickle", True)
        ),
        WEIGHTS_CONFIG,
        "never unpickles",
    ),
    "pickled constant": (
        lambda a: _edit_json(
            CONSTANTS_CONFIG, lambda c: _set(c["config"]["const"], "use_pickle", True)
        ),
        CONSTANTS_CONFIG,
        "never unpickles",
    ),
    "symbolic size": (
        lambda a: _edit_json(
            MODEL,
            lambda m: m["graph_module"]["graph"]["tensor_values"]["mm"]["sizes"].__setitem__(
                0,
                {
                    "as_expr": {
                        "expr_str": "Symbol('s0', positive=True, integer=True)",
                        "hint": {"as_int": 5},
                    }
                },
            ),
        ),
        MODEL,
        "symbol(s) s0 appear in sizes, but no input's size binds them",
    ),
    "symbolic argument": (
        lambda a: _edit_json(
            MODEL,
            lambda m: _set(_node(m, "mul")["inputs"][1], "arg", {"as_sym_int": {"as_name": "s0"}}),
        ),
        MODEL,
        "symbolic value 's0' is used before it is defined",
    ),
    "operator target": (
        lambda a: _edit_json(MODEL, lambda m: _set(_node(m, "mul"), "target", "_operator.mul")),
        MODEL,
        "aten.mul.int): argument 'a' expects int (got %getitem_5: f32[5, 3])",
    ),
    "unsupported operator target": (
        lambda a: _edit_json(MODEL, lambda m: _set(_node(m, "mul"), "target", "_operator.and_")),
        MODEL,
        "_operator.and_ on (Tensor, ",
    ),
    "unknown aten op": (
        lambda a: _edit_json(
            MODEL, lambda m: _set(_node(m, "mul"), "target", "torch.ops.aten.frobnicate.default")
        ),
        MODEL,
        "1 op(s) outside the Core ATen overloads aten2prims knows: aten.frobnicate.default (1 node, first node ",
    ),
    "non-core aten op": (
        lambda a: _edit_json(
            MODEL, lambda m: _set(_node(m, "mm"), "target", "torch.ops.aten.linear.default")
        ),
        MODEL,
        "outside the Core ATen overloads aten2prims knows: aten.linear.default (1 node",
    ),
    "several unknown ops, named at once": (
        lambda a: _edit_json(
            MODEL,
            lambda m: (
                _set(_node(m, "mm"), "target", "torch.ops.aten.linear.default"),
                _set(_node(m, "mul"), "target", "torch.ops.aten.frobnicate.default"),
            ),
        ),
        MODEL,
        " (mm)); aten.frobnicate.default (1 node, first node ",  # both, in the graph's order
    ),
    "prims op": (  # ops of a user's namespace load (tests/test_custom_ops.py); prims do not
        lambda a: _edit_json(
            MODEL, lambda m: _set(_node(m, "mul"), "target", "torch.ops.prims.mul.default")
        ),
        MODEL,
        "is neither an aten op nor an op of a user's namespace",
    ),
    "malformed op name": (
        lambda a: _edit_json(
            MODEL, lambda m: _set(_node(m, "mul"), "target", "torch.ops.my lib.scale.default")
        ),
        MODEL,
        "is neither an aten op nor an op of a user's namespace",
    ),
    "unsupported dtype": (
        lambda a: _edit_json(
            MODEL, lambda m: _set(m["graph_module"]["graph"]["tensor_values"]["mm"], "dtype", 29)
        ),
        MODEL,
        "tensor %mm: torch.export ScalarType 29 is not supported",
    ),
    "path outside the archive": (
        lambda a: _edit_json(
            WEIGHTS_CONFIG, lambda c: _set(c["config"]["lin.bias"], "path_name", "../x")
        ),
        WEIGHTS_CONFIG,
        "points outside",
    ),
    "absolute path": (
        lambda a: _edit_json(
            WEIGHTS_CONFIG, lambda c: _set(c["config"]["lin.bias"], "path_name", "/etc/passwd")
        ),
        WEIGHTS_CONFIG,
        "points outside",
    ),
    "storage too small": (
        lambda a: (
            lambda e: _set(
                e, _weight_entry(a, "lin.weight"), e[_weight_entry(a, "lin.weight")][:20]
            )
        ),
        lambda a: _weight_entry(a, "lin.weight"),
        "holds 5 f32 element(s), but 'lin.weight'",
    ),
    "storage of partial elements": (
        lambda a: (
            lambda e: _set(e, _weight_entry(a, "lin.bias"), e[_weight_entry(a, "lin.bias")][:-1])
        ),
        lambda a: _weight_entry(a, "lin.bias"),
        "not a whole number of f32 elements",
    ),
    "stored meta disagrees with the graph": (
        lambda a: _edit_json(
            WEIGHTS_CONFIG, lambda c: _set(c["config"]["lin.bias"]["tensor_meta"], "dtype", 8)
        ),
        WEIGHTS_CONFIG,
        "its stored meta f64[3] disagrees with graph input %p_lin_bias: f32[3]",
    ),
    "missing weights file": (
        lambda a: lambda e: e.pop(_weight_entry(a, "ln.bias")),
        lambda a: _weight_entry(a, "ln.bias"),
        "missing from the archive (it holds 'ln.bias')",
    ),
    "missing weights config": (
        lambda a: lambda e: e.pop(WEIGHTS_CONFIG),
        WEIGHTS_CONFIG,
        "missing from the archive",
    ),
    "missing model": (lambda a: lambda e: e.pop(MODEL), MODEL, "missing from the archive"),
    "malformed json": (
        lambda a: lambda e: _set(e, MODEL, b'{"graph_module": [1, 2'),
        MODEL,
        "malformed JSON",
    ),
    "malformed node": (
        lambda a: _edit_json(MODEL, lambda m: _node(m, "mul").pop("target")),
        MODEL,
        "node 9 (mul): malformed, missing key 'target'",
    ),
    "dangling tensor name": (
        lambda a: _edit_json(
            MODEL,
            lambda m: _set(_node(m, "mul")["inputs"][0]["arg"], "as_tensor", {"name": "nowhere"}),
        ),
        MODEL,
        "'nowhere' is used before it is defined",
    ),
    "name that is not an identifier": (
        lambda a: _edit_json(
            MODEL, lambda m: _set(_node(m, "clone")["outputs"][0], "as_tensor", {"name": "a b"})
        ),
        MODEL,
        "'a b' is not an identifier",
    ),
    "unsupported argument kind": (
        lambda a: _edit_json(
            MODEL,
            lambda m: _set(_node(m, "mul")["inputs"][1], "arg", {"as_operator": "aten.add.Tensor"}),
        ),
        MODEL,
        "argument kind 'as_operator' is not supported",
    ),
    "other schema version and layout": (
        lambda a: _edit_json(
            MODEL,
            lambda m: (
                _set(m, "schema_version", {"major": 99, "minor": 1}),
                m["graph_module"]["graph"].pop("tensor_values"),
            ),
        ),
        MODEL,
        "schema version 99.1 is not supported",
    ),
    "wrong archive format": (
        lambda a: lambda e: _set(e, f"{ROOT}/archive_format", b"zip"),
        f"{ROOT}/archive_format",
        "not 'pt2'",
    ),
    "big-endian archive": (
        lambda a: lambda e: _set(e, f"{ROOT}/byteorder", b"big"),
        f"{ROOT}/byteorder",
        "little-endian",
    ),
    "ill-typed graph": (
        lambda a: _edit_json(
            MODEL, lambda m: _set(_node(m, "permute")["inputs"][1], "arg", {"as_float": 1.0})
        ),
        MODEL,
        "the imported graph is malformed",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refuses_bad_archives(case: str, archive: Path, tmp_path: Path) -> None:
    make_edit, entry, reason = REFUSALS[case]
    bad = rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", make_edit(archive))
    with pytest.raises(LoadError) as caught:
        load(bad)
    assert caught.value.entry == (entry if isinstance(entry, str) else entry(archive))
    assert reason in str(caught.value)


def test_refuses_a_truncated_archive(archive: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.pt2"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(LoadError, match="not a readable zip archive") as caught:
        load(truncated)
    assert caught.value.entry == str(truncated)


def test_refuses_an_entry_whose_crc_fails(archive: Path, tmp_path: Path) -> None:
    entry = _weight_entry(archive, "lin.weight")
    data = bytearray(archive.read_bytes())
    data[entry_data_offset(archive, entry) + 3] ^= 0x40
    corrupted = tmp_path / f"{ROOT}.pt2"
    corrupted.write_bytes(bytes(data))
    with pytest.raises(LoadError, match="CRC") as caught:
        load(corrupted)
    assert caught.value.entry == entry


def _stored_inputs(graph) -> dict[str, np.ndarray]:
    return {i.name: i.data for i in graph.inputs if i.data is not None}


def _assert_same_inputs(one, other) -> None:
    first, second = _stored_inputs(one), _stored_inputs(other)
    assert first.keys() == second.keys()
    for name, data in first.items():
        assert data.dtype == second[name].dtype and data.shape == second[name].shape, name
        assert data.tobytes() == second[name].tobytes(), name


def test_compressed_prefixed_and_extra_field_archives_read_the_same(
    archive: Path, graph, tmp_path: Path
) -> None:
    """Stored entries are read straight from the file at the offset their local header gives;
    compressed ones through zipfile. Both give the same arrays, wherever the entry starts."""
    with zipfile.ZipFile(archive) as source:
        entries = [(info.filename, source.read(info)) for info in source.infolist()]
    deflated = tmp_path / "deflated" / f"{ROOT}.pt2"
    deflated.parent.mkdir()
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for name, data in entries:
            target.writestr(name, data)
    extra = tmp_path / "extra" / f"{ROOT}.pt2"
    extra.parent.mkdir()
    with zipfile.ZipFile(extra, "w") as target:
        for index, (name, data) in enumerate(entries):
            info = zipfile.ZipInfo(name)
            info.extra = (
                b"\xfe\xca" + (4 * index % 13).to_bytes(2, "little") + bytes(4 * index % 13)
            )
            target.writestr(info, data)
    prefixed = tmp_path / "prefixed" / f"{ROOT}.pt2"
    prefixed.parent.mkdir()
    prefixed.write_bytes(b"PK\x03\x04 a self-extracting stub " + bytes(1000) + archive.read_bytes())
    for path in (deflated, extra, prefixed):
        _assert_same_inputs(load(path), graph)


def test_refuses_a_local_header_naming_another_entry(archive: Path, tmp_path: Path) -> None:
    entry = _weight_entry(archive, "lin.weight")
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as z:
        start = z.getinfo(entry).header_offset + 30  # the name follows the fixed header fields
    assert data[start : start + len(entry)] == entry.encode()
    data[start + len(entry) - 1] ^= 0x01  # weight_<i> becomes another name in the local header
    renamed = tmp_path / f"{ROOT}.pt2"
    renamed.write_bytes(bytes(data))
    with pytest.raises(LoadError, match="cannot read the entry") as caught:
        load(renamed)
    assert caught.value.entry == entry


def test_load_holds_each_weight_once(tmp_path: Path) -> None:
    """Each weight is read straight into its array: no bytes object of the entry, no second copy."""
    import tracemalloc

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.Linear(1024, 512))
    program = torch.export.export(model, (torch.randn(2, 512),)).run_decompositions()
    path = save(program, tmp_path / "wide.pt2")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    tracemalloc.start()
    graph = load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sum(array.nbytes for array in _stored_inputs(graph).values()) == weights
    assert peak < weights + 2**20  # the arrays, plus the JSON entries and the graph
    for graph_input in graph.inputs:
        if graph_input.data is not None:
            expected = model.state_dict()[graph_input.target].numpy()
            np.testing.assert_array_equal(graph_input.data, expected)


def test_reads_a_dynamic_export_with_its_symbols_and_runs_it_at_other_sizes(
    tmp_path: Path,
) -> None:
    program = export_dynamic()
    path = save(program, tmp_path / "doubled.pt2")
    graph = load(path)
    (name,) = graph.symbols
    declared = graph.symbols[name]
    (constraint,) = program.range_constraints.values()
    assert (declared.lower, declared.backed) == (int(constraint.lower), True)
    assert declared.upper == math.inf  # Dim("n") without a max: unbounded
    assert declared.example == EXAMPLE_INPUTS[0].shape[0]
    assert str(graph.user_inputs[0].value.shape[0]) == name
    for rows in (EXAMPLE_INPUTS[0].shape[0], 2, 9):
        x = torch.randn(rows, *EXAMPLE_INPUTS[0].shape[1:])
        (ours,) = aten2prims.execute(graph, [x.numpy()])
        verdict = compare(ours, program.module()(x).numpy(), what=f"{rows} rows")
        assert verdict, verdict.message


# -- load: dispatch and text IR -------------------------------------------------------------------------------


def test_load_reads_a_text_ir_file(graph, tmp_path: Path) -> None:
    path = tmp_path / "everything.a2p"
    path.write_text(format_graph(graph))
    loaded = load(path)
    assert graph_difference(loaded, graph) is None  # data is not part of the text form
    assert all(i.data is None for i in loaded.inputs)


def test_load_names_the_text_file_in_parse_errors(tmp_path: Path) -> None:
    path = tmp_path / "broken.txt"
    path.write_text(
        "graph g(%x: f32[2]) -> (f32[2]):\n  %y: f32[2] = aten.neg.default(%z)\n  return (%y)\n"
    )
    with pytest.raises(ParseError, match="used before it is defined") as caught:
        load(path)
    assert caught.value.entry == str(path) and caught.value.line == 2


def test_load_verifies_text_ir(tmp_path: Path) -> None:
    path = tmp_path / "illtyped.txt"
    path.write_text(
        "graph g(%x: f32[2]) -> (f32[2]):\n  %y: f32[2] = aten.frob.default(%x)\n  return (%y)\n"
    )
    with pytest.raises(LoadError, match="no schema is known"):
        load(path)


def test_load_refuses_missing_garbage_and_directories(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file"):
        load(tmp_path / "absent.pt2")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(LoadError, match="neither a .pt2 archive nor UTF-8 text"):
        load(garbage)
    with pytest.raises(LoadError, match="cannot read the file"):
        load(tmp_path)
    not_pt2 = tmp_path / "other.zip"
    with zipfile.ZipFile(not_pt2, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(LoadError, match="no archive_format entry"):
        load(not_pt2)


# -- undefined results ------------------------------------------------------------------------------


def _layer_norm_rstd_as_none(entries: dict[str, bytes], reader: str | None = None) -> None:
    """native_layer_norm's unused rstd written as torch writes a masked backward result; with
    `reader`, that node reads it (as a tensor) instead of its first operand."""
    model = json.loads(entries[MODEL])
    nodes = model["graph_module"]["graph"]["nodes"]
    norm = next(n for n in nodes if n["target"].endswith("native_layer_norm.default"))
    norm["outputs"][2] = {"as_none": True}
    if reader is not None:
        node = next(n for n in nodes if n.get("name") == reader)
        node["inputs"][0]["arg"] = {"as_tensor": {"name": "undefined_0"}}
    entries[MODEL] = json.dumps(model).encode()


def test_an_as_none_result_is_an_undefined_value(archive: Path, tmp_path: Path) -> None:
    graph = load(rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", _layer_norm_rstd_as_none))
    norm = next(n for n in graph.nodes if n.op == "aten.native_layer_norm.default")
    undefined = norm.results[2]
    assert undefined.name == "undefined_0" and undefined.is_undefined
    # native_layer_norm always computes rstd: a graph declaring it undefined is malformed, and
    # lowering says so rather than dropping a result
    with pytest.raises(aten2prims.LoweringError, match="declares %undefined_0 as undefined"):
        aten2prims.lower(graph)


def test_reading_an_undefined_value_as_a_tensor_is_refused(archive: Path, tmp_path: Path) -> None:
    def edit(entries: dict[str, bytes]) -> None:
        _layer_norm_rstd_as_none(entries, reader="mul_1")

    with pytest.raises(
        LoadError,
        match=r"mul_1 = aten\.mul\.Tensor\): argument 'self' expects Tensor \(got %undefined_0",
    ):
        load(rewrite_archive(archive, tmp_path / f"{ROOT}.pt2", edit))
