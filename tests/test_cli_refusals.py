"""The command line on archives the reader refuses: every refusal of `tests/test_pt2_reader.py`
(and the archive-level ones) is a LoadError from `load`, and `aten2prims lower/run/check` print
exactly that error as one line and exit 2; `--debug` adds the traceback. The help texts
document every option."""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from _pt2_modules import entry_data_offset, export_everything, rewrite_archive, save
from test_pt2_reader import REFUSALS, ROOT, _weight_entry

from aten2prims import LoadError, load
from aten2prims.cli import _parser, main

COMMANDS = ("lower", "run", "check")


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(export_everything(), tmp_path_factory.mktemp("pt2") / f"{ROOT}.pt2")


# -- the bad archives: (make the file in a directory, words of the reason) ---------------------------


def _truncated(archive: Path, directory: Path) -> Path:
    path = directory / f"{ROOT}.pt2"
    path.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    return path


def _corrupted_weight(archive: Path, directory: Path) -> Path:
    data = bytearray(archive.read_bytes())
    data[entry_data_offset(archive, _weight_entry(archive, "lin.weight")) + 3] ^= 0x40
    path = directory / f"{ROOT}.pt2"
    path.write_bytes(bytes(data))
    return path


def _not_pt2(archive: Path, directory: Path) -> Path:
    path = directory / "other.pt2"
    with zipfile.ZipFile(path, "w") as other:
        other.writestr("readme.txt", "hello")
    return path


def _from_refusal(case: str) -> Callable[[Path, Path], Path]:
    def make(archive: Path, directory: Path) -> Path:
        return rewrite_archive(archive, directory / f"{ROOT}.pt2", REFUSALS[case][0](archive))

    return make


BAD_ARCHIVES: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    **{
        case: (_from_refusal(case), reason)
        for case, (_, _, reason) in REFUSALS.items()
        if isinstance(reason, str)
    },
    "truncated archive": (_truncated, "not a readable zip archive"),
    "corrupted entry (CRC)": (_corrupted_weight, "CRC"),
    "zip that is not a .pt2 archive": (_not_pt2, "no archive_format entry"),
}


def test_every_refusal_of_the_reader_is_covered() -> None:
    assert set(REFUSALS) <= set(BAD_ARCHIVES)


@pytest.mark.parametrize("case", list(BAD_ARCHIVES))
def test_refusals_exit_2_with_the_load_error_on_one_line(
    case: str, archive: Path, tmp_path: Path, capsys
) -> None:
    make, reason = BAD_ARCHIVES[case]
    bad = make(archive, tmp_path)
    with pytest.raises(LoadError) as caught:
        load(bad)
    assert reason in str(caught.value)
    one_line = " ".join(str(caught.value).split())
    for command in COMMANDS:
        assert main([command, str(bad)]) == 2, command
        captured = capsys.readouterr()
        assert captured.err == f"aten2prims {command}: error: {one_line}\n", command
        assert captured.out == "", command


def test_refusal_exit_code_and_line_from_a_real_process(archive: Path, tmp_path: Path) -> None:
    bad = _from_refusal("pickled weight")(archive, tmp_path)
    for command in COMMANDS:
        result = subprocess.run(
            [sys.executable, "-m", "aten2prims.cli", command, str(bad)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith(
            f"aten2prims {command}: error: {ROOT}/data/weights/model_weights_config.json: "
        )
        assert "never unpickles" in result.stderr and result.stdout == ""


def test_debug_shows_the_traceback(archive: Path, tmp_path: Path, capsys) -> None:
    bad = _truncated(archive, tmp_path)
    assert main(["--debug", "lower", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "aten2prims.errors.LoadError" in err and "frontends/pt2.py" in err
    assert err.splitlines()[-1].startswith(
        f"aten2prims lower: error: {bad}: not a readable zip archive"
    )
    command = [sys.executable, "-m", "aten2prims.cli", "--debug", "run", str(bad)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "Traceback (most recent call last):" in result.stderr and "LoadError" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        f"aten2prims run: error: {bad}: not a readable zip archive"
    )


# -- help ------------------------------------------------------------------------------------------------


DOCUMENTED = {
    "lower": ["--aten", "--nested", "--format", "--stats"],
    "run": ["--inputs", "--output", "--seed"],
    "check": ["--inputs", "--expected", "--seed", "--ops", "--dtype", "--json", "--full-budget"],
    "ops": ["--json"],
}


def _help(*argv: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "aten2prims.cli", *argv, "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return result.stdout


def test_top_level_help_lists_commands_debug_and_exit_codes() -> None:
    text = _help()
    for command in DOCUMENTED:
        assert command in text
    assert "--debug" in text and "show tracebacks" in text
    assert "Exit codes: 0 ok, 1 a check found a mismatch, 2 bad usage or bad input." in text


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", list(DOCUMENTED))
def test_each_subcommand_help_documents_its_options(command: str) -> None:
    text = _help(command)
    assert text.startswith(f"usage: aten2prims {command}")
    options = [a for a in _subcommands()[command]._actions if a.option_strings and a.dest != "help"]
    assert set(DOCUMENTED[command]) <= {s for a in options for s in a.option_strings}
    for option in options:
        # every option appears with a sentence saying what it does
        assert option.help and option.help != argparse.SUPPRESS, option.option_strings
        assert option.option_strings[0] in text
        assert " ".join(option.help.split()[:3]) in " ".join(text.split()), option.option_strings
