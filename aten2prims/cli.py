"""The `aten2prims` command line.

    aten2prims lower FILE [--aten] [--keep OPS] [--nested] [--format text|json|dot] [--stats]
                          [--max-memory SIZE]
    aten2prims run FILE [--inputs IN.npz] [--output OUT.npz] [--seed N] [--max-memory SIZE]
                        [--threads N]
    aten2prims check FILE [--inputs IN.npz] [--expected OUT.npz] [--seed N] [--bisect]
                          [--max-memory SIZE]
    aten2prims check --ops [REGEX] [--dtype DT ...] [--json FILE] [--full-budget] [--workers N]
                          [--coverage FILE]
    aten2prims ops [--json]

Every command also takes `--debug` (before the command: `aten2prims --debug lower …`).

Exit codes: 0 ok, 1 a check found a mismatch, 2 bad usage or bad input. Errors are one line;
`--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
import zipfile
import zlib
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from . import frontends
from .coverage import coverage_json, coverage_text
from .errors import Error
from .executor import execute
from .executor.run import check_memory_budget
from .ir.dtypes import DType
from .ir.printer import format_nested, format_operand, format_provenance
from .ir.values import ScalarMeta
from .limits import default_memory_budget, format_bytes, parse_size
from .passes.bind import specialize
from .passes.lower import lower
from .testing.model_outputs import judge_output

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage or input detected by the CLI itself."""


def _size(text: str) -> int:

    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _add_max_memory(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-memory",
        type=_size,
        metavar="SIZE",
        help="memory budget for loading and running, e.g. 512M or 4G (default: the machine's "
        "memory); larger archives and graphs are refused before anything is allocated",
    )


