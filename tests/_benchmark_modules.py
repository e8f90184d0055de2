"""The modules of benchmarks/ (not a package: its scripts import each other by file name),
loaded for the tests that build the benchmark suite's models."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def load_benchmark(module_name: str, file_name: str) -> ModuleType:
    """benchmarks/<file_name> as module `module_name` (the benchmarks folder on the path, since
    its scripts import one another)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
