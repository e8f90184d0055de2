"""Non-contiguous variants of samples: the same call with its tensors transposed, sliced (a
stepped slice at a storage offset), expanded (stride 0) or channels-last, for the overloads whose
results depend on their operands' layouts — views (their strides and offsets follow the
operand's), copies with a memory format, `as_strided`, and ops whose decompositions address
elements in row-major order or whose torch kernels keep the operand's layout. `samples.samples`
gives them up to half the budget of these overloads."""

from __future__ import annotations

from typing import Any

from .record import AtenCall

# The ways a tensor argument is re-laid out, in the order variants are made.
LAYOUTS = ("channels_last", "transposed", "sliced", "expanded")

# Overloads whose samples get layout variants, and the layouts they get (default: LAYOUTS).
# as_strided reads the storage a tensor views: on a sliced or expanded operand, positions of
# its base that the graph does not hold (an error, docs/prims.md), so only dense layouts.
LAYOUTS_OF = {"aten.as_strided.default": ("channels_last", "transposed")}
LAYOUT_SAMPLED = frozenset(
    {
        "aten.as_strided.default",
        "aten.slice.Tensor",
        "aten.select.int",
        "aten.diagonal.default",
        "aten.permute.default",
        "aten.expand.default",
        "aten.view.default",
        "aten.squeeze.dims",
        "aten.unsqueeze.default",
        "aten.split_with_sizes.default",
        "aten.cat.default",
        "aten.flip.default",
        "aten.constant_pad_nd.default",
        "aten.clone.default",
        "aten._to_copy.default",
        "aten.slice_scatter.default",
        "aten.select_scatter.default",
        "aten.add.Tensor",
        "aten.mul.Tensor",
        "aten.where.self",
        "aten.relu.default",
        "aten.sum.dim_IntList",
        "aten.mm.default",
        "aten.convolution.default",
        "aten.max_pool2d_with_indices.default",
        "aten.avg_pool2d.default",
        "aten._adaptive_avg_pool2d.default",
        "aten.index_select.default",
        "aten.gather.default",
    }
)


def relaid(call: AtenCall, layout: str) -> AtenCall | None:
    """The call with every tensor argument of two or more elements laid out as `layout`
    (values kept, except that `expanded` repeats a tensor's first row along its first dim), or
    None when no argument changes."""
    changed = False

    def convert(value: Any) -> Any:
        nonlocal changed
        import torch

        if isinstance(value, torch.Tensor):
            result = _relaid(value, layout)
            if result is not None:
                changed = True
                return result
            return value
        if isinstance(value, list | tuple):
            return type(value)(convert(v) for v in value)
        return value

    args = tuple(convert(a) for a in call.args)
    kwargs = {name: convert(v) for name, v in call.kwargs.items()}
    if not changed:
        return None
    return AtenCall(call.op, args, kwargs, f"{call.origin}, {layout}")


def _relaid(tensor: Any, layout: str) -> Any:
    import torch

    shape = tuple(tensor.shape)
    if tensor.numel() < 2:
        return None
    if layout == "transposed" and tensor.ndim >= 2:
        order = list(reversed(range(tensor.ndim)))
        return tensor.permute(order).contiguous().permute(order)
    if layout == "sliced":
        # every other element of a larger tensor, from position 1: strides 2, offset 1
        wide = torch.zeros(*shape[:-1], 2 * shape[-1] + 1, dtype=tensor.dtype)
        wide[..., 1::2] = tensor
        return wide[..., 1::2]
    if layout == "channels_last" and tensor.ndim in (4, 5):
        memory_format = torch.channels_last if tensor.ndim == 4 else torch.channels_last_3d
        return tensor.contiguous(memory_format=memory_format)
    if layout == "expanded" and shape[0] > 1:
        return tensor[:1].expand(shape)
    return None
