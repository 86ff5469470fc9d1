"""benchmarks/bench_attention.py runs (smoke budget, one step) and shows the equality it claims."""
from tests.benchmark_module import load_benchmark


def test_bench_attention_smoke():
    bench = load_benchmark("bench_attention")
    out = bench.main(["--env", "sokoban", "--budget", "smoke", "--steps", "2", "--repeats", "1"])["sokoban"]
    assert out["ratio"] > 0
    assert out["same_loss"]  # the forward is bit-identical under both attentions
    # the gradients are equal up to float rounding: a few eps (1.2e-7) of their size
    assert out["max_grad"] > 0 and out["max_grad_diff"] <= 1e-5 * out["max_grad"]
