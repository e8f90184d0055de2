"""Small torch modules exported at test time for the `.pt2` reader and fx importer tests.

`Everything` packs into one export what the frontends must handle: a Linear (permute + addmm),
a transposed parameter, two buffers viewing one storage (strided and offset), bf16, f16, int64
and bool buffers, an empty buffer, a non-persistent buffer, a lifted tensor constant, a
BatchNorm in train mode (buffer mutations), a LayerNorm and max.dim (multi-result nodes),
split_with_sizes (a list result), index.Tensor (optional tensors), full (device), clone
(memory format), dtype conversions (_to_copy after _assert_tensor_metadata), Python int and float
scalars, and a specialized int argument (a constant input).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import torch


class Everything(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)
        self.w_t = torch.nn.Parameter(torch.randn(3, 4).t())  # strides (1, 4)
        big = torch.arange(24.0).reshape(4, 6)
        self.register_buffer("strided", big[:, ::2])  # shares `big`'s storage ...
        self.register_buffer("offset", big[1:3])  # ... at storage offset 6
        self.register_buffer("bf16", torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16))
        self.register_buffer("f16", torch.tensor([0.5, -1.25, 65504.0], dtype=torch.float16))
        self.register_buffer("counts", torch.tensor([[1, -2, 3]], dtype=torch.int64))
        self.register_buffer("mask", torch.tensor([True, False, True]))
        self.register_buffer("empty", torch.zeros(0, 3))
        self.register_buffer("scratch", torch.full((3,), 0.25), persistent=False)
        self.const = torch.tensor([1.0, 2.0, 3.0])  # lifted as a tensor constant
        self.bn = torch.nn.BatchNorm1d(3)  # train mode: running stats are mutated
        self.ln = torch.nn.LayerNorm(3)

    def forward(self, x: torch.Tensor, idx: torch.Tensor, times: int) -> tuple[torch.Tensor, ...]:
        y = self.lin(x) + 2 + self.const
        y = self.bn(y) + x @ self.w_t
        y = self.ln(y) * times
        values, indices = y.max(dim=1)
        first, _ = torch.split(y, [1, 2], dim=1)
        picked = y[:, idx] + torch.full((3,), 0.5)
        state = self.bf16.float() + self.f16.float() + self.strided.sum() + self.offset.sum()
        state = torch.where(self.mask, state + self.counts, self.scratch) + self.empty.sum(0)
        return (
            y.half(),
            values,
            indices,
            first * 2.5,
            picked.clone(memory_format=torch.contiguous_format),
            state,
        )


EXAMPLE_INPUTS = (
    torch.randn(5, 4, generator=torch.Generator().manual_seed(1)),
    torch.tensor([2, 0, 1]),
    3,
)


def export_everything() -> torch.export.ExportedProgram:
    return torch.export.export(Everything(), EXAMPLE_INPUTS).run_decompositions()


class Doubled(torch.nn.Module):
    """Uses its input's leading size: exported with that size dynamic, it is symbolic."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x]).sum(0) * x.shape[0]


def export_dynamic() -> torch.export.ExportedProgram:
    dynamic = ({0: torch.export.Dim("n")},)
    return torch.export.export(
        Doubled(), (EXAMPLE_INPUTS[0],), dynamic_shapes=dynamic
    ).run_decompositions()


def save(program: torch.export.ExportedProgram, path: Path) -> Path:
    torch.export.save(program, path)
    return path


def rewrite_archive(source: Path, target: Path, edit: Callable[[dict[str, bytes]], None]) -> Path:
    """Copy a zip archive entry by entry (stored, as torch writes), letting `edit` change, add or
    delete entries in the {name: bytes} mapping first."""
    with zipfile.ZipFile(source) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    edit(entries)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return target


def entry_data_offset(path: Path, name: str) -> int:
    """Where the stored bytes of entry `name` start in the zip file."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    with open(path, "rb") as file:
        file.seek(info.header_offset)
        header = file.read(30)
    name_length = int.from_bytes(header[26:28], "little")
    extra_length = int.from_bytes(header[28:30], "little")
    return info.header_offset + 30 + name_length + extra_length