def _keep_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated op names or patterns (e.g. 'aten.mm.default,aten.convolution.*'), "
            f"got {text!r}"
        )
    return names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aten2prims",
        description="Lower Core ATen graphs (.pt2 archives from torch.export.save, or text IR files) to "
        "torch Prims and run them on NumPy.",
        epilog="Exit codes: 0 ok, 1 a check found a mismatch, 2 bad usage or bad input.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lower = commands.add_parser("lower", help="print the lowered (prims) graph")
    lower.add_argument("file", help=".pt2 archive or text IR file")
    lower.add_argument("--aten", action="store_true", help="print the input (aten) graph instead")
    lower.add_argument(
        "--keep",
        type=_keep_list,
        action="append",
        metavar="OPS",
        help="leave these aten ops unlowered: comma-separated overload names or shell patterns, "
        "e.g. 'aten.convolution.*,aten.mm.default' (repeatable)",
    )
    lower.add_argument(
        "--nested", action="store_true", help="show each aten node with its prims beneath it"
    )
    lower.add_argument(
        "--format", choices=("text", "json", "dot"), default="text", help="output format"
    )
    lower.add_argument(
        "--stats", action="store_true", help="print op counts before and after lowering"
    )
    _add_max_memory(lower)

    run = commands.add_parser("run", help="run the graph on NumPy")
    run.add_argument("file", help=".pt2 archive or text IR file")
    run.add_argument(
        "--inputs", metavar="IN.npz", help="user inputs by name (default: random, seeded)"
    )
    run.add_argument("--output", metavar="OUT.npz", help="save outputs as output_0, output_1, …")
    run.add_argument("--seed", type=int, default=None, help="seed for random inputs and random ops")
    _add_max_memory(run)
    run.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="threads running the graph (default: the machine's cores, or ATEN2PRIMS_NUM_THREADS)",
    )

    check = commands.add_parser(
        "check",
        help="compare our results with torch's (FILE), or run the conformance harness (--ops)",
    )
    check.add_argument("file", nargs="?", help=".pt2 archive or text IR file")
    check.add_argument(
        "--inputs", metavar="IN.npz", help="user inputs by name (default: random, seeded)"
    )
    check.add_argument(
        "--expected", metavar="OUT.npz", help="expected outputs (default: run torch)"
    )
    check.add_argument(
        "--seed", type=int, default=None, help="seed for random inputs and random ops"
    )
    check.add_argument(
        "--bisect",
        action="store_true",
        help="with FILE: name the first node whose lowering diverges",
    )
    check.add_argument(
        "--ops",
        nargs="?",
        const=".*",
        metavar="REGEX",
        help="check Core ATen overloads matching REGEX",
    )
    check.add_argument(
        "--dtype", action="append", metavar="DT", help="with --ops: only these dtypes (e.g. f32)"
    )
    check.add_argument("--json", metavar="FILE", help="with --ops: write the details as JSON")
    check.add_argument(
        "--full-budget", action="store_true", help="with --ops: run the full sample budget"
    )
    check.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="with --ops: check the overloads in N processes (default 1)",
    )
    check.add_argument(
        "--coverage",
        metavar="FILE",
        help="with --ops and no REGEX or --dtype: write the coverage report (docs/coverage.md)",
    )
    _add_max_memory(check)

    ops = commands.add_parser("ops", help="print which prims and Core ATen ops are covered")
    ops.add_argument("--json", action="store_true", help="print the coverage as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (Error, UsageError) as error:
        if args.debug:
            traceback.print_exc()
        print(f"aten2prims {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug of ours: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        print(
            f"aten2prims {args.command}: internal error: {type(error).__name__}: {_one_line(error)} "
            "(run with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_USAGE


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


# -- lower ---------------------------------------------------------------------------------------


def _lower(args: argparse.Namespace) -> int:

    keep = [name for names in args.keep or () for name in names]
    if keep and args.aten:
        raise UsageError("--keep chooses what lowering leaves intact; --aten does not lower")
    graph = frontends.load(args.file, max_memory=args.max_memory)
    lowered = None if args.aten else lower(graph, keep=keep or None)
    shown = graph if lowered is None else lowered
    if args.format == "text":
        print(
            format_nested(graph, lowered) if args.nested and lowered is not None else str(shown),
            end="",
        )
    elif args.format == "json":
        print(json.dumps(graph_to_json(shown), indent=1))
    else:
        print(graph_to_dot(shown), end="")
    if args.stats:
        _print_stats(graph, lowered)
    return EXIT_OK


def _print_stats(graph: Any, lowered: Any) -> None:
    before = graph.op_counts()
    print(f"# aten graph: {len(graph.nodes)} nodes", file=sys.stderr)
    for op, count in before.most_common():
        print(f"#   {count:6d}  {op}", file=sys.stderr)
    if lowered is not None:
        after = lowered.op_counts()
        print(f"# prims graph: {len(lowered.nodes)} nodes", file=sys.stderr)
        for op, count in after.most_common():
            print(f"#   {count:6d}  {op}", file=sys.stderr)


def graph_to_json(graph: Any) -> dict[str, Any]:
    """The graph as JSON: operands in their text-form spelling (exact for every literal kind); a
    control-flow node's nested graphs (`@name` operands) whole under `graphs`."""

    def node_json(node: Any) -> dict[str, Any]:
        entry = {
            "op": node.op,
            "args": [format_operand(a) for a in node.args],
            "kwargs": {k: format_operand(v) for k, v in node.kwargs.items()},
            "results": [{"name": r.name, "type": str(r.meta)} for r in node.results],
            "provenance": format_provenance(node.provenance).removeprefix("# ") or None,
        }
        subgraphs = [graph_to_json(subgraph) for subgraph in node.subgraphs()]
        if subgraphs:
            entry["graphs"] = subgraphs
        return entry

    return {
        "name": graph.name,
        "inputs": [
            {"name": i.name, "type": str(i.value.meta), "kind": i.kind.value, "target": i.target}
            for i in graph.inputs
        ],
        "nodes": [node_json(node) for node in graph.nodes],
        "outputs": [
            {"name": o.value.name, "kind": o.kind.value, "target": o.target} for o in graph.outputs
        ],
    }


def graph_to_dot(graph: Any) -> str:
    """The graph as Graphviz dot: one vertex per input and node, edges labelled with types."""
    lines = [
        f'digraph "{graph.name}" {{',
        "  rankdir=TB;",
        "  node [shape=box, fontname=monospace];",
    ]
    defined: dict[Any, str] = {}
    for index, graph_input in enumerate(graph.inputs):
        vertex = f"in{index}"
        lines.append(
            f'  {vertex} [label="%{graph_input.name}\\n{graph_input.value.meta}", shape=ellipse];'
        )
        defined[graph_input.value] = vertex
    for index, node in enumerate(graph.nodes):
        vertex = f"n{index}"
        results = ", ".join(f"%{r.name}" for r in node.results)
        lines.append(f'  {vertex} [label="{node.op}\\n{results}"];')
        for value in dict.fromkeys(node.operand_values()):
            if value in defined:
                lines.append(f'  {defined[value]} -> {vertex} [label="{value.meta}"];')
        for result in node.results:
            defined[result] = vertex
    lines.append('  out [label="return", shape=ellipse];')
    for graph_output in graph.outputs:
        lines.append(f'  {defined[graph_output.value]} -> out [label="{graph_output.value.meta}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- run -----------------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:

    graph = frontends.load(args.file, max_memory=args.max_memory)
    lowered = lower(graph)
    check_memory_budget(lowered, args.max_memory)  # before random inputs are drawn
    inputs, seed = _inputs(graph, args.inputs, args.seed, args.max_memory)
    start = time.perf_counter()
    outputs = execute(lowered, inputs, seed=seed, max_memory=args.max_memory, threads=args.threads)
    elapsed = time.perf_counter() - start
    for index, output in enumerate(outputs):
        print(f"output_{index}: {_describe(output)}")
    print(f"executed {len(lowered.nodes)} prims in {elapsed * 1e3:.2f} ms")
    if args.output:
        _save(args.output, {f"output_{i}": o for i, o in enumerate(outputs)})
        print(f"saved {len(outputs)} output(s) to {args.output}")
    return EXIT_OK


def _describe(output: Any) -> str:

    if isinstance(output, np.ndarray):
        return f"{DType.from_numpy(output.dtype).short}{list(output.shape)}"
    return f"{type(output).__name__} {output!r}"


def _inputs(
    graph: Any, path: str | None, seed: int | None, max_memory: int | None = None
) -> tuple[dict[str, Any], int]:
    """User inputs from an .npz file, or random ones drawn from the metas (seed printed)."""
    if seed is None:
        seed = int(np.random.default_rng().integers(0, 2**31 - 1))
    if path is not None:
        return _load_npz(path, graph, max_memory), seed
    print(f"random inputs, seed {seed}")
    rng = np.random.default_rng(seed)
    drawn: dict[str, Any] = {}
    if graph.symbols:  # a dynamic graph: inputs of the sizes (and int values) it was exported with
        examples = {n: s.example for n, s in graph.symbols.items() if s.example is not None}
        drawn = {
            s.value: examples[n]
            for n, s in graph.symbols.items()
            if n in examples and s.backed and s.value
        }
        graph = specialize(graph, examples)
    for i in graph.inputs:
        if i.data is None and i.name not in drawn:
            drawn[i.name] = random_array(i.value.meta, rng)
    return drawn, seed


def random_array(meta: Any, rng: np.random.Generator) -> Any:
    """A random value of a meta: normal floats, small integers, random bools."""

    if type(meta) is ScalarMeta:
        return meta.kind(rng.integers(1, 5))
    dtype = meta.dtype
    if dtype.is_bool:
        return rng.random(meta.shape) < 0.5
    if dtype.is_integer:
        low = 0 if not dtype.is_signed else -10
        return rng.integers(low, 10, size=meta.shape).astype(dtype.numpy)
    values = rng.standard_normal(meta.shape)
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(meta.shape)
    return np.asarray(values).astype(dtype.numpy)


# Written by `run --output` next to the arrays: "name:dtype" for every array whose dtype an .npy
# header cannot name (bfloat16 and the other ml_dtypes types, stored as their raw bits).
_DTYPES_ENTRY = "__aten2prims_dtypes__"
_NPY_MAGIC = b"\x93NUMPY"


def _load_npz(path: str, graph: Any, max_memory: int | None = None) -> dict[str, Any]:
    """The arrays of an .npz file, retyped to the graph's bfloat16 inputs where needed."""

    arrays = read_npz(path, max_memory)
    # Older files and other tools save bfloat16 as raw 2-byte values ("V2"): retyped by the meta.
    metas = {i.name: i.value.meta for i in graph.inputs}
    for name, array in arrays.items():
        meta = metas.get(name)
        if type(meta) is ScalarMeta and array.ndim == 0 and array.dtype.kind in "iub":
            arrays[name] = meta.kind(array.item())  # an int input (a symbol, when dynamic)
            continue
        if (
            meta is not None
            and getattr(meta, "dtype", None) is DType.bfloat16
            and array.dtype.kind == "V"
            and array.dtype.itemsize == 2
        ):
            arrays[name] = array.view(DType.bfloat16.numpy)
    return arrays


def read_npz(path: str, max_memory: int | None = None) -> dict[str, np.ndarray]:
    """The arrays of an .npz file, read without numpy.load: every .npy header is checked (no
    Python objects, sizes matching the entry, within the memory budget) before its data is
    read, and nothing is ever unpickled. Raises UsageError saying what is wrong."""

    budget = default_memory_budget() if max_memory is None else max_memory
    try:
        with open(path, "rb") as file:
            head = file.read(len(_NPY_MAGIC))
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise UsageError(f"cannot read {path}: no such file") from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError):
        if head == _NPY_MAGIC:
            raise UsageError(
                f"{path} is a single .npy array; inputs and outputs are .npz files "
                "(numpy.savez(path, name=array, ...))"
            ) from None
        what = "an empty file" if not head else "not an .npz file"
        raise UsageError(
            f"{path} is {what}; expected an .npz file (a zip of .npy arrays, as numpy.savez writes)"
        ) from None
    arrays: dict[str, np.ndarray] = {}
    spent = 0
    with archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if name == info.filename or not name or name in arrays:
                raise UsageError(f"{path}: entry {info.filename!r} is not a (distinct) .npy array")
            try:
                with archive.open(info) as stream:
                    shape, fortran, dtype = _npy_header(stream)
                    if dtype.hasobject:
                        raise UsageError(
                            f"{path}: {name} holds Python objects, which would need "
                            "unpickling; aten2prims never unpickles"
                        )
                    if any(type(n) is not int or n < 0 for n in shape):
                        raise UsageError(f"{path}: {name} has a malformed shape {shape}")
                    nbytes = math.prod(shape) * dtype.itemsize
                    if info.file_size != stream.tell() + nbytes:
                        raise UsageError(
                            f"{path}: {name} declares {dtype}{list(shape)} "
                            f"({nbytes} bytes), but its entry holds "
                            f"{info.file_size - stream.tell()} bytes of data"
                        )
                    spent += nbytes
                    if spent > budget:
                        raise UsageError(
                            f"{path}: {name} ({dtype}{list(shape)}) takes the arrays "
                            f"to {format_bytes(spent)}, over the memory budget of "
                            f"{format_bytes(budget)} (--max-memory)"
                        )
                    buffer = bytearray(nbytes)
                    if cast(zipfile.ZipExtFile, stream).readinto(buffer) != nbytes:
                        raise UsageError(f"{path}: {name} is truncated")
                    stream.read(1)  # reaching the end checks the entry's CRC-32
            except (
                zipfile.BadZipFile,
                zipfile.LargeZipFile,
                OSError,
                EOFError,
                ValueError,
                TypeError,
                SyntaxError,
                zlib.error,
                NotImplementedError,
            ) as error:
                raise UsageError(f"{path}: cannot read {name}: {_one_line(error)}") from None
            arrays[name] = np.frombuffer(buffer, dtype).reshape(
                shape, order="F" if fortran else "C"
            )
    return _retyped(path, arrays)


def _npy_header(stream: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"unsupported .npy format version {version}")
    read = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    try:
        return read(stream)
    except (ValueError, OSError, EOFError):
        raise
    except Exception as error:  # numpy tokenizes the header text: TokenError, SyntaxError, …
        raise ValueError(f"malformed .npy header ({type(error).__name__}: {error})") from None


def _retyped(path: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays saved as raw bits by `_save` given back their dtype (bfloat16, float8, …)."""

    table = arrays.pop(_DTYPES_ENTRY, None)
    if table is None:
        return arrays
    if table.dtype.kind != "U" or table.ndim != 1:
        raise UsageError(f"{path}: {_DTYPES_ENTRY} is not a list of 'name:dtype' strings")
    for item in table.tolist():
        name, _, short = item.rpartition(":")
        try:
            dtype = DType.from_short(short).numpy
        except ValueError:
            raise UsageError(f"{path}: {_DTYPES_ENTRY} names an unknown dtype {short!r}") from None
        array = arrays.get(name)
        if array is None or array.dtype.itemsize != dtype.itemsize:
            raise UsageError(
                f"{path}: {_DTYPES_ENTRY} retypes {name!r} to {short}, which does "
                "not fit the array stored under that name"
            )
        arrays[name] = array.view(dtype)
    return arrays


def _save(path: str, arrays: dict[str, Any]) -> None:
    """Write exactly `path` (numpy.savez given a name would append .npz). Dtypes an .npy header
    cannot name are stored as raw bits and listed in _DTYPES_ENTRY, so read_npz restores them."""

    stored: dict[str, Any] = {}
    retype: list[str] = []
    for name, value in arrays.items():
        array = np.asarray(value)
        if type(array.dtype).__module__.startswith(
            "ml_dtypes"
        ) or array.dtype.type.__module__.startswith("ml_dtypes"):
            retype.append(f"{name}:{DType.from_numpy(array.dtype).short}")
            array = array.view(f"V{array.dtype.itemsize}")
        stored[name] = array
    if retype:
        stored[_DTYPES_ENTRY] = np.array(retype)
    try:
        with open(path, "wb") as file:
            np.savez(file, **stored)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


# -- check ---------------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    if args.ops is not None:
        if args.file is not None:
            raise UsageError("give either FILE or --ops, not both")
        # The harness loads torch; only `check` needs it.
        from .testing.cli import HarnessUsageError, check_ops

        try:
            return check_ops(
                args.ops,
                dtypes=args.dtype,
                json_path=args.json,
                full_budget=args.full_budget,
                coverage_path=args.coverage,
                workers=args.workers,
            )
        except HarnessUsageError as error:
            raise UsageError(str(error)) from None
    if args.json or args.coverage or args.dtype or args.full_budget or args.workers != 1:
        raise UsageError("--dtype, --json, --full-budget, --workers and --coverage go with --ops")
    if args.file is None:
        raise UsageError("check needs a FILE or --ops")

    graph = frontends.load(args.file, max_memory=args.max_memory)
    lowered = lower(graph)
    check_memory_budget(lowered, args.max_memory)  # before random inputs are drawn
    inputs, seed = _inputs(graph, args.inputs, args.seed, args.max_memory)
    if args.bisect:
        # The harness loads torch; only `check --bisect` needs it.
        from .testing.bisect import bisect

        report = bisect(graph, inputs, seed=seed or 0)
        print(report)
        return EXIT_OK if report.ok else EXIT_MISMATCH
    ours = execute(lowered, inputs, seed=seed, max_memory=args.max_memory)
    if args.expected is not None:
        expected_arrays = read_npz(args.expected, args.max_memory)
        try:
            expected = [expected_arrays[f"output_{i}"] for i in range(len(ours))]
        except KeyError as missing:
            raise UsageError(f"{args.expected} has no {missing.args[0]}") from None
        source = args.expected
        references: list[Any] = [None] * len(ours)
    else:
        # The harness loads torch; only `check` needs it.
        from .testing.torch_run import run_with_torch

        expected = run_with_torch(args.file, graph, inputs)
        source = "torch"
        references = _float64_references(args.file, graph, inputs, len(ours))
    failed = 0
    for index, (our, their, reference) in enumerate(zip(ours, expected, references, strict=True)):
        verdict = judge_output(our, their, reference, what=f"output_{index}", against=source)
        mark = "ok      " if verdict else "MISMATCH"
        largest = verdict.comparison.max_abs_error
        print(f"{mark} output_{index}: max abs error {largest:.3g} vs {source} — {verdict.message}")
        failed += not verdict
    print("all outputs match" if not failed else f"{failed} of {len(ours)} output(s) differ")
    return EXIT_MISMATCH if failed else EXIT_OK


def _float64_references(file: str, graph: Any, inputs: dict[str, Any], count: int) -> list[Any]:
    """torch's outputs of the graph run in float64, the reference deep models are judged
    against; Nones (the tolerance rule against torch alone) when torch cannot run it so."""
    # The harness loads torch; only `check` needs it.
    from .testing.torch_run import run_with_torch

    try:
        return run_with_torch(file, graph, inputs, float64=True)
    except Exception as error:  # any op refusing float64: no reference
        print(f"(no float64 reference: {_one_line(error)})")
        return [None] * count


# -- ops -----------------------------------------------------------------------------------------


def _ops(args: argparse.Namespace) -> int:

    if args.json:
        print(json.dumps(coverage_json(), indent=1, sort_keys=True))
    else:
        print(coverage_text(), end="")
    return EXIT_OK


_COMMANDS = {"lower": _lower, "run": _run, "check": _check, "ops": _ops}


if __name__ == "__main__":
    sys.exit(main())
