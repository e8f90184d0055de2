"""Type promotion and broadcasting: torch's rules, the single source of truth.

Pure rules (`rules`): `result_type`, `elementwise_dtypes`, `opmath_dtype`, `broadcast_shapes`,
`reduction_dtypes`, `sum_dtype`, `mean_dtypes`. Emitting helpers (`emit`, inside a
`prims.Builder`): `convert`, `broadcast_to`, `broadcast`, `promote`, `elementwise`.
See docs/promotion.md.
"""

from .emit import broadcast, broadcast_to, convert, convert_number, elementwise, promote
from .rules import (
    COMPLEX32,
    DEFAULT_FLOAT,
    PromotionKind,
    ReductionKind,
    broadcast_dimensions,
    broadcast_shapes,
    elementwise_dtypes,
    mean_dtypes,
    opmath_dtype,
    promoted_dtype,
    reduction_dtypes,
    result_type,
    sum_dtype,
)

__all__ = [
    "COMPLEX32",
    "DEFAULT_FLOAT",
    "PromotionKind",
    "ReductionKind",
    "broadcast",
    "broadcast_dimensions",
    "broadcast_shapes",
    "broadcast_to",
    "convert",
    "convert_number",
    "elementwise",
    "elementwise_dtypes",
    "mean_dtypes",
    "opmath_dtype",
    "promote",
    "promoted_dtype",
    "reduction_dtypes",
    "result_type",
    "sum_dtype",
]
