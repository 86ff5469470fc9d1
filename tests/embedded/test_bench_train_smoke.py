"""benchmarks/bench_train.py runs (quick mode) and reports sane ratios."""
from tests.benchmark_module import load_benchmark


def test_bench_train_quick():
    bench = load_benchmark("bench_train")
    out = bench.main(["--quick", "--threads", "1"])
    assert 0.0 < out["mfu"] < 1.0  # a fraction of the measured peak, never above it
    assert 0.0 < out["env_share"] < 1.0
    assert out["rollout/turn_samples"] > 0 and out["perf/update_seconds"] > 0
