"""Samples for each Core ATen overload: OpInfo samples from torch's `op_db`, mapped to the
overloads they actually reach (by recording dispatch), plus hand-written samples registered for
overloads OpInfo does not reach or reaches too thinly.

Discovery runs every OpInfo once on a few samples of its first supported dtype among a
preference list (float32 first) and records which Core ATen overloads it reaches; the map can
be cached on disk (keyed by torch version). Sampling an overload then replays only the OpInfos
that reach it, for each dtype they support, keeping the calls of that overload.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

from ..ir.dtypes import DType
from ..schema.registry import aten_schema
from .handwritten import HANDWRITTEN
from .layouts import LAYOUT_SAMPLED, LAYOUTS, LAYOUTS_OF, relaid
from .record import RECORDED_OPS, AtenCall, record_core_calls
from .runner import torch_outputs

# Dtypes tried, in order, to find one an OpInfo supports for discovery.
_DISCOVERY_DTYPES = ("float32", "int64", "bool", "complex64", "float64", "int32", "uint8")
_DISCOVERY_SAMPLES = 6


def opinfo_label(opinfo: Any) -> str:
    """'name' or 'name.variant': how the map of `discover` names an OpInfo."""
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


def opinfos() -> dict[str, Any]:
    """Every OpInfo of torch's `op_db` by its label."""
    from torch.testing._internal.common_methods_invocations import op_db

    _skip_test_lookup()
    return {opinfo_label(opinfo): opinfo for opinfo in op_db}


def _skip_test_lookup() -> None:
    """Every OpInfo.sample_inputs call looks for the running unittest.TestCase in the call stack
    (`extract_test_fn`, through inspect.stack(), which reads source context for every frame):
    about half a second per call under pytest's deep stacks. The harness runs in no TestCase, so
    the lookup always finds nothing; answer that directly."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    for module in (common_utils, core):
        module.extract_test_fn = _no_test_fn  # type: ignore[attr-defined]  # patching torch


def _no_test_fn() -> None:
    return None


def supported_dtypes(opinfo: Any) -> list[DType]:
    """The dtypes of ours an OpInfo supports on CPU, in DType order."""
    names = {str(d).removeprefix("torch.") for d in opinfo.supported_dtypes("cpu")}
    return [d for d in DType if d.torch_name in names]


GENERATION_ERROR = "generation error"


@attrs.frozen
class Dropped:
    """A sample that was generated but never reached the comparison: `reason` is
    GENERATION_ERROR (OpInfo's sample generator raised, or OpInfo's function raised on the
    sample so that it reached no overload) or a non-counting `Status` value of the runner's."""

    origin: str
    reason: str
    message: str


def _run_opinfo_sample(
    opinfo: Any, sample: Any, origin: str, dropped: list[Dropped] | None = None
) -> list[AtenCall]:
    def call() -> None:
        opinfo(sample.input, *sample.args, **sample.kwargs)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return record_core_calls(call, origin=origin)
    except Exception as error:  # a sample torch itself rejects reaches nothing usable
        if dropped is not None:
            dropped.append(Dropped(origin, GENERATION_ERROR, f"{type(error).__name__}: {error}"))
        return []


def opinfo_samples(
    opinfo: Any, dtype: DType, dropped: list[Dropped] | None = None
) -> Iterator[Any]:
    """The OpInfo's sample inputs for `dtype`, generated lazily with torch's global generator in a
    state of their own, seeded from the OpInfo's name and the dtype: the same samples in every
    run, whatever ran before or runs between two samples (discovery, other ops, torch's random
    ops, another pytest worker), and the caller's generator state untouched."""
    import torch

    seed = zlib.crc32(f"{opinfo.name}.{opinfo.variant_test_name} {dtype.torch_name}".encode())
    state = torch.Generator().manual_seed(seed).get_state()
    iterator: Iterator[Any] | None = None
    while True:
        outer = torch.random.get_rng_state()
        torch.random.set_rng_state(state)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if iterator is None:
                    iterator = iter(
                        opinfo.sample_inputs(
                            "cpu", getattr(torch, dtype.torch_name), requires_grad=False
                        )
                    )
                sample = next(iterator)
        except StopIteration:
            return
        except Exception as error:  # a sample generator torch itself fails in
            if dropped is not None:
                origin = f"opinfo:{opinfo_label(opinfo)} {dtype.short}"
                message = f"sample generator: {type(error).__name__}: {error}"
                dropped.append(Dropped(origin, GENERATION_ERROR, message))
            return
        finally:
            state = torch.random.get_rng_state()
            torch.random.set_rng_state(outer)
        yield sample


