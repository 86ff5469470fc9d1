"""Smoke test of benchmarks/bench_po.py: the quick run finishes and reports sane ratios."""
import math

import pytest

from tests.benchmark_module import load_benchmark

pytest.importorskip("verl")

def test_bench_quick_runs(capsys):
    bench = load_benchmark("bench_po")
    ratios = bench.main(["--quick"])
    assert set(ratios) == {"ppo", "gspo", "cispo", "sapo"}
    assert all(math.isfinite(r) and r > 0 for r in ratios.values())
    assert "ours/verl" in capsys.readouterr().out
