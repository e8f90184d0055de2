"""The model suite of `benchmarks/models.py`: real model families built from configs with random
weights (no downloads; MobileNetV3, which no installable library here provides, from its
published layer table in torch.nn), and three models of the zoo of `examples/models.py` at
realistic sizes. Requires torch; the transformers models require `transformers` (the `bench`
extra).

Each `Spec` builds its model in eval mode with seeded weights and its example inputs at one of
three scales:

- `full`: the benchmark's sizes (documented in docs/performance.md);
- `quick`: the same architectures on small inputs (batch 2, 64x64 images, 32 tokens), for
  developing the benchmark and checking every code path in seconds;
- `tiny`: shallower configs (fewer blocks and layers) on the quick inputs, for the test that
  every model of the suite builds, exports, lowers and matches torch
  (`tests/test_bench_suite.py`).

Random weights are re-drawn variance-preserving (normal, std sqrt(gain / fan_in)) with
non-trivial normalization statistics: the configs' own initializers (std 0.02) make the
activations of deep convolutional nets shrink layer by layer, to zeros or subnormal floats in
EfficientNet, MobileNet and MobileViT, which would make the correctness check vacuous and the
timings unrepresentative (subnormal arithmetic is slow on x86).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
SCALES = ("full", "quick", "tiny")
SEED = 0
INPUT_SEED = 1


@attrs.frozen
class Spec:
    name: str
    family: str  # "vision", "text" or "zoo"
    what: str  # one line for the tables' legend
    make: Callable[[str], nn.Module]  # scale -> module (torch's random init; re-drawn by build)
    inputs: Callable[[str], tuple[torch.Tensor, ...]]  # scale -> example inputs
    shape: Callable[[str], str]  # scale -> the inputs' shapes, for the tables
    # transformers' (model, config) class names: `preload` imports their modules (transformers
    # loads them lazily), so a process can import them before it measures its memory baseline.
    classes: tuple[str, ...] = ()

    def preload(self) -> None:
        if self.classes:
            import transformers  # the optional `bench` extra

            for name in self.classes:
                getattr(transformers, name)


class LastHidden(nn.Module):
    """A transformers model returning its `last_hidden_state` as a plain tensor (the export,
    ONNX and inductor paths then see one tensor output)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).last_hidden_state


# -- sizes -------------------------------------------------------------------------------------

# Images: batch 4 at each model's native resolution (224, MobileViT 256); text: batch 4 of 128
# tokens. The zoo models keep the shapes their issue names.
IMAGE_BATCH = 4
TEXT_BATCH, TEXT_LENGTH = 4, 128
QUICK_BATCH, QUICK_IMAGE, QUICK_LENGTH = 2, 64, 32


def _image(size: int) -> Callable[[str], tuple[torch.Tensor, ...]]:
    def inputs(scale: str) -> tuple[torch.Tensor, ...]:
        if scale == "full":
            return (torch.randn(IMAGE_BATCH, 3, size, size),)
        return (torch.randn(QUICK_BATCH, 3, QUICK_IMAGE, QUICK_IMAGE),)

    return inputs


def _image_shape(size: int) -> Callable[[str], str]:
    return lambda scale: (
        f"{IMAGE_BATCH}x3x{size}x{size}"
        if scale == "full"
        else f"{QUICK_BATCH}x3x{QUICK_IMAGE}x{QUICK_IMAGE}"
    )


def _tokens(vocabulary: int) -> Callable[[str], tuple[torch.Tensor, ...]]:
    def inputs(scale: str) -> tuple[torch.Tensor, ...]:
        if scale == "full":
            return (torch.randint(0, vocabulary, (TEXT_BATCH, TEXT_LENGTH)),)
        return (torch.randint(0, vocabulary, (QUICK_BATCH, QUICK_LENGTH)),)

    return inputs


