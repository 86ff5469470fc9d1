"""Smoke test of benchmarks/bench_envs.py on its built-in instant `fake` env (quick mode)."""
import arena.envs
from tests.benchmark_module import load_benchmark


def load_bench():
    return load_benchmark("bench_envs")


def test_quick_fake_numbers_are_positive(capsys):
    results = load_bench().main(["--quick", "--envs", "fake"])
    assert list(results) == ["fake"]
    row = results["fake"]
    assert row["random"]["steps_per_s"] > 0 and row["expert"]["steps_per_s"] > 0
    # quick mode: 2 groups x 2 members; the expert says "go" and wins at turn 5 -> 4 x 5 samples
    assert row["loop"]["turn_samples"] == 20 and row["loop"]["success_rate"] == 1.0
    assert 0 < row["loop"]["loop_us"] <= row["loop"]["with_env_us"]
    assert row["loop_tensor"]["loop_us"] > 0
    assert "fake" in capsys.readouterr().out


def test_unmakeable_env_is_skipped(monkeypatch, capsys):
    monkeypatch.setitem(arena.envs.ENVS, "broken", "arena.envs.does_not_exist:Nope")
    results = load_bench().main(["--quick", "--envs", "fake,broken"])
    assert list(results) == ["fake"]
    assert "[skip] broken" in capsys.readouterr().out
