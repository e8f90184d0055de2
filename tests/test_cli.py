"""The command line: run on text IR, ops coverage (exact JSON shape), lower formats, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aten2prims.cli import main
from aten2prims.schema.core_aten import CORE_ATEN_OPS
from prims.registry import PRIMS
from prims.torch_prims import TORCH_PRIMS

GRAPH = """\
graph g(%x: f32[2, 3], %y: f32[2, 3]) -> (f32[2, 3], b8[2, 3]):
  %a: f32[2, 3] = prims.add(%x, %y)
  %b: f32[2, 3] = prims.sin(%a)
  %c: b8[2, 3] = prims.gt(%b, 0.0)
  return (%b, %c)
"""


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "g.ir"
    path.write_text(GRAPH)
    return path


def test_run_with_random_inputs_prints_seed_and_saves_outputs(
    graph_file: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "out.npz"
    assert main(["run", str(graph_file), "--seed", "7", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "random inputs, seed 7" in printed
    assert "output_0: f32[2, 3]" in printed and "output_1: b8[2, 3]" in printed
    with np.load(out) as saved:
        assert sorted(saved.files) == ["output_0", "output_1"]
        rng = np.random.default_rng(7)
        x = rng.standard_normal((2, 3)).astype(np.float32)
        y = rng.standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_allclose(saved["output_0"], np.sin(x + y), rtol=1e-6)
        np.testing.assert_array_equal(saved["output_1"], np.sin(x + y) > 0)


def test_run_with_inputs_file(graph_file: Path, tmp_path: Path, capsys) -> None:
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.zeros((2, 3), np.float32), y=np.full((2, 3), np.pi / 2, np.float32))
    out = tmp_path / "out.npz"
    assert main(["run", str(graph_file), "--inputs", str(inputs), "--output", str(out)]) == 0
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["output_0"], np.ones((2, 3)), rtol=1e-6)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (
            {"x": np.zeros((2, 3), np.float64), "y": np.zeros((2, 3), np.float32)},
            "must have dtype f32",
        ),
        (
            {"x": np.zeros((3, 2), np.float32), "y": np.zeros((2, 3), np.float32)},
            "must have shape [2, 3]",
        ),
        ({"x": np.zeros((2, 3), np.float32)}, "missing input(s): y"),
        (
            {
                "x": np.zeros((2, 3), np.float32),
                "y": np.zeros((2, 3), np.float32),
                "z": np.zeros(1),
            },
            "no input(s) 'z'",
        ),
    ],
)
def test_bad_inputs_exit_2_with_one_line(
    graph_file: Path, tmp_path: Path, capsys, arrays, message
) -> None:
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **arrays)
    assert main(["run", str(graph_file), "--inputs", str(inputs)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_ops_json_has_exactly_the_promised_shape(capsys) -> None:
    assert main(["ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"prims", "aten"}
    extension = {f"prims.{n}" for n, d in PRIMS.items() if d.extension}
    assert set(data["prims"]) == {f"prims.{n}" for n in TORCH_PRIMS} | extension
    for name, entry in data["prims"].items():
        assert set(entry) == {"implemented", "extension"} and all(
            type(v) is bool for v in entry.values()
        )
        assert entry["extension"] == (name in extension)
    assert set(data["aten"]) == set(CORE_ATEN_OPS)
    for entry in data["aten"].values():
        assert set(entry) == {"decomposed"} and type(entry["decomposed"]) is bool


def test_ops_text_lists_every_prim_and_overload(capsys) -> None:
    assert main(["ops"]) == 0
    text = capsys.readouterr().out
    assert all(f"prims.{name}" in text for name in TORCH_PRIMS)
    assert all(op in text for op in CORE_ATEN_OPS)
    assert (
        "aten.linalg_vector_norm.default                      decomposed" in text
    )  # the extras too


@pytest.mark.parametrize("fmt", ["text", "json", "dot"])
def test_lower_formats(graph_file: Path, fmt: str, capsys) -> None:
    assert main(["lower", str(graph_file), "--format", fmt, "--stats"]) == 0
    captured = capsys.readouterr()
    if fmt == "text":
        assert captured.out == GRAPH
    elif fmt == "json":
        data = json.loads(captured.out)
        assert [n["op"] for n in data["nodes"]] == ["prims.add", "prims.sin", "prims.gt"]
        assert data["nodes"][2]["args"] == ["%b", "0.0"]
    else:
        assert captured.out.startswith('digraph "g"') and "prims.sin" in captured.out
    assert "# prims graph: 3 nodes" in captured.err


def test_missing_file_and_bad_usage_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["lower", str(tmp_path / "nope.pt2")]) == 2
    assert "no such file" in capsys.readouterr().err
    garbage = tmp_path / "bad.ir"
    garbage.write_text("graph g(%x: f99[2]) -> ():\n  return ()\n")
    assert main(["lower", str(garbage)]) == 2
    assert "line 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["frobnicate"])
    assert usage.value.code == 2


def test_check_against_torch_and_expected(graph_file: Path, tmp_path: Path, capsys) -> None:
    assert main(["check", str(graph_file), "--seed", "1"]) == 0
    assert "all outputs match" in capsys.readouterr().out
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, output_0=np.zeros((2, 3), np.float32), output_1=np.zeros((2, 3), bool))
    assert main(["check", str(graph_file), "--seed", "1", "--expected", str(wrong)]) == 1
    assert "MISMATCH output_0" in capsys.readouterr().out


def test_console_script_help_documents_the_commands() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "aten2prims.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for command in ("lower", "run", "check", "ops"):
        assert command in result.stdout
    assert "Exit codes" in result.stdout


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_lower_keep_leaves_the_named_ops_and_patterns(capsys) -> None:
    cnn = str(EXAMPLES / "cnn.pt2")
    assert main(["lower", cnn, "--format", "json", "--aten"]) == 0
    aten_ops = {n["op"] for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert {"aten.convolution.default", "aten.relu.default", "aten.addmm.default"} <= aten_ops
    argv = ["lower", cnn, "--format", "json", "--keep", "aten.convolution.*, aten.relu.default"]
    assert main([*argv, "--keep", "aten.addmm.default"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    kept = {n["op"] for n in nodes if not n["op"].startswith("prims.")}
    assert kept == {"aten.convolution.default", "aten.relu.default", "aten.addmm.default"}
    assert sum(n["op"] == "aten.convolution.default" for n in nodes) == 3
    # the same graph the library gives
    import aten2prims

    graph = aten2prims.load(cnn)
    library = aten2prims.lower(
        graph, keep=["aten.convolution.*", "aten.relu.default", "aten.addmm.default"]
    )
    assert [n["op"] for n in nodes] == [node.op for node in library.nodes]


def test_lower_keep_usage_errors_exit_2(capsys) -> None:
    mlp = str(EXAMPLES / "mlp.pt2")
    with pytest.raises(SystemExit) as usage:
        main(["lower", mlp, "--keep", "aten.mm.default,,aten.addmm.default"])
    assert usage.value.code == 2
    assert "comma-separated op names" in capsys.readouterr().err
    assert main(["lower", mlp, "--aten", "--keep", "aten.addmm.default"]) == 2
    err = capsys.readouterr().err
    assert "--aten does not lower" in err and err.count("\n") == 1


def test_readme_synopsis_matches_the_parser() -> None:
    """Every option of every command appears in README's synopsis and the CLI docstring, and
    nothing else does."""
    import re

    from aten2prims import cli

    parser = cli._parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    synopsis = readme.split("## Command line", 1)[1].split("\n\n", 2)[1]
    for text in (synopsis, cli.__doc__ or ""):
        for name, sub in commands.choices.items():  # type: ignore[attr-defined]  # argparse keeps it private
            options = {
                opt
                for action in sub._actions
                for opt in action.option_strings
                if opt.startswith("--") and opt != "--help"
            }
            # a command's lines, each with its indented continuation lines
            shown: set[str] = set()
            all_lines = text.splitlines()
            for index, line in enumerate(all_lines):
                if f"aten2prims {name}" in line:
                    block = [line]
                    for follow in all_lines[index + 1 :]:
                        if not follow.startswith(" " * 10) or "aten2prims" in follow:
                            break
                        block.append(follow)
                    shown |= set(re.findall(r"--[a-z-]+", " ".join(block)))
            assert shown == options, (name, sorted(shown ^ options))
