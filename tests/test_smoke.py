"""The packages import without torch, and a tiny prims graph runs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import prims
from aten2prims.executor import execute
from aten2prims.ir import TensorMeta
from aten2prims.ir.dtypes import f16, f32
from prims import Builder


def test_packages_import_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import aten2prims, prims, decompositions\n"
        "import aten2prims.executor, aten2prims.passes.verify\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tiny_graph_runs() -> None:
    with Builder("tiny") as b:
        x = b.add_input("x", TensorMeta((3,), f16))
        y = b.add_input("y", TensorMeta((2, 3), f32))
        wide = prims.broadcast_in_dim(prims.convert_element_type(x, f32), [2, 3], [1])
        graph = b.finish([prims.add(wide, y)])
    x_value = np.array([1, 2, 3], np.float16)
    y_value = np.ones((2, 3), np.float32)
    (result,) = execute(graph, {"x": x_value, "y": y_value}, check=True)
    np.testing.assert_array_equal(result, np.array([[2, 3, 4], [2, 3, 4]], np.float32))
