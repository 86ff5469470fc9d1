"""benchmarks/bench_train.py runs (quick mode) and reports sane ratios."""
import importlib.util
from pathlib import Path


def test_bench_train_quick():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_train.py"
    spec = importlib.util.spec_from_file_location("bench_train", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--quick", "--threads", "1"])
    assert 0.0 < out["mfu"] < 1.0  # a fraction of the measured peak, never above it
    assert 0.0 < out["env_share"] < 1.0
    assert out["rollout/turn_samples"] > 0 and out["perf/update_seconds"] > 0