def _tokens_shape(scale: str) -> str:
    return (
        f"{TEXT_BATCH}x{TEXT_LENGTH} tokens"
        if scale == "full"
        else f"{QUICK_BATCH}x{QUICK_LENGTH} tokens"
    )


# -- transformers models -------------------------------------------------------------------------


def _hf(
    model_class: str, config_class: str, **config: Any
) -> Callable[[dict[str, Any]], nn.Module]:
    def make(overrides: dict[str, Any]) -> nn.Module:
        import transformers  # the optional `bench` extra; only these models need it

        settings = {**config, **overrides}
        made = getattr(transformers, config_class)(**settings)
        return LastHidden(getattr(transformers, model_class)(made))

    return make


def _scaled(
    make: Callable[[dict[str, Any]], nn.Module],
    tiny: dict[str, Any],
    small: dict[str, Any] | None = None,
) -> Callable[[str], nn.Module]:
    """`tiny` overrides the config at the tiny scale; `small` at the quick and tiny scales."""

    def scaled(scale: str) -> nn.Module:
        overrides = {} if scale == "full" else dict(small or {})
        return make(overrides | (tiny if scale == "tiny" else {}))

    return scaled


# Tiny language-model configs: 4 layers of width 256 (BERT-mini's shape), real vocabularies.
BERT = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
# GPT-2 runs its eager attention: with "sdpa", torch 2.13's run_decompositions fails on its
# graph for batches above 1 (it views the non-contiguous attention output as [-1, 256]).
GPT2 = dict(n_embd=256, n_layer=4, n_head=4, use_cache=False, attn_implementation="eager")
LLAMA = dict(
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=4,
    vocab_size=32000,
    use_cache=False,
)
TEXT_TINY = dict(num_hidden_layers=1)

SPECS: list[Spec] = [
    Spec(
        "resnet50",
        "vision",
        "ResNet-50 (transformers ResNetConfig defaults)",
        _scaled(_hf("ResNetModel", "ResNetConfig"), dict(depths=[1, 1, 1, 1])),
        _image(224),
        _image_shape(224),
        classes=("ResNetModel", "ResNetConfig"),
    ),
    Spec(
        "efficientnet_b0",
        "vision",
        "EfficientNet-B0 (width 1.0, depth 1.0, 224, hidden 1280)",
        _scaled(
            _hf(
                "EfficientNetModel",
                "EfficientNetConfig",
                width_coefficient=1.0,
                depth_coefficient=1.0,
                image_size=224,
                hidden_dim=1280,
                dropout_rate=0.2,
            ),
            # one block in each of its first three stages
            dict(
                depth_coefficient=0.1,
                kernel_sizes=[3, 3, 5],
                in_channels=[32, 16, 24],
                out_channels=[16, 24, 40],
                strides=[1, 2, 2],
                num_block_repeats=[1, 2, 2],
                expand_ratios=[1, 6, 6],
            ),
        ),
        _image(224),
        _image_shape(224),
        classes=("EfficientNetModel", "EfficientNetConfig"),
    ),
    Spec(
        "convnext_tiny",
        "vision",
        "ConvNeXt-T (ConvNextConfig defaults)",
        _scaled(_hf("ConvNextModel", "ConvNextConfig"), dict(depths=[1, 1, 1, 1])),
        _image(224),
        _image_shape(224),
        classes=("ConvNextModel", "ConvNextConfig"),
    ),
    Spec(
        "deit_tiny",
        "vision",
        "DeiT-Ti (hidden 192, 3 heads, 12 layers, MLP 768; patch 16)",
        _scaled(
            _hf(
                "DeiTModel",
                "DeiTConfig",
                hidden_size=192,
                num_attention_heads=3,
                num_hidden_layers=12,
                intermediate_size=768,
            ),
            dict(num_hidden_layers=2),
            dict(image_size=QUICK_IMAGE),  # its position embeddings fix the image size
        ),
        _image(224),
        _image_shape(224),
        classes=("DeiTModel", "DeiTConfig"),
    ),
    Spec(
        "mobilevit_s",
        "vision",
        "MobileViT-S (MobileViTConfig defaults, 256x256)",
        _scaled(_hf("MobileViTModel", "MobileViTConfig"), dict(hidden_sizes=[48, 64, 80])),
        _image(256),
        _image_shape(256),
        classes=("MobileViTModel", "MobileViTConfig"),
    ),
    Spec(
        "bert",
        "text",
        "BERT, 4 layers, d=256, 4 heads, FFN 1024 (BERT-mini's shape)",
        _scaled(_hf("BertModel", "BertConfig", **BERT), TEXT_TINY),
        _tokens(30522),
        _tokens_shape,
        classes=("BertModel", "BertConfig"),
    ),
    Spec(
        "gpt2",
        "text",
        "GPT-2, 4 layers, d=256, 4 heads",
        _scaled(_hf("GPT2Model", "GPT2Config", **GPT2), dict(n_layer=1)),
        _tokens(50257),
        _tokens_shape,
        classes=("GPT2Model", "GPT2Config"),
    ),
    Spec(
        "llama",
        "text",
        "Llama, 4 layers, d=256, 8 heads, 4 KV heads, FFN 688 (SwiGLU, RoPE)",
        _scaled(_hf("LlamaModel", "LlamaConfig", **LLAMA), TEXT_TINY),
        _tokens(32000),
        _tokens_shape,
        classes=("LlamaModel", "LlamaConfig"),
    ),
]