def call_dtype(call: AtenCall) -> DType | None:
    """The dtype a call runs in, as far as its arguments tell: its first tensor argument's, else
    its `dtype` argument's (creation ops), else None (`run_dtype` then asks torch). A leading
    condition (`where(condition, self, other)`) is skipped: the call is filed under `self`'s."""
    import torch

    def first_tensor(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, list | tuple):
            for item in value:
                found = first_tensor(item)
                if found is not None:
                    return found
        return None

    tensor = first_tensor(call.args)
    # Only a condition or mask argument is skipped: a bool `self` or `weight` (gather, scatter,
    # embedding of a bool tensor) is the data, and so is a bool `self` after the condition.
    if (
        tensor is not None
        and tensor.dtype == torch.bool
        and _first_argument(call.op) in ("condition", "mask")
    ):
        values = first_tensor(call.args[1:])
        tensor = tensor if values is None else values
    if tensor is None:
        tensor = first_tensor(list(call.kwargs.values()))
    torch_dtype = tensor.dtype if tensor is not None else call.kwargs.get("dtype")
    if torch_dtype is None:
        return None
    try:
        return DType.from_torch_name(str(torch_dtype))
    except ValueError:
        return None


def run_dtype(call: AtenCall) -> DType | None:
    """The dtype a call runs in: `call_dtype`, or when its arguments do not tell (`arange(5)`,
    `full([2], 1.5)`), the dtype of torch's first tensor result (None when torch rejects the
    call or the dtype is not one of ours)."""
    # torch lazily, here: importing this module must not need it
    import torch

    filed = call_dtype(call)
    if filed is not None:
        return filed
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs = torch_outputs(call)
    except Exception:
        return None
    result = next((o for o in outputs if isinstance(o, torch.Tensor)), None)
    try:
        return None if result is None else DType.from_torch_name(str(result.dtype))
    except ValueError:
        return None


def _first_argument(op: str) -> str | None:
    schema = aten_schema(op)
    return schema.argument_names[0] if schema is not None and schema.argument_names else None


_DISCOVERED: dict[str, list[str]] | None = None


def discover(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, list[str]]:
    """overload -> labels of the OpInfos whose samples reach it (cached in memory, and on disk
    under `cache_dir` when given)."""
    global _DISCOVERED
    import torch

    # The map depends on torch and on which overloads a recording keeps.
    recorded = hashlib.sha1(" ".join(sorted(RECORDED_OPS)).encode()).hexdigest()[:10]
    cache_file = (
        Path(cache_dir) / f"opinfo-map-{torch.__version__}-{recorded}.json"
        if cache_dir is not None
        else None
    )
    if _DISCOVERED is None and cache_file is not None and cache_file.exists():
        _DISCOVERED = json.loads(cache_file.read_text())
    if _DISCOVERED is None:
        _DISCOVERED = _discovered()
    if cache_file is not None and not cache_file.exists():
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=cache_file.parent, delete=False, suffix=".tmp"
        ) as handle:
            json.dump(_DISCOVERED, handle)
        os.replace(handle.name, cache_file)
    return _DISCOVERED


def _discovered() -> dict[str, list[str]]:
    reach: dict[str, set[str]] = {}
    for label, opinfo in opinfos().items():
        names = {d.torch_name for d in supported_dtypes(opinfo)}
        dtype = next((DType.from_torch_name(n) for n in _DISCOVERY_DTYPES if n in names), None)
        if dtype is None:
            continue
        for index, sample in enumerate(opinfo_samples(opinfo, dtype)):
            if index >= _DISCOVERY_SAMPLES:
                break
            for call in _run_opinfo_sample(opinfo, sample, label):
                reach.setdefault(call.op, set()).add(label)
    return {op: sorted(labels) for op, labels in sorted(reach.items())}


