import math

import pytest

from arena.analysis.frames import CHOICES, runs_frame

from .synthetic import ENVS, GRID, NAME, SEARCH_SCORE, STEPS


def _row(runs, arm, env, seed):
    rows = runs[(runs.arm == arm) & (runs.env == env) & (runs.seed == seed)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_runs_frame_has_one_row_per_report_run(runs):
    assert len(runs) == len(GRID) * len(ENVS) * 3  # the search cell (seed 100) is left out
    assert set(runs.role) == {"report"}
    assert SEARCH_SCORE not in set(runs.final_eval_success)
    for col in ("sweep", "run", "arm", "env", "seed", "status", "git_sha", "var_last20", "stable", *CHOICES):
        assert col in runs.columns


def test_resolved_choices_and_hyperparameters(runs):
    sampo = _row(runs, "sampo", "sokoban", 0)
    assert (sampo.method, sampo.group, sampo.clipping, sampo.filtering, sampo.advantage, sampo.aggregation) == (
        "sampo", "combined", "gspo", "dynamic", "gigpo", "token_mean")
    assert sampo["hp.max_gen_batches"] == 2 and sampo["hp.gamma"] == 0.95
    assert _row(runs, "grpo_4mb", "sokoban", 0).ppo_num_mini_batches == 4
    assert _row(runs, "grpo", "sokoban", 0)["hp.eps_high"] == 0.2


def test_failed_and_missing_runs_are_present_without_scores(runs):
    failed, missing = _row(runs, "grpo_4mb", "sokoban", 2), _row(runs, "grpo_4mb", "household", 1)
    assert failed.status == "failed" and missing.status == "missing"
    assert math.isnan(failed.final_eval_success) and math.isnan(missing.final_eval_success)  # never 0
    assert _row(runs, "sampo", "sokoban", 2).status == "collapsed"
    assert _row(runs, "gspo", "sokoban", 1).stable == "unresolved"


def test_tidy_frame_one_row_per_run_step_metric(tidy, runs):
    assert not tidy.duplicated(["sweep", "run", "step", "metric"]).any()
    for col in ("run", "step", "metric", "value", "method", "clipping", "advantage", "env", "seed", "git_sha", "hp.eps_low"):
        assert col in tidy.columns
    # synthetic train/success_rate = final * step / STEPS: gspo sokoban seed 1 at step 5 = 0.65 * 0.5
    hit = tidy[(tidy.arm == "gspo") & (tidy.env == "sokoban") & (tidy.seed == 1) & (tidy.step == 5)
               & (tidy.metric == "train/success_rate")]
    assert hit.value.tolist() == [pytest.approx(0.325, rel=1e-12)]
    # eval only at steps 0, 8, 9, 10 -> 4 rows for a finished run
    evals = tidy[(tidy.run == _row(runs, "grpo", "sokoban", 0).run) & (tidy.metric == "eval/success_rate")]
    assert evals.step.tolist() == [0, 8, 9, STEPS]
    assert _row(runs, "grpo_4mb", "household", 1).run not in set(tidy.run)  # a missing run logged nothing


def test_unknown_sweep_lists_the_valid_ones(results_dir):
    with pytest.raises(ValueError, match=f"valid: {NAME}"):
        runs_frame(results_dir, "nope")


def test_chosen_prefers_hp_then_overrides(tmp_path):
    import json

    from arena.analysis.manifest import chosen_hp

    path = tmp_path / "sweeps" / "s" / "search" / "gspo" / "sokoban" / "chosen.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mode": "first", "overrides": {"po.hp.eps_low": 0.003}}))
    assert chosen_hp(tmp_path, "s", "gspo", "sokoban") == {"po.hp.eps_low": 0.003}
    path.write_text(json.dumps({"hp": {"eps_low": 0.003}, "overrides": {"x": 1}}))
    assert chosen_hp(tmp_path, "s", "gspo", "sokoban") == {"eps_low": 0.003}
    path.write_text(json.dumps({"point": 2}))
    assert chosen_hp(tmp_path, "s", "gspo", "sokoban") == {"point": 2}
    assert chosen_hp(tmp_path, "s", "gspo", "household") is None
