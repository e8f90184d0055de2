"""The modules of benchmarks/ (not a package: its scripts import each other by file name),
loaded for the tests that build the benchmark suite's models, and its scripts run end to end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
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


def run_benchmark(
    file_name: str, arguments: list[str], *, torch_absent: bool
) -> subprocess.CompletedProcess[str]:
    """benchmarks/<file_name> run as a script with `arguments` in a fresh interpreter, with
    every `import torch` failing when `torch_absent` (as under an interpreter torch has no wheel
    for)."""
    script = str(BENCHMARKS / file_name)
    # sys.modules["torch"] = None makes every `import torch` raise ModuleNotFoundError.
    code = (
        "import runpy, sys\n"
        + ("sys.modules['torch'] = None\n" if torch_absent else "")
        + f"sys.argv = [{script!r}] + {arguments!r}\n"
        + f"runpy.run_path({script!r}, run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