# -- MobileNetV3, built in torch.nn --------------------------------------------------------------
#
# Neither transformers nor torch ship MobileNetV3, and timm (which has it) imports torchvision,
# whose only wheel for torch 2.13 is a CUDA build that fails to import on CPU torch. The model is
# built here from MobileNetV3-Large's published layer table, reproduced below.

# One row per inverted-residual block: kernel, expanded width, output width, squeeze-and-
# excitation, activation ("RE" ReLU, "HS" hardswish), stride.
MOBILENET_V3_LARGE: tuple[tuple[int, int, int, bool, str, int], ...] = (
    (3, 16, 16, False, "RE", 1),
    (3, 64, 24, False, "RE", 2),
    (3, 72, 24, False, "RE", 1),
    (5, 72, 40, True, "RE", 2),
    (5, 120, 40, True, "RE", 1),
    (5, 120, 40, True, "RE", 1),
    (3, 240, 80, False, "HS", 2),
    (3, 200, 80, False, "HS", 1),
    (3, 184, 80, False, "HS", 1),
    (3, 184, 80, False, "HS", 1),
    (3, 480, 112, True, "HS", 1),
    (3, 672, 112, True, "HS", 1),
    (5, 672, 160, True, "HS", 2),
    (5, 960, 160, True, "HS", 1),
    (5, 960, 160, True, "HS", 1),
)
# The tiny scale's rows: the first block without an expansion, a strided ReLU block, a
# squeeze-and-excitation block, a strided hardswish block and a residual one with both.
MOBILENET_V3_TINY_ROWS = (0, 1, 3, 6, 10, 11)


