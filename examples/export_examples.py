"""Export the example models to `.pt2` archives (needs torch):

    python examples/export_examples.py          # writes examples/{mlp,cnn,transformer}.pt2

Each archive is `torch.export.save` of `torch.export.export(model, inputs).run_decompositions()`:
a Core ATen graph plus its weights, which `aten2prims` reads without torch. The example inputs
are saved beside it as `<name>.inputs.npz` (keys = the graph's user input names) and torch's
outputs as `<name>.expected.npz`, so `aten2prims check` can compare without torch too."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from models import build, export_program  # noqa: E402 - after the sys.path entry

EXAMPLES = ("mlp", "cnn", "transformer")


def export(name: str, directory: Path = HERE) -> Path:
    program, inputs = export_program(name)
    path = directory / f"{name}.pt2"
    torch.export.save(program, str(path))
    names = [
        spec.arg.name
        for spec in program.graph_signature.input_specs
        if spec.kind.name == "USER_INPUT"
    ]
    np.savez(directory / f"{name}.inputs.npz", **{n: t.numpy() for n, t in zip(names, inputs)})
    model, _ = build(name)
    with torch.no_grad():
        outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    np.savez(
        directory / f"{name}.expected.npz",
        **{f"output_{i}": o.numpy() for i, o in enumerate(outputs)},
    )
    return path


if __name__ == "__main__":
    for example in sys.argv[1:] or EXAMPLES:
        print(f"wrote {export(example)}")
