"""A seeded, structure-aware mutation fuzzer of everything the command line reads: `.pt2`
archives, text IR files and `--inputs` .npz files (SECURITY.md says what it checks).

    python -m aten2prims.fuzz --cases 5000 [--seed N] [--jobs 2] [--keep DIR]

Seeds are the bundled examples (examples/*.pt2, *.inputs.npz), their graphs in text form and
three small text graphs (one with a backward op whose output_mask leaves a gradient undefined,
one with control flow: a cond and a map whose nested graphs are printed beneath them).
Each case mutates one seed (sizes, strides, offsets, dtype codes, op names, references,
undefined tensors, zip entries, JSON nesting, encodings, .npy headers) and runs `aten2prims lower` or `run` on it in
a forked child process with an address-space limit (RLIMIT_AS) and a time limit. torch is
blocked in this process, so the CLI's lower/run path is checked to never import it.

A case passes when the CLI exits 0, or exits 2 with exactly one line on stderr that is a
documented error ("aten2prims VERB: error: ..."), within the limits. An "internal error", a
traceback, another exit code, a signal or a timeout fails it. The summary counts the outcomes
by class; the exit status is 1 if any case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from .cli import main as cli_main
from .frontends import load

ADDRESS_SPACE_LIMIT = 2 * 2**30
TIME_LIMIT_SECONDS = 20
_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
_SEED_MODELS = ("mlp", "cnn")
_OPS = (
    "aten.add.Tensor",
    "aten.mm.default",
    "aten.nope.default",
    "prims.add",
    "os.system",
    "torch.ops.aten.relu.default",
    "aten.view.default",
    "",
)
_HUGE = (0, 1, -1, 2**29, 2**31, 2**33, 2**40, 2**61, 2**63, 2**64, -(2**63))


@attrs.define
class Case:
    index: int
    kind: str  # "pt2", "text" or "npz"
    mutation: str
    verb: str
    files: dict[str, bytes]  # name -> content; "model" is the FILE argument
    extra: tuple[str, ...] = ()


@attrs.define
class Outcome:
    case: Case
    status: str  # "ok", "refused", or "FAIL: ..."
    detail: str
    seconds: float
    max_rss_kib: int


# -- seeds ------------------------------------------------------------------------------------------


def _seeds() -> dict[str, bytes]:
    seeds = {}
    for name in _SEED_MODELS:
        seeds[f"{name}.pt2"] = (_EXAMPLES / f"{name}.pt2").read_bytes()
        seeds[f"{name}.inputs.npz"] = (_EXAMPLES / f"{name}.inputs.npz").read_bytes()
    for name in _SEED_MODELS:
        seeds[f"{name}.txt"] = str(load(_EXAMPLES / f"{name}.pt2")).encode()
    seeds["tiny.txt"] = (
        b"graph tiny(%x: f32[2, 3]) -> (f32[2, 3]):\n"
        b"  %y: f32[2, 3] = aten.add.Tensor(%x, %x, alpha=1)\n"
        b"  return (%y)\n"
    )
    # A backward op whose output_mask leaves a gradient undefined.
    seeds["masked.txt"] = (
        b"graph masked(%g: f32[2, 4, 6, 6], %x: f32[2, 3, 8, 8], %w: f32[4, 3, 3, 3]) -> "
        b"(f32[4, 3, 3, 3]):\n"
        b"  %gi: f32[2, 3, 8, 8], %gw: f32[4, 3, 3, 3], %undefined_0: undefined = "
        b"aten.convolution_backward.default(%g, %x, %w, [0], [1, 1], [0, 0], [1, 1], False, "
        b"[0, 0], 1, [True, True, False])\n"
        b"  return (%gw)\n"
    )
    # Control flow: a cond whose branches are nested graphs (a map, a loop) printed beneath it.
    seeds["cond.txt"] = (
        b"graph c(%x: f32[3], %y: f32[3]) -> (f32[3], f32[2, 3]):\n"
        b"  %s: f32[] = aten.sum.dim_IntList(%x, [])\n"
        b"  %gt: b8[] = aten.gt.Scalar(%s, 0)\n"
        b"  %r: f32[3] = higher_order.cond(%gt, @t, @f, [%x, %y])\n"
        b"    graph t(%x: f32[3], %y: f32[3]) -> (f32[3]):\n"
        b"      %a: f32[3] = aten.add.Tensor(%x, %y)\n"
        b"      return (%a)\n"
        b"    graph f(%x: f32[3], %y: f32[3]) -> (f32[3]):\n"
        b"      %n: f32[3] = aten.neg.default(%y)\n"
        b"      return (%n)\n"
        b"  %st: f32[2, 3] = aten.expand.default(%r, [2, 3])\n"
        b"  %m: f32[2, 3] = higher_order.map_impl(@body, [%st], [%x])\n"
        b"    graph body(%row: f32[3], %x: f32[3]) -> (f32[3]):\n"
        b"      %p: f32[3] = aten.mul.Tensor(%row, %x)\n"
        b"      return (%p)\n"
        b"  return (%r, %m)\n"
    )
    return seeds


# -- JSON mutations --------------------------------------------------------------------------------


def _paths(document: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every value in a JSON document, iteratively."""
    found, stack = [], [document]
    while stack:
        node = stack.pop()
        items = (
            node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        )
        for key, child in items:
            found.append((node, key))
            if type(child) in (dict, list):
                stack.append(child)
    return found


