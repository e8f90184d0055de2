"""Ops of a user's torch.library namespace: a real exported program with two custom ops loads
(from its .pt2 archive and with from_fx), lowering names them, and user rules lower them to
prims that match torch's eager result of the custom ops."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch

import aten2prims
import prims
from aten2prims.cli import main
from aten2prims.errors import LoadError, UnsupportedOpError
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import graph_difference
from aten2prims.ir.values import TensorMeta
from aten2prims.testing.compare import compare
from decompositions import aten


@torch.library.custom_op("a2ptest::fused_gelu", mutates_args=())
def fused_gelu(x: torch.Tensor, approximate: str = "none", scale: float = 1.0) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate=approximate) * scale


@fused_gelu.register_fake
def _(x: torch.Tensor, approximate: str = "none", scale: float = 1.0) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("a2ptest::split_rows", mutates_args=())
def split_rows(
    x: torch.Tensor, bias: torch.Tensor | None, rows: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    top, bottom = x[: rows[0]].clone(), x[rows[0] :].clone()
    return (top if bias is None else top + bias), bottom


@split_rows.register_fake
def _(
    x: torch.Tensor, bias: torch.Tensor | None, rows: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    return x[: rows[0]].clone(), x[rows[0] :].clone()


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.ops.a2ptest.fused_gelu(self.lin(x), "tanh", 2.0)
        top, bottom = torch.ops.a2ptest.split_rows(y, None, [2])
        return top + 1, bottom


GELU = "a2ptest.fused_gelu.default"
SPLIT = "a2ptest.split_rows.default"


@pytest.fixture(scope="module")
def program() -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    return torch.export.export(Model().eval(), (torch.randn(5, 3),)).run_decompositions()


@pytest.fixture(scope="module")
def archive(program: torch.export.ExportedProgram, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("custom") / "custom.pt2"
    torch.export.save(program, path)
    return path


def gelu_rule(x: aten2prims.Value, approximate: str, scale: float) -> aten2prims.Value:
    """Bound by name through the op's schema: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))·scale."""
    assert approximate == "tanh"
    cube = prims.mul(prims.mul(x, x), x)
    inner = prims.mul(prims.add(x, prims.mul(cube, 0.044715)), 0.7978845608028654)
    gelu = prims.mul(prims.mul(x, 0.5), prims.add(prims.tanh(inner), 1.0))
    return prims.mul(gelu, scale)


def split_rule(*operands: object) -> tuple[aten2prims.Value, aten2prims.Value]:
    """Without a schema: the node's operands as they are."""
    x, bias, rows = operands
    assert isinstance(x, aten2prims.Value) and bias is None and rows == (2,)
    top = aten.slice.Tensor(x, 0, 0, rows[0], 1)
    bottom = aten.slice.Tensor(x, 0, rows[0], None, 1)
    return aten.clone.default(top), aten.clone.default(bottom)


def _rules() -> object:
    schema = str(torch.ops.a2ptest.fused_gelu.default._schema)  # torch.library's declared schema
    return (
        aten2prims.default_rules()
        .with_rule(GELU, gelu_rule, schema=schema)
        .with_rule(SPLIT, split_rule)
    )


def _custom_nodes(graph: aten2prims.Graph) -> list[aten2prims.Node]:
    return [node for node in graph.nodes if node.namespace == "a2ptest"]


def test_the_archive_loads_custom_ops_with_their_operands_and_metas(archive: Path) -> None:
    graph = aten2prims.load(archive)
    gelu, split = _custom_nodes(graph)
    assert gelu.op == GELU and split.op == SPLIT
    (x,) = gelu.args[:1]
    assert isinstance(x, aten2prims.Value) and x.name == "addmm"
    assert gelu.args[1:] == ("tanh", 2.0) and gelu.kwargs == {}
    assert [r.meta for r in gelu.results] == [TensorMeta((5, 4), DType.float32)]
    assert split.args[0] is gelu.results[0] and split.args[1:] == (None, (2,))
    assert [r.meta for r in split.results] == [
        TensorMeta((2, 4), DType.float32),
        TensorMeta((3, 4), DType.float32),
    ]
    # the text form prints and reads them back
    text = archive.with_suffix(".a2p")
    text.write_text(str(graph))
    assert graph_difference(aten2prims.load(text), graph) is None


