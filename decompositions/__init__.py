"""Decomposition rules: every Core ATen overload (and a few non-core ones torch.export keeps)
expressed in prims.

Importing this package registers every rule in `RULES`. One module per kind of op:

- pointwise: elementwise arithmetic, comparisons, math functions, activations, copies
- reductions: sums, means, variances, extremes, scans, softmax, vector norms
- views: views, reshapes, padding, concatenation, creation, shape metadata
- indexing: gather/scatter, advanced indexing, embeddings, sorting, nonzero, random ops
- linear: matrix products, convolutions, col2im
- normalization: batch/layer/group normalization
- pooling: max/average/adaptive pooling
- resampling: upsampling, grid sampling
- distances: cdist, pdist
- sizes: integer arithmetic on (symbolic) sizes
- fft: real-to-complex and complex-to-real FFTs
- selection: order statistics (kthvalue, median, mode) and binary searches (searchsorted, bucketize)

`registry` holds `RULES` and the `@register("aten.<op>.<overload>")` decorator every rule is
written with; `common` holds the helpers the rules share.
"""

from . import (  # noqa: F401 - importing a module registers its rules
    distances,
    fft,
    indexing,
    linear,
    normalization,
    pointwise,
    pooling,
    reductions,
    resampling,
    selection,
    sizes,
    views,
)
from .registry import (
    RULES,
    Rule,
    RuleRegistry,
    active_registry,
    aten,
    call,
    declared_result_metas,
    default_rules,
    register,
)

__all__ = [
    "RULES",
    "Rule",
    "RuleRegistry",
    "active_registry",
    "aten",
    "call",
    "declared_result_metas",
    "default_rules",
    "register",
]
