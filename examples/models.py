"""Small real `torch.nn` models used by the examples, the end-to-end tests and the model
benchmark (one zoo, so all three exercise the same programs). Requires torch.

Each entry of `MODELS` builds a module in eval mode with fixed weights (seeded) and example
inputs; `export_program(name)` runs `torch.export.export(...).run_decompositions()` on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class CNN(nn.Module):
    """Conv2d, BatchNorm2d, ReLU, MaxPool2d, a residual add, AdaptiveAvgPool2d, Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.block = ResidualBlock(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.block(self.stem(x))), 1))


class Encoder(nn.Module):
    """A 2-layer nn.TransformerEncoder applied with an attention mask."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # is_causal=False: the mask is used as given (torch would otherwise inspect it, a
        # data-dependent check export cannot trace)
        return self.encoder(x, mask=mask, is_causal=False)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.attention(query, key, value, need_weights=True)


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(12, 20, num_layers=2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, (hidden, cell) = self.lstm(x)
        return output, hidden, cell


class UNet(nn.Module):
    """ConvTranspose2d, Upsample (nearest and bilinear), GroupNorm, SiLU and skip connections by cat."""

    def __init__(self) -> None:
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.SiLU())
        self.down2 = nn.Sequential(
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GroupNorm(4, 16), nn.SiLU()
        )
        self.bottom = nn.Sequential(
            nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.GroupNorm(4, 16), nn.SiLU()
        )
        self.up_nearest = nn.Upsample(scale_factor=2, mode="nearest")
        self.up_transposed = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.up_bilinear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.out = nn.Conv2d(16 + 8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(d1)
        b = self.up_nearest(self.bottom(d2))
        u2 = nn.functional.silu(self.up_transposed(torch.cat([b, d2], dim=1)))
        u1 = self.up_bilinear(u2)
        return self.out(torch.cat([u1[:, :, : d1.shape[2], : d1.shape[3]], d1], dim=1))


class EmbeddingHead(nn.Module):
    """Embedding, LayerNorm, GELU, softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(100, 32)
        self.norm = nn.LayerNorm(32)
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = nn.functional.gelu(self.fc1(self.norm(self.embedding(tokens))))
        return torch.softmax(self.fc2(hidden), dim=-1)


def _encoder_inputs() -> tuple[Any, ...]:
    mask = torch.triu(torch.full((10, 10), float("-inf")), diagonal=1)  # causal
    return torch.randn(2, 10, 32), mask


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple[Any, ...]]]] = {
    "mlp": (MLP, lambda: (torch.randn(4, 16),)),
    "cnn": (CNN, lambda: (torch.randn(2, 3, 16, 16),)),
    "transformer": (Encoder, _encoder_inputs),
    "attention": (
        Attention,
        lambda: (torch.randn(2, 5, 32), torch.randn(2, 7, 32), torch.randn(2, 7, 32)),
    ),
    "lstm": (Recurrent, lambda: (torch.randn(3, 6, 12),)),
    "unet": (UNet, lambda: (torch.randn(1, 3, 16, 16),)),
    "embedding": (EmbeddingHead, lambda: (torch.randint(0, 100, (2, 9)),)),
}


def build(name: str, *, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The model (eval mode, seeded weights; BatchNorm statistics made non-trivial) and inputs."""
    make_model, make_inputs = MODELS[name]
    torch.manual_seed(seed)
    model = make_model()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model.eval(), make_inputs()


def export_program(name: str, *, seed: int = 0) -> tuple[Any, tuple[Any, ...]]:
    """The core-aten ExportedProgram of a zoo model and its example inputs."""
    model, inputs = build(name, seed=seed)
    program = torch.export.export(model, inputs).run_decompositions()
    return program, inputs