def test_from_fx_gives_the_graph_the_archive_gives(
    program: torch.export.ExportedProgram, archive: Path
) -> None:
    imported = aten2prims.from_fx(program, name="custom")
    assert graph_difference(imported, aten2prims.load(archive), compare_data=True) is None


def test_lowering_names_the_custom_ops_and_user_rules_lower_them(
    program: torch.export.ExportedProgram, archive: Path
) -> None:
    graph = aten2prims.load(archive)
    with pytest.raises(UnsupportedOpError) as refused:
        aten2prims.lower(graph)
    assert refused.value.counts == {GELU: 1, SPLIT: 1}
    partial = aten2prims.lower(graph, keep=["a2ptest.*"])
    assert [n.op for n in _custom_nodes(partial)] == [GELU, SPLIT]

    lowered = aten2prims.lower(graph, rules=_rules())
    assert {node.namespace for node in lowered.nodes} == {"prims"}
    x = torch.randn(5, 3)
    expected = program.module()(x)  # torch running the custom ops eagerly
    ours = aten2prims.execute(lowered, {"x": x.numpy()})
    assert len(ours) == len(expected) == 2
    for index, (our, their) in enumerate(zip(ours, expected, strict=True)):
        verdict = compare(our, to_numpy(their), what=f"output {index}")
        assert verdict, verdict.message
    # from_fx's graph lowers to the same prims
    from_fx = aten2prims.lower(aten2prims.from_fx(program, name="custom"), rules=_rules())
    assert graph_difference(from_fx, lowered, compare_data=True) is None


def test_the_cli_names_the_custom_ops(archive: Path, capsys) -> None:
    assert main(["lower", str(archive), "--aten"]) == 0
    assert f'= {GELU}(%addmm, "tanh", 2.0)' in capsys.readouterr().out
    assert main(["lower", str(archive)]) == 2
    err = capsys.readouterr().err
    assert GELU in err and SPLIT in err and err.count("\n") == 1
    assert main(["lower", str(archive), "--keep", "a2ptest.*"]) == 0
    assert GELU in capsys.readouterr().out


def _edited(archive: Path, tmp_path: Path, target: str) -> Path:
    with zipfile.ZipFile(archive) as source:
        entries = [(info.filename, source.read(info)) for info in source.infolist()]
    out = tmp_path / "edited.pt2"
    with zipfile.ZipFile(out, "w") as edited:
        for name, data in entries:
            if name.endswith("models/model.json"):
                model = json.loads(data)
                for node in model["graph_module"]["graph"]["nodes"]:
                    if node["target"] == f"torch.ops.{GELU}":
                        node["target"] = target
                data = json.dumps(model).encode()
            edited.writestr(name, data)
    return out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("torch.ops.aten.frobnicate.default", "outside the Core ATen overloads aten2prims knows"),
        ("torch.ops.prims.add.default", "neither an aten op nor an op of a user's namespace"),
        ("torch.ops.my-lib.gelu.default", "neither an aten op nor an op of a user's namespace"),
        ("torch.ops.a2ptest.fused_gelu", "is not an op (torch.ops.namespace.name.overload)"),
    ],
)
def test_unknown_aten_overloads_and_malformed_names_stay_refused(
    archive: Path, tmp_path: Path, target: str, message: str
) -> None:
    with pytest.raises(LoadError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        aten2prims.load(_edited(archive, tmp_path, target))
    assert error.value.entry is not None and error.value.entry.endswith("models/model.json")
