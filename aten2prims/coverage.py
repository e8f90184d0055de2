"""What the registries cover: every torch prim (implemented or not, extension or not) and every
Core ATen overload (decomposed or not). `aten2prims ops` prints this; the harness's
docs/coverage.md adds sample results per dtype."""

from __future__ import annotations

from typing import Any

import decompositions
from prims.registry import PRIMS
from prims.torch_prims import TORCH_PRIMS

from .schema.core_aten import CORE_ATEN_OPS
from .schema.registry import EXTRA_COMPUTING_OPS


def coverage_json() -> dict[str, Any]:
    rules = decompositions.RULES
    names = sorted(set(TORCH_PRIMS) | set(PRIMS))
    return {
        "prims": {
            f"prims.{name}": {
                "implemented": name in PRIMS and PRIMS[name].implemented,
                "extension": name in PRIMS and PRIMS[name].extension,
            }
            for name in names
        },
        "aten": {op: {"decomposed": op in rules} for op in sorted(CORE_ATEN_OPS)},
    }


def coverage_text() -> str:
    data = coverage_json()
    prims = data["prims"]
    extensions = sorted(f"prims.{name}" for name, d in PRIMS.items() if d.extension)
    implemented = sum(prims[f"prims.{name}"]["implemented"] for name in TORCH_PRIMS)
    lines = [
        f"Prims: {implemented} / {len(TORCH_PRIMS)} of torch's implemented; {len(extensions)} extension prim(s)"
    ]
    for name in sorted(TORCH_PRIMS):
        definition = PRIMS.get(name)
        if definition is None:
            status = "not implemented"
        elif definition.implemented:
            status = "implemented"
        else:
            status = f"omitted: {definition.omitted_reason}"
        lines.append(f"  prims.{name:28s} {status}")
    for name in extensions:
        lines.append(f"  {name:34s} extension")
    aten = data["aten"]
    lines.append("")
    lines.append(
        f"Core ATen: {sum(v['decomposed'] for v in aten.values())} / {len(aten)} decomposed"
    )
    for family in ("E", "S", "N"):
        ops = sorted(op for op, (fam, _) in CORE_ATEN_OPS.items() if fam == family)
        done = sum(aten[op]["decomposed"] for op in ops)
        lines.append(f"  family {family}: {done} / {len(ops)}")
        for op in ops:
            lines.append(f"    {op:52s} {'decomposed' if aten[op]['decomposed'] else '-'}")
    lines += [
        "",
        "Also lowered: non-core overloads torch.export keeps in graphs (tests/test_extra_overloads.py)",
    ]
    for op in sorted(EXTRA_COMPUTING_OPS):
        lines.append(f"    {op:52s} {'decomposed' if op in decompositions.RULES else '-'}")
    lines += [
        "",
        "Sample results per overload and dtype: docs/coverage.md (aten2prims check --ops).",
    ]
    return "\n".join(lines) + "\n"
