"""Models exported with dynamic shapes (`torch.export` with `dynamic_shapes`): a ResNet-style
CNN (dynamic batch and spatial size), an LSTM (dynamic batch) and transformers' BERT,
GPT-2 and Llama (tiny configurations, random weights, dynamic batch and sequence length).

    python examples/dynamic_models.py OUT_DIR    # writes OUT_DIR/<name>.pt2 for each model

`build(name)` gives (model, example inputs, dynamic_shapes, sizes), where `sizes` lists input
tuples at three sizes (the example's and two others) to run the exported program at.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim


class ResidualCNN(nn.Module):
    """Conv-BN-ReLU stem, a residual block, max pooling, adaptive average pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
        )
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        x = self.pool(x)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class SequenceLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=1, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, _ = self.lstm(x)
        return self.head(output)


class _HiddenStates(nn.Module):
    """A transformers model's last hidden state (a tensor output, not a ModelOutput)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def _ids(batch: int, seq: int) -> tuple[torch.Tensor]:
    return (torch.randint(0, 100, (batch, seq)),)


def _transformer(config: Any, model_class: Any) -> nn.Module:
    config._attn_implementation = "eager"
    return _HiddenStates(model_class(config)).eval()


def _bert() -> nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return _transformer(config, BertModel)


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    return _transformer(config, GPT2Model)


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return _transformer(config, LlamaModel)


_SEQUENCE = {"input_ids": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=2, max=32)}}
MODELS: dict[str, tuple[Callable[[], nn.Module], Any, dict[str, Any], list[tuple[Any, ...]]]] = {
    "cnn": (
        ResidualCNN,
        lambda b, h, w: (torch.randn(b, 3, h, w),),
        {
            "x": {
                0: Dim("batch", min=1, max=16),
                2: Dim("height", min=4, max=64),
                3: Dim("width", min=4, max=64),
            }
        },
        [(2, 16, 12), (5, 8, 8), (1, 30, 22)],
    ),
    "lstm": (
        SequenceLSTM,
        lambda b, t: (torch.randn(b, t, 8),),
        # torch.export unrolls nn.LSTM over the time steps, so the sequence length cannot be
        # dynamic (it refuses: "your code specialized it to be a constant"); the batch can.
        {"x": {0: Dim("batch", min=1, max=16)}},
        [(2, 10), (5, 10), (1, 10)],
    ),
    "bert": (_bert, _ids, _SEQUENCE, [(2, 8), (1, 5), (4, 17)]),
    "gpt2": (_gpt2, _ids, _SEQUENCE, [(2, 8), (1, 5), (4, 17)]),
    "llama": (_llama, _ids, _SEQUENCE, [(2, 8), (1, 5), (4, 17)]),
}


def build(name: str) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any], list[tuple[Any, ...]]]:
    """(model, example inputs, dynamic_shapes, inputs at three sizes), seeded."""
    make, inputs, dynamic, sizes = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    return model, inputs(*sizes[0]), dynamic, [inputs(*size) for size in sizes]


def export_program(name: str) -> Any:
    model, example, dynamic, _ = build(name)
    return torch.export.export(model, example, dynamic_shapes=dynamic).run_decompositions()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for model_name in sys.argv[2:] or MODELS:
        torch.export.save(export_program(model_name), out / f"{model_name}.pt2")
        print(out / f"{model_name}.pt2")