_DEEP = re.compile(r'"__deep_([0-9]+)__"')


def _deep_text(match: re.Match[str]) -> str:
    """Deep nesting is spliced into the JSON text: json.dumps itself would recurse too far."""
    depth = int(match[1])
    return '{"k": [' * (depth // 2) + "0" + "]}" * (depth // 2)


def _mutate_json(document: Any, rng: random.Random) -> str:
    paths = _paths(document)
    if not paths:
        return "empty"
    interesting = [
        (c, k)
        for c, k in paths
        if k
        in (
            "sizes",
            "strides",
            "storage_offset",
            "dtype",
            "layout",
            "target",
            "name",
            "use_pickle",
            "path_name",
            "as_int",
            "arg",
            "inputs",
            "outputs",
        )
    ]
    container, key = rng.choice(interesting if interesting and rng.random() < 0.7 else paths)
    value = container[key]
    choice = rng.randrange(9)
    if choice == 0 and type(value) is list and value:
        for i in range(len(value)):
            if type(value[i]) is dict and "as_int" in value[i]:
                value[i] = {"as_int": rng.choice(_HUGE)}
        return f"huge ints in {key}"
    if choice == 1:
        container[key] = rng.choice(_HUGE)
        return f"int {key}"
    if choice == 2:
        container[key] = rng.choice(_OPS) if key == "target" else f"ref_{rng.randrange(100)}"
        return f"name {key}"
    if choice == 3 and type(container) is dict:
        del container[key]
        return f"drop {key}"
    if choice == 4:
        container[key] = f"__deep_{rng.choice((50, 500, 1200, 5000))}__"
        return f"deep {key}"
    if choice == 5:
        # {"as_none": true}: an undefined (None) tensor where the archive had something else
        container[key] = rng.choice((None, True, "x", 1.5, [], {}, "NaN", {"as_none": True}))
        return f"type {key}"
    if choice == 6 and key == "use_pickle":
        container[key] = True
        return "use_pickle"
    if choice == 7 and type(value) is list and value:
        container[key] = value * rng.choice((2, 100))
        return f"repeat {key}"
    if type(value) is int:
        container[key] = value + rng.choice((-1, 1, 7, 2**31))
        return f"nudge {key}"
    container[key] = rng.choice(_HUGE)
    return f"int {key}"


# -- archive mutations ------------------------------------------------------------------------------


def _entries(archive: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        return [(info.filename, z.read(info)) for info in z.infolist()]


def _zip(entries: list[tuple[str, bytes]], bomb: tuple[str, int] | None = None) -> bytes:
    out = io.BytesIO()
    with warnings_silenced(), zipfile.ZipFile(out, "w") as z:
        for name, data in entries:
            if bomb is not None and name == bomb[0]:
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                with z.open(info, "w", force_zip64=True) as stream:
                    chunk = bytes(2**24)
                    for _ in range(bomb[1] // len(chunk)):
                        stream.write(chunk)
            else:
                z.writestr(name, data)
    return out.getvalue()


@contextlib.contextmanager
def warnings_silenced() -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name" is what some cases want
        yield


def _mutate_pt2(seed: bytes, rng: random.Random) -> tuple[str, bytes]:
    entries = _entries(seed)
    names = [name for name, _ in entries]
    choice = rng.randrange(10)
    if choice <= 3:  # the model or a payload config, structurally
        targets = [n for n in names if n.endswith(".json")]
        target = rng.choice(targets)
        position = names.index(target)
        document = json.loads(entries[position][1])
        what = _mutate_json(document, rng)
        entries[position] = (target, _DEEP.sub(_deep_text, json.dumps(document)).encode())
        return f"json {target.split('/')[-1]}: {what}", _zip(entries)
    if choice == 4:
        name, data = rng.choice(entries)
        root = names[0].split("/")[0]
        variant = rng.choice((f"../{name}", f"/{name}", name, f"{root}/../evil", f"{root}\\x"))
        entries.append((variant, data))
        return f"entry name {variant!r}", _zip(entries)
    if choice == 5:
        weights = [n for n in names if "/weight_" in n] or names
        target = rng.choice(weights)
        size = rng.choice((2**26, 2**28))
        return f"zip bomb {size} bytes", _zip(entries, bomb=(target, size))
    if choice == 6:
        position = rng.randrange(len(entries))
        name, data = entries[position]
        entries[position] = (name, data[: rng.randrange(len(data) + 1)] + bytes(rng.randrange(8)))
        return f"resize {name.split('/')[-1]}", _zip(entries)
    if choice == 7:
        del entries[rng.randrange(len(entries))]
        return "drop an entry", _zip(entries)
    flipped = bytearray(seed)
    for _ in range(rng.randrange(1, 20)):
        flipped[rng.randrange(len(flipped))] = rng.randrange(256)
    return "byte flips", bytes(flipped)


# -- text IR mutations ------------------------------------------------------------------------------

_NUMBER = re.compile(rb"(?<![A-Za-z_%])[0-9]+")


def _mutate_text(seed: bytes, rng: random.Random) -> tuple[str, bytes]:
    text = seed
    choice = rng.randrange(9)
    numbers = list(_NUMBER.finditer(text))
    if choice == 0 and numbers:
        match = rng.choice(numbers)
        new = rng.choice(
            (b"9" * 5000, str(2**40).encode(), str(2**64).encode(), "٣2".encode(), b"-1", b"0")
        )
        return "number", text[: match.start()] + new + text[match.end() :]
    if choice == 1:
        depth = rng.choice((100, 2000))
        position = text.find(b"(%", text.find(b"\n")) + 1
        return "deep list", text[:position] + b"[" * depth + b"1" + b"]" * depth + b", " + text[
            position:
        ]
    if choice == 2:
        position = text.find(b"(%", text.find(b"\n")) + 1
        literal = rng.choice((b'"\\q"', b'"\\u12"', b'"\\ud800"', b'"abc'))
        return "string escape", text[:position] + literal + b", " + text[position:]
    if choice == 3:
        ops = list(re.finditer(rb"[a-z]+\.[a-z_0-9]+\.[A-Za-z_]+", text))
        if ops:
            match = rng.choice(ops)
            new = rng.choice(_OPS).encode()
            return "op name", text[: match.start()] + new + text[match.end() :]
    if choice == 4:
        refs = list(re.finditer(rb"%[A-Za-z0-9_]+", text))
        if refs:
            match = rng.choice(refs)
            new = rng.choice((b"%nowhere", b"%" + rng.choice(refs).group()[1:]))
            return "reference", text[: match.start()] + new + text[match.end() :]
    if choice == 5:
        lines = text.split(b"\n")
        del lines[rng.randrange(len(lines))]
        return "drop a line", b"\n".join(lines)
    if choice == 6:
        return "encoding", rng.choice(
            (text.decode().encode("utf-16"), b"\xff\xfe" + text, text[:-1] + b"\x80")
        )
    if choice == 7:
        types = list(re.finditer(rb"\b(f32|i64|b8|bf16)\[[0-9, ]*\]", text))
        if types and rng.random() < 0.3:  # an undefined (None) tensor in place of a typed one
            match = rng.choice(types)
            return "undefined", text[: match.start()] + b"undefined" + text[match.end() :]
        dtypes = list(re.finditer(rb"\b(f32|i64|b8|bf16)\[", text))
        if dtypes:
            match = rng.choice(dtypes)
            new = rng.choice((b"f64[", b"c64[", b"bf16[", b"q8[", b"i64["))
            return "dtype", text[: match.start()] + new + text[match.end() :]
    data = bytearray(text)
    for _ in range(rng.randrange(1, 10)):
        data[rng.randrange(len(data))] = rng.randrange(32, 127)
    return "byte flips", bytes(data)


# -- input-file mutations ---------------------------------------------------------------------------


def _npy(header: dict[str, Any], payload: bytes) -> bytes:
    text = repr(header).encode()
    text += b" " * (63 - (len(text) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload


def _mutate_npz(seed: bytes, rng: random.Random) -> tuple[str, bytes]:
    entries = _entries(seed)
    name, data = entries[0]
    choice = rng.randrange(8)
    if choice == 0:
        return "empty file", b""
    if choice == 1:
        return "single .npy", data
    if choice == 2:
        return "text file", b"x = [1, 2, 3]\n"
    if choice == 3:
        shape = rng.choice(((2**40,), (2**20, 2**20), (2**62, 4), (-1,)))
        header = {"descr": "<f4", "fortran_order": False, "shape": shape}
        entries[0] = (name, _npy(header, b"\0" * 64))
        return f"npy header {shape}", _zip(entries)
    if choice == 4:
        header = {"descr": "|O", "fortran_order": False, "shape": (1,)}
        entries[0] = (name, _npy(header, b"\x80\x04N."))
        return "object array", _zip(entries)
    if choice == 5:
        descr = rng.choice(("<f8", "<i4", "|V2", "|b1", "<c8", "zz"))
        header = {"descr": descr, "fortran_order": False, "shape": (2,)}
        entries[0] = (name, _npy(header, bytes(32)))
        return f"dtype {descr}", _zip(entries)
    if choice == 6:
        entries.append((rng.choice(("../x.npy", name, "extra.txt")), data))
        return "extra entry", _zip(entries)
    blob = bytearray(seed)
    for _ in range(rng.randrange(1, 10)):
        blob[rng.randrange(len(blob))] = rng.randrange(256)
    return "byte flips", bytes(blob)


def make_case(index: int, seed: int, seeds: dict[str, bytes]) -> Case:
    rng = random.Random(f"{seed}:{index}")
    kind = rng.choice(("pt2", "pt2", "pt2", "text", "text", "npz"))
    model = rng.choice(_SEED_MODELS)
    if kind == "pt2":
        mutation, data = _mutate_pt2(seeds[f"{model}.pt2"], rng)
        return Case(index, kind, mutation, rng.choice(("lower", "run")), {"model": data})
    if kind == "text":
        source = rng.choice((f"{model}.txt", "tiny.txt", "masked.txt", "cond.txt"))
        mutation, data = _mutate_text(seeds[source], rng)
        return Case(index, kind, mutation, rng.choice(("lower", "run")), {"model": data})
    mutation, data = _mutate_npz(seeds[f"{model}.inputs.npz"], rng)
    files = {"model": seeds[f"{model}.pt2"], "inputs": data}
    return Case(index, kind, mutation, "run", files, ("--inputs", "{inputs}"))


# -- running ----------------------------------------------------------------------------------------


def _child(case: Case, directory: Path, cli_main: Callable[[list[str]], int]) -> None:
    """In the forked child: limits, redirected output, the CLI; never returns."""
    code = 3
    try:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
        signal.alarm(TIME_LIMIT_SECONDS)
        paths = {}
        for name, data in case.files.items():
            paths[name] = directory / name
            paths[name].write_bytes(data)
        argv = [case.verb, str(paths["model"])]
        argv += [arg.format(**{k: str(v) for k, v in paths.items()}) for arg in case.extra]
        if case.verb == "run":
            argv += ["--seed", "0", "--output", str(directory / "out.npz")]
        out = os.open(directory / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(directory / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        code = cli_main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # the harness around the CLI failed: reported as exit 3
        code = 3
    os._exit(code)


def _verdict(case: Case, directory: Path, status: int) -> tuple[str, str]:
    err = (directory / "stderr").read_bytes().decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return ("FAIL: timeout" if name == "SIGALRM" else f"FAIL: signal {name}"), err[-300:]
    code = os.WEXITSTATUS(status)
    if code == 0:
        return "ok", ""
    lines = err.splitlines()
    prefix = f"aten2prims {case.verb}: error: "
    if code == 2 and len(lines) == 1 and err.endswith("\n") and lines[0].startswith(prefix):
        return "refused", lines[0][len(prefix) :]
    return f"FAIL: exit {code}", err[-500:]


def _classify(detail: str) -> str:
    """A refusal's class for the summary: its words with names and numbers dropped."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"|%\w+|[0-9][0-9.]*|\S+\.(pt2|npz|txt)\b|\S*/\S*", "_", detail)
    return " ".join(text.split()[:8])


def run_cases(cases: list[Case], jobs: int = 2, keep: Path | None = None) -> list[Outcome]:
    outcomes: list[Outcome] = []
    running: dict[int, tuple[Case, Path, float]] = {}
    pending = list(reversed(cases))
    with tempfile.TemporaryDirectory(prefix="aten2prims-fuzz-") as scratch:
        while pending or running:
            while pending and len(running) < jobs:
                case = pending.pop()
                directory = Path(scratch) / str(case.index)
                directory.mkdir()
                pid = os.fork()
                if pid == 0:
                    _child(case, directory, cli_main)
                running[pid] = (case, directory, time.perf_counter())
            pid, status, usage = os.wait4(-1, 0)
            if pid not in running:
                continue
            case, directory, started = running.pop(pid)
            verdict, detail = _verdict(case, directory, status)
            outcomes.append(
                Outcome(case, verdict, detail, time.perf_counter() - started, usage.ru_maxrss)
            )
            if verdict.startswith("FAIL") and keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for name, data in case.files.items():
                    (keep / f"case{case.index}.{name}").write_bytes(data)
            for path in directory.iterdir():
                path.unlink()
            directory.rmdir()
    return sorted(outcomes, key=lambda o: o.case.index)


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    worst = max(outcomes, key=lambda o: o.max_rss_kib)
    slowest = max(outcomes, key=lambda o: o.seconds)
    return {
        "cases": len(outcomes),
        "by_status": dict(Counter(o.status for o in outcomes)),
        "by_kind": dict(Counter(f"{o.case.kind} {o.status}" for o in outcomes)),
        "refusal_classes": dict(
            Counter(_classify(o.detail) for o in outcomes if o.status == "refused").most_common()
        ),
        "failures": [
            {
                "case": o.case.index,
                "kind": o.case.kind,
                "mutation": o.case.mutation,
                "verb": o.case.verb,
                "status": o.status,
                "detail": o.detail,
            }
            for o in outcomes
            if o.status.startswith("FAIL")
        ],
        "peak_rss_mib": round(worst.max_rss_kib / 1024, 1),
        "peak_rss_case": f"{worst.case.kind}: {worst.case.mutation}",
        "slowest_seconds": round(slowest.seconds, 2),
        "slowest_case": f"{slowest.case.kind}: {slowest.case.mutation}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aten2prims.fuzz", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the files of failing cases here")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    seeds = _seeds()
    cases = [make_case(index, args.seed, seeds) for index in range(args.cases)]
    result = summary(run_cases(cases, jobs=args.jobs, keep=args.keep))
    print(json.dumps(result, indent=1 if args.json else None) if args.json else _text(result))
    return 1 if result["failures"] else 0


def _text(result: dict[str, Any]) -> str:
    lines = [f"{result['cases']} cases: {result['by_status']}"]
    lines += [f"  {count:5d}  {what}" for what, count in sorted(result["by_kind"].items())]
    lines.append("refusal classes:")
    lines += [f"  {count:5d}  {what}" for what, count in result["refusal_classes"].items()]
    lines.append(
        f"peak RSS {result['peak_rss_mib']} MiB ({result['peak_rss_case']}); "
        f"slowest {result['slowest_seconds']} s ({result['slowest_case']})"
    )
    lines += [f"FAILED {failure}" for failure in result["failures"]]
    return "\n".join(lines)


if __name__ == "__main__":
    # The CLI's lower and run never need torch: prove it by making its import fail.
    sys.modules["torch"] = None  # type: ignore[assignment]
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
