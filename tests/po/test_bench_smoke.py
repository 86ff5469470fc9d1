"""Smoke test of benchmarks/bench_po.py: the quick run finishes and reports sane ratios."""
import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("verl")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_po.py"


def test_bench_quick_runs(capsys):
    spec = importlib.util.spec_from_file_location("bench_po", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ratios = bench.main(["--quick"])
    assert set(ratios) == {"ppo", "gspo", "cispo", "sapo"}
    assert all(math.isfinite(r) and r > 0 for r in ratios.values())
    assert "ours/verl" in capsys.readouterr().out
