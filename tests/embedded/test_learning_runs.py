"""The learning tests' bar arithmetic (learning_runs.gains, mean_gain) on hand-made run folders."""
import json
import math

import pytest

from .learning_runs import gains, mean_gain, named_on_command_line


def _run(tmp_path, seed, n, p0, p1, se_paired=None):
    out = tmp_path / f"rl{seed}"
    out.mkdir()
    (out / "config.yaml").write_text(f"eval:\n  n: {n}\n")
    (out / "summary.json").write_text(json.dumps({"initial_eval_success": p0, "final_eval_success": p1,
                                                  "gain_paired_se": se_paired}))


def test_gain_and_its_standard_errors_by_hand(tmp_path):
    # seed 0: n = 100, p0 = 0.5, p1 = 0.6: SE = sqrt(0.25/100 + 0.24/100) = sqrt(0.0049) = 0.07
    # seed 1: n = 400, p0 = 0.2, p1 = 0.2: SE = sqrt(2 * 0.16 / 400) = sqrt(0.0008)
    _run(tmp_path, 0, 100, 0.5, 0.6)
    _run(tmp_path, 1, 400, 0.2, 0.2)
    rows = gains([0, 1], tmp_path)
    assert [r["n"] for r in rows] == [100, 400]
    assert rows[0]["gain"] == pytest.approx(0.1) and rows[0]["se"] == pytest.approx(0.07, rel=1e-12)
    assert rows[1]["gain"] == 0.0 and rows[1]["se"] == pytest.approx(math.sqrt(0.0008), rel=1e-12)
    # g = (0.1 + 0) / 2 = 0.05; SE_g = sqrt(0.0049 + 0.0008) / 2 = sqrt(0.0057) / 2
    g, se_g = mean_gain(rows)
    assert g == pytest.approx(0.05) and se_g == pytest.approx(math.sqrt(0.0057) / 2, rel=1e-12)


def test_assert_bar_fails_on_the_seed_below_the_margin(tmp_path):
    # seed 0 as above: gain 0.1 = 1.43 SE (0.1 / 0.07); seed 2: n = 400, p0 = 0.2, p1 = 0.4,
    # SE = sqrt(0.16/400 + 0.24/400) = sqrt(0.001) = 0.0316, gain 0.2 = 6.3 SE.
    # Mean: g = 0.15, SE_g = sqrt(0.0049 + 0.001) / 2 = 0.0384: 3.9 SE, so only the per-seed bar fails.
    from .learning_runs import assert_bar
    _run(tmp_path, 0, 100, 0.5, 0.6)
    _run(tmp_path, 2, 400, 0.2, 0.4)
    assert_bar([2], tmp_path, margin=2.5, min_n=400)
    with pytest.raises(AssertionError, match=r"per-seed bar not met on seeds \[0\]"):
        assert_bar([0, 2], tmp_path, margin=2.5, min_n=100)
    with pytest.raises(AssertionError):
        assert_bar([2], tmp_path, margin=2.5, min_n=512)  # n = 400 < 512
    with pytest.raises(AssertionError, match="outside"):
        assert_bar([2], tmp_path, margin=2.5, min_n=400, headroom=(0.25, 0.70))  # p0 = 0.2


def test_named_on_command_line_matches_the_file_or_its_items_only(tmp_path):
    from types import SimpleNamespace
    test_file = tmp_path / "tests" / "test_x.py"
    test_file.parent.mkdir()
    test_file.write_text("")

    def config(*args, start=tmp_path):
        return SimpleNamespace(args=list(args), invocation_params=SimpleNamespace(dir=start))

    assert named_on_command_line(config("tests/test_x.py"), str(test_file))
    assert named_on_command_line(config("tests/test_x.py::test_a[0]"), str(test_file))
    assert named_on_command_line(config(str(test_file)), str(test_file))  # absolute
    assert named_on_command_line(config("test_x.py", start=tmp_path / "tests"), str(test_file))
    assert not named_on_command_line(config("tests"), str(test_file))  # a folder is not a request
    assert not named_on_command_line(config(), str(test_file))  # plain `pytest -m slow`
    assert not named_on_command_line(config("tests/test_y.py"), str(test_file))


def test_the_paired_bar_reads_the_summary_s_paired_se(tmp_path):
    # seed 0: gain 0.1 = 1.43 two-sample SE (above), but 0.1 / 0.04 = 2.5 paired SE: the paired bar
    # at 2.0 passes, the two-sample bar at 2.0 fails; at 2.6 the paired bar fails too. A run
    # without a paired SE (gain_paired_se null) cannot pass a paired bar.
    from .learning_runs import assert_bar
    _run(tmp_path, 0, 100, 0.5, 0.6, se_paired=0.04)
    _run(tmp_path, 1, 100, 0.5, 0.6)
    assert gains([0], tmp_path)[0]["se_paired"] == 0.04
    assert_bar([0], tmp_path, margin=2.0, min_n=100, paired=True)
    with pytest.raises(AssertionError):
        assert_bar([0], tmp_path, margin=2.0, min_n=100)
    with pytest.raises(AssertionError):
        assert_bar([0], tmp_path, margin=2.6, min_n=100, paired=True)
    with pytest.raises(AssertionError, match="gain_paired_se"):
        assert_bar([1], tmp_path, margin=2.0, min_n=100, paired=True)


def test_run_seed_runs_one_arena_train_and_kills_it_past_its_timeout(tmp_path):
    from .learning_runs import run_seed
    args = ["env=sanity", "budget=sanity", "steps=2", "eval.n=8", "wandb.enabled=false"]
    assert run_seed(args, 0, tmp_path, timeout_s=600)
    assert "[train] done" in (tmp_path / "rl0.log").read_text() and (tmp_path / "rl0" / "summary.json").is_file()
    # 0.01 s is less than the interpreter's start: killed, reported as not finished, no summary
    assert not run_seed(args, 1, tmp_path, timeout_s=0.01)
    assert not (tmp_path / "rl1" / "summary.json").exists()
