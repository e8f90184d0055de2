"""Golden printed graphs: a few lowerings whose exact prims text guards the explicit converts
and broadcasts. Each case is an aten graph in the text form and the lowered graph
it must print as; add a case by adding an entry to GOLDEN."""

from __future__ import annotations

import pytest

from aten2prims.ir import parse
from aten2prims.passes.lower import lower
from aten2prims.passes.verify import verify

GOLDEN: dict[str, tuple[str, str]] = {
    # Promotion to float32 converts the int64 operand (before broadcasting it: fewer elements).
    "add.Tensor i64[3] + f32[4, 3]": (
        """\
graph add_i64_f32(%x: i64[3], %y: f32[4, 3]) -> (f32[4, 3]):
  %z: f32[4, 3] = aten.add.Tensor(%x, %y)
  return (%z)
""",
        """\
graph add_i64_f32(%x: i64[3], %y: f32[4, 3]) -> (f32[4, 3]):
  %0: f32[3] = prims.convert_element_type(%x, dtype=f32)  # aten.add.Tensor %z
  %1: f32[4, 3]{0, 1} = prims.broadcast_in_dim(%0, shape=[4, 3], broadcast_dimensions=[1])  # aten.add.Tensor %z
  %z: f32[4, 3] = prims.add(%1, %y)  # aten.add.Tensor %z
  return (%z)
""",
    ),
    # float16 adds in float32 (opmath); the Python float stays a literal operand.
    "add.Tensor f16[3] + 2.5": (
        """\
graph add_f16_scalar(%x: f16[3]) -> (f16[3]):
  %z: f16[3] = aten.add.Tensor(%x, 2.5)
  return (%z)
""",
        """\
graph add_f16_scalar(%x: f16[3]) -> (f16[3]):
  %0: f32[3] = prims.convert_element_type(%x, dtype=f32)  # aten.add.Tensor %z
  %1: f32[3] = prims.add(%0, 2.5)  # aten.add.Tensor %z
  %z: f16[3] = prims.convert_element_type(%1, dtype=f16)  # aten.add.Tensor %z
  return (%z)
""",
    ),
    # A 0-dim float32 value meets a float16 vector: the n-dim tensor decides the dtype; the
    # 0-dim one is converted, then broadcast with broadcast_dimensions=[] like every operand.
    "where.self 0-dim operand": (
        """\
graph where_0dim(%c: b8[2, 3], %x: f32[], %y: f16[3]) -> (f16[2, 3]):
  %z: f16[2, 3] = aten.where.self(%c, %x, %y)
  return (%z)
""",
        """\
graph where_0dim(%c: b8[2, 3], %x: f32[], %y: f16[3]) -> (f16[2, 3]):
  %0: f16[] = prims.convert_element_type(%x, dtype=f16)  # aten.where.self %z
  %1: f16[2, 3]{0, 0} = prims.broadcast_in_dim(%0, shape=[2, 3], broadcast_dimensions=[])  # aten.where.self %z
  %2: f16[2, 3]{0, 1} = prims.broadcast_in_dim(%y, shape=[2, 3], broadcast_dimensions=[1])  # aten.where.self %z
  %z: f16[2, 3] = prims.where(%c, %1, %2)  # aten.where.self %z
  return (%z)
""",
    ),
    # Integer sums accumulate in int64: one convert before the reduction, none after.
    "sum.dim_IntList i32": (
        """\
graph sum_i32(%x: i32[4, 5]) -> (i64[4]):
  %s: i64[4] = aten.sum.dim_IntList(%x, [1])
  return (%s)
""",
        """\
graph sum_i32(%x: i32[4, 5]) -> (i64[4]):
  %0: i64[4, 5] = prims.convert_element_type(%x, dtype=i64)  # aten.sum.dim_IntList %s
  %s: i64[4] = prims.sum(%0, dims=[1], output_dtype=None)  # aten.sum.dim_IntList %s
  return (%s)
""",
    ),
    # float16 softmax computes in float32 (one convert in, one out) on x - max(x).
    "_softmax f16": (
        """\
graph softmax_f16(%x: f16[4, 5]) -> (f16[4, 5]):
  %y: f16[4, 5] = aten._softmax.default(%x, 1, False)
  return (%y)
""",
        """\
graph softmax_f16(%x: f16[4, 5]) -> (f16[4, 5]):
  %0: f32[4, 5] = prims.convert_element_type(%x, dtype=f32)  # aten._softmax.default %y
  %1: f32[4] = prims.amax(%0, dims=[1], output_dtype=None)  # aten._softmax.default %y
  %2: f32[4, 5]{1, 0} = prims.broadcast_in_dim(%1, shape=[4, 5], broadcast_dimensions=[0])  # aten._softmax.default %y
  %3: f32[4, 5] = prims.sub(%0, %2)  # aten._softmax.default %y
  %4: f32[4, 5] = prims.exp(%3)  # aten._softmax.default %y
  %5: f32[4] = prims.sum(%4, dims=[1], output_dtype=None)  # aten._softmax.default %y
  %6: f32[4, 5]{1, 0} = prims.broadcast_in_dim(%5, shape=[4, 5], broadcast_dimensions=[0])  # aten._softmax.default %y
  %7: f32[4, 5] = prims.div(%4, %6)  # aten._softmax.default %y
  %y: f16[4, 5] = prims.convert_element_type(%7, dtype=f16)  # aten._softmax.default %y
  return (%y)
""",
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_lowered_graph_prints_as_golden(name: str) -> None:
    source, expected = GOLDEN[name]
    lowered = lower(parse(source))
    verify(lowered)
    assert str(lowered) == expected
