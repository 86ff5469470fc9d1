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


def test_session_dir_is_shared_by_the_xdist_workers_of_one_session(tmp_path, monkeypatch):
    # xdist gives worker gwN the basetemp <controller basetemp>/gwN; without xdist the basetemp is the session's
    from types import SimpleNamespace
    from .learning_runs import session_dir
    factory = SimpleNamespace(getbasetemp=lambda: tmp_path / "popen-gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert session_dir(factory) == tmp_path
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert session_dir(factory) == tmp_path / "popen-gw1"


def test_mean_verdict_waits_for_every_seed_then_applies_the_verdict_rule(tmp_path):
    from arena.analysis.verdicts import BETTER, UNDERPOWERED
    from .learning_runs import mean_verdict_when_complete, record_gain

    def row(seed, gain):
        return dict(seed=seed, n=1024, p0=0.4, p1=0.4 + gain, gain=gain, se=0.02, se_paired=0.015)

    # gains 5, 6, 7, 8 points: mean 6.5, sd = sqrt((1.5^2 + 0.5^2 + 0.5^2 + 1.5^2) / 3) = sqrt(5/3)
    # = 1.291, SE = 1.291 / 2 = 0.6455, t = 6.5 / 0.6455 = 10.07 on 3 df: p ~ 0.002 < 0.05, "better"
    for seed, gain in ((5, 0.05), (6, 0.06), (7, 0.07)):
        record_gain(tmp_path, "bar", row(seed, gain))
        assert mean_verdict_when_complete(tmp_path, "bar", (5, 6, 7, 8), min_effect=5.0) is None
    record_gain(tmp_path, "bar", row(8, 0.08))
    result = mean_verdict_when_complete(tmp_path, "bar", (5, 6, 7, 8), min_effect=5.0)
    assert result.n == 4 and result.mean == pytest.approx(6.5) and result.sd == pytest.approx(math.sqrt(5 / 3))
    assert result.p < 0.01 and result.verdict == BETTER
    # +5 and -5: mean 0, sd 7.07 on 1 df: the interval is far wider than +-5, so "underpowered"
    record_gain(tmp_path, "even", row(0, 0.05))
    record_gain(tmp_path, "even", row(1, -0.05))
    assert mean_verdict_when_complete(tmp_path, "even", (0, 1), min_effect=5.0).verdict == UNDERPOWERED
    assert not list((tmp_path / "bar").glob(".*.tmp"))  # every write was renamed into place


def test_assert_no_fall_reads_the_paired_se(tmp_path):
    from .learning_runs import assert_no_fall
    ok = dict(seed=0, gain=-0.02, se_paired=0.01)  # -2.0 paired SE: not beyond -2.5
    fell = dict(seed=1, gain=-0.03, se_paired=0.01)  # -3.0 paired SE
    assert_no_fall([ok], margin=2.5)
    with pytest.raises(AssertionError, match=r"seeds \[1\] fell"):
        assert_no_fall([ok, fell], margin=2.5)
    with pytest.raises(AssertionError, match="gain_paired_se"):
        assert_no_fall([dict(seed=2, gain=0.1, se_paired=None)], margin=2.5)


def test_assert_headroom_checks_n_and_the_start_only():
    from .learning_runs import assert_headroom
    row = dict(seed=0, n=1024, p0=0.40, p1=0.10)  # a fall is not its business (assert_no_fall's)
    assert_headroom([row], min_n=1024)
    with pytest.raises(AssertionError, match="n = 1024 < 2048"):
        assert_headroom([row], min_n=2048)
    with pytest.raises(AssertionError, match="outside"):
        assert_headroom([{**row, "p0": 0.10}], min_n=1024)  # below the default headroom's 15%
