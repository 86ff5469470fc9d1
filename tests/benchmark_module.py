"""Tests load the scripts in benchmarks/ (not a package) by path with this one helper."""
import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """The module benchmarks/<name>.py, executed fresh. benchmarks/ goes on sys.path first: the
    scripts import their neighbours (reference_sampler, bench_train, kernel_floor)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
