"""`examples/README.md` tells the truth without torch: its Python snippet and every
`$ aten2prims ...` command run on the bundled archives in a subprocess where `import torch`
fails, exit 0 and print the lines that matter."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import aten2prims
from aten2prims.ir import format_node
from aten2prims.testing.compare import compare

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
README = (EXAMPLES / "README.md").read_text()
BLOCK_TORCH = "import sys; sys.modules['torch'] = None\n"  # `import torch` now raises ImportError
CLI = BLOCK_TORCH + "from aten2prims.cli import main; raise SystemExit(main(sys.argv[1:]))"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory laid out like the repository root for the README's relative paths; outputs
    (`out.npz`) land here, not in the repository."""
    (tmp_path / "examples").mkdir()
    for archive in EXAMPLES.glob("*.pt2"):
        shutil.copy(archive, tmp_path / "examples")
    for arrays in EXAMPLES.glob("*.npz"):
        shutil.copy(arrays, tmp_path / "examples")
    return tmp_path


def _without_torch(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_torch_is_really_blocked(workdir: Path) -> None:
    result = _without_torch(BLOCK_TORCH + "import torch", cwd=workdir)
    assert result.returncode == 1 and "import of torch halted" in result.stderr


# -- the Python snippet --------------------------------------------------------------------------------


def _fenced(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)


def test_main_job_snippet_runs_without_torch(workdir: Path) -> None:
    (snippet,) = _fenced("python")
    result = _without_torch(BLOCK_TORCH + snippet, cwd=workdir)
    assert result.returncode == 0, result.stderr
    lowered = aten2prims.lower(aten2prims.load(EXAMPLES / "transformer.pt2"))
    lines = result.stdout.splitlines()
    assert lines[0] == f"152 aten nodes -> {len(lowered.nodes)} prims"
    assert re.fullmatch(r"result: close \(max abs error [0-9.e+-]+\)", lines[1]), lines[1]


# -- the commands -------------------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _nodes_between_header_and_return(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(") -> (")) + 1
    assert lines[-1].startswith("  return (")
    return lines[start:-1]


def _check_lower_mlp(out: str, err: str, workdir: Path) -> None:
    lines = _lines(out)
    assert (
        lines[0] == "graph mlp("
        and '    %p_fc1_weight: f32[32, 16] parameter "fc1.weight",' in lines
    )
    assert lines[-1] == "  return (%addmm_1)"
    for line in _nodes_between_header_and_return(lines):
        assert re.match(
            r"  %\w+: (f32|b8)\[[\d, ]*\](\{[\d, ]*\})?(\+\d+)? = prims\.\w+\(.*\)  "
            r"# aten\.\S+ %\w+ at \"models\.py:\d+",
            line,
        ), line
    assert err == ""


def _check_lower_transformer_stats(out: str, err: str, workdir: Path) -> None:
    nodes = _nodes_between_header_and_return(_lines(out))
    assert all(" = prims." in line for line in nodes)
    stats = _lines(err)
    assert stats[0] == "# aten graph: 152 nodes"
    assert f"# prims graph: {len(nodes)} nodes" in stats
    assert "#       44  aten.view.default" in stats
    assert any(re.fullmatch(r"# +\d+  prims\.broadcast_in_dim", line) for line in stats)


def _check_lower_mlp_nested(out: str, err: str, workdir: Path) -> None:
    aten = aten2prims.load(workdir / "examples" / "mlp.pt2")
    lines = _nodes_between_header_and_return(_lines(out))
    positions = [
        lines.index(f"  {format_node(node)}") for node in aten.nodes
    ]  # every aten line, whole
    assert positions == sorted(positions) and positions[0] == 0
    prims = 0
    for start, end in zip(positions, [*positions[1:], len(lines)]):
        beneath = lines[start + 1 : end]
        assert beneath and all(
            re.match(r"    %\w+: .+? = prims\.\w+\(", line) for line in beneath
        ), beneath
        assert all("#" not in line for line in beneath)  # the provenance is the line above
        prims += len(beneath)
    assert prims == len(aten2prims.lower(aten).nodes)


def _check_lower_mlp_keep(out: str, err: str, workdir: Path) -> None:
    nodes = _nodes_between_header_and_return(_lines(out))
    kept = [line for line in nodes if " = aten." in line]
    assert len(kept) == 2 and all(" = aten.addmm.default(" in line for line in kept)
    assert all(" = prims." in line for line in nodes if line not in kept)
    assert err == ""


def _check_run_cnn(out: str, err: str, workdir: Path) -> None:
    lines = _lines(out)
    assert lines[0] == "output_0: f32[2, 10]"
    assert re.fullmatch(r"executed \d+ prims in [\d.]+ ms", lines[1]), lines[1]
    assert lines[2] == "saved 1 output(s) to out.npz"
    with np.load(workdir / "out.npz") as saved, np.load(EXAMPLES / "cnn.expected.npz") as expected:
        verdict = compare(saved["output_0"], expected["output_0"])
        assert verdict, verdict.message


def _check_check_cnn(out: str, err: str, workdir: Path) -> None:
    lines = _lines(out)
    assert lines[0].startswith("ok       output_0: max abs error ")
    assert lines[-1] == "all outputs match"


def _check_ops_head(out: str, err: str, workdir: Path) -> None:
    lines = _lines(out)
    assert len(lines) == 10
    assert re.fullmatch(
        r"Prims: \d+ / \d+ of torch's implemented; \d+ extension prim\(s\)", lines[0]
    ), lines[0]
    assert re.fullmatch(r"  prims\.abs +implemented", lines[1]), lines[1]


CHECKS: dict[str, Callable[[str, str, Path], None]] = {
    "aten2prims lower examples/mlp.pt2": _check_lower_mlp,
    "aten2prims lower examples/transformer.pt2 --stats": _check_lower_transformer_stats,
    "aten2prims lower examples/mlp.pt2 --nested": _check_lower_mlp_nested,
    "aten2prims lower examples/mlp.pt2 --keep aten.addmm.default": _check_lower_mlp_keep,
    "aten2prims run examples/cnn.pt2 --inputs examples/cnn.inputs.npz --output out.npz": _check_run_cnn,
    "aten2prims check examples/cnn.pt2 --inputs examples/cnn.inputs.npz --expected examples/cnn.expected.npz": (
        _check_check_cnn
    ),
    "aten2prims ops | head": _check_ops_head,
}


def _readme_commands() -> list[str]:
    return [
        line[2:]
        for block in _fenced("console")
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def test_every_readme_command_is_checked() -> None:
    assert sorted(_readme_commands()) == sorted(CHECKS)


@pytest.mark.parametrize("command", list(CHECKS))
def test_readme_command_runs_without_torch(command: str, workdir: Path) -> None:
    words = command.split()
    head = words[-2:] == ["|", "head"]
    if head:
        words = words[:-2]
    assert words[0] == "aten2prims"
    result = _without_torch(CLI, *words[1:], cwd=workdir)
    assert result.returncode == 0, result.stderr
    out = "".join(result.stdout.splitlines(keepends=True)[:10]) if head else result.stdout
    CHECKS[command](out, result.stderr, workdir)


def test_check_without_expected_needs_torch_and_says_so(workdir: Path) -> None:
    result = _without_torch(
        CLI, "check", "examples/mlp.pt2", "--inputs", "examples/mlp.inputs.npz", cwd=workdir
    )
    assert result.returncode == 2
    assert result.stderr == (
        "aten2prims check: error: checking against torch needs torch installed (or pass --expected OUT.npz)\n"
    )