def opinfo_dtypes(op: str, cache_dir: str | os.PathLike[str] | None = None) -> list[DType]:
    """Every dtype of ours supported by some OpInfo reaching `op`."""
    by_label = opinfos()
    found: set[DType] = set()
    for label in discover(cache_dir).get(op, []):
        found.update(supported_dtypes(by_label[label]))
    return [d for d in DType if d in found]


def sample_dtypes(op: str, cache_dir: str | os.PathLike[str] | None = None) -> list[DType]:
    """Every dtype we have samples of `op` for (OpInfo and hand-written)."""
    found = set(opinfo_dtypes(op, cache_dir))
    for dtypes, _ in HANDWRITTEN.get(op, []):
        found.update(dtypes)
    return [d for d in DType if d in found]


def samples(
    op: str,
    dtype: DType,
    *,
    budget: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    seen: set[str] | None = None,
    dropped: list[Dropped] | None = None,
) -> Iterator[AtenCall]:
    """Distinct calls of `op` that run in `dtype` (`run_dtype`; hand-written first, then
    OpInfo's), at most `budget` of them. Calls whose key is in `seen` are skipped and the keys
    of those yielded are added: pass one set for every dtype of an overload, so that a call
    OpInfo's per-dtype loop produces in several of them (one without tensors or a dtype
    argument) is counted once. A call whose dtype torch cannot tell (it rejects the call) runs
    in the first dtype it turns up in. Samples that fail to generate are appended to
    `dropped`. For an overload whose results depend on layouts (`LAYOUT_SAMPLED`) up to half
    the budget goes to layout variants, one per layout of `layouts.LAYOUTS` in order: the first
    sampled call the layout changes, its tensors re-laid out."""
    seen = set() if seen is None else seen
    layouts = LAYOUTS_OF.get(op, LAYOUTS) if op in LAYOUT_SAMPLED else ()
    if not layouts:
        yield from _samples(op, dtype, budget, cache_dir, seen, dropped)
        return
    reserved = len(layouts) if budget is None else min(len(layouts), budget // 2)
    base = list(_samples(op, dtype, budget, cache_dir, seen, dropped))
    variants: list[AtenCall] = []
    for layout in layouts:
        if len(variants) >= reserved:
            break
        for call in base:
            variant = relaid(call, layout)
            if variant is not None and variant.key() not in seen:
                seen.add(variant.key())
                variants.append(variant)
                break
    keep = len(base) if budget is None else min(len(base), budget - len(variants))
    yield from base[:keep]
    yield from variants


def _samples(
    op: str,
    dtype: DType,
    budget: int | None,
    cache_dir: str | os.PathLike[str] | None,
    seen: set[str],
    dropped: list[Dropped] | None,
) -> Iterator[AtenCall]:
    produced = 0

    def fresh(calls: Iterable[AtenCall]) -> Iterator[AtenCall]:
        nonlocal produced
        for call in calls:
            if call.op != op:
                continue
            key = call.key()
            if key in seen:
                continue
            runs_in = run_dtype(call)
            if runs_in is not None and runs_in is not dtype:
                continue
            seen.add(key)
            produced += 1
            yield call
            if budget is not None and produced >= budget:
                return

    for dtypes, generate in HANDWRITTEN.get(op, []):
        if dtype in dtypes:
            yield from fresh(generate(dtype))
            if budget is not None and produced >= budget:
                return
    by_label = opinfos()
    for label in discover(cache_dir).get(op, []):
        opinfo = by_label[label]
        if dtype not in supported_dtypes(opinfo):
            continue
        for index, sample in enumerate(opinfo_samples(opinfo, dtype, dropped)):
            origin = f"opinfo:{label} {dtype.short} #{index}"
            yield from fresh(_run_opinfo_sample(opinfo, sample, origin, dropped))
            if budget is not None and produced >= budget:
                return