def _divisible_by_8(width: float) -> int:
    """MobileNetV3's channel rounding: the nearest multiple of 8, at least 8, never more than 10%
    below `width`."""
    rounded = max(8, int(width + 4) // 8 * 8)
    return rounded + 8 if rounded < 0.9 * width else rounded


def _activation(name: str) -> nn.Module:
    return nn.ReLU() if name == "RE" else nn.Hardswish()


def _conv_bn(
    inputs: int, outputs: int, kernel: int, stride: int, groups: int = 1
) -> list[nn.Module]:
    return [
        nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(outputs),
    ]


class _SqueezeExcite(nn.Module):
    """The channels scaled by hardsigmoid(W2 relu(W1 mean(x))), the squeeze a quarter wide."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = _divisible_by_8(channels / 4)
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.reduce(x.mean((2, 3), keepdim=True)).relu()
        return x * nn.functional.hardsigmoid(self.expand(scale))


class MobileNetV3Block(nn.Module):
    """MobileNetV3's inverted-residual block: expansion (1x1, when wider), depthwise kxk,
    optional squeeze-and-excitation, linear projection (1x1), batch norms; the input added back
    when the shape is unchanged (also `benchmarks/ops.py`'s MobileNetV3 block case)."""

    def __init__(
        self, inputs: int, kernel: int, expanded: int, outputs: int, se: bool, act: str, stride: int
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if expanded != inputs:
            layers += [*_conv_bn(inputs, expanded, 1, 1), _activation(act)]
        layers += [*_conv_bn(expanded, expanded, kernel, stride, groups=expanded), _activation(act)]
        if se:
            layers.append(_SqueezeExcite(expanded))
        layers += _conv_bn(expanded, outputs, 1, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and inputs == outputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV3Features(nn.Module):
    """MobileNetV3-Large's feature extractor: stem (3x3 stride 2, 16, hardswish), the blocks of
    `rows`, the last 1x1 convolution to 6x the last width (960) with hardswish; returns that
    feature map (as the transformers vision models of the suite return their last hidden
    state: no pooling, no classifier)."""

    def __init__(self, rows: tuple[tuple[int, int, int, bool, str, int], ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = [*_conv_bn(3, 16, 3, 2), nn.Hardswish()]
        width = 16
        for kernel, expanded, outputs, se, act, stride in rows:
            layers.append(MobileNetV3Block(width, kernel, expanded, outputs, se, act, stride))
            width = outputs
        layers += [*_conv_bn(width, 6 * width, 1, 1), nn.Hardswish()]
        self.features = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


def _mobilenet_v3(scale: str) -> nn.Module:
    if scale == "tiny":
        return MobileNetV3Features(tuple(MOBILENET_V3_LARGE[i] for i in MOBILENET_V3_TINY_ROWS))
    return MobileNetV3Features(MOBILENET_V3_LARGE)


SPECS.insert(  # after EfficientNet-B0, as in the list
    2,
    Spec(
        "mobilenet_v3",
        "vision",
        "MobileNetV3-Large 1.0 features (torch.nn, from its published layer table)",
        _mobilenet_v3,
        _image(224),
        _image_shape(224),
    ),
)


# -- the zoo of examples/models.py at realistic sizes ----------------------------------------------


def _zoo() -> Any:
    """examples/models.py, loaded by path (benchmarks/models.py has the same module name)."""
    if "zoo_models" in sys.modules:
        return sys.modules["zoo_models"]
    spec = importlib.util.spec_from_file_location("zoo_models", ROOT / "examples" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["zoo_models"] = module
    spec.loader.exec_module(module)
    return module


def _cnn(scale: str) -> nn.Module:
    zoo = _zoo()
    width = 16 if scale == "tiny" else 64

    class CNN(zoo.CNN):  # the zoo's forward, 64 channels
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 3, padding=1),
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.MaxPool2d(2),
            )
            self.block = zoo.ResidualBlock(width)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.head = nn.Linear(width, 10)

    return CNN()


def _transformer(scale: str) -> nn.Module:
    zoo = _zoo()
    layers = 1 if scale == "tiny" else 6

    class Encoder(zoo.Encoder):  # the zoo's forward (causal mask given), 6 layers of d=256
        def __init__(self) -> None:
            nn.Module.__init__(self)
            layer = nn.TransformerEncoderLayer(
                d_model=256, nhead=8, dim_feedforward=1024, dropout=0.0, batch_first=True
            )
            self.encoder = nn.TransformerEncoder(
                layer, num_layers=layers, enable_nested_tensor=False
            )

    return Encoder()


def _mlp(scale: str) -> nn.Module:
    zoo = _zoo()
    width = 256 if scale == "tiny" else 4096

    class MLP(zoo.MLP):  # the zoo's forward: fc2(relu(fc1(x))), 1024 -> 4096 -> 1024
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.fc1 = nn.Linear(1024, width)
            self.fc2 = nn.Linear(width, 1024)

    return MLP()


def _encoder_inputs(scale: str) -> tuple[torch.Tensor, ...]:
    batch, length = (8, 64) if scale == "full" else (QUICK_BATCH, QUICK_LENGTH)
    mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
    return torch.randn(batch, length, 256), mask


SPECS += [
    Spec(
        "cnn",
        "zoo",
        "the zoo's CNN at 64 channels (conv-BN-ReLU-maxpool stem, residual block, head)",
        _cnn,
        lambda scale: (
            torch.randn(8, 3, 64, 64) if scale == "full" else torch.randn(QUICK_BATCH, 3, 32, 32),
        ),
        lambda scale: "8x3x64x64" if scale == "full" else f"{QUICK_BATCH}x3x32x32",
    ),
    Spec(
        "transformer",
        "zoo",
        "the zoo's nn.TransformerEncoder, 6 layers, d=256, 8 heads, FFN 1024, causal mask",
        _transformer,
        _encoder_inputs,
        lambda scale: "8x64x256" if scale == "full" else f"{QUICK_BATCH}x{QUICK_LENGTH}x256",
    ),
    Spec(
        "mlp",
        "zoo",
        "the zoo's MLP widened: 1024 -> 4096 -> 1024, ReLU",
        _mlp,
        lambda scale: (torch.randn(256 if scale == "full" else 8, 1024),),
        lambda scale: "256x1024" if scale == "full" else "8x1024",
    ),
]

BY_NAME = {spec.name: spec for spec in SPECS}

# The model of the first-call target (load + lower + plan <= 100 ms): ResNet-18's shape.
RESNET18 = Spec(
    "resnet18",
    "vision",
    "ResNet-18 (basic blocks, depths 2-2-2-2, widths 64-512)",
    _scaled(
        _hf(
            "ResNetModel",
            "ResNetConfig",
            layer_type="basic",
            depths=[2, 2, 2, 2],
            hidden_sizes=[64, 128, 256, 512],
        ),
        dict(depths=[1, 1, 1, 1]),
    ),
    lambda scale: (torch.randn(1, 3, 224, 224) if scale == "full" else torch.randn(1, 3, 64, 64),),
    lambda scale: "1x3x224x224" if scale == "full" else "1x3x64x64",
    classes=("ResNetModel", "ResNetConfig"),
)
BY_NAME[RESNET18.name] = RESNET18


# -- building -------------------------------------------------------------------------------------


def _redraw(model: nn.Module) -> None:
    """Variance-preserving random weights and non-trivial normalization statistics."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            fan_in = module.weight[0].numel()
            gain = 2.0 if isinstance(module, nn.Conv2d) else 1.0
            nn.init.normal_(module.weight, 0.0, math.sqrt(gain / fan_in))
            if module.bias is not None:
                nn.init.uniform_(module.bias, -0.1, 0.1)
        elif isinstance(module, nn.BatchNorm2d):
            assert module.running_mean is not None and module.running_var is not None
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
            nn.init.uniform_(module.weight, 0.5, 1.0)
            nn.init.uniform_(module.bias, -0.1, 0.1)
        elif isinstance(module, nn.LayerNorm | nn.GroupNorm) and module.weight is not None:
            nn.init.uniform_(module.weight, 0.8, 1.2)
            nn.init.uniform_(module.bias, -0.1, 0.1)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 1.0)


def build(name: str, scale: str = "full") -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The model (eval mode, weights seeded with `SEED`) and its inputs (seeded with
    `INPUT_SEED`): the same in every process."""
    spec = BY_NAME[name]
    torch.manual_seed(SEED)
    model = spec.make(scale)
    torch.manual_seed(SEED)
    with torch.no_grad():
        _redraw(model)
    model.eval()
    torch.manual_seed(INPUT_SEED)
    return model, spec.inputs(scale)
